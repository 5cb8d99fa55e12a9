#!/usr/bin/env bash
# Per-commit overhead of `git sandbox run` against a plain shell loop, the cost of re-running
# already-tested commits, and the cost of one throw-away checkout of a big tree.
#
#   (a) baseline: per commit `git worktree add --detach` (into a disk temp dir), `sh -c true`
#       inside, `git notes --ref=baseline add -f`, `git worktree remove --force`.
#   (b) `git sandbox run --force BASE..HEAD` over the same 30 commits (test command `true`),
#       with analysis on (the repository's `.sandbox.toml`) and off (SANDBOX_ANALYSIS_ENABLED=false).
#       Target: at most 0.3x the baseline (git-test measures about 1.0x of it).
#       The baseline also runs with its worktrees in /dev/shm (like for like: git-sandbox checks
#       out into /dev/shm), and (b') repeats the tmpfs baseline and (b) after `git gc`.
#   (c) `git sandbox run BASE..HEAD` over 50 commits that all have results (nothing to run).
#       Target: under 50 ms in total.
#   (d) one checkout of a 5,000-file tree: `git sandbox exec REV -- true` against
#       `git worktree add --detach` + `git worktree remove`. Target: faster.
#       git-sandbox checks out into /dev/shm when it can; it is also timed with
#       GIT_SANDBOX_TMPDIR on a disk temp dir, and the baseline also into /dev/shm (for reference).
#       The first exec in the repository (its kept checkout built) is timed apart; the timed ones
#       come after a `git sandbox run` of REV, the one-off exec of issue 12 (target <= 20 ms).
#
# git-sandbox's scratch dir (GIT_SANDBOX_TMPDIR) is a private dir on /dev/shm when /dev/shm is
# usable: the same tmpfs as its default, but the kept checkouts go with the script and no other
# run on the machine takes their slots.
#
# The baseline's git commands run with core.hooksPath pointed at an empty dir, so the installed
# git-sandbox hooks (which fire on the baseline's ref updates) are not charged to it.
#
# Usage: bench/overhead.sh            (from any directory)
# Env:   GIT_SANDBOX_BIN  the binary (default: target/release/git-sandbox of this checkout)
#        REPS             alternating repetitions of (a)/(b) (default 5)
#        REPS_SHORT       repetitions of (c) and (d) (default 5)
# Needs: git, python3, awk. Measures only: always exits 0 once it has run.
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${GIT_SANDBOX_BIN:-$ROOT/target/release/git-sandbox}
REPS=${REPS:-5}
REPS_SHORT=${REPS_SHORT:-5}
[ -x "$BIN" ] || { echo "$BIN not found: cd $ROOT && cargo build --release (or set GIT_SANDBOX_BIN)" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

# ---- private environment -------------------------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-overhead.XXXXXX")
SHM=
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  cd /
  rm -rf "$WORK"
  [ -z "$SHM" ] || rm -rf "$SHM"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

mkdir -p "$WORK/home" "$WORK/config" "$WORK/sandbox-home" "$WORK/bin" "$WORK/no-hooks" "$WORK/disk-tmp"
ln -s "$BIN" "$WORK/bin/git-sandbox"
export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/config XDG_DATA_HOME=$WORK/home/.local/share
export GIT_SANDBOX_HOME=$WORK/sandbox-home GIT_CONFIG_NOSYSTEM=1
export PATH=$WORK/bin:$PATH
unset GIT_SANDBOX_TMPDIR GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_CONFIG_GLOBAL
for v in $(env | sed -n 's/^\(SANDBOX_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
git config --global user.name "Bench Mark"
git config --global user.email "bench@example.invalid"
git config --global init.defaultBranch main
git config --global advice.detachedHead false
NOHOOKS=(-c "core.hooksPath=$WORK/no-hooks")

if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  SHM=$(mktemp -d /dev/shm/gs-bench-overhead.XXXXXX)
  mkdir -p "$SHM/scratch"
  export GIT_SANDBOX_TMPDIR=$SHM/scratch
fi

# ---- helpers -------------------------------------------------------------------------------
# Microseconds since the epoch, without a fork.
now_us() { local t=$EPOCHREALTIME; REPLY=${t/./}; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ms() { awk -v u="$1" 'BEGIN{printf "%.1f", u/1000}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b>0) printf "%.2fx", a/b; else print "n/a" }'; }
fstype() { stat -f -c %T "$1" 2>/dev/null || echo "?"; }
LOG=$WORK/sandbox.log
# sandbox ARGS...: `git sandbox ARGS` in $REPO, output to the log; warns (does not fail) on exit != 0.
sandbox() {
  if ! (cd "$REPO" && git sandbox "$@") >>"$LOG" 2>&1; then
    echo "warning: git sandbox $* exited non-zero; last log lines:" >&2
    tail -5 "$LOG" >&2
  fi
}

# gen_files DIR COUNT NDIRS START: small Python modules pkgN/mod_M.py with a few functions.
gen_files() {
  python3 - "$@" <<'EOF'
import os, sys
root, count, ndirs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(count):
    d = os.path.join(root, "src", f"pkg{i % ndirs}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"mod_{i}.py"), "w") as f:
        f.write(f'"""Module {i}."""\n\n\n')
        for j in range(3):
            f.write(f"def func_{i}_{j}(x, y=0):\n"
                    f"    total = 0\n"
                    f"    for k in range(x):\n"
                    f"        if k % {j + 2} == 0 and y:\n"
                    f"            total += k * y\n"
                    f"        elif k > {i}:\n"
                    f"            total -= 1\n"
                    f"    return total\n\n\n")
EOF
}

# commit_changes N TAG: N commits, each appending a function to 1 or 2 of the 200 modules.
commit_changes() {
  local n=$1 tag=$2 i f
  for ((i = 1; i <= n; i++)); do
    f=$(( (i * 37 + ${#tag}) % 200 ))
    printf '\ndef %s_%d():\n    return %d\n' "$tag" "$i" "$i" >>"$REPO/src/pkg$((f % 8))/mod_$f.py"
    if ((i % 2 == 0)); then
      f=$(( (f + 101) % 200 ))
      printf '\ndef %s_%d_b():\n    return %d\n' "$tag" "$i" "$i" >>"$REPO/src/pkg$((f % 8))/mod_$f.py"
    fi
    git -C "$REPO" commit -q -am "$tag $i"
  done
}

# ---- set-up: a 200-file repository with 30 commits ------------------------------------------
echo "git-sandbox overhead benchmark"
echo "  binary:    $BIN ($("$BIN" --version 2>/dev/null || echo '?'))"
echo "  git:       $(git --version)"
echo "  machine:   $(nproc) cores; work dir $WORK ($(fstype "$WORK")); /dev/shm $( [ -n "$SHM" ] && fstype "$SHM" || echo 'not usable')"
echo "  load:      $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
echo

REPO=$WORK/repo
git sandbox new bench --path "$REPO" >/dev/null 2>>"$LOG"
gen_files "$REPO" 200 8
cat >"$REPO/.sandbox.toml" <<'EOF'
[test]
command = "true"
timeout = "120s"

[analysis]
enabled = true
exclude = ["logs/**", "results/**"]

[watch]
branches = ["main", "experiment/*"]
EOF
git -C "$REPO" add -A
git -C "$REPO" commit -q -m "bench: 200 python files, test command true"
BASE=$(git -C "$REPO" rev-parse HEAD)
commit_changes 30 first
COMMITS=$(git -C "$REPO" rev-list --reverse "$BASE..HEAD")
N=$(git -C "$REPO" rev-list --count "$BASE..HEAD")
FILES=$(git -C "$REPO" ls-files | wc -l)
echo "set-up: $FILES files, $N commits in BASE..HEAD"

# ---- (a) baseline and (b) git sandbox run, alternating ------------------------------------
# baseline PARENT_DIR: the shell loop over $COMMITS; total microseconds in REPLY.
baseline() {
  local c wt=$1/wt t0
  now_us; t0=$REPLY
  for c in $COMMITS; do
    git "${NOHOOKS[@]}" -C "$REPO" worktree add -q --detach "$wt" "$c"
    (cd "$wt" && sh -c true)
    git "${NOHOOKS[@]}" -C "$REPO" notes --ref=baseline add -f \
      -m "{\"commit\":\"$c\",\"status\":\"passed\"}" "$c" 2>/dev/null
    git "${NOHOOKS[@]}" -C "$REPO" worktree remove --force "$wt"
  done
  now_us; REPLY=$((REPLY - t0))
}
# run_range [ENV...]: `git sandbox run --force BASE..HEAD`; total microseconds in REPLY.
run_range() {
  local t0
  now_us; t0=$REPLY
  # shellcheck disable=SC2163  # exports the NAME=VALUE arguments
  (if (($#)); then export "$@"; fi; sandbox run -j 1 --force "$BASE..HEAD")
  now_us; REPLY=$((REPLY - t0))
}

# The first run parses all 200 files once (the analysis cache is per blob); reported apart.
run_range
COLD=$REPLY
B_DISK=() B_SHM=() S_ON=() S_OFF=()
for ((r = 1; r <= REPS; r++)); do
  baseline "$WORK/disk-tmp"; B_DISK+=("$REPLY")
  run_range; S_ON+=("$REPLY")
  run_range SANDBOX_ANALYSIS_ENABLED=false; S_OFF+=("$REPLY")
  if [ -n "$SHM" ]; then baseline "$SHM"; B_SHM+=("$REPLY"); fi
done
mb=$(median "${B_DISK[@]}")
mon=$(median "${S_ON[@]}")
moff=$(median "${S_OFF[@]}")
per() { awk -v u="$1" -v n="$N" 'BEGIN{printf "%.1f", u/1000/n}'; }

echo
echo "(a)/(b) $N commits, $FILES files, test command true; median of $REPS alternating runs"
ms_=
[ -z "$SHM" ] || ms_=$(median "${B_SHM[@]}")
line() { # LABEL MICROS
  printf '  %-50s %9s %9s %8s %9s\n' "$1" "$(ms "$2")" "$(per "$2")" "$(ratio "$2" "$mb")" \
    "$([ -n "$ms_" ] && ratio "$2" "$ms_" || echo n/a)"
}
printf '  %-50s %9s %9s %8s %9s\n' "" "total ms" "ms/commit" "vs (a)" "vs (a)shm"
line "(a) baseline: worktree add/sh/notes add/remove" "$mb"
[ -z "$ms_" ] || line "    same loop, worktrees in /dev/shm" "$ms_"
line "(b) git sandbox run --force, analysis on" "$mon"
line "    git sandbox run --force, analysis off" "$moff"
line "    first run (analysis cache cold), analysis on" "$COLD"
echo "  target: (b) <= 0.30x of (a)   [git-test: about 1.0x]"
echo "  (a) puts its worktrees in $WORK/disk-tmp ($(fstype "$WORK")); git-sandbox checks out into /dev/shm:"
echo "  'vs (a)shm' compares with the same loop on tmpfs, like for like."
all() { local x; for x in "$@"; do printf '%s ' "$(ms "$x")"; done; }
echo "  every run, total ms:"
echo "    (a) $(all "${B_DISK[@]}")"
[ -z "$ms_" ] || echo "    (a) shm $(all "${B_SHM[@]}")"
echo "    (b) on $(all "${S_ON[@]}")"
echo "    (b) off $(all "${S_OFF[@]}")"

# ---- (b') the same once the objects are packed -------------------------------------------
# A new repository (and every recent commit of an old one) has loose objects: one file to open
# and inflate per blob read. Packing shows how much of (a) and (b) is that.
git "${NOHOOKS[@]}" -C "$REPO" gc -q
G_SHM=() G_ON=() G_OFF=()
for ((r = 1; r <= 3; r++)); do
  [ -z "$SHM" ] || { baseline "$SHM"; G_SHM+=("$REPLY"); }
  run_range; G_ON+=("$REPLY")
  run_range SANDBOX_ANALYSIS_ENABLED=false; G_OFF+=("$REPLY")
done
gon=$(median "${G_ON[@]}")
goff=$(median "${G_OFF[@]}")
gshm=
[ -z "$SHM" ] || gshm=$(median "${G_SHM[@]}")
echo
echo "(b') the same after git gc (objects packed); median of 3 runs"
printf '  %-50s %9s %9s %8s %9s\n' "" "total ms" "ms/commit" "" "vs shm gc"
gline() { printf '  %-50s %9s %9s %8s %9s\n' "$1" "$(ms "$2")" "$(per "$2")" "" "$([ -n "$gshm" ] && ratio "$2" "$gshm" || echo n/a)"; }
[ -z "$gshm" ] || gline "    baseline loop, worktrees in /dev/shm" "$gshm"
gline "    git sandbox run --force, analysis on" "$gon"
gline "    git sandbox run --force, analysis off" "$goff"

# ---- (c) re-run of 50 already-tested commits -------------------------------------------
commit_changes 20 second
N50=$(git -C "$REPO" rev-list --count "$BASE..HEAD")
sandbox run -j 1 "$BASE..HEAD"            # runs the 20 new ones, re-syncs the rest
sandbox run -j 1 "$BASE..HEAD"            # warm-up: everything cached
NOTES_BEFORE=$(git -C "$REPO" rev-parse -q --verify refs/notes/sandbox || echo none)
RERUN=()
for ((r = 1; r <= REPS_SHORT; r++)); do
  now_us; t0=$REPLY
  sandbox run -j 1 "$BASE..HEAD"
  now_us; RERUN+=($((REPLY - t0)))
done
NOTES_AFTER=$(git -C "$REPO" rev-parse -q --verify refs/notes/sandbox || echo none)
mr=$(median "${RERUN[@]}")
echo
echo "(c) git sandbox run over $N50 commits that all have results; $REPS_SHORT runs"
printf '  median %s ms total (%s ms/commit); min %s ms; notes ref unchanged: %s\n' \
  "$(ms "$mr")" "$(awk -v u="$mr" -v n="$N50" 'BEGIN{printf "%.2f", u/1000/n}')" \
  "$(ms "$(printf '%s\n' "${RERUN[@]}" | sort -g | head -1)")" \
  "$([ "$NOTES_BEFORE" = "$NOTES_AFTER" ] && echo yes || echo NO)"
echo "  target: under 50 ms"

# ---- (d) checkout of a 5,000-file tree ---------------------------------------------------
BIG=$WORK/big
git sandbox new big --path "$BIG" >/dev/null 2>>"$LOG"
python3 - "$BIG" <<'EOF'
import os, sys
root = sys.argv[1]
for i in range(5000):
    d = os.path.join(root, "data", f"d{i % 50:02d}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i:04d}.py"), "w") as f:
        f.write(f"# file {i}\nVALUE = {i}\n\ndef get():\n    return VALUE * {i % 7}\n")
EOF
git "${NOHOOKS[@]}" -C "$BIG" add -A
git "${NOHOOKS[@]}" -C "$BIG" commit -q -m "5,000 files"
BIGFILES=$(git -C "$BIG" ls-files | wc -l)
REV=$(git -C "$BIG" rev-parse HEAD)

exec_once() { # [ENV...]
  local t0
  now_us; t0=$REPLY
  (cd "$BIG" && env "$@" git sandbox exec "$REV" -- true) >>"$LOG" 2>&1 || echo "warning: exec failed (see log)" >&2
  now_us; REPLY=$((REPLY - t0))
}
worktree_once() { # PARENT
  local t0 wt=$1/big-wt
  now_us; t0=$REPLY
  git "${NOHOOKS[@]}" -C "$BIG" worktree add -q --detach "$wt" "$REV"
  git "${NOHOOKS[@]}" -C "$BIG" worktree remove --force "$wt"
  now_us; REPLY=$((REPLY - t0))
}
D_EXEC=() D_EXEC_DISK=() D_WT=() D_WT_SHM=()
worktree_once "$WORK/disk-tmp"  # warm the page cache
exec_once; D_FIRST=$REPLY       # the first exec in the repository builds its kept checkout
exec_once GIT_SANDBOX_TMPDIR="$WORK/disk-tmp"; D_FIRST_DISK=$REPLY
(cd "$BIG" && git sandbox run) >>"$LOG" 2>&1 || echo "warning: git sandbox run failed (see log)" >&2  # REV, on main
# Each timed step starts after a `sync` (untimed): the disk worktree writes 5,000 files, and
# without it their writeback would be charged to whichever step comes next.
for ((r = 1; r <= REPS_SHORT; r++)); do
  sync; exec_once; D_EXEC+=("$REPLY")
  sync; worktree_once "$WORK/disk-tmp"; D_WT+=("$REPLY")
  sync; exec_once GIT_SANDBOX_TMPDIR="$WORK/disk-tmp"; D_EXEC_DISK+=("$REPLY")
  if [ -n "$SHM" ]; then sync; worktree_once "$SHM"; D_WT_SHM+=("$REPLY"); fi
done
mw=$(median "${D_WT[@]}")
me=$(median "${D_EXEC[@]}")
med=$(median "${D_EXEC_DISK[@]}")
echo
echo "(d) one checkout of a $BIGFILES-file tree (incl. removal); median of $REPS_SHORT alternating runs"
printf '  %-52s %10s %9s\n' "" "ms" "vs wt add"
printf '  %-52s %10s %9s\n' "git worktree add --detach + remove (disk)" "$(ms "$mw")" "1.00x"
printf '  %-52s %10s %9s\n' "git sandbox exec REV -- true (/dev/shm)" "$(ms "$me")" "$(ratio "$me" "$mw")"
printf '  %-52s %10s %9s\n' "git sandbox exec REV -- true (GIT_SANDBOX_TMPDIR=disk)" "$(ms "$med")" "$(ratio "$med" "$mw")"
printf '  %-52s %10s %9s\n' "  first exec in the repository (/dev/shm), once" "$(ms "$D_FIRST")" "$(ratio "$D_FIRST" "$mw")"
printf '  %-52s %10s %9s\n' "  first exec in the repository (disk), once" "$(ms "$D_FIRST_DISK")" "$(ratio "$D_FIRST_DISK" "$mw")"
if [ -n "$SHM" ]; then
  mws=$(median "${D_WT_SHM[@]}")
  printf '  %-52s %10s %9s\n' "git worktree add + remove into /dev/shm (reference)" "$(ms "$mws")" "$(ratio "$mws" "$mw")"
fi
echo "  target: exec faster than git worktree add (< 1.00x); issue 12: exec (/dev/shm) after a first run <= 20 ms"
echo "  exec (/dev/shm), every run, ms: $(all "${D_EXEC[@]}")"
echo
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) at end"
exit 0
