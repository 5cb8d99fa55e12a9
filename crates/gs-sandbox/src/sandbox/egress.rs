//! The way out of a run that may reach the network but not the host's namespace. The run has a
//! network namespace of its own (loopback only); the namespace's init listens on its
//! 127.0.0.1 and hands the listening socket to the supervisor (`SCM_RIGHTS`, on the report
//! socket, before the report): the supervisor, in the host's namespace, accepts there and serves
//! git-sandbox's proxy (`gs_egress`), which reaches only the hosts the policy allows. No veth, no
//! route, no capability on the host: the socket is the only door.
//!
//! The first byte on the report socket says whether the listener follows (`L`, with it) or could
//! not be made (`N`); the report comes after it.

use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::net::UnixStream;

const WITH: u8 = b'L';
const WITHOUT: u8 = b'N';

/// In the run's namespace, its loopback up: listen on 127.0.0.1 (a port the kernel picks) and
/// hand the socket to the supervisor over `sock`. Returns the port; on an error the supervisor
/// is told there is no listener (and the run has no way out).
pub(super) fn listen_and_send(sock: RawFd) -> Result<u16, String> {
    let made = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| Ok((l.local_addr()?.port(), l)))
        .map_err(|e| format!("cannot listen on the run's 127.0.0.1: {e}"));
    match made {
        Ok((port, listener)) => {
            send(sock, WITH, Some(listener.as_raw_fd()))?;
            // Our copy closes with `listener`; the supervisor's stays open.
            Ok(port)
        }
        Err(e) => {
            let _ = send(sock, WITHOUT, None);
            Err(e)
        }
    }
}

/// Tell the supervisor no listener comes (no network namespace to make one in).
pub(super) fn send_none(sock: RawFd) {
    let _ = send(sock, WITHOUT, None);
}

/// The variables that point the run's clients at the proxy. `NO_PROXY` keeps the run's own
/// loopback direct: its tests may serve and call their own servers there.
pub(super) fn proxy_env(port: u16) -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{port}");
    let mut env: Vec<(String, String)> = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ]
    .iter()
    .map(|k| (k.to_string(), url.clone()))
    .collect();
    for k in ["NO_PROXY", "no_proxy"] {
        env.push((k.into(), "localhost,127.0.0.1,::1".into()));
    }
    env
}

/// The system's trust store and the user's CA files as one PEM bundle in `dir` (named by its
/// content, written once, readable by the runs: certificates are public), for the run's TLS
/// clients; the error names the file and what is wrong with it.
pub fn ca_bundle(
    dir: &std::path::Path,
    files: &[std::path::PathBuf],
) -> Result<std::path::PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    const SYSTEM: &[&str] = &[
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/cert.pem",
    ];
    const MAX: u64 = 1 << 20;
    let mut pem = SYSTEM
        .iter()
        .find_map(|p| std::fs::read(p).ok())
        .unwrap_or_default();
    for f in files {
        let text = std::fs::File::open(f)
            .and_then(|file| {
                let mut b = Vec::new();
                std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX + 1), &mut b)?;
                Ok(b)
            })
            .map_err(|e| format!("cannot read {}: {e}", f.display()))?;
        if text.len() as u64 > MAX {
            return Err(format!("{} is over 1 MiB: not a CA file", f.display()));
        }
        if !text
            .windows(27)
            .any(|w| w == b"-----BEGIN CERTIFICATE-----")
        {
            return Err(format!(
                "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                f.display()
            ));
        }
        pem.push(b'\n');
        pem.extend_from_slice(&text);
    }
    let path = dir.join(format!("bundle-{}.pem", gs_util::fnv64_hex(&pem)));
    if path.is_file() {
        return Ok(path);
    }
    let io = |e: std::io::Error| format!("cannot write the CA bundle in {}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(io)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
    let tmp = dir.join(format!(".bundle-{}.tmp", std::process::id()));
    std::fs::write(&tmp, &pem).map_err(io)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)?;
    Ok(path)
}

/// The variables that point the run's TLS clients (OpenSSL, curl, git, Python's requests and
/// pip, Node, cargo) at a CA bundle.
pub fn ca_env(bundle: &std::path::Path) -> Vec<(String, String)> {
    let b = bundle.display().to_string();
    [
        "SSL_CERT_FILE",
        "CURL_CA_BUNDLE",
        "GIT_SSL_CAINFO",
        "REQUESTS_CA_BUNDLE",
        "PIP_CERT",
        "NODE_EXTRA_CA_CERTS",
        "CARGO_HTTP_CAINFO",
    ]
    .iter()
    .map(|k| (k.to_string(), b.clone()))
    .collect()
}

fn send(sock: RawFd, byte: u8, pass: Option<RawFd>) -> Result<(), String> {
    let data = [byte];
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: 1,
    };
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: msghdr is plain old data; every pointer in it points at live locals.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if let Some(fd) = pass {
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = space as _;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
        }
        if libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) != 1 {
            return Err(format!(
                "cannot hand the proxy's socket over: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// What came first on the report socket.
pub enum Received {
    /// The listener.
    Listener(TcpListener),
    /// The helper made none (or the socket ended).
    Nothing,
    /// Not a marker: the report's first byte (a helper that failed before its namespaces).
    Report(u8),
}

/// The supervisor's side: the first byte on the report socket, and the listener with it.
pub fn receive(sock: &UnixStream) -> Received {
    let mut data = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: as in `send`; a descriptor received is owned by the listener made from it, and
    // MSG_CMSG_CLOEXEC keeps it from any child of this process.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let n = loop {
            let n = libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break n;
            }
        };
        if n != 1 {
            return Received::Nothing;
        }
        let c = libc::CMSG_FIRSTHDR(&msg);
        let fd = (!c.is_null()
            && (*c).cmsg_level == libc::SOL_SOCKET
            && (*c).cmsg_type == libc::SCM_RIGHTS)
            .then(|| std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<RawFd>()));
        // A descriptor is ours once received, whatever came with it: owned (and closed) here.
        let listener = fd.map(|fd| TcpListener::from_raw_fd(fd));
        match (data[0], listener) {
            (WITH, Some(l)) => Received::Listener(l),
            (WITH | WITHOUT, _) => Received::Nothing,
            (b, _) => Received::Report(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_handed_over_accepts_what_was_sent_to_it() {
        let (r, w) = UnixStream::pair().unwrap();
        let port = listen_and_send(w.as_raw_fd()).unwrap();
        let Received::Listener(listener) = receive(&r) else {
            panic!("no listener")
        };
        assert_eq!(listener.local_addr().unwrap().port(), port);
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        std::io::Write::write_all(&mut c, b"hi").unwrap();
        let (mut s, _) = listener.accept().unwrap();
        let mut got = [0u8; 2];
        std::io::Read::read_exact(&mut s, &mut got).unwrap();
        assert_eq!(&got, b"hi");
        // Nothing follows but what the helper writes next.
        send_none(w.as_raw_fd());
        assert!(matches!(receive(&r), Received::Nothing));
        // A helper that failed first writes its report alone: its first byte is given back.
        std::io::Write::write_all(&mut &w, b"{}").unwrap();
        assert!(matches!(receive(&r), Received::Report(b'{')));
        drop(w);
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut &r, &mut rest).unwrap();
        assert_eq!(rest, "}", "the rest of the report stays to be read");
        assert!(
            matches!(receive(&r), Received::Nothing),
            "the end is no listener"
        );
    }

    #[test]
    fn a_ca_bundle_joins_the_users_certificates_and_names_a_bad_file() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let pem = d.path().join("corp.pem");
        std::fs::write(
            &pem,
            "-----BEGIN CERTIFICATE-----\nCORP\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let out = d.path().join("ca");
        let b = ca_bundle(&out, std::slice::from_ref(&pem)).unwrap();
        assert!(std::fs::read_to_string(&b).unwrap().contains("CORP"));
        let mode = std::fs::metadata(&b).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644, "the runs' uids read it");
        assert_eq!(
            ca_bundle(&out, &[pem]).unwrap(),
            b,
            "the same content, the same file"
        );
        let not_pem = d.path().join("key.txt");
        std::fs::write(&not_pem, "secret").unwrap();
        let e = ca_bundle(&out, std::slice::from_ref(&not_pem)).unwrap_err();
        assert_eq!(
            e,
            format!(
                "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                not_pem.display()
            )
        );
        let e = ca_bundle(&out, &[d.path().join("gone.pem")]).unwrap_err();
        assert!(e.starts_with("cannot read "), "{e}");
    }
}
