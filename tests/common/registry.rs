//! A real OCI registry for a test: Debian's `docker-registry` (the CNCF distribution registry)
//! on a free port of 127.0.0.1 with a temporary storage directory, stopped when dropped; and
//! images the tests make themselves: an OCI layout written here (layers gzipped, the config's
//! diff_ids, the manifest) and pushed with `skopeo copy`.

use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub struct Registry {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn on_path(name: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

impl Registry {
    pub fn start() -> Registry {
        let exe = on_path("docker-registry")
            .unwrap_or_else(|| super::tools::missing("Debian's docker-registry"));
        on_path("skopeo").unwrap_or_else(|| super::tools::missing("skopeo"));
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let child = Command::new(exe)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let r = Registry {
            child,
            port,
            _dir: dir,
        };
        let start = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed().as_secs() < 20,
                "docker-registry did not listen"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        r
    }

    /// `127.0.0.1:PORT`, as a reference and the user's config name it.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Push an image of `layers` (uncompressed tars, bottom first) as `name:tag`; its manifest's
    /// digest.
    pub fn push(&self, name: &str, tag: &str, image: &TestImage) -> String {
        let dir = tempfile::tempdir().unwrap();
        let layout = dir.path();
        let blobs = layout.join("blobs/sha256");
        std::fs::create_dir_all(&blobs).unwrap();
        let put = |bytes: &[u8]| -> (String, u64) {
            let d = sha256(bytes);
            std::fs::write(blobs.join(d.trim_start_matches("sha256:")), bytes).unwrap();
            (d, bytes.len() as u64)
        };
        let mut diff_ids = Vec::new();
        let mut layer_descs = Vec::new();
        for tar in &image.layers {
            diff_ids.push(sha256(tar));
            // A large layer goes as a plain tar (OCI allows it): gzip would only slow the test.
            let (d, size, media) = if tar.len() > 16 << 20 {
                let (d, size) = put(tar);
                (d, size, "application/vnd.oci.image.layer.v1.tar")
            } else {
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                gz.write_all(tar).unwrap();
                let (d, size) = put(&gz.finish().unwrap());
                (d, size, "application/vnd.oci.image.layer.v1.tar+gzip")
            };
            layer_descs.push(serde_json::json!({
                "mediaType": media, "digest": d, "size": size,
            }));
        }
        let mut config = serde_json::json!({
            "architecture": "amd64", "os": "linux",
            "config": {"Env": image.env},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        });
        if let Some(w) = &image.workdir {
            config["config"]["WorkingDir"] = w.clone().into();
        }
        let (cd, csize) = put(&serde_json::to_vec(&config).unwrap());
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": csize},
            "layers": layer_descs,
        });
        let (md, msize) = put(&serde_json::to_vec(&manifest).unwrap());
        std::fs::write(
            layout.join("oci-layout"),
            r#"{"imageLayoutVersion":"1.0.0"}"#,
        )
        .unwrap();
        let index = serde_json::json!({
            "schemaVersion": 2,
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": md, "size": msize,
                "annotations": {"org.opencontainers.image.ref.name": tag},
            }],
        });
        std::fs::write(
            layout.join("index.json"),
            serde_json::to_vec(&index).unwrap(),
        )
        .unwrap();
        // skopeo may compress a plain layer as it pushes, making another manifest: the digest
        // the registry holds is the one it writes to this file.
        let digest_file = layout.join("pushed-digest");
        let out = Command::new("skopeo")
            .args([
                "copy",
                "--quiet",
                "--insecure-policy",
                "--dest-tls-verify=false",
            ])
            .arg("--digestfile")
            .arg(&digest_file)
            .arg(format!("oci:{}:{tag}", layout.display()))
            .arg(format!("docker://{}/{name}:{tag}", self.host()))
            .env("HOME", layout)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "skopeo copy: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let pushed = std::fs::read_to_string(&digest_file).unwrap();
        let pushed = pushed.trim().to_string();
        // A gzip'd image arrives as written.
        if image.layers.iter().all(|l| l.len() <= 16 << 20) {
            assert_eq!(
                pushed, md,
                "skopeo pushed another manifest than the one written"
            );
        }
        pushed
    }
}

/// An image the tests make: layers (uncompressed tars, bottom first), `Env`, `WorkingDir`.
#[derive(Clone, Default)]
pub struct TestImage {
    pub layers: Vec<Vec<u8>>,
    pub env: Vec<String>,
    pub workdir: Option<String>,
}

/// A tar of entries: (path, contents) for files (mode 0755 under `bin/`, else 0644), a
/// `-> target` contents for a symlink.
pub fn tar_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, body) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        if let Some(target) = body.strip_prefix(b"-> ") {
            h.set_entry_type(tar::EntryType::Symlink);
            h.set_size(0);
            h.set_mode(0o777);
            b.append_link(&mut h, path, std::str::from_utf8(target).unwrap())
                .unwrap();
        } else if path.ends_with('/') {
            h.set_entry_type(tar::EntryType::Directory);
            h.set_size(0);
            h.set_mode(0o755);
            b.append_data(&mut h, path, &[][..]).unwrap();
        } else {
            h.set_entry_type(tar::EntryType::Regular);
            h.set_size(body.len() as u64);
            h.set_mode(if path.starts_with("bin/") {
                0o755
            } else {
                0o644
            });
            b.append_data(&mut h, path, *body).unwrap();
        }
    }
    b.into_inner().unwrap()
}

/// A root holding Debian's static busybox as `/bin/busybox` and its applets the tests use
/// (`/bin/sh` first of them): no python, no git.
pub fn busybox_root() -> Vec<u8> {
    let busybox = std::fs::read(Path::new("/bin/busybox"))
        .unwrap_or_else(|_| super::tools::missing("Debian's busybox-static (/bin/busybox)"));
    let mut entries: Vec<(&str, &[u8])> =
        vec![("bin/", b""), ("etc/", b""), ("bin/busybox", &busybox)];
    let applets = [
        "sh", "ls", "cat", "echo", "mkdir", "printf", "test", "id", "env", "pwd", "rm", "touch",
        "grep", "which", "stat", "cp", "head",
    ];
    let links: Vec<String> = applets.iter().map(|a| format!("bin/{a}")).collect();
    for l in &links {
        entries.push((l, b"-> busybox"));
    }
    entries.push(("etc/os-release", b"ID=test-busybox\n"));
    tar_of(&entries)
}

/// A member of a layer as an attacker writes it (see [`raw_tar`]).
pub enum Raw<'a> {
    File(&'a str, &'a [u8], u32),
    Hard(&'a str, &'a str),
    Symlink(&'a str, &'a str),
    Char(&'a str),
}

/// A tar with raw names and link targets (the tar crate's builder refuses `..` and absolute
/// names; an attacker's does not).
pub fn raw_tar(members: &[Raw]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for m in members {
        let mut h = tar::Header::new_gnu();
        let (name, kind, data, mode, link): (&str, tar::EntryType, &[u8], u32, Option<&str>) =
            match m {
                Raw::File(n, d, mode) => (n, tar::EntryType::Regular, d, *mode, None),
                Raw::Hard(n, t) => (n, tar::EntryType::Link, b"", 0o644, Some(t)),
                Raw::Symlink(n, t) => (n, tar::EntryType::Symlink, b"", 0o777, Some(t)),
                Raw::Char(n) => (n, tar::EntryType::Char, b"", 0o666, None),
            };
        let g = h.as_gnu_mut().unwrap();
        g.name[..name.len()].copy_from_slice(name.as_bytes());
        if let Some(l) = link {
            g.linkname[..l.len()].copy_from_slice(l.as_bytes());
        }
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(data.len() as u64);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        if kind == tar::EntryType::Char {
            h.set_device_major(1).unwrap();
            h.set_device_minor(1).unwrap();
        }
        h.set_cksum();
        b.append(&h, data).unwrap();
    }
    b.into_inner().unwrap()
}

/// Where `./test` keeps what it builds once per machine for the image tests, outside the clone:
/// a Debian root with python3 and pytest made by mmdebstrap (`debian-python.tar`) and click's
/// source distribution (`click-8.1.7.tar.gz`).
pub fn machine_cache() -> std::path::PathBuf {
    if let Some(d) = std::env::var_os("GIT_SANDBOX_TEST_CACHE") {
        return d.into();
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
        .unwrap_or_else(|| "/tmp".into());
    base.join("git-sandbox-tests")
}

/// A file of [`machine_cache`], or the test fails saying `./test` makes it.
pub fn cached(name: &str) -> std::path::PathBuf {
    let p = machine_cache().join(name);
    if !p.is_file() {
        super::tools::missing(&format!("{} (./test builds it)", p.display()));
    }
    p
}
