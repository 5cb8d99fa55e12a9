//! A memory + pids cgroup (v1 controllers, as on this machine kind) for one run, nested under
//! the cgroup the supervisor is already in. Named after the helper's pid, so the supervisor can
//! find it, read what was hit, kill what is left and remove it.

use std::path::{Path, PathBuf};

const ROOT: &str = "/sys/fs/cgroup";

/// The run's cgroup directories, one per controller.
#[derive(Debug, Clone)]
pub struct RunCgroup {
    pub memory: PathBuf,
    pub pids: PathBuf,
}

/// This process's cgroup path for a v1 controller, from /proc/self/cgroup.
fn current(controller: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, names, path) = (parts.next()?, parts.next()?, parts.next()?);
        names.split(',').any(|n| n == controller).then(|| {
            Path::new(ROOT)
                .join(controller)
                .join(path.trim_start_matches('/'))
        })
    })
}

impl RunCgroup {
    /// Where the cgroup of the helper with `pid` lives (the helper inherits our cgroups).
    pub fn for_helper(pid: i32) -> Option<RunCgroup> {
        let name = format!("git-sandbox-{pid}");
        Some(RunCgroup {
            memory: current("memory")?.join(&name),
            pids: current("pids")?.join(&name),
        })
    }

    /// Create it, set the limits and move the calling process in. Returns a description.
    pub fn create_and_join(&self, memory_mb: u64, processes: u64) -> Result<String, String> {
        let io = |what: &str, p: &Path, e: std::io::Error| {
            format!("{what} {}: {}", p.display(), super::errno_text(&e))
        };
        for dir in [&self.memory, &self.pids] {
            std::fs::create_dir(dir).map_err(|e| io("mkdir", dir, e))?;
        }
        let write = |dir: &Path, file: &str, value: String| {
            let p = dir.join(file);
            std::fs::write(&p, value).map_err(|e| io("write", &p, e))
        };
        if memory_mb > 0 {
            let bytes = memory_mb.saturating_mul(1024 * 1024);
            write(&self.memory, "memory.limit_in_bytes", bytes.to_string())?;
            // Swap counts too where the kernel accounts it; absent otherwise.
            let _ = write(
                &self.memory,
                "memory.memsw.limit_in_bytes",
                bytes.to_string(),
            );
        }
        if processes > 0 {
            write(&self.pids, "pids.max", processes.to_string())?;
        }
        // "0" into `tasks` moves the calling thread only, and the kernel then skips the global
        // lock that moving a whole process (`cgroup.procs`) takes: that lock waits for an RCU
        // grace period, 7-15 ms per run on this machine kind, against 0.5 ms. The helper is
        // single-threaded, and every process of the run is forked by this thread afterwards,
        // so the whole run is inside either way.
        write(&self.memory, "tasks", "0".into())?;
        write(&self.pids, "tasks", "0".into())?;
        Ok("memory and pids (cgroup v1), nested under the supervisor's cgroup".into())
    }

    /// The limits the kernel holds for this cgroup: (memory MiB, pids max); `None` is no limit.
    pub fn read_limits(&self) -> (Option<u64>, Option<u64>) {
        let read = |p: PathBuf| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        };
        let memory = read(self.memory.join("memory.limit_in_bytes"))
            .and_then(|s| s.parse::<u64>().ok())
            // The kernel's "no limit" is a page-rounded i64::MAX.
            .filter(|b| *b < (1u64 << 62))
            .map(|b| b / (1024 * 1024));
        let pids = read(self.pids.join("pids.max")).and_then(|s| s.parse::<u64>().ok());
        (memory, pids)
    }

    pub fn exists(&self) -> bool {
        self.pids.is_dir() || self.memory.is_dir()
    }

    /// The process cap was hit at least once (a fork failed).
    pub fn pids_hit(&self) -> bool {
        counter(&self.pids.join("pids.events"), "max") > 0
    }

    /// The kernel OOM-killed a process of the run.
    pub fn oom_killed(&self) -> bool {
        counter(&self.memory.join("memory.oom_control"), "oom_kill") > 0
    }

    /// SIGKILL everything still in the cgroup: the tree kill that survives `setsid`.
    pub fn kill_all(&self) {
        for _ in 0..50 {
            let procs = std::fs::read_to_string(self.pids.join("cgroup.procs")).unwrap_or_default();
            let pids: Vec<i32> = procs
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect();
            if pids.is_empty() {
                return;
            }
            for pid in pids {
                // SAFETY: signalling processes of the run's own cgroup.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Remove the directories (they must be empty of processes).
    pub fn remove(&self) {
        for dir in [&self.memory, &self.pids] {
            for _ in 0..50 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
}

/// Remove the cgroups of runs whose helper is gone (a supervisor killed with -9 cannot clean up
/// after itself). Only empty cgroups of dead pids are touched; called once per process.
pub fn sweep_stale() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for controller in ["memory", "pids"] {
            let Some(parent) = current(controller) else {
                continue;
            };
            let Ok(entries) = std::fs::read_dir(&parent) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let Some(pid) = name
                    .strip_prefix("git-sandbox-")
                    .and_then(|p| p.parse::<i32>().ok())
                else {
                    continue;
                };
                if crate::util::pid_alive(pid) {
                    continue;
                }
                let procs =
                    std::fs::read_to_string(entry.path().join("cgroup.procs")).unwrap_or_default();
                if procs.trim().is_empty() {
                    let _ = std::fs::remove_dir(entry.path());
                }
            }
        }
    });
}

fn counter(file: &Path, key: &str) -> u64 {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0)
}
