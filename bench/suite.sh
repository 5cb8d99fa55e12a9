#!/usr/bin/env bash
# A real suite, side by side with git-test (issue 36: "stays <= 1.1x git-test").
#
# It clones a pytest project (a path or URL; default https://github.com/pallets/click), takes its
# HEAD as the base, installs its test dependencies into a venv (pip, from PyPI), commits a
# .sandbox.toml with the suite's command, and makes COMMITS one-line commits on top (a comment
# line appended to one of the project's source files each; the suite passes on every one).
# Then, alternating over REPS rounds, it times:
#   git-test  `git-test run --force --keep-going BASE..main` in its own worktree (made once, reused), with
#             `test.default.command` set to the same command;
#   sandbox   `git sandbox run --force BASE..main` with every setting at its default (the
#             workers, the sandbox, the build caches, the analysis, the two phases).
# It prints each round's seconds and the medians' ratio (target: at most 1.1x git-test).
#
# Usage: bench/suite.sh [REPO]     REPO=/work/.mirror/pallets+click/repo COMMITS=5 REPS=2
# Env:   GIT_SANDBOX_BIN  the binary (default: target/release/git-sandbox of this checkout)
#        GIT_TEST_BIN     git-test (default: ../shared/peers/git-test/git-test next to this checkout)
# Needs: python3 with venv and pip, network to PyPI (once: the venv is kept). VENV (default
# ~/.cache/git-sandbox-bench/venv-NAME) must be outside /tmp: a run has a private /tmp.
# Measures only: always exits 0 once it has run.
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${GIT_SANDBOX_BIN:-$ROOT/target/release/git-sandbox}
GIT_TEST=${GIT_TEST_BIN:-$ROOT/../shared/peers/git-test/git-test}
REPO=${1:-${REPO:-https://github.com/pallets/click}}
COMMITS=${COMMITS:-5}
REPS=${REPS:-2}
[ -x "$BIN" ] || { echo "$BIN not found: cd $ROOT && cargo build --release (or set GIT_SANDBOX_BIN)" >&2; exit 2; }
[ -f "$GIT_TEST" ] || { echo "$GIT_TEST not found (set GIT_TEST_BIN)" >&2; exit 2; }
NAME=$(basename "${REPO%/}" .git)
[ "$NAME" = repo ] && NAME=$(basename "$(dirname "${REPO%/}")" | sed 's/.*+//')
VENV=${VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/git-sandbox-bench/venv-$NAME}
case "$VENV" in /tmp/*) echo "VENV=$VENV is under /tmp, which runs cannot see" >&2; exit 2 ;; esac

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-suite.XXXXXX")
trap 'cd /; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM HUP PIPE
mkdir -p "$WORK/bin" "$WORK/config/git-sandbox" "$WORK/no-hooks"
# A copy: a concurrent `cargo build` cannot swap it mid-run.
cp "$BIN" "$WORK/bin/git-sandbox"
export PATH=$WORK/bin:$PATH
export GIT_SANDBOX_HOME=$WORK/home XDG_CONFIG_HOME=$WORK/config
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE
for v in $(env | sed -n 's/^\(SANDBOX_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
LOG=$WORK/bench.log

SRC=$WORK/$NAME
git clone -q "$REPO" "$SRC"
cd "$SRC"
git checkout -q -B main
[ -x "$VENV/bin/python3" ] || python3 -m venv "$VENV"
python3 - >"$WORK/requirements.txt" <<'EOF'
import tomllib
d = tomllib.load(open("pyproject.toml", "rb"))
deps = list(d.get("project", {}).get("dependencies", []))
for item in d.get("dependency-groups", {}).get("tests", []):
    if isinstance(item, str):
        deps.append(item)
print("\n".join(deps))
EOF
"$VENV/bin/pip" install --quiet --disable-pip-version-check "pytest<9" -r "$WORK/requirements.txt"
export PATH=$VENV/bin:$PATH VIRTUAL_ENV=$VENV

# Deprecation warnings as errors (the project's config) would fail on this interpreter, and
# click's test_light_imports lists the modules this interpreter imports.
CMD="python3 -m pytest -q -p no:cacheprovider -o pythonpath=src -o filterwarnings=ignore::DeprecationWarning --deselect tests/test_imports.py::test_light_imports tests"
cat >.sandbox.toml <<EOF
[test]
command = "$CMD"
timeout = "900s"
EOF
git add -f .sandbox.toml && git commit -qm "bench: the test command"
git-sandbox init >/dev/null 2>&1
# Tests that fail inside the sandbox before any change (a pager test that needs a terminal, a
# version read from the installed package's metadata) are deselected, so that the base passes
# in both tools; a collection error hides the failures behind it: a few rounds.
for round in 1 2 3 4; do
  git-sandbox run --json --force >"$WORK/base.json" 2>>"$LOG" && break
  [ "$round" = 4 ] && { echo "the base does not pass its own tests" >&2; exit 1; }
  python3 - "$WORK/base.json" >"$WORK/deselect" <<'EOF'
import json, sys
names = {f["name"].split("[")[0] for f in json.load(open(sys.argv[1]))[0]["tests"]["failures"]}
print(" ".join(f"--deselect {n}" if "::" in n else f"--ignore {n}" for n in sorted(names)))
EOF
  CMD=${CMD/--deselect tests\/test_imports/$(cat "$WORK/deselect") --deselect tests/test_imports}
  sed -i "s|^command = .*|command = \"$CMD\"|" .sandbox.toml
  git commit -qa --amend -m "bench: the test command"
done
BASE=$(git rev-parse HEAD)
mapfile -t FILES < <(git ls-files "src/*.py" | sort | head -n "$COMMITS")
for ((i = 0; i < COMMITS; i++)); do
  printf '# bench: change %d\n' "$i" >>"${FILES[$((i % ${#FILES[@]}))]}"
  git -c core.hooksPath="$WORK/no-hooks" commit -qam "bench: one-line change $i"
done
git config test.default.command "$CMD"
git -c core.hooksPath="$WORK/no-hooks" worktree add -q --detach "$WORK/gt" "$BASE"

now_us() { local t=$EPOCHREALTIME; REPLY=${t/./}; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
T_GT=() T_SB=()
for ((r = 1; r <= REPS; r++)); do
  now_us; t0=$REPLY
  (cd "$WORK/gt" && GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0="$WORK/no-hooks" \
    python3 "$GIT_TEST" run --force --keep-going "$BASE..main") >>"$LOG" 2>&1 || echo "warning: git-test exited non-zero (round $r)" >&2
  now_us; T_GT+=($((REPLY - t0)))
  now_us; t0=$REPLY
  git-sandbox run --force "$BASE..main" >>"$LOG" 2>&1 || echo "warning: git sandbox run exited non-zero (round $r)" >&2
  now_us; T_SB+=($((REPLY - t0)))
done
failed=$(git-sandbox log -n "$COMMITS" 2>/dev/null | grep -vc '✔' || true)

echo "A real suite side by side with git-test: $NAME, $COMMITS one-line commits on $(git rev-parse --short "$BASE")"
echo "  binary:  $BIN ($("$BIN" --version 2>/dev/null || echo '?'))"
echo "  suite:   $CMD"
echo "  machine: $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg) at end"
echo "  rounds (s):  git-test $(printf '%s ' "${T_GT[@]}" | awk '{for(i=1;i<=NF;i++) printf "%.1f ", $i/1e6}')  git-sandbox $(printf '%s ' "${T_SB[@]}" | awk '{for(i=1;i<=NF;i++) printf "%.1f ", $i/1e6}')"
gt=$(median "${T_GT[@]}") sb=$(median "${T_SB[@]}")
awk -v a="$sb" -v b="$gt" -v n="$COMMITS" 'BEGIN{printf "  median:      git-test %.2f s/commit, git-sandbox %.2f s/commit: %.2fx git-test   target <= 1.1x\n", b/n/1e6, a/n/1e6, a/b}'
echo "  git-sandbox's last records that did not pass: $failed of $COMMITS"
exit 0
