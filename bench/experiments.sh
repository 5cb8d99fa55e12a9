#!/usr/bin/env bash
# `git sandbox experiment list` in a repository with many experiment branches (issue 36: 20,000
# branches took 26 s; target <= 1 s). A repository made with `git sandbox new` gets N branches
# `experiment/e00001`.. made in one `git update-ref --stdin` (all at main: experiments with no
# commits yet), every other one with a metadata ref as `experiment start` writes it (a commit
# whose tree holds its experiment.toml). Timed, in a private GIT_SANDBOX_HOME:
#
#   first   the first `experiment list` (the index learns every experiment: one transaction)
#   again   the next ones (the index is in line; median of REPS)
#   json    `experiment list --json` (median of REPS)
#
# Usage: bench/experiments.sh          (from any directory)
# Env:   GIT_SANDBOX_BIN  the binary (default: target/release/git-sandbox of this checkout)
#        N                branches (default 20000)
#        REPS             timed repetitions (default 3)
# Needs: git, python3. Measures only: always exits 0 once it has run. Making 20,000 loose refs
# (and removing them at the end) takes minutes on a slow disk; the timings do not include it.
# Measured 2026-11-27 on the shared 2-core dev machine, debug build (no release build fitted):
# before (one pass per experiment) 103 s steady, 231 s first; after 2.2-3.2 s, of which reading
# the 30,000 loose refs ~0.5 s (`git for-each-ref` alone: 0.65 s).
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${GIT_SANDBOX_BIN:-$ROOT/target/release/git-sandbox}
N=${N:-20000}
REPS=${REPS:-3}
[ -x "$BIN" ] || { echo "$BIN not found: cd $ROOT && cargo build --release (or set GIT_SANDBOX_BIN)" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-experiments.XXXXXX")
trap 'cd /; rm -rf "$WORK"' EXIT
for v in $(env | sed -n 's/^\(SANDBOX_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
unset GIT_SANDBOX_TMPDIR
export GIT_SANDBOX_HOME=$WORK/home XDG_CONFIG_HOME=$WORK/config HOME=$WORK
export GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com

cd "$WORK"
"$BIN" new many --path "$WORK/many" >/dev/null 2>&1
cd "$WORK/many"
main=$(git rev-parse main)
# A metadata ref as `experiment start` writes it for every other name (one fast-import for all),
# then every branch in one `update-ref --stdin`.
python3 - "$N" "$main" >"$WORK/refs" <<'EOF'
import subprocess, sys
n, main = int(sys.argv[1]), sys.argv[2]
names = [f"e{i:05d}" for i in range(1, n + 1)]
stream = []
for m in names[::2]:
    body = (f'name = "{m}"\ncreated_at = "2026-11-27T00:00:00.000Z"\nauthor = "bench <b@example.com>"\n'
            f'base_commit = "{main}"\nbase = "main"\n\n[config]\n').encode()
    stream.append(b"commit refs/sandbox/experiments/%s\ncommitter bench <b@example.com> 1764201600 +0000\n"
                  b"data 4\nmeta\nM 100644 inline experiment.toml\ndata %d\n%s\n" % (m.encode(), len(body), body))
subprocess.run(["git", "fast-import", "--quiet"], input=b"".join(stream), check=True)
for name in names:
    print(f"create refs/heads/experiment/{name} {main}")
EOF
git update-ref --stdin <"$WORK/refs"
echo "repository: $N experiment branches ($(git for-each-ref refs/sandbox/experiments | wc -l) with metadata refs)"

ms() { python3 -c 'import sys,time; t=time.perf_counter(); import subprocess; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True); print(round((time.perf_counter()-t)*1000))' "$@"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

first=$(ms "$BIN" experiment list)
again=$(for _ in $(seq "$REPS"); do ms "$BIN" experiment list; done | median)
json=$(for _ in $(seq "$REPS"); do ms "$BIN" experiment list --json; done | median)
listed=$("$BIN" experiment list --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')
echo "experiment list: first $first ms, again $again ms, --json $json ms ($listed listed; target <= 1000 ms)"
