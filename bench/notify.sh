#!/usr/bin/env bash
# What the git-sandbox hooks add to `git commit`.
#
# Two identical repositories made with `git sandbox new`: one keeps its installed hooks
# (reference-transaction, post-commit, post-merge, post-rewrite -> `git-sandbox notify`), the
# other has core.hooksPath pointed at an empty directory. COMMITS commits alternate between them
# (each changes one file; only `git commit` is timed). Then, in the hooked repository:
#   - TRACED more commits under GIT_TRACE2_EVENT: which hooks a commit runs and what each costs;
#   - `git-sandbox notify --hook post-commit` run directly NOTIFIES times (nothing new to queue,
#     as for the second notify of a commit) -- target: under 10 ms;
#   - notify with one new commit to queue (the commit made with hooks off), QUEUES times;
#   - the hook script alone on its early-exit path (a ref that is not a branch), QUEUES times.
#
# Usage: bench/notify.sh            (from any directory)
# Env:   GIT_SANDBOX_BIN  the binary (default: target/release/git-sandbox of this checkout)
#        COMMITS (default 50), NOTIFIES (default 100), TRACED (default 10), QUEUES (default 30)
# Needs: git, python3, awk. Measures only: always exits 0 once it has run.
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${GIT_SANDBOX_BIN:-$ROOT/target/release/git-sandbox}
COMMITS=${COMMITS:-50}
NOTIFIES=${NOTIFIES:-100}
TRACED=${TRACED:-10}
QUEUES=${QUEUES:-30}
[ -x "$BIN" ] || { echo "$BIN not found: cd $ROOT && cargo build --release (or set GIT_SANDBOX_BIN)" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-notify.XXXXXX")
trap 'cd /; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM HUP PIPE
mkdir -p "$WORK/home" "$WORK/config" "$WORK/sandbox-home" "$WORK/bin" "$WORK/no-hooks"
ln -s "$BIN" "$WORK/bin/git-sandbox"
export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/config XDG_DATA_HOME=$WORK/home/.local/share
export GIT_SANDBOX_HOME=$WORK/sandbox-home GIT_CONFIG_NOSYSTEM=1
export PATH=$WORK/bin:$PATH
unset GIT_SANDBOX_TMPDIR GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_CONFIG_GLOBAL
unset GIT_TRACE2 GIT_TRACE2_EVENT GIT_TRACE2_PERF
for v in $(env | sed -n 's/^\(SANDBOX_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
git config --global user.name "Bench Mark"
git config --global user.email "bench@example.invalid"
git config --global init.defaultBranch main
ZERO=0000000000000000000000000000000000000000

now_us() { local t=$EPOCHREALTIME; REPLY=${t/./}; }
# stats US...: "mean median p95 max" in ms (p95: nearest rank).
stats() {
  printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1; s+=$1} END{
    p=int(0.95*NR + 0.999999); if (p<1) p=1; if (p>NR) p=NR;
    m=(NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2);
    printf "%.2f %.2f %.2f %.2f", s/NR/1000, m/1000, a[p]/1000, a[NR]/1000}'
}
row() { printf '  %-44s %8s %8s %8s %8s\n' "$@"; }

HOOKED=$WORK/hooked
PLAIN=$WORK/plain
git sandbox new notify-hooked --path "$HOOKED" >/dev/null 2>&1
git sandbox new notify-plain --path "$PLAIN" >/dev/null 2>&1
git -C "$PLAIN" config core.hooksPath "$WORK/no-hooks"

echo "git-sandbox notify benchmark"
echo "  binary:  $BIN ($("$BIN" --version 2>/dev/null || echo '?'))"
echo "  git:     $(git --version); machine: $(nproc) cores; work dir $WORK ($(stat -f -c %T "$WORK"))"
echo "  load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
echo "  hooks:   $(ls "$HOOKED/.git/hooks" | grep -v '\.sample$' | tr '\n' ' ')"

# commit_in REPO I: change one file (untimed), then time `git commit`; microseconds in REPLY.
commit_in() {
  local t0
  printf 'line %s\n' "$2" >>"$1/notes.txt"
  git -C "$1" add notes.txt
  now_us; t0=$REPLY
  git -C "$1" commit -q -m "change $2"
  now_us; REPLY=$((REPLY - t0))
}

# Warm-up (page cache, first index writes), untimed.
for i in 1 2 3; do commit_in "$HOOKED" "w$i"; commit_in "$PLAIN" "w$i"; done

T_HOOKED=() T_PLAIN=()
for ((i = 1; i <= COMMITS; i++)); do
  commit_in "$HOOKED" "$i"; T_HOOKED+=("$REPLY")
  commit_in "$PLAIN" "$i"; T_PLAIN+=("$REPLY")
done

# Which hooks a commit runs and what each costs, from git's trace2 event log, over TRACED more
# commits (apart from the timed ones, so tracing does not slow those).
for ((i = 1; i <= TRACED; i++)); do
  printf 'traced %s\n' "$i" >>"$HOOKED/notes.txt"
  git -C "$HOOKED" add notes.txt
  GIT_TRACE2_EVENT="$WORK/trace2.json" git -C "$HOOKED" commit -q -m "traced $i"
done
HOOK_TABLE=$(python3 - "$WORK/trace2.json" "$TRACED" <<'PY'
import json, sys
starts, rows = {}, {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    key = (e.get("sid"), e.get("child_id"))
    if e["event"] == "child_start" and e.get("child_class") == "hook":
        starts[key] = " ".join([e.get("hook_name", "?")] + e.get("argv", [])[1:])
    elif e["event"] == "child_exit" and key in starts:
        rows.setdefault(starts.pop(key), []).append(e["t_rel"] * 1000)
n = int(sys.argv[2])
for name, ts in sorted(rows.items(), key=lambda kv: -sum(kv[1])):
    print(f"  {name:44s} {len(ts) / n:8.1f} {sum(ts) / len(ts):8.2f} {sum(ts) / n:8.2f}")
calls = sum(len(t) for t in rows.values()) / n
total = sum(sum(t) for t in rows.values()) / n
print(f"  {'all hooks':44s} {calls:8.1f} {'':8s} {total:8.2f}")
PY
)

# notify run directly, as the post-commit hook runs it, with nothing new to queue.
T_NOTIFY=()
for ((i = 1; i <= NOTIFIES; i++)); do
  now_us; t0=$REPLY
  (cd "$HOOKED" && git-sandbox notify --hook post-commit </dev/null >/dev/null 2>>"$WORK/notify.err")
  now_us; T_NOTIFY+=($((REPLY - t0)))
done
# notify with one new commit to queue (that commit made with the hooks off).
T_QUEUE=()
for ((i = 1; i <= QUEUES; i++)); do
  printf 'queue %s\n' "$i" >>"$HOOKED/notes.txt"
  git -C "$HOOKED" add notes.txt
  git -C "$HOOKED" -c core.hooksPath="$WORK/no-hooks" commit -q -m "queue $i"
  now_us; t0=$REPLY
  (cd "$HOOKED" && git-sandbox notify --hook post-commit </dev/null >/dev/null 2>>"$WORK/notify.err")
  now_us; T_QUEUE+=($((REPLY - t0)))
done
# The installed hook script alone, on its early-exit path (a transaction without a branch).
T_HOOKSH=()
for ((i = 1; i <= QUEUES; i++)); do
  now_us; t0=$REPLY
  (cd "$HOOKED" && printf '%s %s AUTO_MERGE\n' "$ZERO" "$ZERO" | .git/hooks/reference-transaction committed)
  now_us; T_HOOKSH+=($((REPLY - t0)))
done
# For scale: the cost of starting a process at all (same subshell + cd as above).
T_TRUE=()
for ((i = 1; i <= QUEUES; i++)); do
  now_us; t0=$REPLY
  (cd "$HOOKED" && /bin/true </dev/null >/dev/null)
  now_us; T_TRUE+=($((REPLY - t0)))
done

read -r hm hmed hp95 hmax <<<"$(stats "${T_HOOKED[@]}")"
read -r pm pmed pp95 pmax <<<"$(stats "${T_PLAIN[@]}")"
read -r nm nmed np95 nmax <<<"$(stats "${T_NOTIFY[@]}")"
sub() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a-b}'; }

echo
echo "git commit, $COMMITS commits each, alternating (ms)"
row "" mean median p95 max
row "with git-sandbox hooks" "$hm" "$hmed" "$hp95" "$hmax"
row "core.hooksPath = empty dir" "$pm" "$pmed" "$pp95" "$pmax"
row "added per commit" "$(sub "$hm" "$pm")" "$(sub "$hmed" "$pmed")" "$(sub "$hp95" "$pp95")" ""
printf '  ratio of means: %s\n' "$(awk -v a="$hm" -v b="$pm" 'BEGIN{printf "%.2fx", a/b}')"
echo
echo "hooks one commit runs ($TRACED traced commits; ms)"
printf '  %-44s %8s %8s %8s\n' "hook and argument" "runs" "mean" "per commit"
echo "$HOOK_TABLE"
echo
echo "parts (ms)"
row "" mean median p95 max
row "git-sandbox notify, nothing to queue (x$NOTIFIES)" $(stats "${T_NOTIFY[@]}")
row "git-sandbox notify, 1 commit to queue (x$QUEUES)" $(stats "${T_QUEUE[@]}")
row "hook script alone, early exit (x$QUEUES)" $(stats "${T_HOOKSH[@]}")
row "/bin/true, for scale (x$QUEUES)" $(stats "${T_TRUE[@]}")
echo "  target: notify under 10 ms   [nothing to queue: p95 $np95 ms, $(awk -v p="$np95" 'BEGIN{print (p<10 ? "meets it" : "misses it")}')]"
echo "  load:   $(cut -d' ' -f1-3 /proc/loadavg) at end"
if [ -s "$WORK/notify.err" ]; then
  echo "  notify printed warnings: $(sort -u "$WORK/notify.err" | head -3 | tr '\n' ' ')"
fi
exit 0
