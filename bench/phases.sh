#!/usr/bin/env bash
# Two-phase runs against one-phase runs on a real project (click, from its sdist on PyPI).
#
# On click's released source, committed as a base, it makes one-line mutations of click's own
# source, each on its own branch from the base (not stacked), until BREAKING of them fail the
# suite and BENIGN of them do not. Each mutated commit runs twice: with phases (the default),
# then `--force` with `[test] phases = false` in the user config. It prints, side by side:
#   - first failure: median first_failure_ms of the two-phase run as a share of the one-phase
#     run's test time (target <= 25%);
#   - recall: the share of breaking commits whose phase one showed a failure (target >= 95%),
#     and how many ran in one phase (the selection fell back to everything);
#   - added time: for the commits that break nothing, the two-phase test time over the
#     one-phase one, median (target <= 5%).
#
# Usage: bench/phases.sh            BREAKING=40 BENIGN=20 CLICK=8.2.1 SEED=1
# Needs: target/release/git-sandbox (or GS=path), python3 with pytest importable, pip (network to
# PyPI for the sdist).
set -euo pipefail

cd "$(dirname "$0")/.."
GS=${GS:-$PWD/target/release/git-sandbox}
BREAKING=${BREAKING:-40}
BENIGN=${BENIGN:-20}
CLICK=${CLICK:-8.2.1}
SEED=${SEED:-1}
[ -x "$GS" ] || { echo "$GS not found: cargo build --release (or set GS)" >&2; exit 2; }
python3 -c 'import pytest' 2>/dev/null ||
  { echo "python3 cannot import pytest: put a venv with pytest first on PATH" >&2; exit 2; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-phases.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export GIT_SANDBOX_HOME=$WORK/home XDG_CONFIG_HOME=$WORK/config
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com
mkdir -p "$XDG_CONFIG_HOME/git-sandbox"

python3 -m pip download --quiet --no-deps --no-binary :all: "click==$CLICK" -d "$WORK/dl"
tar --no-same-owner -xzf "$WORK"/dl/click-*.tar.gz -C "$WORK"
REPO=$WORK/click
mv "$WORK"/click-"$CLICK" "$REPO"
cd "$REPO"
# pytest 9 fails click's collection on a deprecation (click's config makes warnings errors), and
# test_light_imports lists the modules this interpreter imports: both say nothing of click.
cat > .sandbox.toml <<'EOF'
[test]
command = "python3 -m pytest -q -p no:cacheprovider -p no:schemathesis -o pythonpath=src -o filterwarnings=ignore::DeprecationWarning --deselect tests/test_imports.py::test_light_imports tests"
timeout = "600s"
[analysis]
enabled = false
EOF
git init -q -b main && git add -A && git commit -qm base
"$GS" init >/dev/null
# Tests that fail in the sandbox before any mutation (a pager test that needs a terminal) are
# deselected, by node id without parameters, so that the base passes.
if ! "$GS" run --json > "$WORK/base.json"; then
  python3 - "$WORK/base.json" <<'EOF2' > "$WORK/deselect"
import json, sys
names = {f["name"].split("[")[0] for f in json.load(open(sys.argv[1]))[0]["tests"]["failures"]}
print(" ".join(f"--deselect {n}" for n in sorted(names)))
EOF2
  sed -i "s|--deselect|$(cat "$WORK/deselect") --deselect|" .sandbox.toml
  git commit -qa --amend -m base
  "$GS" run >/dev/null || { echo "the base does not pass its own tests" >&2; exit 1; }
fi

python3 - "$GS" "$BREAKING" "$BENIGN" "$SEED" "$XDG_CONFIG_HOME/git-sandbox/config.toml" <<'EOF'
import json, random, re, statistics, subprocess, sys
gs, breaking, benign, seed, user_config = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rng = random.Random(seed)
git = lambda *a: subprocess.run(["git", *a], check=True, capture_output=True, text=True).stdout
files = [f for f in git("ls-files", "src/click").split() if f.endswith(".py")]
# One-line mutations, as a mutation tester makes them.
swaps = [(" == ", " != "), (" != ", " == "), (" < ", " <= "), (" > ", " >= "), ("True", "False"),
         ("False", "True"), (" + 1", " + 2"), (" - 1", " - 2"), (" and ", " or "), (" or ", " and "),
         ("return ", "return None  # ")]
candidates = []
for f in files:
    for n, line in enumerate(open(f).read().split("\n")):
        s = line.strip()
        if not s or s.startswith("#") or s.startswith(("\"", "'")):
            continue
        for a, b in swaps:
            if a in line:
                candidates.append((f, n, a, b))
rng.shuffle(candidates)

def run(config):
    open(user_config, "w").write(config)
    o = subprocess.run([gs, "run", "--json", "--force"], capture_output=True, text=True)
    return json.loads(o.stdout)[0]

rows = {"breaking": [], "benign": []}
for f, n, a, b in candidates:
    if len(rows["breaking"]) >= breaking and len(rows["benign"]) >= benign:
        break
    git("checkout", "-q", "-B", "mutant", "main")
    lines = open(f).read().split("\n")
    lines[n] = lines[n].replace(a, b, 1)
    open(f, "w").write("\n".join(lines))
    git("commit", "-qam", f"mutate {f}:{n + 1}")
    two = run("")
    one = run("[test]\nphases = false\n")
    t1, t2 = one.get("tests") or {}, two.get("tests") or {}
    if one["status"] not in ("passed", "failed"):
        continue
    kind = "breaking" if one["status"] == "failed" else "benign"
    if len(rows[kind]) >= (breaking if kind == "breaking" else benign):
        continue
    phases = t2.get("phases") or []
    rows[kind].append({
        "where": f"{f}:{n + 1}", "one_ms": t1["duration_ms"], "two_ms": t2["duration_ms"],
        "first_ms": t2.get("first_failure_ms"), "phases": len(phases),
        "caught": len(phases) == 2 and (phases[0].get("failed") or 0) + (phases[0].get("errors") or 0) > 0
                  or len(phases) == 1 and two["status"] == "failed",
        "same": [t1.get(k) for k in ("passed", "failed", "skipped", "errors", "total")]
                == [t2.get(k) for k in ("passed", "failed", "skipped", "errors", "total")],
    })
    print(kind, json.dumps(rows[kind][-1]), file=sys.stderr)

br, be = rows["breaking"], rows["benign"]
def median(xs):
    return statistics.median(xs) if xs else float("nan")
share = median([r["first_ms"] / r["one_ms"] for r in br if r["first_ms"] is not None])
split = [r for r in br if r["phases"]]
recall = f"{sum(r['caught'] for r in split) / len(split):.0%}" if split else "-"
added = median([r["two_ms"] / r["one_ms"] - 1 for r in be])
print(f"click {len(br)} breaking, {len(be)} benign commits")
print(f"| measure | two phases | one phase | target |")
print(f"| --- | --- | --- | --- |")
print(f"| first failure, median share of the suite's test time | {share:.0%} | 100% | <= 25% |")
print(f"| recall (phase one showed a failure) | {recall} of {len(split)} split runs ({len(br) - len(split)} ran in one phase) | - | >= 95% |")
print(f"| added test time, commits that break nothing (median) | {added:+.1%} | 0% | <= 5% |")
print(f"| records equal to the one-phase run's counts | {sum(r['same'] for r in br + be)} of {len(br) + len(be)} | | all |")
EOF
