#!/bin/sh
# git-sandbox hook: queues the new commits of watched branches for a run (through this home's
# spool, or `git sandbox notify`).
# It never fails your git command, but for the pre-push gate when you turn it on ([hooks]
# pre_push = "block" or "wait"; `git push --no-verify` skips it). A hook that was here before is
# kept beside this one as <name>.pre-sandbox and runs first, with the same arguments and input;
# git sees its exit status.
# It starts no process unless a branch moved: git runs reference-transaction several times for
# one commit, and pack-refs (`git gc`) runs it twice for every ref it packs.
hook=${0##*/}
dir=${0%/*}
status=0
chained=
[ -x "$dir/$hook.pre-sandbox" ] && chained="$dir/$hook.pre-sandbox"
# husky's generated hooks (`. "$(dirname "$0")/h"`) find the project's hook by their own name:
# they run as if they were this hook, with $0 unchanged.
run_chained() {
  if [ -f "$dir/h" ] && grep -q '/h"' "$chained" 2>/dev/null; then
    sh -c 'c=$1; shift; . "$c"' "$0" "$chained" "$@"
  else
    "$chained" "$@"
  fi
}
# is_news OLD NEW REF: an update that moves a branch to a commit.
is_news() {
  [ "$1" != "$2" ] && [ "$2" != "$zero" ] && case "$3" in refs/heads/?*) return 0 ;; esac
  return 1
}
find_bin() {
  if command -v git-sandbox >/dev/null 2>&1; then
    bin=git-sandbox
  elif [ -x "@GIT_SANDBOX_FALLBACK@" ]; then
    bin="@GIT_SANDBOX_FALLBACK@"
  else
    bin=
  fi
}
case "$hook" in
  pre-push)
    # The pushed refs come on stdin, once: both the chained hook and the gate get them.
    input=$(cat)
    if [ -n "$chained" ]; then
      printf '%s\n' "$input" | run_chained "$@" || exit $?
    fi
    find_bin
    [ -n "$bin" ] || exit 0
    printf '%s\n' "$input" | "$bin" pre-push "$@"
    exit $?
    ;;
  reference-transaction)
    # Only a finished update of a branch is news; other phases, notes and tags are not.
    if [ "$1" != committed ]; then
      [ -n "$chained" ] && { run_chained "$@"; exit $?; }
      exit 0
    fi
    # News: a line `<old> <new> refs/heads/...` that moves a branch to a commit. A deletion
    # (pack-refs prunes each loose ref in a transaction of its own) or an unchanged value is
    # not. A small transaction (a commit: HEAD and its branch) is read here, without starting a
    # process; a large one (update-ref --stdin, pack-refs) goes through one awk, never a shell
    # loop, whose cost would grow with the square of the number of refs.
    zero=0000000000000000000000000000000000000000
    news=
    made=
    input=
    n=0
    while [ $n -lt 16 ] && IFS= read -r line; do
      n=$((n + 1))
      input="$input$line
"
      set -f
      # shellcheck disable=SC2086
      is_news $line && news="$news$line
" && case $line in "$zero "*) made=1 ;; esac
      set +f
    done
    rest=
    if [ $n -ge 16 ]; then
      rest=$(cat)
      # pack-refs reports every ref as created (`<zero> <new> <ref>`) just after it wrote them
      # all to packed-refs: a created ref that packed-refs already holds at that value is the
      # same ref being packed, not news (a real creation is written as a loose ref).
      packed=$(git rev-parse --git-common-dir 2>/dev/null)/packed-refs
      news=$(printf '%s%s\n' "$input" "$rest" | awk -v zero="$zero" -v packed="$packed" '
        BEGIN {
          while ((getline l < packed) > 0) {
            split(l, f, " ")
            if (f[2] ~ /^refs\/heads\//) p[f[2]] = f[1]
          }
        }
        $3 ~ /^refs\/heads\// && $2 != zero && $1 != $2 && !($1 == zero && p[$3] == $2)')
    fi
    if [ -n "$chained" ]; then
      if [ -n "$rest" ]; then
        printf '%s%s\n' "$input" "$rest" | run_chained "$@"
      else
        printf '%s' "$input" | run_chained "$@"
      fi
      status=$?
    fi
    [ -n "$news" ] || exit $status
    # A small transaction that moves branches (a commit) goes to this home's spool, written by
    # the shell alone: the next git-sandbox command, or the daemon within a fifth of a second,
    # queues its commits (`git sandbox notify` would cost the commit a process). The home is
    # found as git-sandbox finds it; without its spool (made by `init`), the binary is called
    # as before, and so it is for a branch made, which counts the loose refs made one at a time.
    if [ -z "$rest" ] && [ -z "$made" ]; then
      spool=${GIT_SANDBOX_HOME:-${XDG_DATA_HOME:-${HOME:-}/.local/share}/git-sandbox}/spool
      if [ -d "$spool" ] && [ -w "$spool" ] &&
        { printf 'git-sandbox spool 1\ncwd %s\n%send\n' "$PWD" "$news" >>"$spool/$$"; } 2>/dev/null; then
        exit $status
      fi
    fi
    find_bin
    [ -n "$bin" ] || exit $status
    # The binary looks at these refs alone. A here-document, not a pipe from printf: a small
    # one is written without forking the shell.
    "$bin" notify --hook "$hook" --stdin >/dev/null <<EOF || true
$news
EOF
    exit $status
    ;;
  *)
    if [ -n "$chained" ]; then
      run_chained "$@"
      status=$?
    fi
    # With git >= 2.28 reference-transaction reports the same update: notify once, from there.
    [ "@NOTIFY_FROM_POST@" = 1 ] || exit $status
    ;;
esac
find_bin
[ -n "$bin" ] || exit $status
"$bin" notify --hook "$hook" </dev/null >/dev/null || true
exit $status
