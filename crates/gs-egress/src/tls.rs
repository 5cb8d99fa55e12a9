//! The server name a TLS ClientHello asks for (its `server_name` extension), read from the first
//! bytes a client sends through a `CONNECT` tunnel: the proxy requires it to be the host the
//! tunnel was opened to, so an allowed name cannot carry a connection to another site behind it.

/// What the first bytes of a tunnel are.
#[derive(Debug, PartialEq, Eq)]
pub enum Hello {
    /// A ClientHello naming this server (lower case).
    Named(String),
    /// A ClientHello without a server name.
    Unnamed,
    /// Not a TLS handshake record.
    NotTls,
    /// A TLS record that is not a whole, well-formed ClientHello (in the bytes given).
    Malformed,
}

/// Read `b`, the first bytes of a tunnel (the first record whole, or as much as came).
pub fn client_hello(b: &[u8]) -> Hello {
    if b.first() != Some(&0x16) {
        return Hello::NotTls;
    }
    parse(b).unwrap_or(Hello::Malformed)
}

/// How many bytes the first record takes (its 5-byte header and body), once its header came.
pub fn record_len(b: &[u8]) -> Option<usize> {
    (b.len() >= 5).then(|| 5 + u16::from_be_bytes([b[3], b[4]]) as usize)
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        (self.0.len() >= n).then(|| {
            let (a, b) = self.0.split_at(n);
            self.0 = b;
            a
        })
    }
    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| b[0] as usize)
    }
    fn u16(&mut self) -> Option<usize> {
        self.take(2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]) as usize)
    }
    fn u24(&mut self) -> Option<usize> {
        self.take(3)
            .map(|b| ((b[0] as usize) << 16) | ((b[1] as usize) << 8) | b[2] as usize)
    }
}

fn parse(b: &[u8]) -> Option<Hello> {
    let mut rec = Cursor(b);
    rec.take(3)?; // type, version
    let n = rec.u16()?;
    let body = rec.take(n)?;
    let mut h = Cursor(body);
    if h.u8()? != 1 {
        return None; // not a ClientHello
    }
    let len = h.u24()?;
    let mut hello = Cursor(h.take(len)?);
    hello.take(2 + 32)?; // version, random
    let n = hello.u8()?;
    hello.take(n)?; // session id
    let n = hello.u16()?;
    hello.take(n)?; // cipher suites
    let n = hello.u8()?;
    hello.take(n)?; // compression methods
    if hello.0.is_empty() {
        return Some(Hello::Unnamed);
    }
    let n = hello.u16()?;
    let mut exts = Cursor(hello.take(n)?);
    while !exts.0.is_empty() {
        let kind = exts.u16()?;
        let n = exts.u16()?;
        let mut ext = Cursor(exts.take(n)?);
        if kind != 0 {
            continue;
        }
        let n = ext.u16()?;
        let mut list = Cursor(ext.take(n)?);
        while !list.0.is_empty() {
            let kind = list.u8()?;
            let n = list.u16()?;
            let name = list.take(n)?;
            if kind == 0 {
                let name = std::str::from_utf8(name).ok()?;
                return Some(Hello::Named(name.to_ascii_lowercase()));
            }
        }
    }
    Some(Hello::Unnamed)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal ClientHello record naming `name` (none when `None`).
    pub fn hello(name: Option<&str>) -> Vec<u8> {
        let mut exts = Vec::new();
        if let Some(n) = name {
            let mut list = vec![0u8];
            list.extend((n.len() as u16).to_be_bytes());
            list.extend(n.as_bytes());
            let mut ext = (list.len() as u16).to_be_bytes().to_vec();
            ext.extend(list);
            exts.extend(0u16.to_be_bytes());
            exts.extend((ext.len() as u16).to_be_bytes());
            exts.extend(ext);
        }
        let mut body = vec![3, 3];
        body.extend([7u8; 32]);
        body.push(0); // session id
        body.extend(2u16.to_be_bytes());
        body.extend([0x13, 0x01]);
        body.extend([1, 0]); // compression: null
        body.extend((exts.len() as u16).to_be_bytes());
        body.extend(exts);
        let mut hs = vec![1];
        hs.extend(&(body.len() as u32).to_be_bytes()[1..]);
        hs.extend(body);
        let mut rec = vec![0x16, 3, 1];
        rec.extend((hs.len() as u16).to_be_bytes());
        rec.extend(hs);
        rec
    }

    #[test]
    fn the_server_name_is_read_from_a_client_hello() {
        let h = hello(Some("PyPI.org"));
        assert_eq!(record_len(&h), Some(h.len()));
        assert_eq!(client_hello(&h), Hello::Named("pypi.org".into()));
        assert_eq!(client_hello(&hello(None)), Hello::Unnamed);
        assert_eq!(client_hello(b"GET / HTTP/1.1\r\n"), Hello::NotTls);
        assert_eq!(client_hello(&h[..20]), Hello::Malformed);
        let mut lying = h.clone();
        lying[4] = lying[4].wrapping_add(40); // a record longer than what came
        assert_eq!(client_hello(&lying), Hello::Malformed);
    }
}
