#!/bin/sh
# git-sandbox hook: queues the new commits of watched branches for a run (`git sandbox notify`).
# It never fails your git command, but for the pre-push gate when you turn it on ([hooks]
# pre_push = "block" or "wait"; `git push --no-verify` skips it). A hook that was here before is
# kept beside this one as <name>.pre-sandbox and runs first, with the same arguments and input;
# git sees its exit status.
# It starts no process unless a branch moved: git runs reference-transaction several times for
# one commit.
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
    news=
    input=
    while IFS= read -r line; do
      input="$input$line
"
      case "$line" in *" refs/heads/"*) news=1 ;; esac
    done
    if [ -n "$chained" ]; then
      printf '%s' "$input" | run_chained "$@"
      status=$?
    fi
    [ -n "$news" ] || exit $status
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
