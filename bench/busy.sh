# Sourced by benchmarks that report their figures beside a build (BESIDE_BUILD=1): `busy_start
# DIR` runs `cargo build --release` of this checkout from scratch into DIR/busy-target, over and
# over, in a process group of its own, and returns once it is compiling; `busy_stop` ends it.
# The figures taken in between are reported, not held to a target (issue 52).
# Where cargo and its registry are, taken when sourced (before a benchmark moves HOME).
BUSY_CARGO=$(command -v cargo || true)
BUSY_CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}
BUSY_RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}

busy_start() {
    local dir=$1/busy-target root
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    [ -n "$BUSY_CARGO" ] || { echo "BESIDE_BUILD=1 needs cargo on PATH" >&2; return 1; }
    CARGO_HOME=$BUSY_CARGO_HOME RUSTUP_HOME=$BUSY_RUSTUP_HOME setsid bash -c \
        'while :; do rm -rf "$1"; "$3" build --release --offline --quiet --manifest-path "$2/Cargo.toml" --target-dir "$1" >/dev/null 2>&1 || sleep 1; done' \
        busy "$dir" "$root" "$BUSY_CARGO" </dev/null >/dev/null 2>&1 &
    BUSY_PID=$!
    # Past resolving and the first crates: both cores compiling.
    sleep "${BUSY_WARMUP:-30}"
}

busy_stop() {
    [ -n "${BUSY_PID:-}" ] || return 0
    kill -- "-$BUSY_PID" 2>/dev/null || true
    wait "$BUSY_PID" 2>/dev/null || true
    BUSY_PID=
}
