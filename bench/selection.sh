#!/usr/bin/env bash
# Runs with the probe beside them against runs without, on a real project with its real history
# (click, flask, requests; express, a JavaScript project with mocha). The record is the
# command's own run either way; the probe (phase one: the tests a change reaches, run alone
# beside it) only makes the first failure known early.
#
# A project with a package.json and no pyproject.toml (express) is JavaScript: `git sandbox init`
# proposes its command (`npm test`) and setup (`npm install`, allowed the network by the user
# config); its .sandbox.toml is that, and the mutations are of its `lib/` and `index.js`.
#
# It clones the repository (a path or URL; default https://github.com/pallets/click), takes its
# HEAD (or REV, a tag or commit: REV=8.2.1 pins a release) as the base, installs the project's
# test dependencies into a venv (pip, from PyPI), and commits a .sandbox.toml with a plain pytest
# command, no coverage flag (COVERAGE=1 adds `--cov=PKG --cov-context=test`, per-test coverage
# the user's own run records). It makes git-sandbox's own test map of the base as a production
# run would have it made (`git-sandbox __testmap`, timed: its time counts in the added time,
# spread over the mutants it serves). Then it makes one-line mutations of
# the project's own source, each on its own branch from the base (not stacked), until BREAKING
# of them fail the suite and BENIGN of them do not. Each mutated commit runs once with
# `[test] phases = false` and, when it is still wanted, `--force` with phases on. It prints:
#   - first failure: median first_failure_ms of the two-phase run as a share of the one-phase
#     run's test time (target <= 20%): when the first failure was known, from the probe or the
#     run's own output, in one phase too; a run that never knew it early counts 100%;
#   - faulty commits caught: breaking commits whose phase one held one of the run's failures
#     (target >= 39 of 40); a run in one phase caught nothing;
#   - failing tests caught: of the breaking runs' failing tests, those phase one held (target
#     >= 95%);
#   - added time: for the commits that break nothing, the two-phase test time over the
#     one-phase one, median, plus the test map's time spread over every mutant (target <= 3%);
#     with REPEAT=N each such commit runs N times in each
#     mode, alternating, and each mode's median time counts (a run's time varies by 15-25%
#     from one run to the next on this machine kind; the pairs' noise is what REPEAT damps);
#   - phase one's size: the median share of the suite's tests it ran.
# Every commit's figures go to $OUT/rows.jsonl as they come, so a cut-short run still reports
# (`bench/selection.sh --report OUT`).
#
# Usage: bench/selection.sh [REPO]     REPO=/work/.mirror/pallets+flask/repo REV= COVERAGE=1 PYTHON=
#                                      BREAKING=40 BENIGN=20 SEED=1 REPEAT=1 TIMEOUT=900s
#        bench/selection.sh --report OUT
# Needs: target/release/git-sandbox (or GS=path), python3 with venv and pip (PYTHON=python3.12
# makes the venv with another interpreter), network to PyPI.
# VENV (default ~/.cache/git-sandbox-bench/venv-NAME) must be outside /tmp: a run has a private
# /tmp of its own.
set -euo pipefail

cd "$(dirname "$0")/.."
report() {
  python3 - "$1/rows.jsonl" "$(cat "$1/name" 2>/dev/null || echo project)" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
br = [r for r in rows if r["kind"] == "breaking" and r.get("two_ms")]
be = [r for r in rows if r["kind"] == "benign" and r.get("two_ms")]
def median(xs):
    return statistics.median(xs) if xs else float("nan")
import os
share = median([(r["first_ms"] if r["first_ms"] is not None else r["one_ms"]) / r["one_ms"] for r in br])
split = [r for r in br if r["phases"] == 2]
caught = sum(r["caught"] for r in br)
tests_caught = sum(r.get("tests_caught", 0) for r in br)
tests_failed = sum(r.get("tests_failed", 0) for r in br)
mapping = {}
try:
    mapping = json.load(open(os.path.join(os.path.dirname(sys.argv[1]), "map.json")))
except Exception:
    pass
one_be = median([r["one_ms"] for r in be])
upkeep = (mapping.get("ms", 0) / max(len(rows), 1)) / one_be if be else 0
added = median([r["two_ms"] / r["one_ms"] - 1 for r in be])
size = median([r["phase_one_tests"] / r["total"] for r in br + be if r["phases"] == 2 and r["total"]])
print(f"{sys.argv[2]}: {len(br)} breaking, {len(be)} benign commits; {len(split)} breaking ran in two phases; test map {mapping.get('ms', 0) / 1000:.1f} s for {mapping.get('tests', 0)} tests")
print("| measure | two phases | one phase | target |")
print("| --- | --- | --- | --- |")
print(f"| first failure, median share of the suite's test time | {share:.0%} | 100% | <= 20% |")
print(f"| faulty commits caught by phase one | {caught} of {len(br)} ({caught / max(len(br), 1):.0%}) | - | >= 39 of 40 |")
print(f"| failing tests caught by phase one | {tests_caught} of {tests_failed} ({tests_caught / max(tests_failed, 1):.0%}) | - | >= 95% |")
print(f"| added test time, commits that break nothing (median), the map's upkeep ({upkeep:+.1%}) included | {added + upkeep:+.1%} | 0% | <= 3% |")
print(f"| phase one's tests, median share of the suite (two-phase runs) | {size:.0%} | 100% | |")
print(f"| records equal to the one-phase run's (status, counts, failing tests) | {sum(r['same'] for r in br + be)} of {len(br) + len(be)} | | all |")
EOF
}
if [ "${1:-}" = --report ]; then report "$2"; exit 0; fi

GS=${GS:-$PWD/target/release/git-sandbox}
REPO=${1:-${REPO:-https://github.com/pallets/click}}
BREAKING=${BREAKING:-40}
BENIGN=${BENIGN:-20}
SEED=${SEED:-1}
REPEAT=${REPEAT:-1}
REV=${REV:-}
COVERAGE=${COVERAGE:-0}
# A mutant that hangs the suite (a request never answered) runs until this, in both modes.
TIMEOUT=${TIMEOUT:-900s}
[ -x "$GS" ] || { echo "$GS not found: cargo build --release (or set GS)" >&2; exit 2; }
NAME=$(basename "${REPO%/}" .git)
[ "$NAME" = repo ] && NAME=$(basename "$(dirname "${REPO%/}")" | sed 's/.*+//')
PYTHON=${PYTHON:-python3}
VENV=${VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/git-sandbox-bench/venv-$NAME${PYTHON#python3}}
case "$VENV" in /tmp/*) echo "VENV=$VENV is under /tmp, which runs cannot see" >&2; exit 2 ;; esac
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-selection.XXXXXX")
OUT=${OUT:-$WORK/out}
mkdir -p "$OUT"
echo "$NAME" > "$OUT/name"
echo "bench/selection.sh: $NAME in $WORK, figures in $OUT" >&2
export GIT_SANDBOX_HOME=$WORK/home XDG_CONFIG_HOME=$WORK/config
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com
mkdir -p "$XDG_CONFIG_HOME/git-sandbox"

SRC=$WORK/$NAME
git clone -q "$REPO" "$SRC"
cd "$SRC"
git checkout -q -B main ${REV:+"$REV"}
# main is production (`init` takes the remote's default branch, express's master, else a local
# main): production's setup layer then serves the test map's run and the mutants', as it would.
git remote remove origin
# The user config every run starts from (the driver below writes its own lines after it).
USER_BASE=""
if [ -f package.json ] && [ ! -f pyproject.toml ]; then
  LANGUAGE=js
  PKG=lib
  USER_BASE=$'[limits]\nsetup_network = true\n'
  printf '%s' "$USER_BASE" > "$XDG_CONFIG_HOME/git-sandbox/config.toml"
  "$GS" init >/dev/null
  # init's proposal, as the repository's own, with the bench's timeout and no analysis.
  "$GS" config --adopted | sed -n '/^\[test\]/,/^$/p' | sed "/^\[test\]/a timeout = \"$TIMEOUT\"" > .sandbox.toml
  printf '[analysis]\nenabled = false\n' >> .sandbox.toml
  git add -f .sandbox.toml && git commit -qm "bench: the test command"
  export GIT_SANDBOX_NO_TEST_MAP=1
  "$GS" run --json --force > "$WORK/base.json" || {
    echo "the base does not pass its own tests: $WORK/base.json" >&2
    exit 1
  }
else
  LANGUAGE=py
  PKG=$(cd src && for d in */__init__.py; do echo "${d%/__init__.py}"; break; done)
  if [ ! -x "$VENV/bin/python3" ]; then
    "$PYTHON" -m venv "$VENV"
  fi
  # The project's runtime dependencies and its test group (PEP 735: `tests`, or requests'
  # `test`), not the project itself:
  # the tests import it from src/.
  python3 - > "$WORK/requirements.txt" <<'EOF'
import tomllib
d = tomllib.load(open("pyproject.toml", "rb"))
deps = list(d.get("project", {}).get("dependencies", []))
groups = d.get("dependency-groups", {})
for item in groups.get("tests", []) + groups.get("test", []):
    if isinstance(item, str):
        deps.append(item)
print("\n".join(deps))
EOF
  # pytest 9 dropped names flask's conftest.py imports (_pytest.monkeypatch.notset).
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "pytest<9" pytest-cov -r "$WORK/requirements.txt"
  export PATH=$VENV/bin:$PATH VIRTUAL_ENV=$VENV

  # warnings as errors (the projects' config) would fail on this interpreter's deprecations, and
  # click's test_light_imports lists the modules this interpreter imports: neither says anything
  # of the selection.
  # Lines, not branches (flask measures branches, and tests too): what the selection reads,
  # and a data file a tenth the size.
  printf '[run]\nbranch = false\n' > .coveragerc-bench
  COV=""
  [ "$COVERAGE" = 0 ] || COV="--cov=$PKG --cov-config=.coveragerc-bench --cov-context=test --cov-report= "
  cat > .sandbox.toml <<EOF
[test]
command = "python3 -m pytest -q -p no:cacheprovider -o pythonpath=src -o filterwarnings=ignore::DeprecationWarning $COV--deselect tests/test_imports.py::test_light_imports tests"
timeout = "$TIMEOUT"
[analysis]
enabled = false
EOF
  git add -f .sandbox.toml .coveragerc-bench && git commit -qm "bench: the test command"
  "$GS" init >/dev/null
  # The base's test map is made once, below, and timed; none behind the bench's back.
  export GIT_SANDBOX_NO_TEST_MAP=1
  # Tests that fail in the sandbox before any mutation (a pager test that needs a terminal, a
  # version read from the installed package's metadata) are deselected, by node id without
  # parameters, so that the base passes.
  # A collection error hides the failures behind it: a few rounds.
  for round in 1 2 3 4; do
    "$GS" run --json --force > "$WORK/base.json" && break
    [ "$round" = 4 ] && { echo "the base does not pass its own tests" >&2; exit 1; }
    python3 - "$WORK/base.json" <<'EOF' > "$WORK/deselect"
import json, sys
names = {f["name"].split("[")[0] for f in json.load(open(sys.argv[1]))[0]["tests"]["failures"]}
# A file that fails to import (click's reads its installed version) is ignored whole.
print(" ".join(f"--deselect {n}" if "::" in n else f"--ignore {n}" for n in sorted(names)))
EOF
    sed -i "s|--deselect tests/test_imports|$(cat "$WORK/deselect") --deselect tests/test_imports|" .sandbox.toml
    git commit -qa --amend -m "bench: the test command"
  done
fi

if [ "$COVERAGE" = 0 ]; then
  "$GS" __testmap --json > "$OUT/map.json" || echo '{}' > "$OUT/map.json"
  echo "test map: $(cat "$OUT/map.json")" >&2
fi
[ -f "$OUT/map.json" ] || echo '{}' > "$OUT/map.json"
python3 - "$GS" "$BREAKING" "$BENIGN" "$SEED" "$XDG_CONFIG_HOME/git-sandbox/config.toml" "$PKG" "$OUT/rows.jsonl" "$REPEAT" "$LANGUAGE" "$USER_BASE" <<'EOF'
import json, random, statistics, subprocess, sys
gs, breaking, benign, seed, user_config, pkg, rows_path, repeat, language, user_base = sys.argv[1:11]
breaking, benign, seed, repeat = int(breaking), int(benign), int(seed), int(repeat)
rng = random.Random(seed)
git = lambda *a: subprocess.run(["git", *a], check=True, capture_output=True, text=True).stdout
# One-line mutations, as a mutation tester makes them.
if language == "js":
    files = [f for f in git("ls-files", "lib", "index.js").split() if f.endswith(".js")]
    swaps = [(" === ", " !== "), (" !== ", " === "), (" < ", " <= "), (" > ", " >= "),
             ("true", "false"), ("false", "true"), (" + 1", " + 2"), (" - 1", " - 2"),
             (" && ", " || "), (" || ", " && "), ("return ", "return undefined; // ")]
    comment = ("//", "/*", "*")
else:
    files = [f for f in git("ls-files", f"src/{pkg}").split() if f.endswith(".py")]
    swaps = [(" == ", " != "), (" != ", " == "), (" < ", " <= "), (" > ", " >= "), ("True", "False"),
             ("False", "True"), (" + 1", " + 2"), (" - 1", " - 2"), (" and ", " or "), (" or ", " and "),
             ("return ", "return None  # ")]
    comment = ("#", "\"", "'")
candidates = []
for f in files:
    for n, line in enumerate(open(f).read().split("\n")):
        s = line.strip()
        if not s or s.startswith(comment):
            continue
        for a, b in swaps:
            if a in line:
                candidates.append((f, n, a, b))
rng.shuffle(candidates)

def run(config, *args):
    open(user_config, "w").write(user_base + config)
    o = subprocess.run([gs, "run", "--json", *args], capture_output=True, text=True)
    return json.loads(o.stdout)[0]

wanted = {"breaking": breaking, "benign": benign}
found = {"breaking": 0, "benign": 0}
out = open(rows_path, "a")
for f, n, a, b in candidates:
    if all(found[k] >= wanted[k] for k in wanted):
        break
    git("checkout", "-q", "-B", "mutant", "main")
    lines = open(f).read().split("\n")
    lines[n] = lines[n].replace(a, b, 1)
    open(f, "w").write("\n".join(lines))
    git("commit", "-qam", f"mutate {f}:{n + 1}")
    one = run("[test]\nphases = false\n")
    if one["status"] not in ("passed", "failed"):
        continue
    kind = "breaking" if one["status"] == "failed" else "benign"
    if found[kind] >= wanted[kind]:
        continue
    found[kind] += 1
    two = run("", "--force")
    t1, t2 = one.get("tests") or {}, two.get("tests") or {}
    if kind == "benign" and repeat > 1:
        ones, twos = [t1["duration_ms"]], [t2.get("duration_ms")]
        for _ in range(repeat - 1):
            ones.append((run("[test]\nphases = false\n", "--force").get("tests") or {}).get("duration_ms"))
            twos.append((run("", "--force").get("tests") or {}).get("duration_ms"))
        if None not in ones + twos:
            t1 = dict(t1, duration_ms=statistics.median(ones))
            t2 = dict(t2, duration_ms=statistics.median(twos))
    phases = t2.get("phases") or []
    first = phases[0] if phases else {}
    row = {
        "kind": kind, "where": f"{f}:{n + 1}", "one_ms": t1["duration_ms"], "two_ms": t2.get("duration_ms"),
        "first_ms": t2.get("first_failure_ms"), "phases": len(phases) or 1,
        "phase_one_tests": first.get("total") or 0, "total": t2.get("total"),
        # Phase one held one of the run's failures (a run in one phase caught nothing); where
        # the run names no failure (the suite stopped at collection: a syntax error, a conftest
        # that fails to import), phase one failed too.
        # (A probe that found none of the run's failures is `selection_missed`; one stopped
        # before it ended having found none leaves no phases.)
        "caught": two["status"] == "failed" and len(phases) == 2 and (
            not t2.get("selection_missed")
            if t2.get("failures")
            else first.get("exit_code") not in (0, None)),
        "tests_caught": (first.get("failed") or 0) if len(phases) == 2 else 0,
        # The run's failed and errored tests, as status counts recall by test (phase one's
        # count is over every failure the output named).
        "tests_failed": (t2.get("failed") or 0) + (t2.get("errors") or 0),
        "same": [one["status"]] + [t1.get(k) for k in ("passed", "failed", "skipped", "errors", "total")]
                + [sorted(f["name"] for f in t1.get("failures") or [])]
                == [two["status"]] + [t2.get(k) for k in ("passed", "failed", "skipped", "errors", "total")]
                + [sorted(f["name"] for f in t2.get("failures") or [])],
    }
    out.write(json.dumps(row) + "\n")
    out.flush()
    print(kind, json.dumps(row), file=sys.stderr)
EOF
report "$OUT"
