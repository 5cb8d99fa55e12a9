#!/usr/bin/env bash
# Agent workspaces against their peers on the same tree: `workspace exec W -- true` after a first
# command, beside `exec HEAD -- true` after a first run (the same sandbox with no layers: the peer
# the issue names) on a 5,000-file tree; and `workspace commit` of a one-file change on a
# 10,000-file tree, beside `git commit` of the same change in a checkout (`git add` + `commit`).
#
# Targets (issue 55): exec <= 20 ms after the first; commit <= 30 ms. Prints medians and ratios.
#
# Usage: bench/workspace.sh        (from any directory)
# Env:   GIT_SANDBOX_BIN  the binary (default: target/release/git-sandbox of this checkout)
#        REPS (default 15)
# Needs: git, awk. Measures only: always exits 0 once it has run.
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${GIT_SANDBOX_BIN:-$ROOT/target/release/git-sandbox}
REPS=${REPS:-15}
[ -x "$BIN" ] || { echo "$BIN not found: cd $ROOT && cargo build --release (or set GIT_SANDBOX_BIN)" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-ws.XXXXXX")
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  cd /
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

mkdir -p "$WORK/home" "$WORK/config/git-sandbox" "$WORK/sandbox-home"
export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/config GIT_SANDBOX_HOME=$WORK/sandbox-home
export GIT_CONFIG_NOSYSTEM=1
unset GIT_SANDBOX_TMPDIR GIT_DIR GIT_WORK_TREE
for v in $(env | sed -n 's/^\(SANDBOX_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
git config --global user.name bench
git config --global user.email bench@example.com
git config --global init.defaultBranch main

now() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b - a) / 1e6 }'; }

# A repository of FILES files in 50 directories; analysis off (the runs are not measured here).
repo() {
  local dir=$1 files=$2
  git init -q "$dir"
  cd "$dir"
  for ((d = 0; d < 50; d++)); do
    mkdir -p "d$d"
    for ((f = d; f < files; f += 50)); do printf 'file %d\n' "$f" > "d$d/f$f.txt"; done
  done
  printf '[test]\ncommand = "true"\n[analysis]\nenabled = false\n' > .sandbox.toml
  git add -A && git commit -qm base
  "$BIN" init >/dev/null 2>&1 || "$BIN" init
}

# exec: 5,000 files.
repo "$WORK/five" 5000
"$BIN" workspace new w >/dev/null
"$BIN" workspace exec w -- true
"$BIN" exec HEAD -- true
ws=() ex=()
for ((r = 0; r < REPS; r++)); do
  t0=$(now); "$BIN" workspace exec w -- true; t1=$(now)
  "$BIN" exec HEAD -- true; t2=$(now)
  ws+=("$(ms "$t0" "$t1")"); ex+=("$(ms "$t1" "$t2")")
done
w=$(printf '%s\n' "${ws[@]}" | median)
e=$(printf '%s\n' "${ex[@]}" | median)

# commit: 10,000 files, one file changed each round.
repo "$WORK/ten" 10000
"$BIN" workspace new c >/dev/null
git clone -q --no-local "$WORK/ten" "$WORK/peer"
co=() gc=()
for ((r = 0; r < REPS; r++)); do
  printf 'round %d\n' "$r" | "$BIN" workspace write c d7/f7.txt >/dev/null
  t0=$(now); "$BIN" workspace commit c -m "round $r" >/dev/null; t1=$(now)
  co+=("$(ms "$t0" "$t1")")
  printf 'round %d\n' "$r" > "$WORK/peer/d7/f7.txt"
  t0=$(now); git -C "$WORK/peer" add d7/f7.txt && git -C "$WORK/peer" commit -qm "round $r"; t1=$(now)
  gc+=("$(ms "$t0" "$t1")")
done
c=$(printf '%s\n' "${co[@]}" | median)
g=$(printf '%s\n' "${gc[@]}" | median)

printf 'workspaces, %d rounds (medians)\n' "$REPS"
printf '  workspace exec -- true (5,000 files)   %7.2f ms   exec HEAD -- true %7.2f ms   ratio %.2fx   (target <= 20 ms)\n' \
  "$w" "$e" "$(awk -v a="$w" -v b="$e" 'BEGIN { print a / b }')"
printf '  workspace commit, 1 file (10,000)      %7.2f ms   git add + commit  %7.2f ms   ratio %.2fx   (target <= 30 ms)\n' \
  "$c" "$g" "$(awk -v a="$c" -v b="$g" 'BEGIN { print a / b }')"
