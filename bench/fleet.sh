#!/usr/bin/env bash
# Many daemons on one PostgreSQL queue, side by side with the single SQLite daemon, in one run.
# A PostgreSQL server is started here (initdb/postgres as an unprivileged user when run as root,
# on 127.0.0.1, a free port) and removed at the end. Each configuration gets a fresh repository
# (and, for PostgreSQL, a fresh database and a bare remote the daemons clone from):
#
#   sqlite-1  one daemon, index in its SQLite file, running the user's repository itself
#   pg-N      N daemons (1, 2, 4), each with a home and clones of its own, one PostgreSQL index
#
# Two workloads, each queued at once by one `git update-ref` (the reference-transaction hook
# queues every new commit), with every daemon already started and idle:
#
#   dispatch  JOBS (default 1000) empty commits on one tree, test command `true`: the first
#             runs, the others are served from the result of their tree. What is left is the
#             queue: claim, start, result, completion.
#   tests     TESTS (default 40) commits with trees of their own, test command `sleep 0.2`.
#
# Each daemon has WORKERS (default 1) workers. Throughput is jobs per second from the moment
# the jobs were queued to the last result (from the index's own timestamps). Targets (issue 16):
# dispatch >= 2,000 jobs/s; test throughput near-linear in daemons up to the cores available.
#
# Usage: bench/fleet.sh              (from any directory)
# Env:   GIT_SANDBOX_BIN  the binary (default: target/release/git-sandbox of this checkout)
#        JOBS, TESTS, WORKERS, DAEMONS (default "1 2 4")
# Needs: git, python3, psql, sqlite3, PostgreSQL's initdb and postgres. Measures only: always
# exits 0 once it has run.
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${GIT_SANDBOX_BIN:-$ROOT/target/release/git-sandbox}
JOBS=${JOBS:-1000}
TESTS=${TESTS:-40}
WORKERS=${WORKERS:-1}
DAEMONS=${DAEMONS:-1 2 4}
[ -x "$BIN" ] || { echo "$BIN not found: cd $ROOT && cargo build --release (or set GIT_SANDBOX_BIN)" >&2; exit 2; }
for t in initdb postgres; do
  command -v "$t" >/dev/null || { echo "PostgreSQL's $t is not on PATH" >&2; exit 2; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-fleet.XXXXXX")
chmod 755 "$WORK"
PIDS=()
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  [ -n "${PG_PID:-}" ] && kill -INT "$PG_PID" 2>/dev/null && wait "$PG_PID" 2>/dev/null || true
  cd /
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cp "$BIN" "$WORK/git-sandbox"
BIN=$WORK/git-sandbox
mkdir -p "$WORK/bin" && ln -s "$BIN" "$WORK/bin/git-sandbox"

# ---- PostgreSQL ----------------------------------------------------------------------------
AS_PG=()
[ "$(id -u)" = 0 ] && AS_PG=(setpriv --reuid=65534 --regid=65534 --clear-groups)
as_pg() { "${AS_PG[@]}" "$@"; }
mkdir -p "$WORK/pg" "$WORK/pgsock"
[ "$(id -u)" = 0 ] && chown 65534:65534 "$WORK/pg" "$WORK/pgsock"
as_pg initdb -D "$WORK/pg/data" -U sandbox -A trust -E UTF8 --no-sync --no-instructions >/dev/null
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# Started as a simple command (not through the function, a subshell) so that $! is the server.
"${AS_PG[@]}" postgres -D "$WORK/pg/data" -h 127.0.0.1 -p "$PORT" -k "$WORK/pgsock" -c fsync=off \
  -c max_connections=200 >"$WORK/pg.log" 2>&1 &
PG_PID=$!
for _ in $(seq 100); do
  psql -h 127.0.0.1 -p "$PORT" -U sandbox -d postgres -Atc 'select 1' >/dev/null 2>&1 && break
  sleep 0.1
done

# ---- helpers -------------------------------------------------------------------------------
# A private environment per home: `env_for HOME_DIR [INDEX_URL]` prints the env assignments.
env_for() {
  local h=$1 url=${2:-}
  mkdir -p "$h/home" "$h/data" "$h/config/git-sandbox"
  printf '[user]\n\tname = Bench\n\temail = bench@example.com\n' >"$h/home/.gitconfig"
  echo "HOME=$h/home GIT_SANDBOX_HOME=$h/data XDG_CONFIG_HOME=$h/config GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=$h/home/.gitconfig PATH=$WORK/bin:$PATH${url:+ GIT_SANDBOX_INDEX=$url}"
}
in_home() { local e=$1; shift; env -i $e "$@"; }

# Seconds from the first job queued to the last result of this batch (the index's timestamps).
span() {
  local url=$1 db=$2 since=$3 q
  q="SELECT MIN(j.created_at), MAX(r.finished_at), COUNT(*) FROM jobs j JOIN runs r ON r.repository_id = j.repository_id AND r.commit_id = j.commit_id WHERE j.created_at >= '$since'"
  if [ -n "$url" ]; then psql "$url" -Atc "$q" -F'|'; else sqlite3 -separator '|' "$db" "$q"; fi |
    python3 -c '
import sys, datetime
a, b, n = sys.stdin.read().strip().split("|")
p = lambda s: datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ")
secs = (p(b) - p(a)).total_seconds()
print(f"{n} {secs:.3f} {int(n)/secs if secs > 0 else 0:.1f}")'
}

pending() {
  local url=$1 db=$2 q="SELECT COUNT(*) FROM jobs WHERE state IN ('pending','assigned','running')"
  if [ -n "$url" ]; then psql "$url" -Atc "$q"; else sqlite3 "$db" "$q"; fi
}

# run_case NAME N_DAEMONS USE_PG WORKLOAD → prints "jobs secs jobs/s"
run_case() {
  local name=$1 n=$2 pg=$3 load=$4 dir="$WORK/$1-$4" url="" agent repo remote tip i
  mkdir -p "$dir"
  if [ "$pg" = 1 ]; then
    psql -h 127.0.0.1 -p "$PORT" -U sandbox -d postgres -qc "CREATE DATABASE \"${name//-/_}_$load\"" >/dev/null
    url="postgres://sandbox@127.0.0.1:$PORT/${name//-/_}_$load"
  fi
  agent=$(env_for "$dir/agent" "$url")
  repo="$dir/repo"
  in_home "$agent" "$BIN" new bench --path "$repo" >/dev/null 2>&1
  if [ "$load" = dispatch ]; then cmd=true; else cmd="sleep 0.2"; fi
  printf '[test]\ncommand = "%s"\n[analysis]\nenabled = false\n' "$cmd" >"$repo/.sandbox.toml"
  (cd "$repo" && in_home "$agent" git add .sandbox.toml && in_home "$agent" git commit -qm config)
  if [ "$pg" = 1 ]; then
    remote="$dir/remote.git"
    git init -q --bare "$remote"
    (cd "$repo" && git remote add origin "$remote" && in_home "$agent" "$BIN" push >/dev/null)
  fi
  # The jobs' commits, made off the branch (no hook fires), pushed, then queued at once.
  tip=$(cd "$repo" && git rev-parse HEAD)
  (
    cd "$repo"
    for i in $(seq "$([ "$load" = dispatch ] && echo "$JOBS" || echo "$TESTS")"); do
      if [ "$load" = dispatch ]; then
        tree=$(git rev-parse "$tip^{tree}")
      else
        blob=$(echo "$i" | git hash-object -w --stdin)
        tree=$( (git ls-tree "$tip" | grep -v $'\tn.txt$'; printf '100644 blob %s\tn.txt\n' "$blob") | git mktree)
      fi
      tip=$(in_home "$agent" git commit-tree "$tree" -p "$tip" -m "job $i")
    done
    echo "$tip" >"$dir/tip"
  )
  tip=$(cat "$dir/tip")
  [ "$pg" = 1 ] && (cd "$repo" && git push -q origin "$tip:refs/heads/main")
  # The daemons, started and idle (each with its clones made).
  local homes=()
  if [ "$pg" = 1 ]; then
    for i in $(seq "$n"); do homes+=("$(env_for "$dir/d$i" "$url")"); done
  else
    homes+=("$agent")
  fi
  for e in "${homes[@]}"; do
    in_home "$e" "$BIN" daemon --workers "$WORKERS" 2>>"$dir/daemons.log" &
    PIDS+=($!)
  done
  for e in "${homes[@]}"; do
    for _ in $(seq 300); do in_home "$e" "$BIN" daemon status >/dev/null 2>&1 && break; sleep 0.1; done
  done
  if [ "$pg" = 1 ]; then
    for i in $(seq "$n"); do
      for _ in $(seq 300); do compgen -G "$dir/d$i/data/clones/*.git" >/dev/null && break; sleep 0.1; done
    done
  fi
  sleep 1
  local since
  since=$(python3 -c 'import datetime; print(datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]+"Z")')
  (cd "$repo" && in_home "$agent" git update-ref refs/heads/main "$tip")
  local db="$dir/agent/data/index.db"
  sleep 0.5
  for _ in $(seq 6000); do [ "$(pending "$url" "$db")" = 0 ] && break; sleep 0.1; done
  span "$url" "$db" "$since"
  for e in "${homes[@]}"; do in_home "$e" "$BIN" daemon stop >/dev/null 2>&1 || true; done
}

echo "git-sandbox fleet benchmark: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "dispatch: $JOBS jobs on one tree (test \`true\`); tests: $TESTS jobs of \`sleep 0.2\`; $WORKERS worker(s) per daemon"
printf '\n%-10s %-9s %6s %8s %9s %9s\n' config workload jobs seconds "jobs/s" "vs sqlite"
for load in dispatch tests; do
  base=
  for c in sqlite-1 $(for n in $DAEMONS; do echo "pg-$n"; done); do
    n=${c#*-}
    pg=0; [ "${c%%-*}" = pg ] && pg=1
    read -r jobs secs rate < <(run_case "$c" "$n" "$pg" "$load")
    [ -z "$base" ] && base=$rate
    ratio=$(python3 -c "print(f'{$rate/$base:.2f}x' if $base > 0 else 'n/a')")
    printf '%-10s %-9s %6s %8s %9s %9s\n' "$c" "$load" "$jobs" "$secs" "$rate" "$ratio"
  done
done
echo
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
