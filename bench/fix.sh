#!/usr/bin/env bash
# `git sandbox fix` against its peer on the same range: a 2,000-file repository and a branch of
# 20 commits, each adding trailing blanks to files of its own; the formatter (the same command on
# both sides) strips them from the files that have any. git-sandbox runs it in the sandbox on each
# commit and rewrites the range; the peer is git-branchless's `git test fix` when it is on PATH
# (BRANCHLESS=install puts it there first: `cargo install git-branchless`, minutes of building),
# else a `git rebase -x` loop that amends each commit with the formatter's changes. Each side runs
# on a fresh copy of the repository; git-sandbox's kept results are dropped before each of its
# rounds (its second `fix` of a range runs nothing, which is timed apart).
#
# Target (issue 54): <= 1.5x the peer's time. Prints each side's median and the ratio.
#
# Usage: bench/fix.sh              (from any directory)
# Env:   GIT_SANDBOX_BIN  the binary (default: target/release/git-sandbox of this checkout)
#        REPS (default 3), COMMITS (default 20), FILES (default 2000)
# Needs: git, awk. Measures only: always exits 0 once it has run.
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${GIT_SANDBOX_BIN:-$ROOT/target/release/git-sandbox}
REPS=${REPS:-3}
COMMITS=${COMMITS:-20}
FILES=${FILES:-2000}
[ -x "$BIN" ] || { echo "$BIN not found: cd $ROOT && cargo build --release (or set GIT_SANDBOX_BIN)" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-fix.XXXXXX")
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  cd /
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

mkdir -p "$WORK/home" "$WORK/config/git-sandbox" "$WORK/sandbox-home" "$WORK/bin"
export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/config GIT_SANDBOX_HOME=$WORK/sandbox-home
export GIT_CONFIG_NOSYSTEM=1
unset GIT_SANDBOX_TMPDIR GIT_DIR GIT_WORK_TREE
for v in $(env | sed -n 's/^\(SANDBOX_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
git config --global user.name bench
git config --global user.email bench@example.com
git config --global init.defaultBranch main
ln -s "$BIN" "$WORK/bin/git-sandbox"
export PATH=$WORK/bin:$PATH

if [ "${BRANCHLESS:-}" = install ] && ! command -v git-branchless >/dev/null; then
  echo "installing git-branchless (cargo install, into $WORK/branchless)…" >&2
  cargo install --quiet --locked --root "$WORK/branchless" git-branchless >&2
  export PATH=$WORK/branchless/bin:$PATH
fi

# The formatter: strip trailing blanks from the .txt files that have any.
FMT="grep -rl --include='*.txt' ' \$' . | xargs -r sed -i 's/ *\$//'"

# The repository: FILES files in 40 directories, then COMMITS commits on `topic`.
SRC=$WORK/src
git init -q "$SRC"
cd "$SRC"
for ((d = 0; d < 40; d++)); do
  mkdir -p "d$d"
  for ((f = d; f < FILES; f += 40)); do printf 'line one of %d\nline two\n' "$f" > "d$d/f$f.txt"; done
done
cat > .sandbox.toml <<TOML
[checks.fmt]
command = "$(printf '%s' "$FMT" | sed 's/\\/\\\\/g; s/"/\\"/g')"
fix = true
required = false
TOML
git add -A && git commit -qm base
git switch -q -c topic
for ((c = 0; c < COMMITS; c++)); do
  for ((k = 0; k < 5; k++)); do
    f=$(( (c * 5 + k) * 7 % FILES ))
    printf 'added by commit %d   \n' "$c" >> "d$((f % 40))/f$f.txt"
  done
  git commit -qam "change $c"
done
git switch -q main
"$BIN" init >/dev/null 2>&1 || "$BIN" init

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

ours=() peer=() again=()
for ((r = 0; r < REPS; r++)); do
  rm -rf "$GIT_SANDBOX_HOME/fix" "$WORK/ours"
  cp -a "$SRC" "$WORK/ours"
  cd "$WORK/ours"
  "$BIN" init >/dev/null 2>&1 || true
  t0=$(now)
  "$BIN" fix main..topic --check fmt >/dev/null
  t1=$(now)
  "$BIN" fix main..topic --check fmt >/dev/null
  t2=$(now)
  ours+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')")
  again+=("$(awk -v a="$t1" -v b="$t2" 'BEGIN { print b - a }')")
  [ -z "$(git diff main..topic | grep -E '^\+.* $' || true)" ] || echo "warning: git-sandbox left trailing blanks" >&2

  rm -rf "$WORK/peer"
  cp -a "$SRC" "$WORK/peer"
  cd "$WORK/peer"
  if command -v git-branchless >/dev/null; then
    PEER="git-branchless test fix"
    git branchless init >/dev/null 2>&1
    git switch -q topic 2>/dev/null
    t0=$(now)
    git branchless test fix --exec "$FMT" 'main..topic' >/dev/null 2>&1
    t1=$(now)
  else
    PEER="git rebase -x (amending each commit)"
    git switch -q topic
    t0=$(now)
    git rebase -q -x "$FMT; git commit -qa --amend --no-edit --allow-empty" main >/dev/null 2>&1
    t1=$(now)
  fi
  peer+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')")
  [ -z "$(git diff main..topic | grep -E '^\+.* $' || true)" ] || echo "warning: the peer left trailing blanks" >&2
done

o=$(printf '%s\n' "${ours[@]}" | median)
p=$(printf '%s\n' "${peer[@]}" | median)
a=$(printf '%s\n' "${again[@]}" | median)
printf 'fix of %d commits over %d files, %d rounds (medians)\n' "$COMMITS" "$FILES" "$REPS"
printf '  git sandbox fix          %6.2f s   (again, nothing to run: %.2f s)\n' "$o" "$a"
printf '  %-24s %6.2f s\n' "$PEER" "$p"
printf '  ratio                    %6.2fx   (target <= 1.5x)\n' "$(awk -v o="$o" -v p="$p" 'BEGIN { print o / p }')"
