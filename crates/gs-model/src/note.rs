//! The note formats: a run record as one line of compact JSON under `refs/notes/sandbox` (so
//! notes written on several machines merge line-wise, as git's `cat_sort_uniq` does), and the
//! short human summary under `refs/notes/sandbox-summary` that plain `git log` shows.
//!
//! Reading is defensive: a note may hold several records (merged from several machines, or
//! glued together by git's `concatenate` rewrite mode), records copied from another commit (an
//! amend or rebase with `notes.rewriteRef`), a pretty-printed record from an older version, or
//! garbage. Only a record made for the commit the note is attached to counts.

use super::record::{RunRecord, Status, Verified, RUN_SCHEMA};

/// What a note says about the commit it is attached to.
#[derive(Debug, Clone, PartialEq)]
pub enum NoteRecord {
    /// The newest record made for this very commit.
    Found(Box<RunRecord>),
    /// Valid records, but none for this commit (copied by an amend or rebase): not run.
    NotForThisCommit,
    /// Nothing readable: the reason, in a few words. The commit counts as not run.
    Invalid(String),
}

impl NoteRecord {
    pub fn found(self) -> Option<RunRecord> {
        match self {
            NoteRecord::Found(r) => Some(*r),
            _ => None,
        }
    }
}

/// Where a record's signature begins inside its line: the record's own bytes are what comes
/// before it, closed by `}`. The signature is the line's last key, so the signed bytes are
/// found again exactly as they were signed, never re-serialised.
const SIGNATURE_KEY: &[u8] = b",\"signature\":\"";

/// Checks a signature over a record's exact bytes: who vouches for it, else why nobody does.
pub type Judge<'a> = &'a dyn Fn(&[u8], &str) -> Result<Verified, String>;

/// The note body for a record: one line of compact JSON, `sign`'s signature of the record's
/// bytes inside it as the last key, and a newline. Who vouches for a record is never written.
pub fn encode(r: &RunRecord, sign: &dyn Fn(&[u8]) -> String) -> Vec<u8> {
    let mut bare = r.clone();
    bare.verified = None;
    let mut body = serde_json::to_vec(&bare).expect("records always serialize");
    let signature = sign(&body);
    debug_assert_eq!(body.last(), Some(&b'}'));
    body.pop();
    body.extend_from_slice(SIGNATURE_KEY);
    body.extend_from_slice(signature.as_bytes());
    body.extend_from_slice(b"\"}\n");
    body
}

/// A signed line's record bytes (as signed) and its signature; `None` for an unsigned line.
pub fn signed_parts(line: &[u8]) -> Option<(Vec<u8>, &str)> {
    let line = line.trim_ascii();
    let at = line
        .windows(SIGNATURE_KEY.len())
        .rposition(|w| w == SIGNATURE_KEY)?;
    let rest = line[at + SIGNATURE_KEY.len()..].strip_suffix(b"\"}")?;
    let signature = std::str::from_utf8(rest).ok()?;
    if !signature
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
    {
        return None;
    }
    let mut record = line[..at].to_vec();
    record.push(b'}');
    Some((record, signature))
}

/// The record bytes and signature of each signed line of `body`: what [`decode`] asks its
/// judge about for a note of one-line records (as notes are written), so their signatures
/// can be checked together beforehand.
pub fn signed_lines(body: &[u8]) -> impl Iterator<Item = (Vec<u8>, &str)> {
    body.split(|&b| b == b'\n').filter_map(signed_parts)
}

/// A record may be dated at most this far past this machine's clock (clocks drift); one dated
/// later would outrank every record made here until its date, so it is not read.
pub const FUTURE_SLACK_MS: i64 = 60_000;

/// The largest record (one line) taken from elsewhere.
pub const MAX_RECORD: usize = 256 * 1024;

/// The record a note holds for `commit` (40 hex), with who vouches for it as `judge` finds.
/// Of several, evidence before reports, this machine's before others', then the one that
/// finished last.
pub fn decode(body: &[u8], commit: &str, judge: Judge<'_>) -> NoteRecord {
    decode_counted(body, commit, judge).0
}

/// [`decode`], with how many of the note's records for `commit` were skipped for being dated
/// more than [`FUTURE_SLACK_MS`] ahead of this machine's clock.
pub fn decode_counted(body: &[u8], commit: &str, judge: Judge<'_>) -> (NoteRecord, usize) {
    decode_at(body, commit, judge, gs_util::time::now_millis())
}

fn decode_at(body: &[u8], commit: &str, judge: Judge<'_>, now_ms: i64) -> (NoteRecord, usize) {
    // Each document with its bytes, which its signature covers.
    let mut records: Vec<(serde_json::Value, &[u8])> = Vec::new();
    let mut problem = None;
    // Whole documents first (one line each, or pretty-printed ones one after another) …
    let mut stream = serde_json::Deserializer::from_slice(body).into_iter::<serde_json::Value>();
    let mut clean = true;
    let mut from = 0;
    while let Some(doc) = stream.next() {
        match doc {
            Ok(v) => {
                let to = stream.byte_offset();
                records.push((v, &body[from..to]));
                from = to;
            }
            Err(e) => {
                clean = false;
                problem = Some(e.to_string());
                break;
            }
        }
    }
    // … else line by line: a line-wise merge of pretty-printed notes, or a line of garbage
    // beside good ones, still leaves every one-line record readable.
    if !clean {
        records = body
            .split(|&b| b == b'\n')
            .filter_map(|line| {
                Some((
                    serde_json::from_slice::<serde_json::Value>(line).ok()?,
                    line,
                ))
            })
            .filter(|(v, _)| v.is_object())
            .collect();
    }
    let mut best: Option<RunRecord> = None;
    let mut seen_other = false;
    let mut future = None;
    let mut skipped_future = 0;
    for (v, bytes) in records {
        let schema = v.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        if schema != RUN_SCHEMA {
            problem.get_or_insert_with(|| {
                if schema.starts_with("git-sandbox/run/") {
                    format!("schema {schema:?} is newer than this build reads; upgrade git-sandbox")
                } else {
                    "not a git-sandbox run record".to_string()
                }
            });
            continue;
        }
        // A signed record is read from the bytes its signature covers, nothing else.
        let signed = signed_parts(bytes);
        let parsed = match &signed {
            Some((message, _)) => serde_json::from_slice::<RunRecord>(message),
            None => serde_json::from_value::<RunRecord>(v),
        };
        let mut record = match parsed {
            Ok(r) => r,
            Err(e) => {
                problem.get_or_insert_with(|| format!("a record is incomplete: {e}"));
                continue;
            }
        };
        record.verified = signed.and_then(|(message, sig)| judge(&message, sig).ok());
        if !record.commit.eq_ignore_ascii_case(commit) {
            seen_other = true;
            continue;
        }
        if finished_ms(&record).is_some_and(|t| t > now_ms.saturating_add(FUTURE_SLACK_MS)) {
            future.get_or_insert(record.finished_at.clone());
            skipped_future += 1;
            continue;
        }
        if best.as_ref().is_none_or(|b| rank(&record) >= rank(b)) {
            best = Some(record);
        }
    }
    let found = match (best, future) {
        (Some(r), _) => NoteRecord::Found(Box::new(r)),
        (None, Some(at)) => NoteRecord::Invalid(format!(
            "its record is dated {at}, in the future of this machine's clock"
        )),
        (None, None) if seen_other => NoteRecord::NotForThisCommit,
        (None, None) => NoteRecord::Invalid(problem.unwrap_or_else(|| "the note is empty".into())),
    };
    (found, skipped_future)
}

/// Which of two records of one commit a reader takes (the greater): evidence before reports
/// (a report never replaces evidence, whatever date it gives), this machine's before another's,
/// then the one that finished last.
pub fn rank(r: &RunRecord) -> (bool, bool, i64) {
    (
        r.is_evidence(),
        r.verified.as_ref().is_some_and(|v| v.here),
        finished_ms(r).unwrap_or(i64::MIN),
    )
}

fn finished_ms(r: &RunRecord) -> Option<i64> {
    gs_util::time::parse_rfc3339(&r.finished_at)
}

/// The summary note for a record: at most four lines in trailer style, what plain `git log`
/// shows (`notes.displayRef`).
pub fn summary(r: &RunRecord) -> Vec<u8> {
    if let (Status::Skipped, Some(by)) = (r.status, &r.superseded_by) {
        return format!("Sandbox: skipped, superseded by {by}\n").into_bytes();
    }
    if let (Status::Skipped, Some(why)) = (r.status, &r.error) {
        let why = why.split(';').next().unwrap_or(why).trim();
        return format!("Sandbox: skipped, {why}\n").into_bytes();
    }
    let mut lines = Vec::new();
    let tests = match &r.tests {
        None => "no tests".to_string(),
        Some(t) => {
            let mut parts = Vec::new();
            if let (Some(p), Some(f)) = (t.passed, t.failed) {
                parts.push(format!("{p} passed {f} failed"));
            } else if let Some(code) = t.exit_code {
                parts.push(format!("exit {code}"));
            }
            if let Some(k) = &t.killed_by {
                parts.push(format!("killed by {k}"));
            }
            let mut s = parts.join(", ");
            if let Some(fw) = &t.framework {
                s.push_str(&format!(" ({fw})"));
            }
            s
        }
    };
    let ms = match &r.tests {
        Some(t) if r.checks.is_empty() => t.duration_ms,
        _ => r.duration_ms,
    };
    let coverage = r
        .coverage
        .as_ref()
        .map(|c| format!(", coverage {:.1}%", c.percent))
        .unwrap_or_default();
    if r.no_tests() {
        // A pass that tested nothing is not told as one.
        lines.push(format!("Sandbox: no tests{coverage}, {}", human_ms(ms)));
    } else {
        lines.push(format!(
            "Sandbox: {}, {}{coverage}, {}",
            r.status,
            tests.trim(),
            human_ms(ms)
        ));
    }
    if !r.checks.is_empty() {
        let checks: Vec<String> = r
            .checks
            .iter()
            .map(|(name, c)| {
                let optional = if c.required { "" } else { " (optional)" };
                format!("{name} {}{optional}", c.status())
            })
            .collect();
        lines.push(format!("Sandbox-Checks: {}", cut(&checks.join(", "), 200)));
    }
    if let Some(a) = &r.analysis {
        lines.push(format!(
            "Sandbox-Analysis: {} {}, {} {}, complexity {:.1}",
            a.files_analyzed,
            plural(a.files_analyzed, "file", "files"),
            a.functions_found,
            plural(a.functions_found, "function", "functions"),
            a.complexity_score
        ));
    }
    let third = if r.status == Status::Error {
        r.error.as_deref().map(|e| {
            let first = e.lines().next().unwrap_or("");
            format!("Sandbox-Error: {}", cut(first, 200))
        })
    } else if let Some(iso) = r
        .tests
        .as_ref()
        .and_then(|t| t.isolation.as_ref())
        .filter(|i| i.degraded)
    {
        let missing: Vec<&str> = iso
            .not_enforced
            .iter()
            .filter(|l| l.status != crate::LayerStatus::Off)
            .map(|l| l.layer.as_str())
            .collect();
        Some(format!(
            "Sandbox-Isolation: degraded ({} unavailable)",
            missing.join(", ")
        ))
    } else {
        r.cached_from
            .as_deref()
            .map(|c| format!("Sandbox-Cached-From: {c}"))
    };
    lines.extend(third);
    let mut body = lines.join("\n").into_bytes();
    body.push(b'\n');
    body
}

/// The summary of a record nobody this machine trusts signed: who reported what, never a
/// result (`Sandbox: reported passed by HOST, not verified`). The reporter's name comes from
/// elsewhere: only the characters of a home id are kept.
pub fn report_summary(r: &RunRecord) -> Vec<u8> {
    let by: String = r
        .reporter()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
        .take(64)
        .collect();
    let by = if by.is_empty() {
        "an unknown machine"
    } else {
        &by
    };
    format!("Sandbox: reported {} by {by}, not verified\n", r.status).into_bytes()
}

/// The summary of a commit with no record here: a remote's summary of it is not taken.
pub const NO_RESULT_SUMMARY: &[u8] = b"Sandbox: no result here\n";

fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

fn human_ms(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} …", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{record::Tests, record::Trigger};

    fn record(commit: &str, finished: &str, status: Status) -> RunRecord {
        RunRecord {
            schema: RUN_SCHEMA.into(),
            commit: commit.into(),
            tree: "b".repeat(40),
            parents: vec![],
            refname: None,
            experiment: None,
            trigger: Trigger::Manual,
            status,
            started_at: finished.into(),
            finished_at: finished.into(),
            duration_ms: 166,
            cached_from: None,
            error: None,
            config_hash: None,
            superseded_by: None,
            cache_generations: Vec::new(),
            retried: None,
            toolchain: Default::default(),
            environment: None,
            coverage: None,
            checks: Default::default(),
            tests: Some(Tests {
                status: None,
                command: "python3 -m unittest".into(),
                framework: Some("unittest".into()),
                exit_code: Some(0),
                passed: Some(6),
                failed: Some(0),
                skipped: Some(0),
                errors: Some(0),
                total: Some(6),
                failures: vec![],
                duration_ms: 166,
                output_tail: String::new(),
                killed_by: None,
                resources: Default::default(),
                output_truncated: false,
                failures_omitted: 0,
                setup: None,
                isolation: None,
                limits: None,
                phases: Vec::new(),
                first_failure_ms: None,
                selection_missed: false,
                ids: Vec::new(),
                network: None,
                new_tests: None,
            }),
            analysis: None,
            changes: None,
            warnings: vec![],
            snapshot: false,
            by: None,
            verified: None,
        }
    }

    /// A stand-in signature: a hash of the bytes, so a changed record no longer matches it.
    fn enc(r: &RunRecord) -> Vec<u8> {
        encode(r, &|m| gs_util::fnv64_hex(m))
    }

    fn judge(m: &[u8], s: &str) -> Result<Verified, String> {
        (gs_util::fnv64_hex(m) == s)
            .then(|| Verified {
                signer: "this machine".into(),
                key: "k".into(),
                here: true,
            })
            .ok_or_else(|| "bad".into())
    }

    fn dec(body: &[u8], commit: &str) -> NoteRecord {
        decode(body, commit, &judge)
    }

    fn verified(mut r: RunRecord) -> RunRecord {
        r.verified = judge(b"", &gs_util::fnv64_hex(b"")).ok();
        r
    }

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    #[test]
    fn a_record_dated_in_the_future_never_outranks_one_made_here() {
        let now = gs_util::time::parse_rfc3339("2026-01-01T00:00:00Z").unwrap();
        let here = record(A, "2026-01-01T00:00:00Z", Status::Failed);
        let future = record(A, "2099-01-01T00:00:00Z", Status::Passed);
        let mut body = enc(&here);
        body.extend(enc(&future));
        let (found, skipped) = decode_at(&body, A, &judge, now);
        assert_eq!(found.found().unwrap().status, Status::Failed);
        assert_eq!(skipped, 1);
        match decode_at(&enc(&future), A, &judge, now) {
            (NoteRecord::Invalid(why), 1) => assert!(why.contains("in the future"), "{why}"),
            other => panic!("{other:?}"),
        }
        // Within the minute clocks may drift, it counts.
        let soon = record(A, "2026-01-01T00:00:59Z", Status::Passed);
        assert!(matches!(
            decode_at(&enc(&soon), A, &judge, now),
            (NoteRecord::Found(_), 0)
        ));
    }

    #[test]
    fn one_line_round_trips() {
        let r = record(A, "2026-01-01T00:00:01.000Z", Status::Passed);
        let body = enc(&r);
        assert_eq!(body.iter().filter(|&&b| b == b'\n').count(), 1);
        assert_eq!(dec(&body, A), NoteRecord::Found(Box::new(verified(r))));
    }

    #[test]
    fn a_record_copied_from_another_commit_is_not_this_commits_result() {
        let r = record(A, "2026-01-01T00:00:01.000Z", Status::Passed);
        assert_eq!(dec(&enc(&r), B), NoteRecord::NotForThisCommit);
    }

    #[test]
    fn several_records_give_the_newest_for_this_commit() {
        // As git's concatenate rewrite glues them (pretty, blank line between) …
        let old = record(A, "2026-01-01T00:00:01.000Z", Status::Passed);
        let copied = record(B, "2026-01-01T00:00:09.000Z", Status::Passed);
        let mut glued = serde_json::to_vec_pretty(&old).unwrap();
        glued.extend_from_slice(b"\n\n");
        glued.extend(serde_json::to_vec_pretty(&copied).unwrap());
        assert_eq!(dec(&glued, A), NoteRecord::Found(Box::new(old.clone())));
        assert_eq!(dec(&glued, B), NoteRecord::Found(Box::new(copied)));
        // … and as cat_sort_uniq merges one-line records, with garbage beside them.
        let newer = record(A, "2026-01-02T00:00:00.000Z", Status::Failed);
        let mut merged = b"not json at all\n".to_vec();
        merged.extend(enc(&newer));
        merged.extend(enc(&old));
        assert_eq!(
            dec(&merged, A),
            NoteRecord::Found(Box::new(verified(newer)))
        );
    }

    #[test]
    fn a_report_never_beats_evidence_and_a_copied_signature_fails() {
        let ours = record(A, "2026-01-01T00:00:01.000Z", Status::Failed);
        // Later than ours, not in the future (a record dated past the clock is not read at all).
        let mut forged = record(A, "2026-06-01T00:00:00.000Z", Status::Passed);
        forged.verified = ours.verified.clone();
        let mut merged = enc(&ours);
        // Unsigned, and newer …
        merged.extend(serde_json::to_vec(&forged).unwrap());
        merged.push(b'\n');
        // … and our signature copied onto a changed record.
        let copied = String::from_utf8(enc(&ours))
            .unwrap()
            .replace("\"status\":\"failed\"", "\"status\":\"passed\"")
            .replace("2026-01-01T00:00:01", "2026-05-01T00:00:01");
        merged.extend(copied.as_bytes());
        let NoteRecord::Found(got) = dec(&merged, A) else {
            panic!()
        };
        assert_eq!(got.status, Status::Failed);
        assert!(got.is_evidence());
        let NoteRecord::Found(alone) = dec(copied.as_bytes(), A) else {
            panic!()
        };
        assert_eq!(alone.status, Status::Passed);
        assert!(
            !alone.is_evidence(),
            "a copied signature does not cover a changed record"
        );
        // A record that says it is verified is not believed.
        let mut claims = serde_json::to_value(&forged).unwrap();
        claims["verified"] =
            serde_json::json!({"signer": "this machine", "key": "k", "here": true});
        let NoteRecord::Found(said) = dec(claims.to_string().as_bytes(), A) else {
            panic!()
        };
        assert!(!said.is_evidence());
    }

    #[test]
    fn garbage_and_foreign_schemas_are_invalid_with_a_reason() {
        assert!(matches!(dec(b"", A), NoteRecord::Invalid(_)));
        assert!(matches!(dec(b"\xff\xfe binary", A), NoteRecord::Invalid(_)));
        assert!(matches!(
            dec(b"{\"schema\": \"git-sandbox/run/v1\", \"commit\"", A),
            NoteRecord::Invalid(_)
        ));
        let NoteRecord::Invalid(why) = dec(br#"{"schema":"git-sandbox/run/v9","commit":"a"}"#, A)
        else {
            panic!()
        };
        assert!(why.contains("newer"), "{why}");
    }

    /// Records an earlier build wrote (one commit failing under unittest with files added,
    /// modified and deleted, one stopped by its timeout) read into the typed record and written
    /// again are the bytes that were signed; so are words this build does not know.
    #[test]
    fn records_written_before_their_words_were_typed_are_written_back_byte_for_byte() {
        let lines = include_str!("../../../tests/fixtures/notes/written-before-typed-words.jsonl");
        let unknown = lines
            .replace(
                "\"killed_by\":\"timeout\"",
                "\"killed_by\":\"watchdog \\\"7\\\"\"",
            )
            .replace("\"framework\":\"unittest\"", "\"framework\":\"zig\"")
            .replace("\"status\":\"added\"", "\"status\":\"copied\"");
        assert_ne!(unknown, lines);
        let mut seen = Vec::new();
        for line in lines.lines().chain(unknown.lines()) {
            let (bytes, _) = signed_parts(line.as_bytes()).expect("a signed line");
            let r: RunRecord = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(
                String::from_utf8(serde_json::to_vec(&r).unwrap()).unwrap(),
                String::from_utf8(bytes).unwrap()
            );
            let t = r.tests.unwrap();
            let changes = r.changes.unwrap();
            seen.push((t.framework, t.killed_by, changes.files[0].status.clone()));
        }
        use crate::{ChangeStatus, Framework, KilledBy};
        assert_eq!(seen[0].0, Some(Framework::Unittest));
        assert_eq!(seen[1].1, Some(KilledBy::Timeout));
        assert_eq!(seen[2].0, Some(Framework::Other("zig".into())));
        assert_eq!(seen[3].1, Some(KilledBy::Other("watchdog \"7\"".into())));
        assert!(seen
            .iter()
            .any(|s| s.2 == ChangeStatus::Other("copied".into())));
    }

    #[test]
    fn unknown_enum_values_are_tolerated_and_never_a_pass() {
        let r = record(A, "2026-01-01T00:00:01.000Z", Status::Passed);
        let text = String::from_utf8(enc(&r))
            .unwrap()
            .replace("\"passed\"", "\"quarantined\"")
            .replace("\"manual\"", "\"carrier-pigeon\"");
        let NoteRecord::Found(got) = dec(text.as_bytes(), A) else {
            panic!("{text}")
        };
        assert_eq!(got.status, Status::Unknown);
        assert!(!got.status.is_success());
        assert_eq!(got.trigger, Trigger::Other);
    }

    #[test]
    fn the_summary_is_at_most_three_trailer_lines() {
        let r = record(A, "2026-01-01T00:00:01.000Z", Status::Passed);
        assert_eq!(
            String::from_utf8(summary(&r)).unwrap(),
            "Sandbox: passed, 6 passed 0 failed (unittest), 166 ms\n"
        );
        let mut e = record(A, "2026-01-01T00:00:01.000Z", Status::Error);
        e.error = Some("x.toml:1: bad\nsecond line".into());
        e.analysis = Some(crate::Analysis {
            files_analyzed: 1,
            functions_found: 9,
            complexity_score: 1.25,
            ..Default::default()
        });
        let text = String::from_utf8(summary(&e)).unwrap();
        assert_eq!(
            text,
            "Sandbox: error, 6 passed 0 failed (unittest), 166 ms\nSandbox-Analysis: 1 file, 9 functions, complexity 1.2\nSandbox-Error: x.toml:1: bad\n"
        );
    }
}
