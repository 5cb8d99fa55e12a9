#!/usr/bin/env bash
# What git-sandbox's proxy costs a run with the network: one 100 MB download and many small
# requests, made inside the sandbox through the proxy (`[limits] network = true`, the origin's
# name mapped to 127.0.0.1 by `[network] resolve`), against the same made on the host straight to
# the origin on loopback. Both sides use the same client (python3's urllib, one connection per
# request) and the same origin (python3's http.server on 127.0.0.1 serving a 100 MB file).
#
# Targets (issue 48): throughput through the proxy >= 1 GB/s, or >= 80% of direct; the latency it
# adds to one request <= 1 ms. Prints both sides and the ratios.
#
# Usage: bench/proxy.sh              (from any directory)
# Env:   GIT_SANDBOX_BIN  the binary (default: target/release/git-sandbox of this checkout)
#        REPS (default 3), REQUESTS (small requests per round, default 200)
# Needs: git, python3, awk. Measures only: always exits 0 once it has run.
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${GIT_SANDBOX_BIN:-$ROOT/target/release/git-sandbox}
REPS=${REPS:-3}
REQUESTS=${REQUESTS:-200}
[ -x "$BIN" ] || { echo "$BIN not found: cd $ROOT && cargo build --release (or set GIT_SANDBOX_BIN)" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-proxy.XXXXXX")
SERVER=
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  [ -z "$SERVER" ] || kill "$SERVER" 2>/dev/null || true
  cd /
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

mkdir -p "$WORK/home" "$WORK/config/git-sandbox" "$WORK/sandbox-home" "$WORK/www"
export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/config GIT_SANDBOX_HOME=$WORK/sandbox-home
export GIT_CONFIG_NOSYSTEM=1
unset GIT_SANDBOX_TMPDIR GIT_DIR GIT_WORK_TREE HTTP_PROXY HTTPS_PROXY http_proxy https_proxy ALL_PROXY all_proxy
for v in $(env | sed -n 's/^\(SANDBOX_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
git config --global user.name "Bench Mark"
git config --global user.email "bench@example.invalid"
git config --global init.defaultBranch main

# The origin: 100 MB and a tiny file, on a port of 127.0.0.1.
head -c 100000000 /dev/zero >"$WORK/www/big"
echo ok >"$WORK/www/small"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server "$PORT" --bind 127.0.0.1 --directory "$WORK/www" >/dev/null 2>&1 &
SERVER=$!
for _ in $(seq 50); do python3 -c "import socket; socket.create_connection(('127.0.0.1',$PORT),1)" 2>/dev/null && break; sleep 0.1; done

cat >"$WORK/config/git-sandbox/config.toml" <<EOF
[limits]
network = true
[network]
allow = ["blob.test:$PORT"]
resolve = { "blob.test" = "127.0.0.1" }
EOF

# The client, the same on both sides: seconds for the big file, then ms per small request.
cat >"$WORK/client.py" <<'EOF'
import sys, time, urllib.request
base, n = sys.argv[1], int(sys.argv[2])
t = time.perf_counter()
with urllib.request.urlopen(base + "/big") as r:
    while r.read(1 << 20):
        pass
big = time.perf_counter() - t
t = time.perf_counter()
for _ in range(n):
    urllib.request.urlopen(base + "/small").read()
small = (time.perf_counter() - t) / n * 1000
print("%.4f %.4f" % (big, small))
EOF

REPO=$WORK/repo
git init -q "$REPO"
cp "$WORK/client.py" "$REPO/"
printf '[analysis]\nenabled = false\n' >"$REPO/.sandbox.toml"
git -C "$REPO" add -A && git -C "$REPO" commit -qm client
(cd "$REPO" && "$BIN" init >/dev/null 2>&1)

inside() {
  (cd "$REPO" && "$BIN" exec HEAD -- python3 client.py "http://blob.test:$PORT" "$REQUESTS") 2>/dev/null | tail -1
}
outside() {
  python3 "$WORK/client.py" "http://127.0.0.1:$PORT" "$REQUESTS" | tail -1
}

echo "git-sandbox proxy benchmark: a 100 MB download and $REQUESTS small requests, through the proxy and direct"
echo "  binary:  $BIN ($("$BIN" --version 2>/dev/null || echo '?'))"
echo "  machine: $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
check=$(inside || true)
if [ -z "$check" ]; then
  echo "  the sandboxed client printed nothing: is the proxy available here? (git sandbox doctor)" >&2
  exit 0
fi
bi=() si=() bo=() so=()
for _ in $(seq "$REPS"); do
  read -r b s < <(outside); bo+=("$b"); so+=("$s")
  read -r b s < <(inside); bi+=("$b"); si+=("$s")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
B_IN=$(median "${bi[@]}") B_OUT=$(median "${bo[@]}") S_IN=$(median "${si[@]}") S_OUT=$(median "${so[@]}")
awk -v bi="$B_IN" -v bo="$B_OUT" -v si="$S_IN" -v so="$S_OUT" 'BEGIN{
  printf "                          through the proxy      direct\n"
  printf "  100 MB download          %8.2f MB/s    %8.2f MB/s   (%.0f%% of direct)\n", 100/bi, 100/bo, 100*bo/bi
  printf "  one small request        %8.3f ms        %8.3f ms     (+%.3f ms)\n", si, so, si-so
  printf "  targets: >= 1 GB/s or >= 80%% of direct; <= 1 ms added per request (issue 48)\n"
}'
exit 0
