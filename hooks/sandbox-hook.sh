#!/bin/sh
# git-sandbox hook: queues the new commits of watched branches for a run (`git sandbox notify`).
# It never fails your git command. A hook that was here before is kept beside this one as
# <name>.pre-sandbox and runs first, with the same arguments and input; git sees its exit status.
hook=$(basename "$0")
dir=$(dirname "$0")
status=0
input=
case "$hook" in
  reference-transaction|post-rewrite) input=$(cat) ;;
esac
if [ -x "$dir/$hook.pre-sandbox" ]; then
  if [ -n "$input" ]; then
    printf '%s\n' "$input" | "$dir/$hook.pre-sandbox" "$@"
  else
    "$dir/$hook.pre-sandbox" "$@"
  fi
  status=$?
fi
if [ "$hook" = reference-transaction ]; then
  # Only a finished update of a branch is news; notes and tags are not.
  [ "$1" = committed ] || exit $status
  case "$input" in *" refs/heads/"*) ;; *) exit $status ;; esac
fi
if command -v git-sandbox >/dev/null 2>&1; then
  bin=git-sandbox
elif [ -x "@GIT_SANDBOX_FALLBACK@" ]; then
  bin="@GIT_SANDBOX_FALLBACK@"
else
  exit $status
fi
"$bin" notify --hook "$hook" </dev/null >/dev/null || true
exit $status
