//! A memory + pids (+ cpu, with `[limits] cpu_cores`) cgroup for one run, nested under the cgroup the supervisor is in: with the
//! v1 controllers where they are mounted (one directory per controller), else in a delegated
//! cgroup v2 subtree. Named after the helper's pid, so the supervisor can find it, read what was
//! hit, kill what is left and remove it.
//!
//! Under v2 a cgroup with processes cannot hand controllers to its children (the "no internal
//! processes" rule): the first run moves every process of the supervisor's cgroup into a leaf
//! of its own ([`LEAF`]) before `+memory +pids` is written to that cgroup's
//! `cgroup.subtree_control`, and the runs' cgroups are the leaf's siblings.
//!
//! The CPU quota is apart from the rest: `+cpu` is written on its own, and a machine without the
//! cpu controller (v1: not mounted; v2: not delegated) loses only the quota, which the run's
//! record then does not show, and the cgroup layer's description says why.

use std::path::{Path, PathBuf};

const ROOT: &str = "/sys/fs/cgroup";
/// The v2 leaf the supervisor's processes move into.
pub const LEAF: &str = "git-sandbox-supervisor";

/// The run's cgroup directories, one per controller (the same one under v2).
#[derive(Debug, Clone)]
pub struct RunCgroup {
    pub memory: PathBuf,
    pub pids: PathBuf,
    /// v1: the cpu controller's directory, where it is mounted; v2: the run's one directory.
    pub cpu: Option<PathBuf>,
    pub v2: bool,
}

/// The CPU quota's period: 100 ms, the kernel's default (a quota is at least 1 ms of it).
const CPU_PERIOD_US: u64 = 100_000;

/// This process's cgroup path for a v1 controller, from /proc/self/cgroup.
fn current(controller: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    v1_path(&text, controller)
}

fn v1_path(text: &str, controller: &str) -> Option<PathBuf> {
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

/// Where the runs' cgroups go under v2: the supervisor's cgroup (the `0::` line), or its parent
/// once the supervisor is in its own leaf. `None` when /sys/fs/cgroup is no v2 hierarchy.
fn v2_base(text: &str, unified: bool) -> Option<PathBuf> {
    if !unified {
        return None;
    }
    let path = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = Path::new(ROOT).join(path.trim().trim_start_matches('/'));
    if dir.file_name().is_some_and(|n| n == LEAF) {
        return dir.parent().map(Path::to_path_buf);
    }
    Some(dir)
}

/// The v1 (memory, pids) directories the runs' cgroups go under, else the v2 one.
fn parents() -> Option<(PathBuf, PathBuf, bool)> {
    if let (Some(m), Some(p)) = (current("memory"), current("pids")) {
        return Some((m, p, false));
    }
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let unified = Path::new(ROOT).join("cgroup.controllers").is_file();
    v2_base(&text, unified).map(|b| (b.clone(), b, true))
}

fn io(what: &str, p: &Path, e: std::io::Error) -> String {
    format!("{what} {}: {}", p.display(), super::errno_text(&e))
}

fn write(dir: &Path, file: &str, value: &str) -> Result<(), String> {
    let p = dir.join(file);
    std::fs::write(&p, value).map_err(|e| io("write", &p, e))
}

/// Give the memory and pids controllers to the children of `parent` (v2), moving its processes
/// into [`LEAF`] first. Done once; later runs find the controllers on.
fn enable_v2(parent: &Path) -> Result<(), String> {
    let on = |file: &str| {
        let text = std::fs::read_to_string(parent.join(file)).unwrap_or_default();
        let words: Vec<&str> = text.split_whitespace().collect();
        words.contains(&"memory") && words.contains(&"pids")
    };
    if on("cgroup.subtree_control") {
        return Ok(());
    }
    if !on("cgroup.controllers") {
        return Err(format!(
            "the memory and pids controllers are not delegated to {} (cgroup v2: its parent's cgroup.subtree_control needs +memory +pids)",
            parent.display()
        ));
    }
    let leaf = parent.join(LEAF);
    if let Err(e) = std::fs::create_dir(&leaf) {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(io("mkdir", &leaf, e));
        }
    }
    let procs = std::fs::read_to_string(parent.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.split_whitespace() {
        // A process that exited meanwhile is no matter; one that cannot move makes the write
        // below fail, which says so.
        let _ = write(&leaf, "cgroup.procs", pid);
    }
    write(parent, "cgroup.subtree_control", "+memory +pids")
}

impl RunCgroup {
    /// Where the cgroup of the helper with `pid` lives (the helper inherits our cgroups).
    pub fn for_helper(pid: i32) -> Option<RunCgroup> {
        let name = format!("git-sandbox-{pid}");
        let (memory, pids, v2) = parents()?;
        let cpu = if v2 {
            Some(memory.join(&name))
        } else {
            current("cpu").map(|c| c.join(&name))
        };
        Some(RunCgroup {
            memory: memory.join(&name),
            pids: pids.join(&name),
            cpu,
            v2,
        })
    }

    /// Create it, set the limits and move the calling process in. Returns a description, which
    /// says why a CPU quota asked for (`cpu_millicores` > 0) could not be set.
    pub fn create_and_join(
        &self,
        memory_mb: u64,
        processes: u64,
        cpu_millicores: u64,
    ) -> Result<String, String> {
        let made = if self.v2 {
            self.create_and_join_v2(memory_mb, processes)?
        } else {
            self.create_and_join_v1(memory_mb, processes)?
        };
        if cpu_millicores == 0 {
            return Ok(made);
        }
        Ok(match self.cpu_quota(cpu_millicores) {
            Ok(()) => format!(
                "{made}; a CPU quota of {} cores",
                gs_util::cores_text(cpu_millicores)
            ),
            Err(e) => format!("{made}; no CPU quota: {e}"),
        })
    }

    /// The CPU quota, in a cgroup of the cpu controller (v1) or the run's own (v2, where
    /// `+cpu` goes to the parent's `cgroup.subtree_control` on its own).
    fn cpu_quota(&self, millicores: u64) -> Result<(), String> {
        let quota = (millicores * CPU_PERIOD_US / 1000).to_string();
        let Some(dir) = &self.cpu else {
            return Err("the cpu controller is not mounted (cgroup v1)".into());
        };
        if self.v2 {
            let parent = dir.parent().ok_or("no parent cgroup")?;
            let has = |file: &str| {
                std::fs::read_to_string(parent.join(file))
                    .unwrap_or_default()
                    .split_whitespace()
                    .any(|w| w == "cpu")
            };
            if !has("cgroup.subtree_control") {
                if !has("cgroup.controllers") {
                    return Err(format!(
                        "the cpu controller is not delegated to {} (cgroup v2: its parent's cgroup.subtree_control needs +cpu)",
                        parent.display()
                    ));
                }
                write(parent, "cgroup.subtree_control", "+cpu")?;
            }
            return write(dir, "cpu.max", &format!("{quota} {CPU_PERIOD_US}"));
        }
        std::fs::create_dir(dir).map_err(|e| io("mkdir", dir, e))?;
        write(dir, "cpu.cfs_period_us", &CPU_PERIOD_US.to_string())?;
        write(dir, "cpu.cfs_quota_us", &quota)?;
        write(dir, "tasks", "0")
    }

    fn create_and_join_v1(&self, memory_mb: u64, processes: u64) -> Result<String, String> {
        for dir in [&self.memory, &self.pids] {
            std::fs::create_dir(dir).map_err(|e| io("mkdir", dir, e))?;
        }
        if memory_mb > 0 {
            let bytes = memory_mb.saturating_mul(1024 * 1024).to_string();
            write(&self.memory, "memory.limit_in_bytes", &bytes)?;
            // Swap counts too where the kernel accounts it; absent otherwise.
            let _ = write(&self.memory, "memory.memsw.limit_in_bytes", &bytes);
        }
        if processes > 0 {
            write(&self.pids, "pids.max", &processes.to_string())?;
        }
        // "0" into `tasks` moves the calling thread only, and the kernel then skips the global
        // lock that moving a whole process (`cgroup.procs`) takes: that lock waits for an RCU
        // grace period, 7-15 ms per run on this machine kind, against 0.5 ms. The helper is
        // single-threaded, and every process of the run is forked by this thread afterwards,
        // so the whole run is inside either way.
        write(&self.memory, "tasks", "0")?;
        write(&self.pids, "tasks", "0")?;
        Ok("memory and pids (cgroup v1), nested under the supervisor's cgroup".into())
    }

    fn create_and_join_v2(&self, memory_mb: u64, processes: u64) -> Result<String, String> {
        let dir = &self.memory;
        let parent = dir.parent().ok_or("no parent cgroup")?;
        enable_v2(parent)?;
        std::fs::create_dir(dir).map_err(|e| io("mkdir", dir, e))?;
        if memory_mb > 0 {
            let bytes = memory_mb.saturating_mul(1024 * 1024).to_string();
            write(dir, "memory.max", &bytes)?;
            // No swap beyond it, as v1's memsw limit; absent where swap is not accounted.
            let _ = write(dir, "memory.swap.max", "0");
        }
        if processes > 0 {
            write(dir, "pids.max", &processes.to_string())?;
        }
        write(dir, "cgroup.procs", "0")?;
        Ok(
            "memory and pids (cgroup v2), beside the supervisor's leaf in its delegated cgroup"
                .into(),
        )
    }

    /// The limits the kernel holds for this cgroup: (memory MiB, pids max, CPU quota in
    /// thousandths of a core); `None` is no limit.
    pub fn read_limits(&self) -> (Option<u64>, Option<u64>, Option<u64>) {
        let read = |p: PathBuf| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        };
        let file = if self.v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        // v2 says "max" for no limit, v1 a page-rounded i64::MAX.
        let memory = read(self.memory.join(file))
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|b| *b < (1u64 << 62))
            .map(|b| b / (1024 * 1024));
        let pids = read(self.pids.join("pids.max")).and_then(|s| s.parse::<u64>().ok());
        let cpu = self.cpu.as_ref().and_then(|dir| {
            // v2: "max 100000" (no quota) or "50000 100000"; v1: a quota of -1 is none.
            let (quota, period) = if self.v2 {
                let text = read(dir.join("cpu.max"))?;
                let (q, p) = text.split_once(' ')?;
                (q.parse::<u64>().ok()?, p.trim().parse::<u64>().ok()?)
            } else {
                (
                    read(dir.join("cpu.cfs_quota_us"))?.parse::<u64>().ok()?,
                    read(dir.join("cpu.cfs_period_us"))?.parse::<u64>().ok()?,
                )
            };
            (period > 0).then(|| quota * 1000 / period)
        });
        (memory, pids, cpu)
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
        let file = if self.v2 {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        counter(&self.memory.join(file), "oom_kill") > 0
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
        let mut dirs = vec![&self.memory];
        if !self.v2 {
            dirs.push(&self.pids);
            dirs.extend(self.cpu.as_ref().filter(|c| c.is_dir()));
        }
        for dir in dirs {
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
        let Some((memory, pids, v2)) = parents() else {
            return;
        };
        let dirs = if v2 {
            vec![memory]
        } else {
            let mut d = vec![memory, pids];
            d.extend(current("cpu"));
            d
        };
        for parent in dirs {
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
                if gs_util::pid_alive(pid) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_go_under_the_v1_controllers_else_beside_the_supervisors_v2_leaf() {
        let v1 = "8:pids:/\n4:memory:/process_api/abc\n0::/\n";
        assert_eq!(
            v1_path(v1, "memory"),
            Some(PathBuf::from("/sys/fs/cgroup/memory/process_api/abc"))
        );
        assert_eq!(
            v1_path(v1, "pids"),
            Some(PathBuf::from("/sys/fs/cgroup/pids"))
        );
        let v2 = "0::/user.slice/user-1000.slice/session-2.scope\n";
        assert_eq!(v1_path(v2, "memory"), None);
        let base = PathBuf::from("/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope");
        assert_eq!(v2_base(v2, true), Some(base.clone()));
        // Once the supervisor moved into its leaf, the runs are the leaf's siblings.
        let moved = format!("0::/user.slice/user-1000.slice/session-2.scope/{LEAF}\n");
        assert_eq!(v2_base(&moved, true), Some(base));
        assert_eq!(
            v2_base(v2, false),
            None,
            "no v2 hierarchy at /sys/fs/cgroup"
        );
    }

    #[test]
    fn a_v2_cgroup_without_the_controllers_says_what_to_delegate() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("cgroup.subtree_control"), "").unwrap();
        std::fs::write(d.path().join("cgroup.controllers"), "cpu io\n").unwrap();
        let e = enable_v2(d.path()).unwrap_err();
        assert!(e.contains("+memory +pids"), "{e}");
        std::fs::write(d.path().join("cgroup.subtree_control"), "cpu memory pids\n").unwrap();
        assert_eq!(enable_v2(d.path()), Ok(()), "already on: nothing moves");
        assert!(!d.path().join(LEAF).exists());
        // Delegated but not on: the processes move into the leaf, then the controllers go on.
        // (A plain directory stands in for the cgroup: each write is a file's whole content.)
        std::fs::write(d.path().join("cgroup.subtree_control"), "").unwrap();
        std::fs::write(d.path().join("cgroup.controllers"), "memory pids\n").unwrap();
        std::fs::write(d.path().join("cgroup.procs"), "4242\n").unwrap();
        assert_eq!(enable_v2(d.path()), Ok(()));
        let read = |p: &str| std::fs::read_to_string(d.path().join(p)).unwrap();
        assert_eq!(read(&format!("{LEAF}/cgroup.procs")), "4242");
        assert_eq!(read("cgroup.subtree_control"), "+memory +pids");
    }
}
