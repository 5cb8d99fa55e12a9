#!/usr/bin/env bash
# Speed, memory and lizard agreement of the analysis engine, side by side with lizard.
#
# For each corpus (the Python standard library, the Rust crates under ~/.cargo/registry/src, an
# npm tree if one exists) it copies one language's files into a temp dir (so both tools see the
# same files, with `node_modules`/`vendor` path parts renamed so nothing counts as vendored), runs
#   $ANALYZE DIR      (default: target/release/git-sandbox analyze DIR --json)
#   lizard (its Python API on each file; the CLI dies on the first file it cannot parse)
# and prints lines per CPU-second for both, the ratio, peak RSS, and function-count agreement.
# Each tool's lines are the lines it read: ours is `total_lines` of the record (files it skipped
# as generated/minified/too large are not counted), lizard's is `wc -l` of the corpus.
#
# Optional: FUNCTIONS_CMD (a command printing `path<TAB>line<TAB>name<TAB>complexity` per function
# for DIR) adds the per-function comparison: functions both find, and how many have equal
# complexity (the target is >= 97%).
#
# Usage: bench/analysis.sh [corpus...]   corpora: stdlib cargo npm (default: all that exist)
# Needs: python3, lizard (pip install lizard).
set -euo pipefail

cd "$(dirname "$0")/.."
ANALYZE=${ANALYZE:-"target/release/git-sandbox analyze"}
ANALYZE_ARGS=${ANALYZE_ARGS---json}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-analysis.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

command -v lizard >/dev/null || { echo "lizard not found: pip install lizard" >&2; exit 2; }
first=${ANALYZE%% *}
[ -x "$first" ] || command -v "$first" >/dev/null ||
  { echo "$first not found: cargo build --release (or set ANALYZE)" >&2; exit 2; }

# measure OUT_PREFIX CMD...: runs CMD with stdout to OUT_PREFIX.out; writes "cpu_seconds rss_kb".
# The exit status is ignored (lizard exits non-zero when it has warnings); outputs are checked.
measure() {
  local out=$1; shift
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -v -o "$out.time" "$@" >"$out.out" 2>"$out.err" || true
    awk -F': ' '/User time/{u=$2} /System time/{s=$2} /Maximum resident/{m=$2}
      END{printf "%.3f %d\n", u+s, m}' "$out.time" >"$out.stat"
  else
    python3 - "$out" "$@" <<'EOF'
import resource, subprocess, sys
out = sys.argv[1]
with open(out + ".out", "wb") as o, open(out + ".err", "wb") as e:
    subprocess.run(sys.argv[2:], stdout=o, stderr=e)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
open(out + ".stat", "w").write(f"{r.ru_utime + r.ru_stime:.3f} {r.ru_maxrss}\n")
EOF
  fi
}

# corpus NAME SRC_DIR LIZARD_LANG EXT...: copies matching files (no symlinks, no site-packages).
corpus() {
  local name=$1 src=$2; shift 3
  local dst="$WORK/$name"
  mkdir -p "$dst"
  python3 - "$src" "$dst" "$@" <<'EOF'
import os, shutil, sys
src, dst, exts = sys.argv[1], sys.argv[2], tuple("." + e for e in sys.argv[3:])
rename = {"node_modules": "nm", "vendor": "vnd", "third_party": "tp", "site-packages": None}
for root, dirs, files in os.walk(src):
    dirs[:] = [d for d in dirs if rename.get(d, d) is not None and not d.startswith(".")]
    rel = os.path.relpath(root, src)
    parts = [rename.get(p, p) for p in rel.split(os.sep) if p != "."]
    for f in files:
        p = os.path.join(root, f)
        if f.endswith(exts) and os.path.isfile(p) and not os.path.islink(p):
            d = os.path.join(dst, *parts)
            os.makedirs(d, exist_ok=True)
            shutil.copyfile(p, os.path.join(d, f))
EOF
}

run() {
  local name=$1 lang=$2 dir="$WORK/$1"
  [ -d "$dir" ] || return 0
  measure "$WORK/$name.ours" $ANALYZE "$dir" $ANALYZE_ARGS
  # lizard through its Python API, one file at a time, so one file it crashes on costs one file.
  measure "$WORK/$name.lizard" python3 - "$dir" <<'EOF'
import os, sys, lizard
root, failed = sys.argv[1], 0
for r, _, fs in os.walk(root):
    for f in sorted(fs):
        p = os.path.join(r, f)
        try:
            info = lizard.analyze_file(p)
        except Exception:
            failed += 1
            continue
        for fn in info.function_list:
            print(f"{os.path.relpath(p, root)}\t{fn.start_line}\t{fn.name}\t{fn.cyclomatic_complexity}")
print(f"lizard failed on {failed} files", file=sys.stderr)
EOF
  if [ -n "${FUNCTIONS_CMD:-}" ]; then
    $FUNCTIONS_CMD "$dir" >"$WORK/$name.functions" 2>/dev/null || true
  fi
  python3 - "$name" "$dir" "$WORK/$name" <<'EOF'
import json, os, sys
name, root, base = sys.argv[1:4]
ours_cpu, ours_rss = open(base + ".ours.stat").read().split()
liz_cpu, liz_rss = open(base + ".lizard.stat").read().split()
try:
    rec = json.load(open(base + ".ours.out"))
except ValueError:
    sys.exit(f"{name}: the analyser printed no JSON; its stderr:\n" + open(base + ".ours.err").read()[-2000:])
rec = rec.get("analysis", rec)  # a full run record or the bare analysis object
ours_lines = rec["total_lines"]
liz_lines = 0
for r, _, fs in os.walk(root):
    for f in fs:
        with open(os.path.join(r, f), "rb") as fh:
            liz_lines += sum(1 for _ in fh)
ours_rate = ours_lines / max(float(ours_cpu), 1e-9)
liz_rate = liz_lines / max(float(liz_cpu), 1e-9)
print(f"== {name}: {rec['files_analyzed']} files")
print(f"  ours   {ours_lines:>9} lines {float(ours_cpu):7.2f} CPU-s {ours_rate:>9.0f} lines/CPU-s  peak RSS {int(ours_rss)/1024:6.1f} MiB")
print(f"  lizard {liz_lines:>9} lines {float(liz_cpu):7.2f} CPU-s {liz_rate:>9.0f} lines/CPU-s  peak RSS {int(liz_rss)/1024:6.1f} MiB")
print(f"  speed ratio ours/lizard: {ours_rate / max(liz_rate, 1e-9):.2f}x")
ext_lang = {"py": "python", "rs": "rust", "go": "go", "java": "java", "c": "c", "h": "c",
            "js": "javascript", "mjs": "javascript", "cjs": "javascript", "jsx": "javascript",
            "ts": "typescript", "tsx": "typescript",
            "cc": "cpp", "cpp": "cpp", "cxx": "cpp", "hpp": "cpp", "hh": "cpp", "hxx": "cpp"}
liz = {}
liz_count = {}
for line in open(base + ".lizard.out", errors="replace"):
    row = line.rstrip("\n").split("\t")
    if len(row) < 4:
        continue
    lang = ext_lang.get(row[0].rsplit(".", 1)[-1])
    liz_count[lang] = liz_count.get(lang, 0) + 1
    liz[(row[0], int(row[1]))] = int(row[3])
print("  " + open(base + ".lizard.err").read().strip().splitlines()[-1])
for lang, stats in sorted(rec["languages"].items()):
    o, l = stats["functions"], liz_count.get(lang, 0)
    diff = f"{100 * (o - l) / l:+.1f}%" if l else "n/a"
    print(f"  functions {lang:<10} ours {o:>7} lizard {l:>7} ({diff})")
fpath = base + ".functions"
if os.path.exists(fpath) and os.path.getsize(fpath):
    ours = {}
    for line in open(fpath, errors="replace"):
        p = line.rstrip("\n").split("\t")
        if len(p) >= 4:
            ours[(p[0], int(p[1]))] = int(p[3])
    both = ours.keys() & liz.keys()
    same = sum(1 for k in both if ours[k] == liz[k])
    print(f"  per function: both find {len(both)}, only ours {len(ours.keys() - liz.keys())}, "
          f"only lizard {len(liz.keys() - ours.keys())}; equal complexity "
          f"{same}/{len(both)} = {100 * same / max(1, len(both)):.2f}%")
EOF
}

# incremental: a 3,000-file repository analysed once (filling the blob cache), then again after a
# one-file commit: only that file is parsed (target under 50 ms), against lizard re-reading it all.
incremental() {
  local bin repo=$WORK/incremental
  bin=$(realpath "${ANALYZE%% *}")
  mkdir -p "$repo" && git -C "$repo" init -q
  python3 - "$repo" <<'PY'
import os, sys
root = sys.argv[1]
for d in range(30):
    os.makedirs(f"{root}/pkg{d}", exist_ok=True)
    for f in range(100):
        with open(f"{root}/pkg{d}/m{f}.py", "w") as out:
            out.write("".join(f"def f{d}_{f}_{i}(a, b):\n    if a > b:\n        return a - b\n    return b - a\n\n" for i in range(8)))
PY
  git -C "$repo" add -A && git -C "$repo" -c user.name=b -c user.email=b@b commit -qm base
  local home=$WORK/incr-home
  local t0 t1 t2 t3
  t0=$(date +%s%N); (cd "$repo" && GIT_SANDBOX_HOME=$home "$bin" analyze HEAD --json >/dev/null); t1=$(date +%s%N)
  echo "def changed(x):\n    return x" >> "$repo/pkg7/m7.py"
  git -C "$repo" -c user.name=b -c user.email=b@b commit -qam one-file
  t2=$(date +%s%N); (cd "$repo" && GIT_SANDBOX_HOME=$home "$bin" analyze HEAD --json >/dev/null); t3=$(date +%s%N)
  local lt0 lt1
  lt0=$(date +%s%N); lizard "$repo" >/dev/null 2>&1 || true; lt1=$(date +%s%N)
  printf '%s\n' "incremental (3,000 files, $(cat "$repo"/pkg*/*.py | wc -l) lines)"
  printf '  first analysis %6d ms; after a one-file commit %4d ms (target < 50 ms); lizard re-reading all %6d ms; ratio %.3f\n' \
    $(((t1 - t0) / 1000000)) $(((t3 - t2) / 1000000)) $(((lt1 - lt0) / 1000000)) \
    "$(python3 -c "print(($t3 - $t2) / max(1, $lt1 - $lt0))")"
}

want=${*:-stdlib cargo npm incremental}
for c in $want; do
  case $c in
    stdlib)
      std=$(python3 -c 'import sysconfig;print(sysconfig.get_paths()["stdlib"])')
      corpus stdlib "$std" python py
      run stdlib python ;;
    cargo)
      reg=$(ls -d "$HOME"/.cargo/registry/src/*/ 2>/dev/null | head -1)
      [ -n "$reg" ] && corpus cargo "$reg" rust rs && run cargo rust ;;
    npm)
      for npm in /usr/lib/node_modules /usr/local/lib/node_modules "$HOME/node_modules"; do
        if [ -d "$npm" ]; then corpus npm "$npm" javascript js && run npm javascript; break; fi
      done ;;
    incremental) incremental ;;
    *) echo "unknown corpus $c (stdlib, cargo, npm, incremental)" >&2; exit 2 ;;
  esac
done
