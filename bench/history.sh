#!/usr/bin/env bash
# What a long history costs when nothing runs (issue 36): one repository whose commits were all
# run (test `true`, analysis off), grown to each size in SIZES (default 300 3000 30000); at each
# size `status`, `log -n 50` and the HTTP API's repository list are timed (medians of REPS,
# default 50) and `reindex` (median of REINDEX_REPS, default 5), then an idle daemon's CPU over
# IDLE seconds (default 65, from /proc/PID/stat) and its resident memory. Targets at 30,000 runs
# on a quiet machine (issue 52): `log -n 50` <= 10 ms, `reindex` <= 2 s; status and the API
# under 20 ms; an idle daemon under 1% of a core and 30 MiB. BESIDE_BUILD=1 times status, log
# and reindex again at each size beside a `cargo build --release` (bench/busy.sh), reported
# only. Prints; asserts nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=${GIT_SANDBOX_BIN:-$root/target/release/git-sandbox}
[ -n "${GIT_SANDBOX_BIN:-}" ] || (cd "$root" && cargo build --release --quiet)
SIZES=${SIZES:-"300 3000 30000"}
REPS=${REPS:-50}
REINDEX_REPS=${REINDEX_REPS:-5}
IDLE=${IDLE:-65}
work=$(mktemp -d)
shm=$(mktemp -d /dev/shm/gs-history-XXXXXX)
daemon_pid=
# shellcheck source=bench/busy.sh
. "$root/bench/busy.sh"
cleanup() {
    busy_stop
    [ -z "$daemon_pid" ] || { kill "$daemon_pid" 2>/dev/null; wait "$daemon_pid" 2>/dev/null; } || true
    rm -rf "$work" "$shm"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# A copy, so a concurrent `cargo build` cannot swap the binary mid-run.
mkdir -p "$work/bin" && cp "$src" "$work/bin/git-sandbox"
bin=$work/bin/git-sandbox
while IFS= read -r v; do unset "$v"; done < <(env | sed -n 's/^\(SANDBOX_[A-Za-z0-9_]*\)=.*/\1/p')
unset GIT_SANDBOX_TMPDIR
export HOME=$work/home GIT_SANDBOX_HOME=$work/data XDG_CONFIG_HOME=$work/config GIT_CONFIG_NOSYSTEM=1
export GIT_SANDBOX_TMPDIR=$shm PATH="$work/bin:$PATH"
mkdir -p "$HOME" "$work/nohooks"
git config --global user.name bench && git config --global user.email bench@example.com
echo "history benchmark; load at start: $(cut -d' ' -f1-3 /proc/loadavg)"

repo=$work/repo
"$bin" new history --path "$repo" >/dev/null
cd "$repo"
printf '[test]\ncommand = "true"\n\n[analysis]\nenabled = false\n' >.sandbox.toml
git add .sandbox.toml && git commit -qm "bench config"
"$bin" run -j 2 HEAD >/dev/null 2>&1
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=$("$bin" token create --role read --name bench)

# Median of REPS runs of a command (N runs with `N=...`), in ms (bash's clock: no fork to read
# it).
ms() {
    local times=() t0 i reps=${N:-$REPS}
    for ((i = 0; i < reps; i++)); do
        t0=$EPOCHREALTIME
        "$@" >/dev/null 2>&1
        times+=("$(((${EPOCHREALTIME/./} - ${t0/./}) / 100))")
    done
    printf '%s\n' "${times[@]}" | sort -n | sed -n "$(((reps + 1) / 2))p" | awk '{printf "%.1f", $1 / 10}'
}
api() { curl -sf -H "Authorization: Bearer $token" "http://127.0.0.1:$port/api/v1/repositories" -o /dev/null; }
# utime + stime of a process, in clock ticks.
cpu() { awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)

rows=()
have=1
for n in $SIZES; do
    # One file changed per commit, written by fast-import with the hooks off (the runs below are
    # what is measured as history, not the queueing of 30,000 commits).
    base=$(git rev-parse HEAD)
    python3 - "$have" "$n" "$base" <<'PY' | git -c core.hooksPath="$work/nohooks" fast-import --quiet
import sys
start, end, base = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
out = sys.stdout
for i in range(start, end):
    body = f"{i}\n".encode()
    msg = f"commit {i}\n".encode()
    out.write(f"commit refs/heads/main\ncommitter bench <bench@example.com> {1700000000 + i} +0000\ndata {len(msg)}\n")
    out.write(msg.decode())
    if i == start:
        out.write(f"from {base}\n")
    out.write(f"M 100644 inline f/{i % 100}.txt\ndata {len(body)}\n{body.decode()}\n")
PY
    git reset -q --hard main
    # The range ends at `main`: each commit is asked whether it is on the branch (for its build
    # cache), which one walk of the branch's history answers for the whole range.
    t0=$EPOCHREALTIME
    "$bin" run -j 2 "$base..main" >/dev/null 2>&1
    run_ms=$(((${EPOCHREALTIME/./} - ${t0/./}) / 1000))
    have=$n
    runs=$(git notes --ref=sandbox list | wc -l)
    status=$(ms "$bin" status)
    log=$(ms "$bin" log -n 50)
    reindex=$(N=$REINDEX_REPS ms "$bin" reindex)
    "$bin" daemon --workers 1 --http "127.0.0.1:$port" 2>"$work/daemon.log" &
    daemon_pid=$!
    until api; do sleep 0.1; done
    sleep 5 # the start-up scan
    apims=$(ms api)
    c0=$(cpu "$daemon_pid")
    sleep "$IDLE"
    c1=$(cpu "$daemon_pid")
    rss=$(awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$daemon_pid/status")
    kill "$daemon_pid" && wait "$daemon_pid" 2>/dev/null || true
    daemon_pid=
    idle_ms=$(((c1 - c0) * 1000 / tck))
    rows+=("$(printf '| %s | %s ms/commit | %s ms | %s ms | %s ms | %s ms | %s ms (%s%% of a core) | %s MiB |' \
        "$runs" "$(awk -v t="$run_ms" -v n="$((n - ${prev:-1}))" 'BEGIN {printf "%.1f", t / n}')" \
        "$status" "$log" "$apims" "$reindex" "$idle_ms" \
        "$(awk -v c="$idle_ms" -v s="$IDLE" 'BEGIN {printf "%.2f", c / s / 10}')" "$rss")")
    prev=$n
    echo "${rows[-1]}"
    if [ "${BESIDE_BUILD:-0}" = 1 ]; then
        # The same commands beside a `cargo build --release` (reported, not targeted).
        busy_start "$work"
        status=$(ms "$bin" status)
        log=$(ms "$bin" log -n 50)
        reindex=$(N=$REINDEX_REPS ms "$bin" reindex)
        load=$(cut -d' ' -f1 /proc/loadavg)
        busy_stop
        rows+=("$(printf '| %s beside cargo build (load %s) | | %s ms | %s ms | | %s ms | | |' "$runs" "$load" "$status" "$log" "$reindex")")
        echo "${rows[-1]}"
    fi
done
echo
echo "| notes | run | \`status\` | \`log -n 50\` | API \`repositories\` | \`reindex\` | daemon idle CPU per ${IDLE} s | daemon RSS |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
