//! git's `allowed_signers` format (as `ssh-keygen -Y verify` reads it), which the `ssh-key`
//! crate does not parse: one entry a line, `principals [options] keytype base64 [comment]`,
//! `#` comments and blank lines. Options are comma-separated: `namespaces="a,b"`,
//! `cert-authority`, `valid-after=`, `valid-before=`.

use ssh_key::PublicKey;

/// One entry of an `allowed_signers` file.
#[derive(Debug, Clone)]
pub struct AllowedSigner {
    /// The principals field as written (patterns, comma-separated).
    pub principals: String,
    /// `namespaces="…"`: the signature namespaces the key is trusted for; `None`: all.
    pub namespaces: Option<Vec<String>>,
    /// A certificate authority's key: it vouches for certificates, which records never carry,
    /// so such an entry never matches a record's key.
    pub cert_authority: bool,
    /// `valid-after=` / `valid-before=`, as Unix seconds (UTC).
    pub valid_after: Option<i64>,
    pub valid_before: Option<i64>,
    pub key: PublicKey,
}

impl AllowedSigner {
    /// Whether the entry vouches for signatures in `namespace` at Unix time `now`.
    pub fn counts_for(&self, namespace: &str, now: i64) -> bool {
        !self.cert_authority
            && self
                .namespaces
                .as_ref()
                .is_none_or(|n| n.iter().any(|n| n == namespace))
            && self.valid_after.is_none_or(|t| now >= t)
            && self.valid_before.is_none_or(|t| now < t)
    }
}

/// Parse the text of an `allowed_signers` file; an error is `line N: problem`.
pub fn parse(text: &str) -> Result<Vec<AllowedSigner>, (usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        out.push(entry(line).map_err(|why| (i + 1, why))?);
    }
    Ok(out)
}

fn entry(line: &str) -> Result<AllowedSigner, String> {
    let mut words = Words(line);
    let principals = words.next().ok_or("no principals")?;
    let mut next = words.next().ok_or("no key after the principals")?;
    let mut opts = Options::default();
    if !is_key_type(&next) {
        options(&next, &mut opts)?;
        next = words.next().ok_or("no key after the options")?;
    }
    let blob = words.next().ok_or("a key type without its key")?;
    let key = PublicKey::from_openssh(&format!("{next} {blob}"))
        .map_err(|e| format!("the key does not parse ({e})"))?;
    Ok(AllowedSigner {
        principals: unquote(&principals),
        namespaces: opts.namespaces,
        cert_authority: opts.cert_authority,
        valid_after: opts.valid_after,
        valid_before: opts.valid_before,
        key,
    })
}

#[derive(Default)]
struct Options {
    namespaces: Option<Vec<String>>,
    cert_authority: bool,
    valid_after: Option<i64>,
    valid_before: Option<i64>,
}

fn is_key_type(word: &str) -> bool {
    ["ssh-", "ecdsa-", "sk-", "rsa-sha2-"]
        .iter()
        .any(|p| word.starts_with(p))
}

/// The options field, read as ssh-keygen reads it: `namespaces`, `valid-after` and
/// `valid-before` take a double-quoted value and may be given once each (ssh-keygen refuses a
/// line otherwise, so trusting it here would trust what `git` never would).
fn options(field: &str, signer: &mut Options) -> Result<(), String> {
    let mut seen: Vec<String> = Vec::new();
    for opt in split_commas(field) {
        let (name, value) = match opt.split_once('=') {
            Some((n, v)) => (n.to_ascii_lowercase(), Some(v.to_string())),
            None => (opt.to_ascii_lowercase(), None),
        };
        if name != "cert-authority" {
            if seen.contains(&name) {
                return Err(format!(
                    "the option {name:?} is given twice (ssh-keygen refuses such a line); keep one"
                ));
            }
            seen.push(name.clone());
        }
        let value = match value {
            Some(v) => Some(quoted(&name, &v)?),
            None => None,
        };
        match (name.as_str(), value) {
            ("cert-authority", None) => signer.cert_authority = true,
            ("namespaces", Some(v)) => {
                signer.namespaces = Some(v.split(',').map(|n| n.trim().to_string()).collect())
            }
            ("valid-after", Some(v)) => signer.valid_after = Some(timestamp(&v)?),
            ("valid-before", Some(v)) => signer.valid_before = Some(timestamp(&v)?),
            (n, _) => return Err(format!("unknown or malformed option {n:?}")),
        }
    }
    Ok(())
}

/// An option's value inside its double quotes, as ssh-keygen requires it.
fn quoted(name: &str, v: &str) -> Result<String, String> {
    v.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .filter(|s| !s.contains('"'))
        .map(str::to_string)
        .ok_or_else(|| {
            format!("the value of {name} is not in double quotes; write {name}=\"{v}\" as ssh-keygen requires")
        })
}

/// `YYYYMMDD[HHMM[SS]][Z]`, read as UTC.
fn timestamp(v: &str) -> Result<i64, String> {
    let bad = || format!("{v:?} is not a time like 20260131 or 202601311200Z");
    let digits = v.strip_suffix(['Z', 'z']).unwrap_or(v);
    if !matches!(digits.len(), 8 | 12 | 14) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n = |a: usize, b: usize| {
        digits
            .get(a..b)
            .map_or(0, |s| s.parse::<i64>().unwrap_or(0))
    };
    let (y, m, d) = (n(0, 4), n(4, 6), n(6, 8));
    let text = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        n(8, 10),
        n(10, 12),
        n(12, 14)
    );
    gs_util::time::parse_rfc3339(&text)
        .map(|ms| ms / 1000)
        .ok_or_else(bad)
}

/// Words split at blanks, a double-quoted stretch kept whole (quotes kept).
struct Words<'a>(&'a str);

impl Iterator for Words<'_> {
    type Item = String;
    fn next(&mut self) -> Option<String> {
        let s = self.0.trim_start();
        if s.is_empty() {
            return None;
        }
        let mut quoted = false;
        let end = s
            .char_indices()
            .find(|&(_, c)| {
                if c == '"' {
                    quoted = !quoted;
                }
                !quoted && c.is_whitespace()
            })
            .map_or(s.len(), |(i, _)| i);
        self.0 = &s[end..];
        Some(s[..end].to_string())
    }
}

/// Split at commas outside double quotes.
fn split_commas(s: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    for c in s.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                out.last_mut().expect("never empty").push(c);
            }
            ',' if !quoted => out.push(String::new()),
            c => out.last_mut().expect("never empty").push(c),
        }
    }
    out
}

fn unquote(s: &str) -> String {
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(s)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEl7M6lWvLdCd5hA8J6mZ1JUMhD+UHbGGdoXQF6Rd1+A";

    #[test]
    fn entries_with_options_comments_and_quotes() {
        let text = format!(
            "# a comment\n\nalice@example {KEY} alice's laptop\n\"bob@x,carol@y\" namespaces=\"git,git-sandbox\",valid-after=\"20200101\" {KEY}\nci@fleet cert-authority {KEY}\n"
        );
        let s = parse(&text).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].principals, "alice@example");
        assert!(s[0].counts_for("git-sandbox", 0));
        assert_eq!(s[1].principals, "bob@x,carol@y");
        assert!(s[1].counts_for("git-sandbox", 1_700_000_000));
        assert!(
            !s[1].counts_for("git-sandbox", 1_000_000_000),
            "not yet valid"
        );
        assert!(
            !s[2].counts_for("git-sandbox", 0),
            "a CA vouches for no plain key"
        );
    }

    #[test]
    fn a_namespace_list_without_ours_does_not_count() {
        let s = parse(&format!("a@b namespaces=\"git\" {KEY}\n")).unwrap();
        assert!(!s[0].counts_for("git-sandbox", 0));
        assert!(s[0].counts_for("git", 0));
    }

    #[test]
    fn malformed_lines_name_their_line() {
        for (text, line) in [
            (format!("ok@x {KEY}\nbroken\n"), 2),
            (format!("a@b nosuch-option {KEY}\n"), 1),
            ("a@b ssh-ed25519 notbase64\n".to_string(), 1),
            (format!("\n\na@b valid-before=\"yesterday\" {KEY}\n"), 3),
            // No 40th of a 13th month (ssh-keygen refuses it; it was read as a day in 2027).
            (format!("a@b valid-before=\"20261340\" {KEY}\n"), 1),
            // ssh-keygen refuses these lines; trusting them would trust what git never would.
            (format!("a@b valid-before=20300101 {KEY}\n"), 1),
            (format!("a@b namespaces=git-sandbox {KEY}\n"), 1),
            (
                format!("a@b namespaces=\"git\",namespaces=\"git-sandbox\" {KEY}\n"),
                1,
            ),
            (
                format!("a@b valid-before=\"20300101\",valid-before=\"20310101\" {KEY}\n"),
                1,
            ),
        ] {
            let (n, why) = parse(&text).unwrap_err();
            assert_eq!(n, line, "{text}: {why}");
        }
    }
}
