#!/usr/bin/env bash
# What two-phase selection picks for jest/vitest on a real JavaScript/TypeScript history, without
# running tests: for the last N first-parent commits of REPO, `run --explain-selection --json`,
# then how many would run in two phases, phase one's share of the test files, why the others
# run in one phase, and the selection's time per commit (graph, resolution, index cache).
#
# Usage: bench/jsselect.sh REPO [N]     REPO: a clone URL or a local repository; N=200
#        COMMAND="vitest run" bench/jsselect.sh …   (the test command when the project's
#        `npm test` script is not a plain jest/vitest one)
set -euo pipefail
cd "$(dirname "$0")/.."
GS=${GS:-$PWD/target/release/git-sandbox}
[ -x "$GS" ] || { echo "$GS not found: cargo build --release (or set GS)" >&2; exit 2; }
REPO=${1:?usage: bench/jsselect.sh REPO [N]}
N=${2:-200}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-jsselect.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export GIT_SANDBOX_HOME=$WORK/home XDG_CONFIG_HOME=$WORK/config
mkdir -p "$XDG_CONFIG_HOME/git-sandbox"
if [ -n "${COMMAND:-}" ]; then
  printf '[test]\ncommand = "%s"\n' "$COMMAND" > "$XDG_CONFIG_HOME/git-sandbox/config.toml"
fi
git clone -q --no-checkout "$REPO" "$WORK/repo"
cd "$WORK/repo"
"$GS" init >/dev/null
git rev-list --first-parent -n "$N" HEAD > "$WORK/revs"
start=$(date +%s%N)
# shellcheck disable=SC2046
"$GS" run --explain-selection --json $(cat "$WORK/revs") > "$WORK/out.json"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
python3 - "$WORK/out.json" "$ms" <<'PY'
import collections, json, re, statistics, sys
runs = json.load(open(sys.argv[1]))
ms = int(sys.argv[2])
two = [r for r in runs if r["one_phase"] is None]
why = collections.Counter()
for r in runs:
    w = r["one_phase"]
    if w is None:
        continue
    # The reason without the path it names.
    w = re.sub(r"^\S+ (changed|was|imports|sets|collects|defines)", r"FILE \1", w)
    why[w.split(":")[0][:110]] += 1
print(f"{len(runs)} commits, {ms} ms in all ({ms / max(len(runs), 1):.1f} ms a commit, the first one building the cache)")
print(f"two phases: {len(two)} ({100 * len(two) / max(len(runs), 1):.0f}%)")
if two:
    share = [len(r["files"]) / max(r["test_files"], 1) for r in two]
    print(f"phase one's share of the test files: median {100 * statistics.median(share):.1f}%, max {100 * max(share):.1f}%")
print("one phase, by reason:")
for w, n in why.most_common():
    print(f"  {n:4d}  {w}")
PY
