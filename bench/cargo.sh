#!/usr/bin/env bash
# A Rust crate's tests run commit by commit: `git sandbox run --force` against git-test (mhagger),
# whose one reused worktree keeps `target/` warm between commits. Issue 12's target: git-sandbox
# at most 1.5x git-test's time, after one warm-up run of the branch for both.
#
# The crate depends on serde_json (which brings serde_core, itoa, memchr, zmij). Its BASE commit
# is followed by COMMITS (default 8) commits that each change one line of src/lib.rs (a constant
# the tests use). The test command is `cargo test --offline -q` for both tools (`.sandbox.toml`,
# and `test.default.command` for git-test); analysis is off.
#
# Dependencies without network: the sandbox has none, and it hides HOME and /tmp. The private
# HOME gets a CARGO_HOME (`$HOME/.cargo`) whose registry index and .crate files are copied from
# the user's CARGO_HOME; `cargo fetch --offline` unpacks the ones the lockfile names (if they are
# not there, one `cargo fetch` with network is tried). git-sandbox passes CARGO_HOME to the test
# and binds it back read-only under the hidden HOME, as it would a user's ~/.cargo. git-test uses
# the same CARGO_HOME. With CARGO_DEPS=vendor the dependencies are instead `cargo vendor`ed into
# the repository (committed `vendor/` and `.cargo/config.toml` with source replacement).
#
# Timed, over BASE..main: one warm-up run of each tool (their first build: git-sandbox's branch
# cache and git-test's worktree start empty), shown apart; then REPS (default 3) alternating
# rounds of `git sandbox run -j 1 --force BASE..main`, `git-test run --force BASE..main` (in its own
# worktree, on the temp dir's disk like git-sandbox's build caches under GIT_SANDBOX_HOME) and
# `git sandbox run --force BASE..main` with the default workers (a range of one branch in parallel).
# Prints the median totals in seconds and the ratio.
#
# git-test runs with core.hooksPath pointed at an empty dir, so the hooks `git sandbox init`
# installs are not charged to it. git-sandbox's scratch dir (GIT_SANDBOX_TMPDIR) is a private dir
# on /dev/shm, so its kept checkouts go with the script.
#
# Usage: bench/cargo.sh              (from any directory)
# Env:   GIT_SANDBOX_BIN  the binary (default: target/release/git-sandbox of this checkout)
#        GIT_TEST_BIN     git-test (default: ../shared/peers/git-test/git-test next to this checkout)
#        COMMITS (default 8), REPS (default 3), CARGO_DEPS (registry | vendor; default registry)
# Needs: git, python3, awk, cargo (rustup or not). Measures only: always exits 0 once it has run.
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${GIT_SANDBOX_BIN:-$ROOT/target/release/git-sandbox}
GIT_TEST=${GIT_TEST_BIN:-$ROOT/../shared/peers/git-test/git-test}
COMMITS=${COMMITS:-8}
REPS=${REPS:-3}
CARGO_DEPS=${CARGO_DEPS:-registry}
[ -x "$BIN" ] || { echo "$BIN not found: cd $ROOT && cargo build --release (or set GIT_SANDBOX_BIN)" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
[ -f "$GIT_TEST" ] || { echo "git-test not found at $GIT_TEST (set GIT_TEST_BIN)" >&2; exit 2; }
GIT_TEST=$(cd "$(dirname "$GIT_TEST")" && pwd)/$(basename "$GIT_TEST")
case $CARGO_DEPS in registry | vendor) ;; *) echo "CARGO_DEPS: registry or vendor" >&2; exit 2 ;; esac

# The user's toolchain and package cache, found before HOME moves.
USER_CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}
export RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}
command -v cargo >/dev/null || { echo "cargo not found" >&2; exit 2; }
# The toolchain's own bin dir (not rustup's proxies in ~/.cargo/bin, which are left behind).
CARGO_BIN=$(rustup which cargo 2>/dev/null || command -v cargo)
TOOLCHAIN_BIN=$(dirname "$CARGO_BIN")

# ---- private environment -------------------------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-cargo.XXXXXX")
SHM=
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  cd /
  rm -rf "$WORK"
  [ -z "$SHM" ] || rm -rf "$SHM"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

mkdir -p "$WORK/home/.cargo/registry" "$WORK/config" "$WORK/sandbox-home" "$WORK/bin" "$WORK/no-hooks"
ln -s "$BIN" "$WORK/bin/git-sandbox"
export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/config XDG_DATA_HOME=$WORK/home/.local/share
export GIT_SANDBOX_HOME=$WORK/sandbox-home GIT_CONFIG_NOSYSTEM=1
export CARGO_HOME=$HOME/.cargo
export PATH=$WORK/bin:$TOOLCHAIN_BIN:$PATH
unset GIT_SANDBOX_TMPDIR GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_CONFIG_GLOBAL
unset GIT_CONFIG_COUNT GIT_CONFIG_PARAMETERS CARGO_TARGET_DIR CARGO_BUILD_TARGET_DIR RUSTFLAGS RUSTC_WRAPPER
for v in $(env | sed -n 's/^\(SANDBOX_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
git config --global user.name "Bench Mark"
git config --global user.email "bench@example.invalid"
git config --global init.defaultBranch main
git config --global advice.detachedHead false

if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  SHM=$(mktemp -d /dev/shm/gs-bench-cargo.XXXXXX)
  export GIT_SANDBOX_TMPDIR=$SHM
fi

now_us() { local t=$EPOCHREALTIME; REPLY=${t/./}; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
sec() { awk -v u="$1" 'BEGIN{printf "%.2f", u/1000000}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b>0) printf "%.2fx", a/b; else print "n/a" }'; }
fstype() { stat -f -c %T "$1" 2>/dev/null || echo "?"; }
LOG=$WORK/bench.log
warn_log() { echo "warning: $1; last log lines:" >&2; tail -8 "$LOG" >&2; }

# ---- the crate -----------------------------------------------------------------------------
REPO=$WORK/crate
mkdir -p "$REPO/src"
cat >"$REPO/Cargo.toml" <<'EOF'
[package]
name = "benchcrate"
version = "0.1.0"
edition = "2021"

[dependencies]
serde_json = "1"
EOF
cat >"$REPO/src/lib.rs" <<'EOF'
use serde_json::{json, Value};

/// How many items `make` puts in its list.
pub const LIMIT: u64 = 3;

/// A JSON object with `n` and the list `0..LIMIT`.
pub fn make(n: u64) -> Value {
    json!({ "n": n, "items": (0..LIMIT).collect::<Vec<_>>() })
}

/// The sum of the items of a value `make` built.
pub fn total(v: &Value) -> u64 {
    v["items"].as_array().map_or(0, |a| a.iter().filter_map(Value::as_u64).sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let v = make(7);
        let text = serde_json::to_string(&v).unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v, back);
    }

    #[test]
    fn sums() {
        assert_eq!(total(&make(1)), LIMIT * (LIMIT - 1) / 2);
    }
}
EOF
printf 'target/\n' >"$REPO/.gitignore"
cat >"$REPO/.sandbox.toml" <<'EOF'
[test]
command = "cargo test --offline -q"
timeout = "600s"

[analysis]
enabled = false
EOF

# Dependencies: the user's registry index and .crate files, copied (nothing of the user's is
# written); unpacked by `cargo fetch`, offline if the user's cache has them.
for d in index cache; do
  [ ! -d "$USER_CARGO_HOME/registry/$d" ] || cp -r "$USER_CARGO_HOME/registry/$d" "$CARGO_HOME/registry/"
done
DEPS_FROM="the user's cargo cache, offline"
if ! (cd "$REPO" && cargo generate-lockfile --offline && cargo fetch --offline) >>"$LOG" 2>&1; then
  DEPS_FROM="crates.io (network)"
  (cd "$REPO" && cargo generate-lockfile && cargo fetch) >>"$LOG" 2>&1 ||
    { echo "cannot get serde_json: not in $USER_CARGO_HOME/registry and no network" >&2; tail -5 "$LOG" >&2; exit 2; }
fi
if [ "$CARGO_DEPS" = vendor ]; then
  mkdir -p "$REPO/.cargo"
  (cd "$REPO" && cargo vendor --offline vendor >"$REPO/.cargo/config.toml") 2>>"$LOG"
  grep -q 'directory = "vendor"' "$REPO/.cargo/config.toml" || { echo "cargo vendor failed (see above)" >&2; exit 2; }
  DEPS_FROM="$DEPS_FROM; vendored into the repository"
fi
DEPS=$(awk '/^name = / { gsub(/"/, "", $3); if ($3 != "benchcrate") printf "%s ", $3 }' "$REPO/Cargo.lock")

git init -q "$REPO"
git -C "$REPO" add -A
git -C "$REPO" commit -q -m "benchcrate: serde_json, cargo test"
(cd "$REPO" && git sandbox init) >>"$LOG" 2>&1
BASE=$(git -C "$REPO" rev-parse HEAD)
for ((i = 1; i <= COMMITS; i++)); do
  sed -i "s/^pub const LIMIT: u64 = .*;/pub const LIMIT: u64 = $((i + 3));/" "$REPO/src/lib.rs"
  git -C "$REPO" -c "core.hooksPath=$WORK/no-hooks" commit -q -am "LIMIT $((i + 3))"
done
# The range ends at the branch's name for both tools: git-sandbox keeps a run's build cache for
# the branch the range names (a range ending at a bare commit id keeps none), and in git-test's
# worktree HEAD is that worktree's detached HEAD.
RANGE=$BASE..main
N=$(git -C "$REPO" rev-list --count "$RANGE")
git -C "$REPO" config test.default.command "cargo test --offline -q"
GTWT=$WORK/gt-worktree
git -C "$REPO" -c "core.hooksPath=$WORK/no-hooks" worktree add -q --detach "$GTWT" "$BASE"

t_sb() {
  local t0
  now_us; t0=$REPLY
  (cd "$REPO" && git sandbox run -j 1 --force "$RANGE") >>"$LOG" 2>&1 || warn_log "git sandbox run exited non-zero"
  now_us; REPLY=$((REPLY - t0))
}
# The same range with the default workers (as a user types it): the branch's commits run in
# parallel, each from the newest cache generation (issue 36: <= 1.0x git-test).
t_sbj() {
  local t0
  now_us; t0=$REPLY
  (cd "$REPO" && git sandbox run --force "$RANGE") >>"$LOG" 2>&1 || warn_log "git sandbox run exited non-zero"
  now_us; REPLY=$((REPLY - t0))
}
t_gt() {
  local t0
  now_us; t0=$REPLY
  (cd "$GTWT" && GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0="$WORK/no-hooks" \
    python3 "$GIT_TEST" run --force "$RANGE") >>"$LOG" 2>&1 || warn_log "git-test exited non-zero"
  now_us; REPLY=$((REPLY - t0))
}

echo "git-sandbox cargo benchmark: a crate's tests commit by commit, against git-test"
echo "  binary:    $BIN ($("$BIN" --version 2>/dev/null || echo '?'))"
echo "  git-test:  $GIT_TEST ($(python3 --version 2>&1))"
echo "  cargo:     $(cargo --version) from $TOOLCHAIN_BIN"
echo "  lockfile:  ${DEPS}(from $DEPS_FROM)"
echo "  machine:   $(nproc) cores; repo, git-test's worktree and git-sandbox's caches in $WORK ($(fstype "$WORK")); kept checkouts in ${SHM:-the default scratch dir}"
echo "  load:      $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
echo "  $N commits, each changing one line of src/lib.rs; test command: cargo test --offline -q"
echo

t_sb; SB1=$REPLY
t_gt; GT1=$REPLY
SB=() GT=() SBJ=()
for ((r = 1; r <= REPS; r++)); do
  t_sb; SB+=("$REPLY")
  t_gt; GT+=("$REPLY")
  t_sbj; SBJ+=("$REPLY")
done
msb=$(median "${SB[@]}")
msbj=$(median "${SBJ[@]}")
mgt=$(median "${GT[@]}")
percommit() { awk -v u="$1" -v n="$N" 'BEGIN{printf "%.2f", u/1000000/n}'; }
printf '  %-46s %9s %9s %9s\n' "" "total s" "s/commit" "vs g-t"
printf '  %-46s %9s %9s %9s\n' "warm-up: git-test run --force (cold target/)" "$(sec "$GT1")" "$(percommit "$GT1")" ""
printf '  %-46s %9s %9s %9s\n' "warm-up: git sandbox run --force (cold cache)" "$(sec "$SB1")" "$(percommit "$SB1")" "$(ratio "$SB1" "$GT1")"
printf '  %-46s %9s %9s %9s\n' "git-test run --force, median of $REPS" "$(sec "$mgt")" "$(percommit "$mgt")" "1.00x"
printf '  %-46s %9s %9s %9s\n' "git sandbox run --force, median of $REPS" "$(sec "$msb")" "$(percommit "$msb")" "$(ratio "$msb" "$mgt")"
printf '  %-46s %9s %9s %9s\n' "git sandbox run --force (default workers)" "$(sec "$msbj")" "$(percommit "$msbj")" "$(ratio "$msbj" "$mgt")"
echo "  targets: -j 1 <= 1.5x git-test after the warm-up (issue 12); default workers <= 1.0x (issue 36)"
all() { local x; for x in "$@"; do printf '%s ' "$(sec "$x")"; done; }
echo "  every round, total s: git-sandbox -j 1 $(all "${SB[@]}"); default workers $(all "${SBJ[@]}"); git-test $(all "${GT[@]}")"
CACHE_MB=$(du -sm "$GIT_SANDBOX_HOME/cache" 2>/dev/null | cut -f1)
BRANCHES=$(find "$GIT_SANDBOX_HOME/cache" -mindepth 2 -maxdepth 2 -type d -printf '%f ' 2>/dev/null || true)
echo "  git-sandbox's build caches: ${CACHE_MB:-0} MiB under GIT_SANDBOX_HOME/cache (branches: ${BRANCHES:-none})"
echo
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) at end"
exit 0
