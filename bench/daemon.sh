#!/usr/bin/env bash
# The daemon's hot path: commit-to-note latency (p50, p95) with test command `true`, throughput
# for a burst of 200 commits across 4 repositories, and resident memory when idle.
# Targets: p50 under 100 ms (plus test time), idle RSS under 30 MiB. Prints; asserts nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${GIT_SANDBOX_BIN:-$root/target/release/git-sandbox}
[ -x "$bin" ] || (cd "$root" && cargo build --release --quiet)
work=$(mktemp -d)
trap 'GIT_SANDBOX_HOME=$work/data "$bin" daemon stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
export HOME=$work/home GIT_SANDBOX_HOME=$work/data XDG_CONFIG_HOME=$work/config GIT_CONFIG_NOSYSTEM=1
export PATH="$(dirname "$bin"):$PATH"
mkdir -p "$HOME"
git config --global user.name bench && git config --global user.email bench@example.com
export BIN=$bin WORK=$work
python3 - <<'PY'
import os, subprocess, time, statistics
bin, work = os.environ["BIN"], os.environ["WORK"]
def sh(*a, cwd=None):
    return subprocess.run(a, cwd=cwd, check=True, capture_output=True, text=True).stdout
def has_note(repo, rev):
    return subprocess.run(["git", "notes", "--ref=sandbox", "show", rev], cwd=repo, capture_output=True).returncode == 0
repos = []
for i in range(4):
    path = f"{work}/r{i}"
    sh(bin, "new", f"r{i}", "--path", path)
    with open(f"{path}/.sandbox.toml", "w") as f:
        f.write('[test]\ncommand = "true"\n')
    sh("git", "commit", "-qam", "bench config", cwd=path)
    repos.append(path)
log = open(f"{work}/daemon.log", "w")
daemon = subprocess.Popen([bin, "daemon", "--workers", "2"], stderr=log)
while subprocess.run([bin, "daemon", "status"], capture_output=True).returncode != 0:
    time.sleep(0.05)
# Let the start-up scan finish.
while any(not has_note(r, "HEAD") for r in repos):
    time.sleep(0.05)
time.sleep(2)
rss = next(int(l.split()[1]) for l in open(f"/proc/{daemon.pid}/status") if l.startswith("VmRSS"))

lat = []
r = repos[0]
for k in range(30):
    with open(f"{r}/f.txt", "w") as f:
        f.write(str(k))
    sh("git", "add", "f.txt", cwd=r)
    t0 = time.perf_counter()
    sh("git", "commit", "-qm", f"latency {k}", cwd=r)
    t_commit = time.perf_counter()
    head = sh("git", "rev-parse", "HEAD", cwd=r).strip()
    while not has_note(r, head):
        time.sleep(0.002)
    lat.append((time.perf_counter() - t_commit) * 1000)
lat.sort()
p50 = statistics.median(lat)
p95 = lat[int(len(lat) * 0.95) - 1]

t0 = time.perf_counter()
heads = {}
for k in range(50):
    for r in repos:
        with open(f"{r}/g.txt", "w") as f:
            f.write(str(k))
        sh("git", "add", "g.txt", cwd=r)
        sh("git", "commit", "-qm", f"burst {k}", cwd=r)
t_committed = time.perf_counter()
for r in repos:
    heads[r] = sh("git", "rev-list", "-50", "HEAD", cwd=r).split()
while any(not has_note(r, c) for r in repos for c in heads[r][:1]):
    time.sleep(0.02)
done = time.perf_counter()
missing = sum(1 for r in repos for c in heads[r] if not has_note(r, c))
subprocess.run([bin, "daemon", "stop"], capture_output=True)
daemon.wait()
burst = done - t0
print("daemon benchmark (2 workers, test command `true`, analysis on)")
print(f"  commit-to-note latency   p50 {p50:6.1f} ms   p95 {p95:6.1f} ms   (target p50 < 100 ms)")
print(f"  burst of 200 commits     {burst:6.2f} s total, {200 / burst:6.1f} commits/s (committing took {t_committed - t0:.2f} s), {missing} without a note")
print(f"  idle resident memory     {rss / 1024:6.1f} MiB (target < 30 MiB)")
PY
