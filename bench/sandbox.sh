#!/usr/bin/env bash
# What the sandbox adds to starting a test command.
#
# Times RUNS spawns of a bare `/bin/sh -c true` against RUNS spawns of the sandbox helper
# (`git-sandbox __sandbox-exec`, as the supervisor starts it, with the default limits and every
# layer the machine allows: cgroup, namespaces, read-only root view, private /tmp, hidden
# secrets, loopback, uid drop, rlimits, Landlock, seccomp) running the same `true`; then
# `git sandbox exec HEAD -- true` end to end (checkout + config + sandbox) for scale.
# Prints mean / median / p95 in ms, the added median and the ratio. Target: added < 10 ms.
#
# Usage: bench/sandbox.sh            (from any directory)
# Env:   GIT_SANDBOX_BIN  the binary (default: target/release/git-sandbox of this checkout)
#        RUNS (default 200)
# Needs: bash 5, git, awk. Measures only: always exits 0 once it has run.
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${GIT_SANDBOX_BIN:-$ROOT/target/release/git-sandbox}
RUNS=${RUNS:-200}
[ -x "$BIN" ] || { echo "$BIN not found: cd $ROOT && cargo build --release (or set GIT_SANDBOX_BIN)" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

WORK=$(mktemp -d /dev/shm/gs-bench-sandbox.XXXXXX 2>/dev/null || mktemp -d)
trap 'cd /; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$WORK/run/tree" "$WORK/run/home" "$WORK/run/tmp" "$WORK/home" "$WORK/data"
export HOME=$WORK/home GIT_SANDBOX_HOME=$WORK/data XDG_CONFIG_HOME=$WORK/config GIT_CONFIG_NOSYSTEM=1
unset GIT_SANDBOX_TMPDIR

now_us() { local t=$EPOCHREALTIME; REPLY=${t/./}; }
# stats US...: "mean median p95" in ms (p95: nearest rank).
stats() {
  printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1; s+=$1} END{
    p=int(0.95*NR + 0.999999); if (p<1) p=1; if (p>NR) p=NR;
    m=(NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2);
    printf "%.2f %.2f %.2f", s/NR/1000, m/1000, a[p]/1000}'
}

# The plan the supervisor would hand over (default limits, no network).
PLAN=$(cat <<JSON
{"command":"true","cwd":"$WORK/run/tree","env":[["PATH","/usr/bin:/bin"]],"root":"$WORK/run",
 "limits":{"memory_mb":2048,"cpu_seconds":600,"processes":256,"open_files":1024,"file_size_mb":1024},
 "network":false,"hide":["$HOME","$WORK/data"],"toolchains":[],"skip":{},"parent_pid":$$}
JSON
)

bare=(); helper=(); execs=()
for ((i = 0; i < RUNS; i++)); do
  now_us; t0=$REPLY; /bin/sh -c true; now_us; bare+=($((REPLY - t0)))
  now_us; t0=$REPLY; GIT_SANDBOX_PLAN=$PLAN "$BIN" __sandbox-exec 3>/dev/null; now_us; helper+=($((REPLY - t0)))
done
GIT_SANDBOX_PLAN=$PLAN "$BIN" __sandbox-exec 3>"$WORK/report.json" || true
REPORT=$(cat "$WORK/report.json")

git init -q "$WORK/repo" && echo hi > "$WORK/repo/a" && git -C "$WORK/repo" add a \
  && git -C "$WORK/repo" -c user.name=b -c user.email=b@b.invalid commit -qm a
(cd "$WORK/repo" && "$BIN" exec HEAD -- true) # the first run probes the machine: not timed
for ((i = 0; i < RUNS / 4; i++)); do
  now_us; t0=$REPLY; (cd "$WORK/repo" && "$BIN" exec HEAD -- true); now_us; execs+=($((REPLY - t0)))
done

read -r bmean bmed bp95 <<<"$(stats "${bare[@]}")"
read -r hmean hmed hp95 <<<"$(stats "${helper[@]}")"
read -r emean emed ep95 <<<"$(stats "${execs[@]}")"
echo "git-sandbox sandbox set-up benchmark"
echo "  binary:  $BIN ($("$BIN" --version 2>/dev/null || echo '?'))"
echo "  machine: $(nproc) cores, Linux $(uname -r), uid $(id -u); $RUNS runs each ($((RUNS / 4)) for exec)"
enforced=$( (grep -o '"status":"enforced"' <<<"$REPORT" || true) | wc -l)
missing=$( (grep -o '"layer":"[a-z_]*","status":"unavailable"' <<<"$REPORT" || true) | sed 's/"layer":"\([a-z_]*\)".*/\1/' | tr '\n' ' ')
echo "  helper layers enforced: $enforced${missing:+; unavailable: $missing}"
printf '  %-32s mean %7.2f  median %7.2f  p95 %7.2f ms\n' "bare /bin/sh -c true" "$bmean" "$bmed" "$bp95"
printf '  %-32s mean %7.2f  median %7.2f  p95 %7.2f ms\n' "sandbox helper + sh -c true" "$hmean" "$hmed" "$hp95"
printf '  %-32s mean %7.2f  median %7.2f  p95 %7.2f ms\n' "git sandbox exec HEAD -- true" "$emean" "$emed" "$ep95"
awk -v b="$bmed" -v h="$hmed" 'BEGIN{printf "  added by the sandbox (median): %.2f ms (%.1fx a bare spawn); target < 10 ms\n", h-b, (b>0? h/b : 0)}'
