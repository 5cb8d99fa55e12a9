//! A real PostgreSQL server for a test: `initdb` into a temp dir and `postgres` on a free port of
//! 127.0.0.1, run as an unprivileged user when the test runs as root (the server refuses root),
//! stopped when dropped. The binaries come from PATH or Debian's /usr/lib/postgresql/*/bin.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub struct Postgres {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

fn binary(name: &str) -> PathBuf {
    if let Some(p) = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    }) {
        return p;
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin").join(name))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| {
        super::tools::missing(&format!("PostgreSQL's {name} (Debian's postgresql)"))
    })
}

fn as_user(cmd: &mut Command) {
    // SAFETY: plain getter.
    if unsafe { libc::geteuid() } == 0 {
        cmd.uid(65534).gid(65534);
    }
}

fn chown(path: &Path) {
    // SAFETY: plain getter.
    if unsafe { libc::geteuid() } == 0 {
        let _ = std::os::unix::fs::chown(path, Some(65534), Some(65534));
    }
}

impl Postgres {
    pub fn start() -> Postgres {
        let dir = tempfile::tempdir().unwrap();
        chown(dir.path());
        let data = dir.path().join("data");
        let sock = dir.path().join("sock");
        std::fs::create_dir(&sock).unwrap();
        chown(&sock);
        let mut init = Command::new(binary("initdb"));
        init.arg("-D")
            .arg(&data)
            .args([
                "-U",
                "sandbox",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ])
            .env("LC_ALL", "C")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        as_user(&mut init);
        let o = init.output().unwrap();
        assert!(
            o.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let child = serve(&data, &sock, port);
        let pg = Postgres { child, port, dir };
        pg.wait_ready();
        pg
    }

    fn wait_ready(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            if postgres::Client::connect(&self.url("postgres"), postgres::NoTls).is_ok() {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "PostgreSQL did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Stop the server (SIGINT, a fast shutdown: every connection is cut).
    pub fn stop(&mut self) {
        // SAFETY: signalling the child we spawned.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let _ = self.child.wait();
    }

    /// Start it again, on the same data and port.
    pub fn restart(&mut self) {
        self.child = serve(
            &self.dir.path().join("data"),
            &self.dir.path().join("sock"),
            self.port,
        );
        self.wait_ready();
    }

    /// The URL of database `db`.
    /// The port it listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self, db: &str) -> String {
        format!("postgres://sandbox@127.0.0.1:{}/{db}", self.port)
    }

    /// A new empty database; its URL.
    pub fn database(&self, name: &str) -> String {
        let mut c = postgres::Client::connect(&self.url("postgres"), postgres::NoTls).unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        self.url(name)
    }
}

fn serve(data: &Path, sock: &Path, port: u16) -> Child {
    let mut server = Command::new(binary("postgres"));
    server
        .arg("-D")
        .arg(data)
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-k"])
        .arg(sock)
        .args([
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    as_user(&mut server);
    server.spawn().unwrap()
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.stop();
        }
    }
}
