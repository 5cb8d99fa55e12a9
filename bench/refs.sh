#!/usr/bin/env bash
# What the git-sandbox hooks cost in a repository with many branches (issue 36).
#
# Three repositories made with `git sandbox new`, each with BRANCHES `experiment/bN` branches
# (watched by the default `[watch] branches`) made in one `git update-ref --stdin`:
#   hooked  keeps its installed hooks (reference-transaction: a commit to the home's spool, a
#           made branch or a large transaction -> `git-sandbox notify --stdin`);
#           a transaction that makes or moves more than 64 branches also packs the loose refs
#           it left (no hook run), so its create and move rows include that packing and its
#           pack-refs finds few loose refs;
#   plain   has core.hooksPath pointed at an empty directory;
#   floor   has core.hooksPath pointed at a reference-transaction hook that is `exit 0`: what
#           git itself pays to run any hook (FLOOR=0 skips it: its pack-refs is slow).
# Timed side by side (alternating between the repositories):
#   - creating the BRANCHES branches (one update-ref --stdin);
#   - COMMITS `git commit`s on main (median);
#   - one run of the installed reference-transaction hook for a commit (the committed phase,
#     which writes the spool), HOOKRUNS times (median), alternating with the same in a
#     repository with main alone, and the next command's taking the commit in;
#   - `git sandbox experiment list` (median of LISTS) with the branches behind main, and again
#     once they are moved ahead of it -- target <= 400 ms;
#   - moving all BRANCHES branches to a new commit in one update-ref --stdin;
#   - `git pack-refs --all` (what `git gc` runs) -- target <= 2x plain.
#
# Usage: bench/refs.sh              (from any directory)
# Env:   GIT_SANDBOX_BIN  the binary (default: target/release/git-sandbox of this checkout)
#        BRANCHES (default 20000), COMMITS (default 50), HOOKRUNS (default 50), LISTS (default 50),
#        FLOOR (default 1), BESIDE_BUILD (default 0; 1: the commits and the list again beside
#        a `cargo build --release`, bench/busy.sh),
#        PACK (default 1; 0 skips pack-refs, the slowest case by far)
# Needs: git, awk, python3. Measures only: always exits 0 once it has run.
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${GIT_SANDBOX_BIN:-$ROOT/target/release/git-sandbox}
BRANCHES=${BRANCHES:-20000}
COMMITS=${COMMITS:-50}
HOOKRUNS=${HOOKRUNS:-50}
LISTS=${LISTS:-50}
FLOOR=${FLOOR:-1}
PACK=${PACK:-1}
[ -x "$BIN" ] || { echo "$BIN not found: cd $ROOT && cargo build --release (or set GIT_SANDBOX_BIN)" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-refs.XXXXXX")
# shellcheck source=bench/busy.sh
. "$ROOT/bench/busy.sh"
trap 'busy_stop; cd /; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM HUP PIPE
mkdir -p "$WORK/home" "$WORK/config" "$WORK/sandbox-home" "$WORK/bin" "$WORK/no-hooks" "$WORK/floor-hooks"
# A copy: a concurrent `cargo build` cannot swap it mid-run.
cp "$BIN" "$WORK/bin/git-sandbox"
printf '#!/bin/sh\nexit 0\n' >"$WORK/floor-hooks/reference-transaction"
chmod +x "$WORK/floor-hooks/reference-transaction"
export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/config XDG_DATA_HOME=$WORK/home/.local/share
export GIT_SANDBOX_HOME=$WORK/sandbox-home GIT_CONFIG_NOSYSTEM=1
export PATH=$WORK/bin:$PATH
unset GIT_SANDBOX_TMPDIR GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_CONFIG_GLOBAL
unset GIT_TRACE2 GIT_TRACE2_EVENT GIT_TRACE2_PERF
for v in $(env | sed -n 's/^\(SANDBOX_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
git config --global user.name "Bench Mark"
git config --global user.email "bench@example.invalid"
git config --global init.defaultBranch main

now_us() { local t=$EPOCHREALTIME; REPLY=${t/./}; }
median_ms() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{printf "%.2f", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)/1000}'; }
ms() { awk -v u="$1" 'BEGIN{printf "%.1f", u/1000}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2fx", a/b}'; }

REPOS=(hooked plain)
[ "$FLOOR" = 1 ] && REPOS+=(floor)
for r in "${REPOS[@]}"; do
  git sandbox new "refs-$r" --path "$WORK/$r" >/dev/null 2>&1
done
git -C "$WORK/plain" config core.hooksPath "$WORK/no-hooks"
[ "$FLOOR" = 1 ] && git -C "$WORK/floor" config core.hooksPath "$WORK/floor-hooks"

echo "git-sandbox hooks with many refs"
echo "  binary:  $BIN ($("$BIN" --version 2>/dev/null || echo '?'))"
echo "  git:     $(git --version); machine: $(nproc) cores; work dir $WORK ($(stat -f -c %T "$WORK"))"
echo "  load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
echo "  repos:   ${REPOS[*]}; $BRANCHES experiment/* branches each"

# timed REPO CMD...: run CMD in REPO (stdin passed on), microseconds in REPLY.
timed() {
  local repo=$1 t0
  shift
  now_us; t0=$REPLY
  git -C "$repo" "$@" >/dev/null
  now_us; REPLY=$((REPLY - t0))
}

declare -A CREATE MOVE BUSY_COMMIT
for r in "${REPOS[@]}"; do
  head=$(git -C "$WORK/$r" rev-parse HEAD)
  awk -v n="$BRANCHES" -v h="$head" 'BEGIN{for (i = 1; i <= n; i++) print "create refs/heads/experiment/b" i " " h}' >"$WORK/create-$r"
done
for r in "${REPOS[@]}"; do
  timed "$WORK/$r" update-ref --stdin <"$WORK/create-$r"
  CREATE[$r]=$REPLY
done

# git commit on main, alternating.
declare -A COMMIT_T
for ((i = 1; i <= COMMITS; i++)); do
  for r in "${REPOS[@]}"; do
    printf 'line %s\n' "$i" >>"$WORK/$r/notes.txt"
    git -C "$WORK/$r" add notes.txt
    timed "$WORK/$r" commit -q -m "change $i"
    COMMIT_T[$r]="${COMMIT_T[$r]:-} $REPLY"
  done
done

# One run of the installed hook for a commit: the commit made with the hooks off, then the
# hook fed its committed phase, as git would (it writes the commit's branch to the home's spool,
# starting no process). The same in `small`, a repository with main alone, alternating: what a
# hook run costs with few refs on this machine now. After each run in `hooked`, the next
# command (`log -n 1`), which takes the spool in and queues the commit, and the same command
# again with nothing spooled: what the commit's queueing costs where it now happens.
hook_run() {
  local repo=$1 old new t0
  old=$(git -C "$repo" rev-parse HEAD)
  new=$(git -C "$repo" commit-tree -p "$old" -m "hook run" "$old^{tree}")
  git -C "$repo" -c core.hooksPath="$WORK/no-hooks" update-ref refs/heads/main "$new" "$old"
  now_us; t0=$REPLY
  (cd "$repo" && printf '%s %s refs/heads/main\n' "$old" "$new" | .git/hooks/reference-transaction committed)
  now_us; REPLY=$((REPLY - t0))
}
git sandbox new refs-small --path "$WORK/small" >/dev/null 2>&1
log_once() {
  local t0
  now_us; t0=$REPLY
  (cd "$WORK/hooked" && git-sandbox log -n 1 >/dev/null)
  now_us; REPLY=$((REPLY - t0))
}
T_HOOK=() T_SMALL=() T_TAKE=() T_NEXT=()
for ((i = 1; i <= HOOKRUNS; i++)); do
  hook_run "$WORK/hooked"; T_HOOK+=("$REPLY")
  log_once; T_TAKE+=("$REPLY")
  log_once; T_NEXT+=("$REPLY")
  hook_run "$WORK/small"; T_SMALL+=("$REPLY")
done

# `experiment list` with the branches behind main (made at its old tip, main moved on since),
# median of LISTS, then again once they are moved below -- target <= 400 ms. The first list
# learns every experiment into the index; it is timed apart.
list_once() {
  local t0
  now_us; t0=$REPLY
  git-sandbox experiment list >/dev/null
  now_us; REPLY=$((REPLY - t0))
}
list_ms() {
  local t=() i
  cd "$WORK/hooked"
  list_once; LIST_FIRST=$REPLY
  for ((i = 1; i <= LISTS; i++)); do
    list_once; t+=("$REPLY")
  done
  cd "$WORK"
  REPLY=$(median_ms "${t[@]}")
}
list_ms; LIST_BEHIND=$REPLY LIST_BEHIND_FIRST=$LIST_FIRST

# Move every branch to a new commit (a child of main's tip) in one transaction.
for r in "${REPOS[@]}"; do
  head=$(git -C "$WORK/$r" rev-parse HEAD)
  moved=$(git -C "$WORK/$r" commit-tree -p "$head" -m "moved" "$head^{tree}")
  awk -v n="$BRANCHES" -v h="$moved" 'BEGIN{for (i = 1; i <= n; i++) print "update refs/heads/experiment/b" i " " h}' >"$WORK/move-$r"
done
for r in "${REPOS[@]}"; do
  timed "$WORK/$r" update-ref --stdin <"$WORK/move-$r"
  MOVE[$r]=$REPLY
done

list_ms; LIST_AHEAD=$REPLY

# pack-refs --all: git runs reference-transaction for the packed-refs transaction (every ref
# shown as created) and twice (prepared, committed) for each loose ref it prunes.
declare -A PACKED=() LOOSE=()
for r in "${REPOS[@]}"; do
  LOOSE[$r]=$(find "$WORK/$r/.git/refs" -type f | wc -l)
  [ "$PACK" = 1 ] || { PACKED[$r]=0; continue; }
  sync
  timed "$WORK/$r" pack-refs --all
  PACKED[$r]=$REPLY
done

# Beside a `cargo build --release` (BESIDE_BUILD=1; reported, not targeted): the commits and
# the list again.
if [ "${BESIDE_BUILD:-0}" = 1 ]; then
  busy_start "$WORK"
  for ((i = 1; i <= COMMITS; i++)); do
    for r in hooked plain; do
      printf 'busy %s\n' "$i" >>"$WORK/$r/notes.txt"
      git -C "$WORK/$r" add notes.txt
      timed "$WORK/$r" commit -q -m "busy $i"
      BUSY_COMMIT[$r]="${BUSY_COMMIT[$r]:-} $REPLY"
    done
  done
  list_ms; LIST_BUSY=$REPLY
  BUSY_LOAD=$(cut -d' ' -f1 /proc/loadavg)
  busy_stop
fi

queued=$(git sandbox status --json 2>/dev/null | python3 -c 'import json, sys; print(json.load(sys.stdin)["totals"]["pending_jobs"])' || echo '?')

echo
printf '  %-40s %12s %12s %8s' "" "with hooks" "no hooks" "ratio"
[ "$FLOOR" = 1 ] && printf ' %12s %8s' "exit-0 hook" "ratio"
echo
line() {
  local name=$1 h=$2 p=$3 f=${4:-}
  printf '  %-40s %12s %12s %8s' "$name" "$h" "$p" "$(ratio "$h" "$p")"
  [ -n "$f" ] && printf ' %12s %8s' "$f" "$(ratio "$f" "$p")"
  echo
}
# shellcheck disable=SC2086
cm() { median_ms ${COMMIT_T[$1]}; }
line "create $BRANCHES branches (ms)" "$(ms "${CREATE[hooked]}")" "$(ms "${CREATE[plain]}")" "$([ "$FLOOR" = 1 ] && ms "${CREATE[floor]}")"
line "git commit, median of $COMMITS (ms)" "$(cm hooked)" "$(cm plain)" "$([ "$FLOOR" = 1 ] && cm floor)"
line "move $BRANCHES branches (ms)" "$(ms "${MOVE[hooked]}")" "$(ms "${MOVE[plain]}")" "$([ "$FLOOR" = 1 ] && ms "${MOVE[floor]}")"
[ "$PACK" = 1 ] && line "pack-refs --all (ms)" "$(ms "${PACKED[hooked]}")" "$(ms "${PACKED[plain]}")" "$([ "$FLOOR" = 1 ] && ms "${PACKED[floor]}")"
echo
echo "  git commit with our hooks: $(awk -v h="$(cm hooked)" -v p="$(cm plain)" 'BEGIN{printf "%+.2f", h - p}') ms over no hooks   target <= +10 ms$([ "$FLOOR" = 1 ] && awk -v f="$(cm floor)" -v p="$(cm plain)" 'BEGIN{printf " (git starting an exit-0 hook in their place: %+.2f ms)", f - p}')"
echo "  one reference-transaction hook run for a commit (writes the spool), median of $HOOKRUNS: $(median_ms "${T_HOOK[@]}") ms"
echo "    the same in a repository with main alone, alternating: $(median_ms "${T_SMALL[@]}") ms"
echo "  the next command (log -n 1) taking the commit in: $(median_ms "${T_TAKE[@]}") ms; the same with nothing spooled: $(median_ms "${T_NEXT[@]}") ms"
echo "  experiment list, $BRANCHES branches behind main, median of $LISTS: $LIST_BEHIND ms (the first: $(ms "$LIST_BEHIND_FIRST") ms)   target <= 400 ms"
echo "    the same with every branch one commit ahead of main: $LIST_AHEAD ms"
if [ "${BESIDE_BUILD:-0}" = 1 ]; then
  # shellcheck disable=SC2086
  echo "  beside cargo build --release (load $BUSY_LOAD): git commit $(median_ms ${BUSY_COMMIT[hooked]}) ms with our hooks, $(median_ms ${BUSY_COMMIT[plain]}) ms without ($(awk -v h="$(median_ms ${BUSY_COMMIT[hooked]})" -v p="$(median_ms ${BUSY_COMMIT[plain]})" 'BEGIN{printf "%+.2f", h - p}') ms); experiment list $LIST_BUSY ms"
fi
[ "$PACK" = 1 ] && echo "  pack-refs with our hooks: $(ratio "${PACKED[hooked]}" "${PACKED[plain]}") of no hooks   target <= 2x"
echo "  loose refs before pack-refs: hooked ${LOOSE[hooked]}, no hooks ${LOOSE[plain]}$([ "$FLOOR" = 1 ] && echo ", exit-0 hook ${LOOSE[floor]}")"
busy_commits=0
[ "${BESIDE_BUILD:-0}" = 1 ] && busy_commits=$COMMITS
echo "  jobs queued in all: ${queued:-?} (expected $((COMMITS + busy_commits + 2 * HOOKRUNS + 1)): each commit on main (and beside the build), each hook run in both repositories, the moved branches' commit once)"
echo "  watermarks: $(wc -l <"$WORK/hooked/.git/sandbox-watermarks") lines"
echo "  load:    $(cut -d' ' -f1-3 /proc/loadavg) at end"
exit 0
