#!/usr/bin/env bash
# Per-commit cost of `git sandbox run` as the tree grows, side by side with git-test (mhagger),
# in one run. For each size (default 200, 2,000 and 10,000 files) a repository made with
# `git sandbox new` gets COMMITS (default 30) commits that each change one file. `.sandbox.toml`
# has `[test] command = "true"` and `[analysis] enabled = false`. Over BASE..main are timed:
#
#   bare     `sh -c true` once per commit: what the test command itself costs.
#   loop     the reused-worktree loop, no isolation: one worktree (made once), per commit
#            `git checkout --detach C`, `sh -c true` in it, `git notes --ref=loop add -f`.
#   git-test `git-test run --force BASE..main` in its own worktree (made once, reused, like
#            git-test is meant to be used), with `test.default.command = true`.
#   sandbox  `git sandbox run --force BASE..main`. Its first run in a repository (the kept
#            checkout built from nothing) is shown apart.
#   +analysis the same with SANDBOX_ANALYSIS_ENABLED=true: each commit's analysis is its
#            parent's updated by the diff (issue 36). Its first run (the first commit's tree
#            analysed whole) is shown apart.
#   image    the same with SANDBOX_ENVIRONMENT_IMAGE naming a busybox image on a local
#            docker-registry (issue 56): each commit's run resolves the tag (one manifest
#            request) and has the image's layers as its root. Only when docker-registry, skopeo
#            and Debian's busybox-static are installed; else n/a.
#
# The five alternate over REPS rounds; medians are shown as ms per commit, with git-sandbox's
# overhead (sandbox - bare) and its ratio to git-test and to the loop. Targets (issue 12):
# 200 files: at most the loop; 2,000 and 10,000 files: overhead <= 10 ms per commit and at most
# 0.3x git-test. Issue 36, analysis on at 2,000 and 10,000 files: at most 0.3x git-test and
# 15 ms per commit. Issue 56: a run in an image costs at most 1.3x a host run's overhead
# (image - bare against sandbox - bare). The script also prints how git-sandbox's checkouts were made in its last run
# (`checkout.completed` events: fresh / rebuilt / updated, and their summed ms).
#
# git-test and the loop run with core.hooksPath pointed at an empty dir, so the git-sandbox
# hooks that `git sandbox new` installs (which fire on their ref updates) are not charged to
# them. Their worktrees are on /dev/shm when it is usable, like git-sandbox's kept checkouts
# (the repositories themselves, .git included, are on the temp dir's disk for all of them).
# git-sandbox's scratch dir (GIT_SANDBOX_TMPDIR) is a private dir on /dev/shm, so its kept
# checkouts go with the script and no other run on the machine takes its slots.
#
# Usage: bench/scale.sh              (from any directory)
# Env:   GIT_SANDBOX_BIN  the binary (default: target/release/git-sandbox of this checkout)
#        GIT_TEST_BIN     git-test (default: ../shared/peers/git-test/git-test next to this
#                         checkout; without it the git-test column is n/a)
#        SIZES            file counts (default "200 2000 10000")
#        COMMITS          commits per repository (default 30)
#        REPS             alternating rounds (default 3)
# Needs: git, python3, awk. Measures only: always exits 0 once it has run.
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${GIT_SANDBOX_BIN:-$ROOT/target/release/git-sandbox}
GIT_TEST=${GIT_TEST_BIN:-$ROOT/../shared/peers/git-test/git-test}
SIZES=${SIZES:-200 2000 10000}
COMMITS=${COMMITS:-30}
REPS=${REPS:-3}
[ -x "$BIN" ] || { echo "$BIN not found: cd $ROOT && cargo build --release (or set GIT_SANDBOX_BIN)" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
if [ -f "$GIT_TEST" ]; then
  GIT_TEST=$(cd "$(dirname "$GIT_TEST")" && pwd)/$(basename "$GIT_TEST")
else
  echo "note: git-test not found at $GIT_TEST (set GIT_TEST_BIN); its column is n/a" >&2
  GIT_TEST=
fi

# ---- private environment -------------------------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-scale.XXXXXX")
SHM=
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  cd /
  rm -rf "$WORK"
  [ -z "$SHM" ] || rm -rf "$SHM"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

mkdir -p "$WORK/home" "$WORK/config" "$WORK/sandbox-home" "$WORK/bin" "$WORK/no-hooks"
ln -s "$BIN" "$WORK/bin/git-sandbox"
export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/config XDG_DATA_HOME=$WORK/home/.local/share
export GIT_SANDBOX_HOME=$WORK/sandbox-home GIT_CONFIG_NOSYSTEM=1
export PATH=$WORK/bin:$PATH
unset GIT_SANDBOX_TMPDIR GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_CONFIG_GLOBAL
unset GIT_CONFIG_COUNT GIT_CONFIG_PARAMETERS
for v in $(env | sed -n 's/^\(SANDBOX_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
git config --global user.name "Bench Mark"
git config --global user.email "bench@example.invalid"
git config --global init.defaultBranch main
git config --global advice.detachedHead false
NOHOOKS=(-c "core.hooksPath=$WORK/no-hooks")

if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  SHM=$(mktemp -d /dev/shm/gs-bench-scale.XXXXXX)
  mkdir -p "$SHM/scratch"
  export GIT_SANDBOX_TMPDIR=$SHM/scratch
  WT_PARENT=$SHM
else
  WT_PARENT=$WORK
fi

# ---- helpers -------------------------------------------------------------------------------
now_us() { local t=$EPOCHREALTIME; REPLY=${t/./}; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b>0) printf "%.2fx", a/b; else print "n/a" }'; }
fstype() { stat -f -c %T "$1" 2>/dev/null || echo "?"; }
LOG=$WORK/bench.log
warn_log() { echo "warning: $1; last log lines:" >&2; tail -5 "$LOG" >&2; }

# gen_files DIR COUNT: COUNT small Python files, 100 to a directory.
gen_files() {
  python3 - "$@" <<'EOF'
import os, sys
root, count = sys.argv[1], int(sys.argv[2])
for i in range(count):
    d = os.path.join(root, "src", f"d{i // 100:03d}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"m{i:05d}.py"), "w") as f:
        f.write(f'"""Module {i}."""\n\nVALUE = {i}\n\n\ndef get(x=0):\n    return VALUE + x\n')
EOF
}

# ---- the measurements for one size ---------------------------------------------------------
# Results, per size, in these arrays (microseconds, medians over REPS).
R_FILES=() R_BARE=() R_LOOP=() R_GT=() R_SB=() R_SB1=() R_HOW=() R_SBA=() R_SBA1=() R_AHOW=() R_SBI=()

# ---- the image (issue 56): a local registry holding a busybox root -------------------------
IMAGE=
if command -v docker-registry >/dev/null && command -v skopeo >/dev/null && [ -x /bin/busybox ]; then
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$WORK/registry"
  printf 'version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' \
    "$WORK/registry/data" "$PORT" >"$WORK/registry/config.yml"
  docker-registry serve "$WORK/registry/config.yml" >/dev/null 2>&1 &
  REGISTRY_PID=$!
  trap 'kill $REGISTRY_PID 2>/dev/null; cleanup' EXIT
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
  # An OCI layout of one layer: /bin/busybox and its applets, gzipped, with its diff_id.
  python3 - "$WORK/oci" <<'EOF'
import gzip, hashlib, io, json, os, sys, tarfile
out = sys.argv[1]
blobs = os.path.join(out, "blobs", "sha256")
os.makedirs(blobs)
def put(b):
    d = hashlib.sha256(b).hexdigest()
    open(os.path.join(blobs, d), "wb").write(b)
    return "sha256:" + d, len(b)
raw = io.BytesIO()
with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as t:
    t.add("/bin/busybox", arcname="bin/busybox")
    for a in ["sh", "true", "cat", "ls", "echo"]:
        i = tarfile.TarInfo("bin/" + a); i.type = tarfile.SYMTYPE; i.linkname = "busybox"; t.addfile(i)
tar = raw.getvalue()
layer, lsize = put(gzip.compress(tar, 1))
config, csize = put(json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/bin"]},
    "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(tar).hexdigest()]}}).encode())
manifest, msize = put(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": csize},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer, "size": lsize}]}).encode())
open(os.path.join(out, "oci-layout"), "w").write('{"imageLayoutVersion":"1.0.0"}')
open(os.path.join(out, "index.json"), "w").write(json.dumps({"schemaVersion": 2, "manifests": [{
    "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest, "size": msize,
    "annotations": {"org.opencontainers.image.ref.name": "1"}}]}))
EOF
  if skopeo copy --quiet --insecure-policy --dest-tls-verify=false "oci:$WORK/oci:1" \
      "docker://127.0.0.1:$PORT/bench/busybox:1" >>"$LOG" 2>&1; then
    IMAGE=127.0.0.1:$PORT/bench/busybox:1
    mkdir -p "$XDG_CONFIG_HOME/git-sandbox"
    printf '[environment]\ninsecure_registries = ["127.0.0.1:%s"]\n' "$PORT" >"$XDG_CONFIG_HOME/git-sandbox/config.toml"
  else
    warn_log "skopeo could not push the benchmark's image"
  fi
fi

measure() {
  local n=$1 repo=$WORK/repo-$1 gtwt=$WT_PARENT/gt-$1 loopwt=$WT_PARENT/loop-$1
  local base head commits ncommits files i f r t0 c

  git sandbox new "scale-$n" --path "$repo" >>"$LOG" 2>&1
  gen_files "$repo" "$n"
  cat >"$repo/.sandbox.toml" <<'EOF'
[test]
command = "true"
timeout = "120s"

[analysis]
enabled = false
EOF
  git "${NOHOOKS[@]}" -C "$repo" add -A
  git "${NOHOOKS[@]}" -C "$repo" commit -q -m "scale: $n files, test command true"
  base=$(git -C "$repo" rev-parse HEAD)
  for ((i = 1; i <= COMMITS; i++)); do
    f=$(( (i * 7919) % n ))
    printf '\n\ndef extra_%d():\n    return %d\n' "$i" "$i" >>"$repo/src/d$(printf '%03d' $((f / 100)))/m$(printf '%05d' "$f").py"
    git "${NOHOOKS[@]}" -C "$repo" commit -q -am "change $i"
  done
  # The range ends at the branch's name: in git-test's worktree HEAD is that worktree's
  # detached HEAD, and git-sandbox keeps its caches for the branch a range names.
  head=main
  commits=$(git -C "$repo" rev-list --reverse "$base..$head")
  ncommits=$(git -C "$repo" rev-list --count "$base..$head")
  files=$(git -C "$repo" ls-files | wc -l)
  git -C "$repo" config test.default.command true
  git "${NOHOOKS[@]}" -C "$repo" worktree add -q --detach "$gtwt" "$base"
  git "${NOHOOKS[@]}" -C "$repo" worktree add -q --detach "$loopwt" "$base"

  # Each timer leaves the total in REPLY.
  t_bare() {
    now_us; t0=$REPLY
    for c in $commits; do sh -c true; done
    now_us; REPLY=$((REPLY - t0))
  }
  t_loop() {
    now_us; t0=$REPLY
    for c in $commits; do
      git "${NOHOOKS[@]}" -C "$loopwt" checkout -q --detach "$c"
      (cd "$loopwt" && sh -c true)
      git "${NOHOOKS[@]}" -C "$loopwt" notes --ref=loop add -f \
        -m "{\"commit\":\"$c\",\"status\":\"passed\"}" "$c" 2>/dev/null
    done
    now_us; REPLY=$((REPLY - t0))
  }
  t_gt() {
    [ -n "$GIT_TEST" ] || { REPLY=0; return; }
    now_us; t0=$REPLY
    (cd "$gtwt" && GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0="$WORK/no-hooks" \
      python3 "$GIT_TEST" run --force "$base..$head") >>"$LOG" 2>&1 || warn_log "git-test exited non-zero ($n files)"
    now_us; REPLY=$((REPLY - t0))
  }
  t_sb() {
    now_us; t0=$REPLY
    (cd "$repo" && git sandbox run -j 1 --force "$base..$head") >>"$LOG" 2>&1 || warn_log "git sandbox run exited non-zero ($n files)"
    now_us; REPLY=$((REPLY - t0))
  }
  t_sbi() {
    [ -n "$IMAGE" ] || { REPLY=0; return; }
    now_us; t0=$REPLY
    (cd "$repo" && SANDBOX_ENVIRONMENT_IMAGE=$IMAGE git sandbox run -j 1 --force "$base..$head") >>"$LOG" 2>&1 || warn_log "git sandbox run (in an image) exited non-zero ($n files)"
    now_us; REPLY=$((REPLY - t0))
  }
  t_sba() {
    now_us; t0=$REPLY
    (cd "$repo" && SANDBOX_ANALYSIS_ENABLED=true git sandbox run -j 1 --force "$base..$head") >>"$LOG" 2>&1 || warn_log "git sandbox run (analysis on) exited non-zero ($n files)"
    now_us; REPLY=$((REPLY - t0))
  }

  t_sb; R_SB1+=("$REPLY")  # first run: the kept checkout is built
  t_sba; R_SBA1+=("$REPLY") # first run with analysis: the first commit's tree analysed whole
  t_gt; t_loop; t_sbi      # warm-ups: first checkout of their worktrees, the image pulled
  # Each commit has its own tree, and git-test keeps one note per tree tested.
  if [ -n "$GIT_TEST" ] && [ "$(git -C "$repo" notes --ref=tests/default list | wc -l)" -ne "$ncommits" ]; then
    echo "warning: git-test did not test all $ncommits commits ($n files); see the log" >&2
  fi
  local bare=() loop=() gt=() sb=() sba=() sbi=()
  for ((r = 1; r <= REPS; r++)); do
    t_sb; sb+=("$REPLY")
    t_sbi; sbi+=("$REPLY")
    t_sba; sba+=("$REPLY")
    t_gt; gt+=("$REPLY")
    t_loop; loop+=("$REPLY")
    t_bare; bare+=("$REPLY")
  done
  # How the last run's checkouts were made (its COMMITS events are the newest).
  local how
  how=$(cd "$repo" && git sandbox events --kind checkout.completed --json --limit "$ncommits" 2>>"$LOG" |
    awk '{ if (match($0, /"how":"[a-z]+"/)) { h = substr($0, RSTART + 7, RLENGTH - 8); k[h]++ }
           if (match($0, /"ms":[0-9]+/)) ms += substr($0, RSTART + 5, RLENGTH - 5) }
         END { s = ""; for (h in k) s = s k[h] " " h ", "; printf "%s%d ms in all", s, ms }')
  # How the last analysis-on run made its analyses (`analysis.completed` events).
  local ahow
  ahow=$(cd "$repo" && git sandbox events --kind analysis.completed --json --limit "$ncommits" 2>>"$LOG" |
    awk '{ if (match($0, /"how":"[a-z]+"/)) { h = substr($0, RSTART + 7, RLENGTH - 8); k[h]++ }
           if (match($0, /"files_read":[0-9]+/)) fr += substr($0, RSTART + 13, RLENGTH - 13)
           if (match($0, /"ms":[0-9]+/)) ms += substr($0, RSTART + 5, RLENGTH - 5) }
         END { s = ""; for (h in k) s = s k[h] " " h ", "; printf "%s%d files read, %d ms in all", s, fr, ms }')
  per() { awk -v u="$1" -v n="$ncommits" 'BEGIN{printf "%.0f", u/n}'; }
  R_FILES+=("$files")
  R_BARE+=("$(per "$(median "${bare[@]}")")")
  R_LOOP+=("$(per "$(median "${loop[@]}")")")
  R_GT+=("$(per "$(median "${gt[@]}")")")
  R_SB+=("$(per "$(median "${sb[@]}")")")
  R_SB1[${#R_SB1[@]} - 1]=$(per "${R_SB1[${#R_SB1[@]} - 1]}")
  R_SBA+=("$(per "$(median "${sba[@]}")")")
  R_SBI+=("$(per "$(median "${sbi[@]}")")")
  R_SBA1[${#R_SBA1[@]} - 1]=$(per "${R_SBA1[${#R_SBA1[@]} - 1]}")
  R_HOW+=("$how")
  R_AHOW+=("$ahow")
  local x
  {
    printf '%s files:' "$files"
    printf ' sandbox'; for x in "${sb[@]}"; do printf ' %.0f' "$((x / 1000))"; done
    printf '; +analysis'; for x in "${sba[@]}"; do printf ' %.0f' "$((x / 1000))"; done
    printf '; image'; for x in "${sbi[@]}"; do printf ' %.0f' "$((x / 1000))"; done
    printf '; git-test'; for x in "${gt[@]}"; do printf ' %.0f' "$((x / 1000))"; done
    printf '; loop'; for x in "${loop[@]}"; do printf ' %.0f' "$((x / 1000))"; done
    printf '; bare'; for x in "${bare[@]}"; do printf ' %.0f' "$((x / 1000))"; done
    echo
  } >>"$WORK/rounds"

  # Free the disk and memory before the next size.
  git "${NOHOOKS[@]}" -C "$repo" worktree remove --force "$gtwt"
  git "${NOHOOKS[@]}" -C "$repo" worktree remove --force "$loopwt"
  rm -rf "$repo"
}

# ---- run -----------------------------------------------------------------------------------
echo "git-sandbox scale benchmark: per-commit cost by tree size, against git-test"
echo "  binary:    $BIN ($("$BIN" --version 2>/dev/null || echo '?'))"
echo "  git-test:  ${GIT_TEST:-not found} ($(python3 --version 2>&1))"
echo "  git:       $(git --version)"
echo "  machine:   $(nproc) cores; repos in $WORK ($(fstype "$WORK")); worktrees and kept checkouts in $WT_PARENT ($(fstype "$WT_PARENT"))"
echo "  load:      $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
echo "  $COMMITS commits per repository, one file changed in each; test command true; analysis off"
echo "  (the +analysis columns: the same runs with SANDBOX_ANALYSIS_ENABLED=true)"
echo "  medians of $REPS alternating rounds"
echo

for n in $SIZES; do
  measure "$n"
done

ms() { awk -v u="$1" 'BEGIN{printf "%.1f", u/1000}'; }
printf '  %-7s %8s %8s %9s %9s %9s %9s %10s %9s\n' "files" "bare" "loop" "git-test" "sandbox" "overhead" "vs g-t" "vs loop" "1st run"
printf '  %-7s %8s %8s %9s %9s %9s %9s %10s %9s\n' "" "ms/c" "ms/c" "ms/c" "ms/c" "ms/c" "" "" "ms/c"
for i in "${!R_FILES[@]}"; do
  g=${R_GT[$i]}
  printf '  %-7s %8s %8s %9s %9s %9s %9s %10s %9s\n' "${R_FILES[$i]}" "$(ms "${R_BARE[$i]}")" \
    "$(ms "${R_LOOP[$i]}")" "$([ -n "$GIT_TEST" ] && ms "$g" || echo n/a)" "$(ms "${R_SB[$i]}")" \
    "$(ms $((R_SB[i] - R_BARE[i])))" "$([ -n "$GIT_TEST" ] && ratio "${R_SB[$i]}" "$g" || echo n/a)" \
    "$(ratio "${R_SB[$i]}" "${R_LOOP[$i]}")" "$(ms "${R_SB1[$i]}")"
done
echo "  overhead = sandbox - bare (what git-sandbox adds to running the test command)."
echo "  targets (issue 12): ~200 files: sandbox <= loop (vs loop <= 1.00x);"
echo "                      2,000 and 10,000 files: overhead <= 10 ms/commit and vs g-t <= 0.30x"
echo
printf '  %-7s %9s %9s %9s %9s\n' "files" "+analysis" "added" "vs g-t" "1st run"
printf '  %-7s %9s %9s %9s %9s\n' "" "ms/c" "ms/c" "" "ms/c"
for i in "${!R_FILES[@]}"; do
  printf '  %-7s %9s %9s %9s %9s\n' "${R_FILES[$i]}" "$(ms "${R_SBA[$i]}")" \
    "$(ms $((R_SBA[i] - R_SB[i])))" "$([ -n "$GIT_TEST" ] && ratio "${R_SBA[$i]}" "${R_GT[$i]}" || echo n/a)" \
    "$(ms "${R_SBA1[$i]}")"
done
echo "  added = +analysis - sandbox (what the analysis adds per commit)."
echo "  targets (issue 36): 2,000 and 10,000 files, analysis on: <= 15 ms/commit and vs g-t <= 0.30x"
echo "  analyses in the last +analysis run (analysis.completed events):"
for i in "${!R_FILES[@]}"; do
  printf '    %6s files: %s\n' "${R_FILES[$i]}" "${R_AHOW[$i]}"
done
echo
if [ -n "$IMAGE" ]; then
  printf '  %-7s %9s %9s %9s %9s\n' "files" "image" "overhead" "host's" "ratio"
  printf '  %-7s %9s %9s %9s %9s\n' "" "ms/c" "ms/c" "ms/c" ""
  for i in "${!R_FILES[@]}"; do
    printf '  %-7s %9s %9s %9s %9s\n' "${R_FILES[$i]}" "$(ms "${R_SBI[$i]}")" \
      "$(ms $((R_SBI[i] - R_BARE[i])))" "$(ms $((R_SB[i] - R_BARE[i])))" \
      "$(ratio $((R_SBI[i] - R_BARE[i])) $((R_SB[i] - R_BARE[i])))"
  done
  echo "  image: the runs with SANDBOX_ENVIRONMENT_IMAGE=$IMAGE (a busybox root);"
  echo "  ratio = its overhead over the host run's. Target (issue 56): <= 1.30x"
else
  echo "  image: n/a (needs docker-registry, skopeo and busybox-static)"
fi
echo "  git-sandbox's checkouts in its last timed run (checkout.completed events):"
for i in "${!R_FILES[@]}"; do
  printf '    %6s files: %s\n' "${R_FILES[$i]}" "${R_HOW[$i]}"
done
echo "  every round, total ms:"
sed 's/^/    /' "$WORK/rounds"
echo
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) at end"
exit 0
