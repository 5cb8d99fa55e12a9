//! Supervising one test command: its own session and process group, stdin from /dev/null,
//! output to a capped log with the tail kept, a wall timeout that ends the whole group
//! (terminate, grace, kill), and resource usage from `wait4`.

use crate::model::Resources;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a terminated process group gets before it is killed.
const GRACE: Duration = Duration::from_millis(1500);
/// How much of the end of the output the record keeps.
const TAIL_BYTES: usize = 4096;
const TAIL_LINES: usize = 40;

pub enum Output<'a> {
    /// Capture stdout and stderr together into `log`, at most `cap` bytes.
    Capture { log: &'a Path, cap: u64 },
    /// Pass the caller's stdout and stderr through (for `exec`).
    Inherit,
}

pub struct Spec<'a> {
    pub command: &'a str,
    pub cwd: &'a Path,
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    pub output: Output<'a>,
    pub cpu_seconds: u64,
    pub open_files: u64,
    /// Set from outside (Ctrl-C) to stop the run early.
    pub interrupt: &'a AtomicBool,
}

#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// `timeout`, `output`, `cpu`, `interrupt` or `signal`: what ended the run early.
    pub killed_by: Option<String>,
    pub duration: Duration,
    pub resources: Resources,
    pub output_tail: String,
    /// The whole captured output (up to the cap), for parsers.
    pub output: Vec<u8>,
    pub truncated: bool,
    pub log: Option<PathBuf>,
    /// The command could not be started at all.
    pub spawn_error: Option<String>,
}

enum Event {
    Exited(i32, libc::rusage),
    OutputCapped,
}

pub fn run(spec: Spec<'_>) -> Outcome {
    let started = Instant::now();
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(spec.command)
        .current_dir(spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null());
    let (cpu, nofile) = (spec.cpu_seconds, spec.open_files);
    // SAFETY: only async-signal-safe calls (setsid, setrlimit) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let set = |res, soft: u64, hard: u64| {
                let lim = libc::rlimit {
                    rlim_cur: soft,
                    rlim_max: hard,
                };
                libc::setrlimit(res, &lim);
            };
            set(libc::RLIMIT_CORE, 0, 0);
            if cpu > 0 {
                set(libc::RLIMIT_CPU, cpu, cpu + 1);
            }
            if nofile > 0 {
                set(libc::RLIMIT_NOFILE, nofile, nofile);
            }
            Ok(())
        });
    }
    let mut reader = None;
    let capture = match spec.output {
        Output::Capture { log, cap } => {
            let (r, w) = match std::io::pipe() {
                Ok(p) => p,
                Err(e) => return spawn_failed(started, format!("cannot create a pipe: {e}")),
            };
            let w2 = match w.try_clone() {
                Ok(w2) => w2,
                Err(e) => return spawn_failed(started, format!("cannot create a pipe: {e}")),
            };
            cmd.stdout(w).stderr(w2);
            reader = Some(r);
            Some((log, cap))
        }
        Output::Inherit => None,
    };
    let child = cmd.spawn();
    drop(cmd); // closes our copies of the pipe's write end
    let child = match child {
        Ok(c) => c,
        Err(e) => return spawn_failed(started, format!("cannot start /bin/sh: {e}")),
    };
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = mpsc::channel::<Event>();

    let capped = std::sync::Arc::new(AtomicBool::new(false));
    let collector = match (reader, capture) {
        (Some(r), Some((log, cap))) => {
            let tx = tx.clone();
            let log = log.to_path_buf();
            let capped = capped.clone();
            Some(std::thread::spawn(move || {
                collect(r, &log, cap, &capped, tx)
            }))
        }
        _ => None,
    };
    {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut status = 0;
            // SAFETY: plain FFI call with valid pointers; rusage is plain old data.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            loop {
                let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
                if r == pid
                    || (r < 0
                        && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR))
                {
                    break;
                }
            }
            let _ = tx.send(Event::Exited(status, usage));
        });
    }
    drop(tx);
    std::mem::forget(child); // reaped by wait4 above

    let deadline = started + spec.timeout;
    let mut killed_by: Option<String> = None;
    let mut term_sent: Option<Instant> = None;
    let mut exit: Option<(i32, libc::rusage)> = None;
    while exit.is_none() {
        let now = Instant::now();
        let wait = if let Some(t) = term_sent {
            (t + GRACE).saturating_duration_since(now)
        } else {
            deadline.saturating_duration_since(now)
        }
        .min(Duration::from_millis(50));
        match rx.recv_timeout(wait) {
            Ok(Event::Exited(status, usage)) => exit = Some((status, usage)),
            Ok(Event::OutputCapped) => stop(pid, &mut killed_by, &mut term_sent, "output"),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if exit.is_some() {
            break;
        }
        let now = Instant::now();
        if spec.interrupt.load(Ordering::Relaxed) {
            stop(pid, &mut killed_by, &mut term_sent, "interrupt");
        }
        if now >= deadline {
            stop(pid, &mut killed_by, &mut term_sent, "timeout");
        }
        if let Some(t) = term_sent {
            if now >= t + GRACE {
                // SAFETY: signalling our own child's process group.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
        }
    }
    // Whatever the command left behind in its group goes with it.
    // SAFETY: signalling our own child's process group.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    let duration = started.elapsed();

    let mut out = Outcome {
        duration,
        ..Outcome::default()
    };
    if let Some((status, usage)) = exit {
        if libc::WIFEXITED(status) {
            out.exit_code = Some(libc::WEXITSTATUS(status));
        } else if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            out.signal = Some(sig);
            if killed_by.is_none() {
                killed_by = Some(if sig == libc::SIGXCPU {
                    "cpu".into()
                } else {
                    "signal".into()
                });
            }
        }
        let ms = |t: libc::timeval| (t.tv_sec as u64) * 1000 + (t.tv_usec as u64) / 1000;
        out.resources = Resources {
            cpu_ms: ms(usage.ru_utime) + ms(usage.ru_stime),
            max_rss_kb: usage.ru_maxrss.max(0) as u64,
        };
    }
    out.killed_by = killed_by;
    if let Some(handle) = collector {
        // An escaped process may hold the pipe open: wait a bounded time, then move on.
        let until = Instant::now() + Duration::from_secs(1);
        while !handle.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        if handle.is_finished() {
            if let Ok(Collected { output, tail, log }) = handle.join() {
                out.output = output;
                out.output_tail = tail;
                out.log = log;
            }
        }
        out.truncated = capped.load(Ordering::Relaxed);
    }
    out
}

fn stop(
    pid: libc::pid_t,
    killed_by: &mut Option<String>,
    term_sent: &mut Option<Instant>,
    why: &str,
) {
    if term_sent.is_none() {
        *killed_by = Some(why.to_string());
        *term_sent = Some(Instant::now());
        // SAFETY: signalling our own child's process group.
        unsafe { libc::kill(-pid, libc::SIGTERM) };
    }
}

fn spawn_failed(started: Instant, message: String) -> Outcome {
    Outcome {
        duration: started.elapsed(),
        spawn_error: Some(message),
        ..Outcome::default()
    }
}

struct Collected {
    output: Vec<u8>,
    tail: String,
    log: Option<PathBuf>,
}

fn collect(
    mut r: std::io::PipeReader,
    log: &Path,
    cap: u64,
    capped: &AtomicBool,
    tx: mpsc::Sender<Event>,
) -> Collected {
    if let Some(dir) = log.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let mut file = std::fs::File::create(log).ok();
    let mut kept: Vec<u8> = Vec::new();
    let mut tail: VecDeque<u8> = VecDeque::with_capacity(TAIL_BYTES);
    let mut total: u64 = 0;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let chunk = &buf[..n];
        let room = cap.saturating_sub(total) as usize;
        let keep = &chunk[..chunk.len().min(room)];
        if !keep.is_empty() {
            if let Some(f) = file.as_mut() {
                let _ = f.write_all(keep);
            }
            kept.extend_from_slice(keep);
        }
        total += n as u64;
        for &b in chunk {
            if tail.len() == TAIL_BYTES {
                tail.pop_front();
            }
            tail.push_back(b);
        }
        if total > cap && !capped.swap(true, Ordering::Relaxed) {
            let _ = tx.send(Event::OutputCapped);
        }
    }
    if capped.load(Ordering::Relaxed) {
        if let Some(f) = file.as_mut() {
            let _ = writeln!(
                f,
                "\n[git-sandbox: output capped at {cap} bytes; the command was stopped]"
            );
        }
    }
    let tail: Vec<u8> = tail.into_iter().collect();
    Collected {
        output: kept,
        tail: tail_lines(&tail),
        log: file.map(|_| log.to_path_buf()),
    }
}

/// The last lines of `bytes` as text (lossy for output that is not UTF-8).
pub fn tail_lines(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    let mut s = lines[start..].join("\n");
    // Drop a partial first line that the byte window cut through.
    if bytes.len() >= TAIL_BYTES && start == 0 {
        if let Some(i) = s.find('\n') {
            s = s[i + 1..].to_string();
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(cmd: &'a str, dir: &'a Path, log: &'a Path, flag: &'a AtomicBool) -> Spec<'a> {
        Spec {
            command: cmd,
            cwd: dir,
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            timeout: Duration::from_secs(10),
            output: Output::Capture { log, cap: 1 << 20 },
            cpu_seconds: 0,
            open_files: 0,
            interrupt: flag,
        }
    }

    #[test]
    fn exit_codes_output_and_env_scrub() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("l.log");
        let flag = AtomicBool::new(false);
        let o = run(spec(
            "echo hello; echo oops >&2; echo ${GITHUB_TOKEN:-none}; exit 3",
            d.path(),
            &log,
            &flag,
        ));
        assert_eq!(o.exit_code, Some(3));
        assert_eq!(o.killed_by, None);
        assert_eq!(o.output_tail, "hello\noops\nnone");
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "hello\noops\nnone\n"
        );
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("l.log");
        let flag = AtomicBool::new(false);
        let marker = d.path().join("survivor");
        let cmd = format!("(sleep 3; touch {}) & sleep 30", marker.display());
        let mut s = spec(&cmd, d.path(), &log, &flag);
        s.timeout = Duration::from_millis(300);
        let o = run(s);
        assert_eq!(o.killed_by.as_deref(), Some("timeout"));
        assert!(o.duration < Duration::from_secs(3), "{:?}", o.duration);
        std::thread::sleep(Duration::from_millis(3500));
        assert!(!marker.exists(), "a background child outlived the timeout");
    }

    #[test]
    fn endless_output_is_capped_and_stopped() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("l.log");
        let flag = AtomicBool::new(false);
        let mut s = spec("yes", d.path(), &log, &flag);
        s.output = Output::Capture {
            log: &log,
            cap: 100_000,
        };
        let o = run(s);
        assert_eq!(o.killed_by.as_deref(), Some("output"));
        assert!(o.truncated);
        assert_eq!(o.output.len(), 100_000);
        assert!(std::fs::metadata(&log).unwrap().len() < 100_200);
    }

    #[test]
    fn missing_command_is_exit_127() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("l.log");
        let flag = AtomicBool::new(false);
        let o = run(spec("definitely-not-a-command-xyz", d.path(), &log, &flag));
        assert_eq!(o.exit_code, Some(127));
    }
}
