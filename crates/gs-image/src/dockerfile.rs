//! The Dockerfile subset git-sandbox builds (`[environment] dockerfile`): one stage, `FROM` an
//! image as `[environment] image` names one, `RUN`, `COPY` and `ADD` of the commit's own files,
//! `ENV`, `ARG`, `WORKDIR`, `USER` (recorded). Any other instruction, flag or form is refused
//! with its line: a build that does not do what the file says would be a wrong environment.
//!
//! The file is committed, so hostile: this is a parser only (nothing is run or read here), and
//! variables (`$NAME`, `${NAME}`, `${NAME:-word}`, `${NAME:+word}`) are expanded from the file's
//! own `ARG` and `ENV`, never from this machine's environment.

use std::collections::BTreeMap;

/// One instruction, its variables expanded (but `RUN`'s, which the shell expands).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instruction {
    From(String),
    /// A shell line (`RUN ["a", "b"]` is written as its words quoted).
    Run(String),
    /// Sources relative to the context, and the destination as written (relative: under the
    /// working directory).
    Copy {
        sources: Vec<String>,
        dest: String,
    },
    Env(Vec<(String, String)>),
    Workdir(String),
    User(String),
}

/// An instruction and the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub line: usize,
    pub instruction: Instruction,
    /// The `ARG`s in scope (their defaults): a `RUN` has them in its environment, under the
    /// `ENV`s of the same names; the image does not keep them.
    pub args: Vec<(String, String)>,
}

/// The most a Dockerfile may hold, and the most instructions.
pub const MAX_BYTES: usize = 256 * 1024;
pub const MAX_STEPS: usize = 200;

/// Parse `text`; an error names the line and what to do.
pub fn parse(text: &str) -> Result<Vec<Step>, String> {
    parse_with(text, &BTreeMap::new())
}

/// Parse `text` with build arguments (a devcontainer's `build.args`): each one is the value of
/// the `ARG` of its name, over its default; one the file declares no `ARG` for is not used (as
/// Docker does).
pub fn parse_with(text: &str, build_args: &BTreeMap<String, String>) -> Result<Vec<Step>, String> {
    if text.len() > MAX_BYTES {
        return Err("the Dockerfile is over 256 KiB; keep it to instructions".into());
    }
    let mut steps = Vec::new();
    // What `ARG` and `ENV` have set so far: the only variables the file's words see.
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    let mut args: BTreeMap<String, String> = BTreeMap::new();
    let mut from_seen = false;
    for (line, logical) in logical_lines(text)? {
        let bad = |why: String| Err(format!("line {line}: {why}"));
        let (word, rest) = match logical.split_once(char::is_whitespace) {
            Some((w, r)) => (w, r.trim()),
            None => (logical.as_str(), ""),
        };
        let keyword = word.to_ascii_uppercase();
        if rest.starts_with("--") && keyword != "RUN" {
            let flag = rest.split_whitespace().next().unwrap_or(rest);
            return bad(format!(
                "{keyword} {flag} is not supported; write the instruction without flags"
            ));
        }
        if !from_seen && !matches!(keyword.as_str(), "FROM" | "ARG") {
            return bad(format!(
                "{keyword} comes before FROM; start with FROM IMAGE"
            ));
        }
        let instruction = match keyword.as_str() {
            "FROM" => {
                if from_seen {
                    return bad(
                        "a second FROM: multi-stage builds are not supported; build one stage"
                            .into(),
                    );
                }
                from_seen = true;
                let words: Vec<&str> = rest.split_whitespace().collect();
                let image = match words.as_slice() {
                    [image] => image,
                    [image, as_, _name] if as_.eq_ignore_ascii_case("as") => image,
                    _ => return bad("write FROM IMAGE (one image, no flags)".into()),
                };
                let image = expand(image, &vars).map_err(|e| format!("line {line}: {e}"))?;
                crate::Reference::parse(&image).map_err(|e| format!("line {line}: {e}"))?;
                Instruction::From(image)
            }
            "RUN" => {
                if rest.starts_with("--") {
                    return bad("RUN flags (--mount, --network) are not supported; write RUN COMMAND".into());
                }
                if rest.is_empty() {
                    return bad("RUN names no command".into());
                }
                match json_words(rest) {
                    Some(words) => {
                        let quoted: Result<Vec<String>, String> = words
                            .iter()
                            .map(|w| {
                                gs_util::shell::quote(w)
                                    .map(|q| q.into_owned())
                                    .map_err(|_| format!("line {line}: a word holds a NUL byte"))
                            })
                            .collect();
                        Instruction::Run(quoted?.join(" "))
                    }
                    None => Instruction::Run(rest.to_string()),
                }
            }
            "COPY" | "ADD" => {
                let words = match json_words(rest) {
                    Some(w) => w,
                    None => split_words(rest).map_err(|e| format!("line {line}: {e}"))?,
                };
                let mut words: Vec<String> = words
                    .iter()
                    .map(|w| expand(w, &vars))
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("line {line}: {e}"))?;
                if words.len() < 2 {
                    return bad(format!("write {keyword} SOURCE… DEST"));
                }
                let dest = words.pop().unwrap_or_default();
                for s in &words {
                    if keyword == "ADD" && (s.contains("://") || s.starts_with("git@")) {
                        return bad(format!(
                            "ADD {s}: URLs are not fetched; commit the file and COPY it"
                        ));
                    }
                    let archive = [".tar", ".tgz", ".gz", ".bz2", ".xz", ".zst"];
                    if keyword == "ADD" && archive.iter().any(|a| s.ends_with(a)) {
                        return bad(format!(
                            "ADD {s}: archives are not unpacked; use COPY, or unpack it in a RUN"
                        ));
                    }
                    if s.contains(['*', '?', '[']) {
                        return bad(format!(
                            "{keyword} {s}: wildcards are not supported; name the files or their directory"
                        ));
                    }
                }
                Instruction::Copy {
                    sources: words,
                    dest,
                }
            }
            "ENV" => {
                let pairs = env_pairs(rest, &vars).map_err(|e| format!("line {line}: {e}"))?;
                for (k, v) in &pairs {
                    vars.insert(k.clone(), v.clone());
                }
                Instruction::Env(pairs)
            }
            "ARG" => {
                let (name, default) = match rest.split_once('=') {
                    Some((n, d)) => (n.trim(), Some(unquote(d.trim())?)),
                    None => (rest, None),
                };
                if !is_name(name) {
                    return bad(format!("ARG {name:?} is not a variable name"));
                }
                // An ARG's value is the build argument of its name, else its default.
                let value = match (build_args.get(name), default) {
                    (Some(given), _) => Some(given.clone()),
                    (None, Some(d)) => {
                        Some(expand(&d, &vars).map_err(|e| format!("line {line}: {e}"))?)
                    }
                    (None, None) => None,
                };
                if let Some(v) = value {
                    vars.entry(name.to_string()).or_insert(v.clone());
                    args.entry(name.to_string()).or_insert(v);
                }
                continue;
            }
            "WORKDIR" => {
                let w = expand(&unquote(rest)?, &vars).map_err(|e| format!("line {line}: {e}"))?;
                if w.is_empty() {
                    return bad("WORKDIR names no directory".into());
                }
                Instruction::Workdir(w)
            }
            "USER" => {
                let u = expand(rest, &vars).map_err(|e| format!("line {line}: {e}"))?;
                if u.is_empty() {
                    return bad("USER names no user".into());
                }
                Instruction::User(u)
            }
            other => {
                return bad(format!(
                    "{other} is not supported; git-sandbox builds FROM, RUN, COPY, ADD, ENV, ARG, WORKDIR and USER"
                ))
            }
        };
        steps.push(Step {
            line,
            instruction,
            args: args.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        });
        if steps.len() > MAX_STEPS {
            return bad(format!("more than {MAX_STEPS} instructions"));
        }
    }
    if !from_seen {
        return Err("the Dockerfile has no FROM; start with FROM IMAGE".into());
    }
    Ok(steps)
}

/// The file's instructions, each on one line (continuations joined, comments and blank lines
/// gone), with the line it starts on. Only the default escape character is accepted.
fn logical_lines(text: &str) -> Result<Vec<(usize, String)>, String> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    let mut directives = true;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = raw.trim();
        if let Some(comment) = trimmed.strip_prefix('#') {
            if directives {
                let d = comment.trim().to_ascii_lowercase();
                if d.starts_with("escape") && d.split_once('=').map(|(_, v)| v.trim()) != Some("\\")
                {
                    return Err(format!(
                        "line {n}: only the default escape character (\\) is supported"
                    ));
                }
            }
            continue;
        }
        if trimmed.is_empty() {
            continue;
        }
        directives = false;
        let (body, continued) = match trimmed.strip_suffix('\\') {
            Some(b) => (b.trim_end(), true),
            None => (trimmed, false),
        };
        match &mut current {
            Some((_, text)) => {
                text.push(' ');
                text.push_str(body);
            }
            None => current = Some((n, body.to_string())),
        }
        if !continued {
            out.extend(current.take());
        }
    }
    if let Some((n, _)) = current {
        return Err(format!(
            "line {n}: the instruction ends with a continuation (\\) and nothing after it"
        ));
    }
    Ok(out)
}

/// `["a", "b"]`: the exec (JSON) form's words, when `rest` is one.
fn json_words(rest: &str) -> Option<Vec<String>> {
    if !rest.starts_with('[') {
        return None;
    }
    serde_json::from_str::<Vec<String>>(rest).ok()
}

fn is_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A word without its surrounding quotes.
fn unquote(s: &str) -> Result<String, String> {
    let mut words = split_words(s)?;
    match words.len() {
        0 => Ok(String::new()),
        1 => Ok(words.remove(0)),
        _ => Ok(s.to_string()),
    }
}

/// Words split on blanks, with double and single quotes and backslash escapes as a shell reads
/// them (variables are left for [`expand`]).
fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => out.extend(word.take()),
            '"' | '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        None => return Err(format!("a quote ({c}) is not closed")),
                        Some(q) if q == c => break,
                        Some('\\') if c == '"' => w.extend(chars.next()),
                        Some(x) => w.push(x),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    out.extend(word);
    Ok(out)
}

/// `ENV A=1 B="two words"`, or the old form `ENV A one value`.
fn env_pairs(rest: &str, vars: &BTreeMap<String, String>) -> Result<Vec<(String, String)>, String> {
    let first = rest.split_whitespace().next().unwrap_or("");
    let mut out = Vec::new();
    if !first.contains('=') {
        let (name, value) = rest
            .split_once(char::is_whitespace)
            .ok_or("write ENV NAME=value")?;
        if !is_name(name) {
            return Err(format!("ENV {name:?} is not a variable name"));
        }
        out.push((name.to_string(), expand(value.trim(), vars)?));
        return Ok(out);
    }
    let mut seen = vars.clone();
    for w in split_words(rest)? {
        let (name, value) = w
            .split_once('=')
            .ok_or(format!("ENV {w:?} is not NAME=value"))?;
        if !is_name(name) {
            return Err(format!("ENV {name:?} is not a variable name"));
        }
        let value = expand(value, &seen)?;
        seen.insert(name.to_string(), value.clone());
        out.push((name.to_string(), value));
    }
    Ok(out)
}

/// `$NAME`, `${NAME}`, `${NAME:-word}` and `${NAME:+word}` from `vars` (unset: empty); `\$` is a
/// dollar sign.
pub fn expand(s: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'$') => out.extend(chars.next()),
            '$' if chars.peek() == Some(&'{') => {
                chars.next();
                let mut inner = String::new();
                loop {
                    match chars.next() {
                        None => return Err(format!("${{{inner} is not closed with }}")),
                        Some('}') => break,
                        Some(x) => inner.push(x),
                    }
                }
                let (name, op) = match inner.find(':') {
                    Some(i) => (&inner[..i], Some(&inner[i..])),
                    None => (inner.as_str(), None),
                };
                if !is_name(name) {
                    return Err(format!("${{{inner}}} is not a variable"));
                }
                let value = vars.get(name).filter(|v| !v.is_empty());
                match op {
                    None => out.push_str(value.map_or("", String::as_str)),
                    Some(o) if o.starts_with(":-") => match value {
                        Some(v) => out.push_str(v),
                        None => out.push_str(&expand(&o[2..], vars)?),
                    },
                    Some(o) if o.starts_with(":+") => {
                        if value.is_some() {
                            out.push_str(&expand(&o[2..], vars)?);
                        }
                    }
                    Some(o) => return Err(format!("${{{name}{o}}}: only :- and :+ are supported")),
                }
            }
            '$' if chars
                .peek()
                .is_some_and(|c| c.is_ascii_alphabetic() || *c == '_') =>
            {
                let mut name = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_ascii_alphanumeric() || c == '_' {
                        name.push(c);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push_str(vars.get(&name).map_or("", String::as_str));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subset_parses_with_variables_continuations_and_both_forms() {
        let steps = parse(
            "# syntax=docker/dockerfile:1\n\
             ARG BASE=python:3.12-slim\n\
             FROM ${BASE} AS build\n\
             ENV APP=/app MODE=\"a b\"\n\
             ENV OLD legacy form\n\
             WORKDIR $APP\n\
             COPY requirements.txt setup.cfg ./\n\
             COPY [\"src\", \"${APP}/src\"]\n\
             RUN pip install \\\n    -r requirements.txt\n\
             RUN [\"echo\", \"two words\"]\n\
             USER app\n",
        )
        .unwrap();
        let i: Vec<&Instruction> = steps.iter().map(|s| &s.instruction).collect();
        assert_eq!(i[0], &Instruction::From("python:3.12-slim".into()));
        assert_eq!(steps[0].line, 3);
        assert_eq!(
            i[1],
            &Instruction::Env(vec![
                ("APP".into(), "/app".into()),
                ("MODE".into(), "a b".into())
            ])
        );
        assert_eq!(
            i[2],
            &Instruction::Env(vec![("OLD".into(), "legacy form".into())])
        );
        assert_eq!(i[3], &Instruction::Workdir("/app".into()));
        assert_eq!(
            i[4],
            &Instruction::Copy {
                sources: vec!["requirements.txt".into(), "setup.cfg".into()],
                dest: "./".into()
            }
        );
        assert_eq!(
            i[5],
            &Instruction::Copy {
                sources: vec!["src".into()],
                dest: "/app/src".into()
            }
        );
        assert_eq!(
            i[6],
            &Instruction::Run("pip install -r requirements.txt".into())
        );
        assert_eq!(i[7], &Instruction::Run("echo 'two words'".into()));
        assert_eq!(steps[6].line, 9);
        assert_eq!(i[8], &Instruction::User("app".into()));
        // A RUN has the ARGs in scope (a default only; ENVs of the same name stand over them).
        assert_eq!(
            steps[6].args,
            vec![("BASE".to_string(), "python:3.12-slim".to_string())]
        );
    }

    #[test]
    fn what_is_not_the_subset_is_refused_with_its_line() {
        for (text, line, says) in [
            ("FROM a\nCMD [\"x\"]\n", 2, "CMD is not supported"),
            ("FROM a\nFROM b\n", 2, "multi-stage"),
            ("FROM a\nCOPY --from=b x y\n", 2, "--from=b"),
            ("FROM a\nCOPY --chown=1 x y\n", 2, "--chown=1"),
            ("FROM a\nADD https://x/y.sh /y\n", 2, "URLs"),
            ("FROM a\nADD x.tar.gz /\n", 2, "archives"),
            ("FROM a\nCOPY *.py /\n", 2, "wildcards"),
            ("FROM a\nRUN --mount=type=cache x\n", 2, "RUN flags"),
            ("RUN x\n", 1, "before FROM"),
            ("FROM --platform=linux/arm64 a\n", 1, "--platform"),
            ("FROM Bad Ref\n", 1, "FROM IMAGE"),
            ("FROM a\nRUN x \\\n", 2, "continuation"),
            ("# escape=`\nFROM a\n", 1, "escape"),
            ("FROM a\nENV 1X=y\n", 2, "not a variable name"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.starts_with(&format!("line {line}: ")), "{text:?}: {e}");
            assert!(e.contains(says), "{text:?}: {e}");
        }
        assert!(parse("# nothing\n").unwrap_err().contains("no FROM"));
    }

    #[test]
    fn build_arguments_stand_over_the_arg_defaults_and_an_undeclared_one_is_unused() {
        let given = BTreeMap::from([
            ("BASE".to_string(), "debian:bookworm".to_string()),
            ("LEVEL".to_string(), "3".to_string()),
            ("UNUSED".to_string(), "x".to_string()),
        ]);
        let steps = parse_with(
            "ARG BASE=python:3.12
FROM $BASE
ARG LEVEL
ARG MODE=fast
RUN make
ENV L=$LEVEL-$MODE-${UNUSED:-none}
",
            &given,
        )
        .unwrap();
        assert_eq!(
            steps[0].instruction,
            Instruction::From("debian:bookworm".into())
        );
        assert_eq!(
            steps[1].args,
            vec![
                ("BASE".to_string(), "debian:bookworm".to_string()),
                ("LEVEL".to_string(), "3".to_string()),
                ("MODE".to_string(), "fast".to_string()),
            ]
        );
        assert_eq!(
            steps[2].instruction,
            Instruction::Env(vec![("L".into(), "3-fast-none".into())])
        );
    }

    #[test]
    fn variables_come_from_the_file_never_from_this_machine() {
        // PATH and HOME are set in every test's environment: neither is read.
        assert!(std::env::var_os("PATH").is_some());
        let steps = parse("FROM a\nENV X=${PATH:-none}$HOME\n").unwrap();
        assert_eq!(
            steps[1].instruction,
            Instruction::Env(vec![("X".into(), "none".into())])
        );
        let vars = BTreeMap::from([("A".to_string(), "1".to_string())]);
        assert_eq!(
            expand("${A:+set}-${B:-d}-\\$A-$A", &vars).unwrap(),
            "set-d-$A-1"
        );
        assert!(expand("${A", &vars).is_err());
    }
}
