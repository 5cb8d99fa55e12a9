//! The door out of a network namespace: its one socket to the outside is a listener on its own
//! 127.0.0.1, made inside and handed to the supervisor (`SCM_RIGHTS`), which serves the
//! [`crate::Proxy`] on it from the host's namespace. No veth, no route, no capability on the
//! host: the socket is the only door. A sandboxed run and a Dockerfile's `RUN` both go out
//! through it.
//!
//! The first byte on the socket says whether the listener follows (`L`, with it) or could not
//! be made (`N`); whatever the namespace's side writes next comes after it.

use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::net::UnixStream;

const WITH: u8 = b'L';
const WITHOUT: u8 = b'N';

/// In the run's namespace, its loopback up: listen on 127.0.0.1 (a port the kernel picks) and
/// hand the socket to the supervisor over `sock`. Returns the port; on an error the supervisor
/// is told there is no listener (and the run has no way out).
pub fn listen_and_send(sock: RawFd) -> Result<u16, String> {
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
pub fn send_none(sock: RawFd) {
    let _ = send(sock, WITHOUT, None);
}

/// The variables that point the run's clients at the proxy. `NO_PROXY` keeps the run's own
/// loopback direct: its tests may serve and call their own servers there.
pub fn proxy_env(port: u16) -> Vec<(String, String)> {
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

/// Bring up `lo` in a new network namespace (the only interface it has).
pub fn loopback_up() -> Result<(), String> {
    let check = |r: libc::c_int, what: &str| {
        if r < 0 {
            Err(format!("{what}: {}", std::io::Error::last_os_error()))
        } else {
            Ok(())
        }
    };
    // SAFETY: plain socket/ioctl calls on a zeroed ifreq; the fd is closed on every path.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        check(fd, "socket")?;
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo\0".iter().enumerate() {
            ifr.ifr_name[i] = *b as libc::c_char;
        }
        let r = libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut ifr);
        if r < 0 {
            let e = check(r, "SIOCGIFFLAGS");
            libc::close(fd);
            return e;
        }
        ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        let r = libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &ifr);
        libc::close(fd);
        check(r, "SIOCSIFFLAGS")
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
}
