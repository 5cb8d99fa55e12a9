//! What a command showed, with what changes from run to run and machine to machine written
//! as a placeholder, for snapshots of human output: temporary paths `[TMP]`, durations
//! `[DUR]`, times `[TIME]`, key fingerprints, repository ids, sizes.

/// Whether `word` is a duration as the CLI prints one (`120ms`, `1.5s`, `0.000s`, `2m05s`).
pub fn is_duration(word: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    if let Some(n) = word.strip_suffix("ms") {
        return digits(n);
    }
    if let Some((m, s)) = word.strip_suffix('s').and_then(|x| x.split_once('m')) {
        return digits(m) && digits(s);
    }
    word.strip_suffix('s')
        .and_then(|x| x.split_once('.'))
        .is_some_and(|(a, b)| digits(a) && digits(b))
}

/// `text` with the temporary directories tests make (`$TMPDIR/.tmpXXXXXX`) written `[TMP]`.
pub fn temp_paths(text: &str) -> String {
    let root = std::env::temp_dir().join(".tmp").display().to_string();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&root) {
        out.push_str(&rest[..at]);
        let after = &rest[at + root.len()..];
        let name = after
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        out.push_str("[TMP]");
        rest = &after[name..];
    }
    out.push_str(rest);
    out
}

/// `text` as a snapshot shows it: temporary paths, durations, times, key fingerprints,
/// repository ids and sizes in KiB as placeholders; each line that starts (after its indent)
/// with one of `machine` keeps that start and drops the rest (`[MACHINE]`), for what depends
/// on the machine the test runs on.
pub fn shown(text: &str, machine: &[&str]) -> String {
    let text = temp_paths(text);
    let mut lines = Vec::new();
    for line in text.lines() {
        let body = line.trim_start();
        if let Some(start) = machine.iter().find(|m| body.starts_with(*m)) {
            let indent = &line[..line.len() - body.len()];
            lines.push(format!("{indent}{start}[MACHINE]"));
            continue;
        }
        let words: Vec<&str> = line.split(' ').collect();
        let mut out: Vec<String> = Vec::with_capacity(words.len());
        for (i, word) in words.iter().enumerate() {
            let bare = word
                .trim_end_matches([',', ')', ';', ']', ':'])
                .trim_start_matches(['(', '[']);
            let shown = if is_duration(bare) {
                word.replacen(bare, "[DUR]", 1)
            } else if is_time(bare) {
                word.replacen(bare, "[TIME]", 1)
            } else if let Some(at) = word.find("SHA256:") {
                format!(
                    "{}SHA256:[KEY]{}",
                    &word[..at],
                    if word.ends_with(')') { ")" } else { "" }
                )
            } else if words.get(i + 1) == Some(&"KiB") && bare.chars().all(|c| c.is_ascii_digit()) {
                word.replacen(bare, "[N]", 1)
            } else {
                repo_ids(word)
            };
            out.push(shown);
        }
        lines.push(out.join(" "));
    }
    lines.join("\n")
}

/// An RFC 3339 time as records keep them (`2026-12-04T04:42:55.061Z`).
fn is_time(word: &str) -> bool {
    let b = word.as_bytes();
    b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && word.ends_with('Z')
        && b[..4].iter().all(u8::is_ascii_digit)
}

/// `word` with each repository id (`repo_` and 16 hex digits) written `repo_[ID]`.
fn repo_ids(word: &str) -> String {
    let mut out = String::new();
    let mut rest = word;
    while let Some(at) = rest.find("repo_") {
        let after = &rest[at + 5..];
        let hex = after.bytes().take_while(u8::is_ascii_hexdigit).count();
        out.push_str(&rest[..at]);
        if hex == 16 {
            out.push_str("repo_[ID]");
            rest = &after[16..];
        } else {
            out.push_str("repo_");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}
