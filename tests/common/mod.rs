//! A hermetic world for driving the real binary: temp HOME, private data and config dirs, no
//! system or global git config, a fixed identity and fixed dates.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub mod fake_github;
pub mod http;
pub mod http_git;
pub mod postgres;
pub mod prism;
pub mod projects;
pub mod registry;
pub mod remotes;
pub mod shown;
pub mod tools;

pub const BIN: &str = env!("CARGO_BIN_EXE_git-sandbox");

pub struct World {
    pub tmp: tempfile::TempDir,
    pub extra_env: Vec<(String, String)>,
    /// Whether git has an identity (a fresh machine has none).
    pub identity: bool,
    /// Run every command (git and git-sandbox) as this unprivileged uid instead of ours.
    pub user: Option<u32>,
}

pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// This output, after checking the command succeeded (exit 0); panics with all of it
    /// otherwise.
    #[track_caller]
    pub fn success(self) -> Out {
        assert_eq!(self.code, 0, "the command failed: {self:?}");
        self
    }

    /// The error on stderr as (problem, hints): one `error:` line naming the problem, then only
    /// `hint:` lines; panics on any other shape.
    pub fn error(&self) -> (String, Vec<String>) {
        let mut lines = self.stderr.lines();
        let problem = lines
            .next()
            .and_then(|l| l.strip_prefix("error: "))
            .unwrap_or_else(|| panic!("no `error:` line first: {self:?}"))
            .to_string();
        let hints = lines
            .map(|l| {
                l.strip_prefix("hint: ")
                    .unwrap_or_else(|| panic!("not a `hint:` line: {l:?} in {self:?}"))
                    .to_string()
            })
            .collect();
        (problem, hints)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }
}

impl std::fmt::Debug for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// The exit code and both streams, with temporary directories written `[TMP]` (for messages
/// and snapshots that must not name this run's paths).
impl std::fmt::Display for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = format!("{self:?}");
        f.write_str(&shown::temp_paths(&text))
    }
}

fn out(o: Output) -> Out {
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

impl World {
    pub fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        for d in ["home", "data", "config", "work"] {
            std::fs::create_dir_all(tmp.path().join(d)).unwrap();
        }
        World {
            tmp,
            extra_env: Vec::new(),
            identity: true,
            user: None,
        }
    }

    /// A world whose commands all run as the unprivileged `nobody` (uid 65534), when this test
    /// runs as root; `None` otherwise (the caller then says why it skipped).
    pub fn unprivileged() -> Option<World> {
        // SAFETY: plain getter.
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        // `nobody` must be able to reach and run the binary (a checkout under /root cannot).
        use std::os::unix::fs::PermissionsExt;
        let reachable = Path::new(BIN)
            .ancestors()
            .all(|p| std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o001 != 0));
        if !reachable {
            eprintln!("{BIN} is out of reach of other users: the unprivileged variant is skipped");
            return None;
        }
        let mut w = World::new();
        w.user = Some(65534);
        w.own(w.tmp.path());
        Some(w)
    }

    /// Commands run with `./test`'s Python virtual environment first on `PATH` (a run's
    /// `python3 -m pytest` finds pytest), after checking that it imports `module`.
    /// The run sees the whole environment, not only its `bin`: `VIRTUAL_ENV` names it, and the
    /// sandbox keeps a toolchain's directory readable under a home it hides, and under /tmp
    /// (which runs get empty) when nobody but the caller could have written it.
    pub fn with_test_python(&mut self, module: &str) {
        let bin = tools::venv_bin(module);
        let venv = bin.parent().unwrap().to_path_buf();
        let path = std::env::var("PATH").unwrap_or_default();
        let path = format!("{}:{}:{path}", bin.display(), Self::bin_dir().display());
        self.extra_env.push(("PATH".into(), path));
        self.extra_env
            .push(("VIRTUAL_ENV".into(), venv.display().to_string()));
    }

    /// Give `path` and everything under it to the world's user (no-op for ourselves).
    pub fn own(&self, path: &Path) {
        let Some(uid) = self.user else { return };
        let _ = std::os::unix::fs::lchown(path, Some(uid), Some(uid));
        if path.is_dir() && !path.is_symlink() {
            for e in std::fs::read_dir(path).unwrap().flatten() {
                self.own(&e.path());
            }
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// `$GIT_SANDBOX_HOME`
    pub fn data(&self) -> PathBuf {
        self.path("data")
    }

    pub fn work(&self) -> PathBuf {
        self.path("work")
    }

    pub fn bin_dir() -> PathBuf {
        Path::new(BIN).parent().unwrap().to_path_buf()
    }

    fn apply(&self, cmd: &mut Command, path_with_bin: bool) {
        let path = std::env::var("PATH").unwrap_or_default();
        let path = if path_with_bin {
            format!("{}:{path}", Self::bin_dir().display())
        } else {
            path
        };
        cmd.env_clear()
            .env("PATH", path)
            .env("HOME", self.path("home"))
            .env("GIT_SANDBOX_HOME", self.data())
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env("XDG_DATA_HOME", self.path("home/.local/share"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", self.path("home/.gitconfig"))
            .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
            .env("TZ", "UTC")
            .env("LC_ALL", "C")
            .env("NO_COLOR", "1")
            // No test map made behind a test's back (a test of the map asks for it).
            .env("GIT_SANDBOX_NO_TEST_MAP", "1")
            .stdin(Stdio::null());
        if self.identity {
            cmd.env("GIT_AUTHOR_NAME", "Test Author")
                .env("GIT_AUTHOR_EMAIL", "author@example.com")
                .env("GIT_COMMITTER_NAME", "Test Committer")
                .env("GIT_COMMITTER_EMAIL", "committer@example.com");
        }
        if let Some(uid) = self.user {
            use std::os::unix::process::CommandExt;
            // Root's toolchains under its home are out of reach of another user.
            let system = "/usr/local/bin:/usr/bin:/bin";
            let path = if path_with_bin {
                format!("{}:{system}", Self::bin_dir().display())
            } else {
                system.to_string()
            };
            // std drops root's supplementary groups when it sets the uid.
            cmd.env("PATH", path).uid(uid).gid(uid);
        } else {
            for k in ["PYENV_ROOT", "CARGO_HOME", "RUSTUP_HOME"] {
                if let Ok(v) = std::env::var(k) {
                    cmd.env(k, v);
                }
            }
        }
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
    }

    /// The hermetic environment on a command of the caller's making.
    pub fn apply_env(&self, cmd: &mut Command) {
        self.apply(cmd, true);
    }

    /// Run `git-sandbox ARGS` in `dir`.
    pub fn sandbox(&self, dir: &Path, args: &[&str]) -> Out {
        self.sandbox_env(dir, args, &[])
    }

    pub fn sandbox_env(&self, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Out {
        let mut cmd = Command::new(BIN);
        cmd.args(args).current_dir(dir);
        self.apply(&mut cmd, true);
        cmd.envs(env.iter().copied());
        out(cmd.output().unwrap())
    }

    /// Run `git-sandbox ARGS` in `dir` with `input` on its stdin.
    pub fn sandbox_stdin(&self, dir: &Path, args: &[&str], input: &[u8]) -> Out {
        use std::io::Write;
        let mut cmd = Command::new(BIN);
        cmd.args(args).current_dir(dir);
        self.apply(&mut cmd, true);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        out(child.wait_with_output().unwrap())
    }

    /// Run git in `dir`; panics on failure.
    pub fn git(&self, dir: &Path, args: &[&str]) -> String {
        let o = self.git_out(dir, args, true);
        assert_eq!(o.code, 0, "git {args:?} failed: {o:?}");
        o.stdout
    }

    pub fn git_out(&self, dir: &Path, args: &[&str], path_with_bin: bool) -> Out {
        let mut cmd = Command::new("git");
        cmd.args(args).current_dir(dir);
        self.apply(&mut cmd, path_with_bin);
        out(cmd.output().unwrap())
    }

    /// A new experiment repository named `name` under the data dir; returns its path.
    pub fn new_repo(&self, name: &str) -> PathBuf {
        let o = self.sandbox(&self.work(), &["new", name, "--json"]);
        assert_eq!(o.code, 0, "{o:?}");
        PathBuf::from(o.json()["path"].as_str().unwrap())
    }

    /// Write files and commit them; returns the new commit id.
    pub fn commit(&self, repo: &Path, files: &[(&str, &str)], message: &str) -> String {
        for (rel, body) in files {
            let p = repo.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, body).unwrap();
            self.own(repo);
            self.git(repo, &["add", rel]);
        }
        self.git(repo, &["commit", "-q", "--allow-empty", "-m", message]);
        self.git(repo, &["rev-parse", "HEAD"]).trim().to_string()
    }

    /// Commit files on `branch` and come back to the branch checked out before; returns the
    /// new commit id.
    pub fn commit_on(
        &self,
        repo: &Path,
        branch: &str,
        files: &[(&str, &str)],
        message: &str,
    ) -> String {
        let back = self
            .git(repo, &["branch", "--show-current"])
            .trim()
            .to_string();
        self.git(repo, &["switch", "-q", branch]);
        let id = self.commit(repo, files, message);
        self.git(repo, &["switch", "-q", &back]);
        id
    }

    /// The log of a run of `commit` (under `$GIT_SANDBOX_HOME/logs/<repository id>/`).
    pub fn log_of(&self, commit: &str) -> PathBuf {
        for dir in std::fs::read_dir(self.data().join("logs"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let log = dir.path().join(format!("{commit}.log"));
            if log.exists() {
                return log;
            }
        }
        panic!(
            "no log for {commit} under {}",
            self.data().join("logs").display()
        )
    }

    /// What the tests of `commit`'s run have written to its log so far (pytest runs both
    /// phases in one session, with one log).
    pub fn tests_log_so_far(&self, commit: &str) -> String {
        std::fs::read_dir(self.data().join("logs"))
            .into_iter()
            .flatten()
            .flatten()
            .find_map(|d| std::fs::read_to_string(d.path().join(format!("{commit}.log"))).ok())
            .unwrap_or_default()
    }

    /// Write the user config (`$XDG_CONFIG_HOME/git-sandbox/config.toml`).
    pub fn user_config(&self, text: &str) {
        let cfg = self.path("config/git-sandbox");
        std::fs::create_dir_all(&cfg).unwrap();
        std::fs::write(cfg.join("config.toml"), text).unwrap();
    }

    /// Hand every notification to a command that appends it to a file (`[notify] command` in
    /// the user config); [`World::alerts_received`] reads them back.
    pub fn alerts_to_file(&self) {
        let out = self.path("alerts.jsonl");
        self.user_config(&format!(
            "[notify]\ncommand = \"cat >> {}; echo >> {}\"\n",
            out.display(),
            out.display()
        ));
    }

    /// The notifications the command of [`World::alerts_to_file`] got so far, in order.
    pub fn alerts_received(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.path("alerts.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Take `other`'s records as evidence: its `git sandbox key` line in this world's
    /// `allowed_signers`, named by `[trust]` added to the user config (call after
    /// [`World::user_config`], which replaces the file).
    pub fn trust(&self, other: &World) {
        let o = other.sandbox(&other.work(), &["key"]);
        assert_eq!(o.code, 0, "{o:?}");
        let cfg = self.path("config/git-sandbox");
        std::fs::create_dir_all(&cfg).unwrap();
        let file = cfg.join("allowed_signers");
        let mut lines = std::fs::read_to_string(&file).unwrap_or_default();
        lines.push_str(&o.stdout);
        std::fs::write(&file, lines).unwrap();
        let config = std::fs::read_to_string(cfg.join("config.toml")).unwrap_or_default();
        if !config.contains("[trust]") {
            std::fs::write(
                cfg.join("config.toml"),
                format!(
                    "{config}\n[trust]\nallowed_signers = \"{}\"\n",
                    file.display()
                ),
            )
            .unwrap();
        }
        self.own(&cfg);
    }

    pub fn note(&self, repo: &Path, rev: &str) -> Option<serde_json::Value> {
        let o = self.git_out(repo, &["notes", "--ref=sandbox", "show", rev], true);
        (o.code == 0).then(|| serde_json::from_str(&o.stdout).expect("note is JSON"))
    }
}

/// A background `git-sandbox` process (the daemon) that is killed when dropped.
pub struct Background {
    pub child: std::process::Child,
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl World {
    /// Start the daemon with `--http` on a free port of 127.0.0.1 and one worker; its address.
    pub fn serve(&self) -> (Background, String) {
        self.serve_with_workers(1)
    }

    /// [`World::serve`] with `workers` workers.
    pub fn serve_with_workers(&self, workers: u32) -> (Background, String) {
        let before = std::fs::read_to_string(self.path("daemon.log")).unwrap_or_default();
        let workers = workers.to_string();
        let d = self.spawn(
            &self.work(),
            &["daemon", "--workers", &workers, "--http", "127.0.0.1:0"],
        );
        let mut addr = None;
        let started = self.wait_until(30, || {
            let log = std::fs::read_to_string(self.path("daemon.log")).unwrap_or_default();
            addr = log[before.len().min(log.len())..]
                .lines()
                .find_map(|l| l.split("serving the dashboard at http://").nth(1))
                .and_then(|a| a.split('/').next())
                .map(str::to_string);
            addr.is_some()
        });
        assert!(
            started,
            "the daemon did not start serving: {}",
            std::fs::read_to_string(self.path("daemon.log")).unwrap_or_default()
        );
        (d, addr.unwrap())
    }

    /// A new API token of `role`; returns it.
    pub fn token(&self, role: &str) -> String {
        let o = self.sandbox(&self.work(), &["token", "create", "--role", role, "--json"]);
        assert_eq!(o.code, 0, "{o:?}");
        o.json()["token"].as_str().unwrap().to_string()
    }

    pub fn spawn(&self, dir: &Path, args: &[&str]) -> Background {
        self.spawn_env(dir, args, &[])
    }

    pub fn spawn_env(&self, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Background {
        let mut cmd = Command::new(BIN);
        cmd.args(args).current_dir(dir);
        self.apply(&mut cmd, true);
        cmd.envs(env.iter().copied());
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path("daemon.log"))
            .unwrap();
        cmd.stdout(Stdio::null()).stderr(log);
        Background {
            child: cmd.spawn().unwrap(),
        }
    }

    /// Poll `f` every 50 ms until it is true or `secs` pass.
    pub fn wait_until(&self, secs: u64, mut f: impl FnMut() -> bool) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while std::time::Instant::now() < deadline {
            if f() {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        f()
    }
}

/// A world whose runs find `bin_dir` first on PATH, and whose setup may download (the user
/// consented in their config).
pub fn online_world(bin_dir: &Path) -> World {
    let mut w = World::new();
    let path = std::env::var("PATH").unwrap_or_default();
    w.extra_env
        .push(("PATH".into(), format!("{}:{path}", bin_dir.display())));
    w.user_config("[limits]\nsetup_network = true\n");
    w
}

/// Every file and link under `dir` (directories walked, links not followed).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => out.extend(files_under(&p)),
            Ok(_) => out.push(p),
            Err(_) => {}
        }
    }
    out
}
