//! A git "smart HTTP" server for tests: 127.0.0.1 only, HTTP Basic authentication in front of
//! `git http-backend` (run as a CGI child per request), every request recorded.
//!
//! HTTP/1.1 without keep-alive: one request per connection, bodies by `Content-Length` or
//! `Transfer-Encoding: chunked` (git chunks pushes larger than `http.postBuffer`), at most 64 MiB.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

const MAX_BODY: usize = 64 << 20;
const MAX_HEAD: usize = 64 << 10;

/// A running server; stops accepting when dropped.
pub struct GitHttp {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<String>>>,
    accept: Option<JoinHandle<()>>,
}

struct Config {
    root: PathBuf,
    user: String,
    password: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl GitHttp {
    /// Serve every bare repository under `root` (e.g. root/shared.git) at
    /// http://127.0.0.1:PORT/<name>.git, accepting only Basic auth with user `user` and password
    /// `password` (GitHub takes user "x-access-token" and the token as password).
    pub fn start(root: &Path, user: &str, password: &str) -> GitHttp {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let config = Arc::new(Config {
            root: root.to_path_buf(),
            user: user.to_string(),
            password: password.to_string(),
            log: Arc::clone(&log),
        });
        let stopped = Arc::clone(&stop);
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = conn else { continue };
                let config = Arc::clone(&config);
                std::thread::spawn(move || serve(stream, &config));
            }
        });
        GitHttp {
            addr,
            stop,
            log,
            accept: Some(accept),
        }
    }

    /// "http://127.0.0.1:PORT" (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request seen so far, as "METHOD PATH?QUERY STATUS AUTH" where AUTH is `auth=ok`
    /// (valid credentials), `auth=bad` (wrong ones) or `auth=none` (no `Authorization`), e.g.
    /// "GET /shared.git/info/refs?service=git-receive-pack 401 auth=none".
    pub fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for GitHttp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag; connections in flight finish detached.
        if TcpStream::connect(self.addr).is_ok() {
            if let Some(t) = self.accept.take() {
                let _ = t.join();
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Auth {
    Ok,
    Bad,
    None,
}

impl Auth {
    fn label(self) -> &'static str {
        match self {
            Auth::Ok => "auth=ok",
            Auth::Bad => "auth=bad",
            Auth::None => "auth=none",
        }
    }
}

struct Request {
    method: String,
    /// As sent: path and query.
    target: String,
    headers: Vec<(String, String)>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn path_and_query(&self) -> (&str, &str) {
        self.target.split_once('?').unwrap_or((&self.target, ""))
    }

    fn auth(&self, config: &Config) -> Auth {
        let Some(value) = self.header("Authorization") else {
            return Auth::None;
        };
        let (scheme, creds) = value.trim().split_once(' ').unwrap_or((value, ""));
        let expected = format!("{}:{}", config.user, config.password);
        let ok = scheme.eq_ignore_ascii_case("Basic")
            && base64_decode(creds.trim()).is_some_and(|d| d == expected.as_bytes());
        if ok {
            Auth::Ok
        } else {
            Auth::Bad
        }
    }
}

struct Response {
    code: u16,
    reason: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn empty(code: u16, headers: &[(&str, &str)]) -> Response {
        Response {
            code,
            reason: reason(code).to_string(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: Vec::new(),
        }
    }
}

fn serve(stream: TcpStream, config: &Config) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(60)));
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut writer = stream;

    let Ok(req) = read_head(&mut reader) else {
        config
            .log
            .lock()
            .unwrap()
            .push("? ? 400 auth=none".to_string());
        let _ = write_response(&mut writer, &Response::empty(400, &[]));
        finish(&mut writer, &mut reader);
        return;
    };
    let auth = req.auth(config);
    let expect_continue = req
        .header("Expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"));

    let response = if auth != Auth::Ok {
        // Without `Expect: 100-continue` the body is already on its way: read it so that closing
        // does not reset the connection before the client has the 401.
        if !expect_continue {
            let _ = read_body(&mut reader, &req);
        }
        Response::empty(401, &[("WWW-Authenticate", "Basic realm=\"git\"")])
    } else {
        if expect_continue {
            let _ = writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        match read_body(&mut reader, &req) {
            Ok(body) => run_backend(config, &req, body).unwrap_or_else(|e| {
                eprintln!("http_git: git http-backend failed: {e}");
                Response::empty(502, &[])
            }),
            Err(BodyError::TooLarge) => Response::empty(413, &[]),
            Err(BodyError::Bad) => Response::empty(400, &[]),
        }
    };
    // Logged before the answer goes out: a client that has its answer finds the request listed.
    config.log.lock().unwrap().push(format!(
        "{} {} {} {}",
        req.method,
        req.target,
        response.code,
        auth.label()
    ));
    let _ = write_response(&mut writer, &response);
    finish(&mut writer, &mut reader);
}

/// Half-close and drain what the client still sends, so that the close is not a reset.
fn finish(writer: &mut TcpStream, reader: &mut BufReader<TcpStream>) {
    let _ = writer.flush();
    let _ = writer.shutdown(Shutdown::Write);
    let _ = reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(2)));
    let _ = std::io::copy(&mut reader.take(MAX_BODY as u64), &mut std::io::sink());
}

/// One line (up to and without `\r\n`), at most `MAX_HEAD` bytes.
fn read_line(r: &mut impl BufRead) -> std::io::Result<String> {
    let mut buf = Vec::new();
    r.take(MAX_HEAD as u64).read_until(b'\n', &mut buf)?;
    if !buf.ends_with(b"\n") {
        return Err(std::io::Error::other("line too long or connection closed"));
    }
    while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        buf.pop();
    }
    String::from_utf8(buf).map_err(std::io::Error::other)
}

fn read_head(r: &mut impl BufRead) -> std::io::Result<Request> {
    let line = read_line(r)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(std::io::Error::other(format!("bad request line {line:?}")));
    };
    if !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return Err(std::io::Error::other(format!("bad request line {line:?}")));
    }
    let mut headers = Vec::new();
    let mut size = line.len();
    loop {
        let line = read_line(r)?;
        if line.is_empty() {
            break;
        }
        size += line.len();
        if size > MAX_HEAD {
            return Err(std::io::Error::other("headers too large"));
        }
        let Some((k, v)) = line.split_once(':') else {
            return Err(std::io::Error::other(format!("bad header {line:?}")));
        };
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(Request {
        method: method.to_string(),
        target: target.to_string(),
        headers,
    })
}

enum BodyError {
    TooLarge,
    Bad,
}

impl From<std::io::Error> for BodyError {
    fn from(_: std::io::Error) -> Self {
        BodyError::Bad
    }
}

fn read_body(r: &mut impl BufRead, req: &Request) -> Result<Vec<u8>, BodyError> {
    let chunked = req
        .header("Transfer-Encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        let mut body = Vec::new();
        loop {
            let line = read_line(r)?;
            let size = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size, 16).map_err(|_| BodyError::Bad)?;
            if size == 0 {
                // Trailers, then the empty line.
                while !read_line(r)?.is_empty() {}
                return Ok(body);
            }
            if body.len() + size > MAX_BODY {
                return Err(BodyError::TooLarge);
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..])?;
            if !read_line(r)?.is_empty() {
                return Err(BodyError::Bad);
            }
        }
    }
    let Some(length) = req.header("Content-Length") else {
        return Ok(Vec::new());
    };
    let length: usize = length.parse().map_err(|_| BodyError::Bad)?;
    if length > MAX_BODY {
        return Err(BodyError::TooLarge);
    }
    let mut body = vec![0; length];
    r.read_exact(&mut body)?;
    Ok(body)
}

fn run_backend(config: &Config, req: &Request, body: Vec<u8>) -> std::io::Result<Response> {
    let (path, query) = req.path_and_query();
    let path_info = percent_decode(path);
    let mut cmd = Command::new("git");
    cmd.arg("http-backend")
        .current_dir(&config.root)
        .env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()),
        )
        .env("HOME", &config.root)
        // Neither the machine's nor the tester's git configuration.
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        // Repositories made by another uid (a test running git as `nobody`) are still served.
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "safe.directory")
        .env("GIT_CONFIG_VALUE_0", "*")
        .env("GIT_PROJECT_ROOT", &config.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("REQUEST_METHOD", &req.method)
        .env("PATH_INFO", path_info)
        .env("QUERY_STRING", query)
        .env("CONTENT_LENGTH", body.len().to_string())
        // A REMOTE_USER is what turns on receive-pack (pushes) by default.
        .env("REMOTE_USER", &config.user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(v) = req.header("Content-Type") {
        cmd.env("CONTENT_TYPE", v);
    }
    if let Some(v) = req.header("Git-Protocol") {
        // http-backend reads HTTP_GIT_PROTOCOL; GIT_PROTOCOL as a web server would pass it.
        cmd.env("GIT_PROTOCOL", v).env("HTTP_GIT_PROTOCOL", v);
    }
    if let Some(v) = req.header("Content-Encoding") {
        cmd.env("HTTP_CONTENT_ENCODING", v);
    }
    let mut child = cmd.spawn()?;
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        // The backend may answer without reading everything (an error): ignore a broken pipe.
        let _ = stdin.write_all(&body);
    });
    let mut stderr = child.stderr.take().unwrap();
    let errors = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        s
    });
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out)?;
    let status = child.wait()?;
    let _ = writer.join();
    let errors = errors.join().unwrap_or_default();
    if !errors.is_empty() {
        eprintln!(
            "http_git: {} {}: git http-backend ({status}): {}",
            req.method,
            req.target,
            String::from_utf8_lossy(&errors).trim_end()
        );
    }
    parse_cgi(&out)
}

/// CGI output: header lines, an empty line, the body.
fn parse_cgi(out: &[u8]) -> std::io::Result<Response> {
    let crlf = find(out, b"\r\n\r\n").map(|i| (i, i + 4));
    let lf = find(out, b"\n\n").map(|i| (i, i + 2));
    let (head_end, body_start) = match (crlf, lf) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b).ok_or_else(|| {
            std::io::Error::other(format!(
                "no end of CGI headers in {:?}",
                String::from_utf8_lossy(&out[..out.len().min(200)])
            ))
        })?,
    };
    let head = String::from_utf8_lossy(&out[..head_end]);
    let mut response = Response::empty(200, &[]);
    for line in head.lines() {
        let line = line.trim_end_matches('\r');
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k.eq_ignore_ascii_case("Status") {
            let (code, text) = v.split_once(' ').unwrap_or((v, ""));
            response.code = code
                .parse()
                .map_err(|_| std::io::Error::other(format!("bad CGI status {v:?}")))?;
            response.reason = if text.is_empty() {
                reason(response.code).to_string()
            } else {
                text.to_string()
            };
        } else if !["Content-Length", "Connection", "Transfer-Encoding"]
            .iter()
            .any(|h| k.eq_ignore_ascii_case(h))
        {
            response.headers.push((k.to_string(), v.to_string()));
        }
    }
    response.body = out[body_start..].to_vec();
    Ok(response)
}

fn write_response(w: &mut impl Write, r: &Response) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {} {}\r\n", r.code, r.reason);
    for (k, v) in &r.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        r.body.len()
    ));
    w.write_all(head.as_bytes())?;
    w.write_all(&r.body)?;
    w.flush()
}

fn reason(code: u16) -> &'static str {
    match code {
        100 => "Continue",
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        413 => "Content Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        _ => "",
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Standard base64 (padding optional); `None` on any other character.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.trim_end_matches('=').bytes() {
        acc = (acc << 6) | u32::from(value(c)?);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}
