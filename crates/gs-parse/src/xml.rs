//! A minimal XML tag scanner shared by the JUnit parser and the Cobertura coverage parser:
//! tags with their attributes (quoted values, entity-decoded), comments, CDATA, processing
//! instructions and declarations skipped. No XML crate, no DTDs, no entities beyond the five
//! predefined ones and numeric references; linear in the text, never panics on garbage.

use std::borrow::Cow;

/// Decodes `&lt; &gt; &amp; &quot; &apos;` and numeric references; anything else is kept as is.
pub fn decode_entities(s: &str) -> Cow<'_, str> {
    if !s.contains('&') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let semi = rest.bytes().skip(1).take(11).position(|b| b == b';');
        let decoded = semi.and_then(|semi| {
            let entity = &rest[1..1 + semi];
            let c = match entity {
                "lt" => '<',
                "gt" => '>',
                "amp" => '&',
                "quot" => '"',
                "apos" => '\'',
                _ => {
                    let num = entity.strip_prefix('#')?;
                    let code = match num.strip_prefix(['x', 'X']) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                        None => num.parse().ok()?,
                    };
                    char::from_u32(code)?
                }
            };
            Some((c, semi + 2))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// One start or end tag: its name and the raw text of its attributes.
pub struct Tag<'a> {
    pub name: &'a str,
    pub attrs: &'a str,
    pub closing: bool,
    pub self_closing: bool,
}

impl<'a> Tag<'a> {
    /// The tag whose text between '<' and '>' is `inner`.
    pub fn of(inner: &'a str) -> Tag<'a> {
        let closing = inner.starts_with('/');
        let inner = inner.strip_prefix('/').unwrap_or(inner);
        let self_closing = inner.ends_with('/');
        let inner = inner.strip_suffix('/').unwrap_or(inner);
        let (name, attrs) = inner.split_at(inner.find(char::is_whitespace).unwrap_or(inner.len()));
        Tag {
            name,
            attrs,
            closing,
            self_closing,
        }
    }

    /// The decoded value of attribute `key` (linear in the tag's length).
    pub fn attr(&self, key: &str) -> Option<Cow<'a, str>> {
        let mut rest = self.attrs;
        loop {
            rest = rest.trim_start();
            let name_end = rest.find(|c: char| c == '=' || c.is_whitespace())?;
            let name = &rest[..name_end];
            let after = rest[name_end..].trim_start();
            let Some(after) = after.strip_prefix('=') else {
                // A name without a value: skip it (always advances).
                rest = &rest[name_end.max(1)..];
                continue;
            };
            let after = after.trim_start();
            let quote = after.chars().next()?;
            if quote != '"' && quote != '\'' {
                return None;
            }
            let end = after[1..].find(quote)?;
            if name == key {
                return Some(decode_entities(&after[1..1 + end]));
            }
            rest = &after[end + 2..];
        }
    }

    pub fn number(&self, key: &str) -> Option<u64> {
        self.attr(key)?.trim().parse().ok()
    }
}

/// Where the tag starting at `lt` (its '<') ends ('>'), honouring quoted attribute values.
pub fn tag_end(s: &str, lt: usize) -> Option<usize> {
    let mut quote: Option<u8> = None;
    for (i, &b) in s.as_bytes()[lt..].iter().enumerate() {
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(b),
            (None, b'>') => return Some(lt + i),
            _ => {}
        }
    }
    None
}

/// Calls `on` with each tag and the text before it, in order; stops at the first unterminated
/// construct. Comments, CDATA, processing instructions and declarations are skipped.
pub fn scan_tags<'a>(xml: &'a str, mut on: impl FnMut(&Tag<'a>, &'a str)) {
    let mut pos = 0;
    while let Some(off) = xml[pos..].find('<') {
        let lt = pos + off;
        let text = &xml[pos..lt];
        let rest = &xml[lt..];
        let skip_to = |open: usize, close: &str| {
            rest[open..]
                .find(close)
                .map(|i| lt + open + i + close.len())
        };
        let next = if rest.starts_with("<!--") {
            skip_to(4, "-->")
        } else if rest.starts_with("<![CDATA[") {
            skip_to(9, "]]>")
        } else if rest.starts_with("<!") || rest.starts_with("<?") {
            // A declaration; an internal DTD subset ends at "]>" (its content is not read).
            match rest.find(['[', '>']) {
                Some(i) if rest.as_bytes()[i] == b'[' => skip_to(i, "]>"),
                Some(i) => Some(lt + i + 1),
                None => None,
            }
        } else {
            tag_end(xml, lt).map(|gt| {
                on(&Tag::of(&xml[lt + 1..gt]), text);
                gt + 1
            })
        };
        match next {
            Some(next) => pos = next,
            None => return,
        }
    }
}
