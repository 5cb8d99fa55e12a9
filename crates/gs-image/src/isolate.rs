//! Unpacking in a process of its own, `git-sandbox __image-unpack`: it enters a new user
//! namespace and unpacks there as its uid 0. As root, the supervisor maps that namespace's
//! 65,536 uids and gids onto a reserved range of unprivileged host ids ([`IMAGE_UID_BASE`]), so
//! the image's ownership is kept and the unpacking process holds no privilege on the host: a bug
//! in it writes as an unprivileged uid into the one directory it was handed (descriptor 3; it
//! cannot even reach the store by path). As another user, the namespace maps only that user
//! (ownership is not kept). Whiteouts (0/0 character devices) are made there, which Linux
//! allows in a user namespace since 5.8.

use crate::unpack::{self, Bounds, Unpacked, IMAGE_IDS};
use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// The hidden subcommand the unpacking process runs.
pub const SUBCOMMAND: &str = "__image-unpack";

/// Where an image's uid 0 lives on the host (as root): 65,536 ids from here, reserved.
pub const IMAGE_UID_BASE: u32 = 2_000_000_000;

/// How a layer is unpacked.
#[derive(Debug, Clone)]
pub enum How {
    /// In a process of its own (this executable's [`SUBCOMMAND`]), in a user namespace.
    Helper(std::path::PathBuf),
    /// In this process, owners not kept (unit tests).
    InProcess,
}

fn open_dir(dest: &Path) -> Result<OwnedFd, String> {
    let f = std::fs::File::open(dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    Ok(OwnedFd::from(f))
}

/// Unpack the layer blob at `blob` into the empty directory `dest`.
pub fn unpack_layer(
    how: &How,
    blob: &Path,
    dest: &Path,
    diff_id: &str,
    bounds: Bounds,
) -> Result<Unpacked, String> {
    let input = std::fs::File::open(blob).map_err(|e| format!("{}: {e}", blob.display()))?;
    let exe = match how {
        How::InProcess => return unpack::unpack(input, &open_dir(dest)?, diff_id, bounds, false),
        How::Helper(exe) => exe,
    };
    // SAFETY: no arguments.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        std::os::unix::fs::chown(dest, Some(IMAGE_UID_BASE), Some(IMAGE_UID_BASE))
            .map_err(|e| format!("{}: {e}", dest.display()))?;
    }
    let dir = open_dir(dest)?;
    let raw = dir.as_raw_fd();
    let mut cmd = Command::new(exe);
    cmd.arg(SUBCOMMAND)
        .arg(diff_id)
        .arg(bounds.bytes.to_string())
        .arg(bounds.members.to_string())
        .arg(if root { "mapped" } else { "self" })
        .env_clear()
        .stdin(Stdio::from(input))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: only dup2, which is async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(raw, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("starting {} {SUBCOMMAND}: {e}", exe.display()))?;
    drop(dir);
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    // As root, the process says when its namespace waits to be mapped; else its first line is
    // already its report.
    let mut line = String::new();
    if root {
        let _ = out.read_line(&mut line);
    }
    if root && line.trim() == "ready" {
        let pid = child.id();
        let map = format!("0 {IMAGE_UID_BASE} {IMAGE_IDS}\n");
        for file in ["uid_map", "gid_map"] {
            if let Err(e) = std::fs::write(format!("/proc/{pid}/{file}"), &map) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("mapping the unpacking process's ids: {e}"));
            }
        }
    }
    let mut rest = String::new();
    let _ = out.read_to_string(&mut rest);
    let mut err = String::new();
    let _ = child.stderr.take().expect("piped").read_to_string(&mut err);
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() {
        let why = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("it stopped without saying why");
        return Err(why.trim_start_matches("error: ").to_string());
    }
    let last = rest
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    serde_json::from_str(last).map_err(|e| format!("the unpacking process's report: {e}"))
}

/// The unpacking process: arguments after [`SUBCOMMAND`], the layer on stdin, its directory on
/// descriptor 3; the report on stdout, an error on stderr.
pub fn child_main(args: &[String]) -> i32 {
    match child(args) {
        Ok(done) => {
            println!("{}", serde_json::to_string(&done).unwrap_or_default());
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

fn child(args: &[String]) -> Result<Unpacked, String> {
    let [diff_id, bytes, members, mode] = args else {
        return Err(format!(
            "{SUBCOMMAND} is internal to git-sandbox: `git sandbox image pull` runs it"
        ));
    };
    let bounds = Bounds {
        bytes: bytes.parse().map_err(|_| "bad bounds")?,
        members: members.parse().map_err(|_| "bad bounds")?,
    };
    // SAFETY: descriptor 3 was handed to this process for this.
    let dir = unsafe { OwnedFd::from_raw_fd(3) };
    // SAFETY: plain calls; results checked.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if unsafe { libc::unshare(libc::CLONE_NEWUSER) } < 0 {
        return Err(format!(
            "no user namespace to unpack the image in ({}); this machine must allow them (kernel.unprivileged_userns_clone, user.max_user_namespaces)",
            std::io::Error::last_os_error()
        ));
    }
    let mapped = mode == "mapped";
    if mapped {
        println!("ready");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let start = std::time::Instant::now();
        while std::fs::read_to_string("/proc/self/gid_map").map_or(true, |m| m.trim().is_empty()) {
            if start.elapsed() > std::time::Duration::from_secs(10) {
                return Err("the supervisor did not map the unpacking process's ids".into());
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    } else {
        let _ = std::fs::write("/proc/self/setgroups", "deny");
        std::fs::write("/proc/self/uid_map", format!("0 {uid} 1\n"))
            .map_err(|e| format!("mapping uid: {e}"))?;
        std::fs::write("/proc/self/gid_map", format!("0 {gid} 1\n"))
            .map_err(|e| format!("mapping gid: {e}"))?;
    }
    // SAFETY: plain calls; results checked.
    unsafe {
        if mapped && libc::setgroups(0, std::ptr::null()) < 0 {
            return Err(format!("setgroups: {}", std::io::Error::last_os_error()));
        }
        if libc::setresgid(0, 0, 0) < 0 || libc::setresuid(0, 0, 0) < 0 {
            return Err(format!(
                "becoming the namespace's root: {}",
                std::io::Error::last_os_error()
            ));
        }
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    }
    unpack::unpack(std::io::stdin().lock(), &dir, diff_id, bounds, mapped)
}
