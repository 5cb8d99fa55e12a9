//! The plain words of a configured test command, as the two-phase runners (pytest, jest and
//! vitest, cargo test, go test) recognise them before adding their selections.
//!
//! What goes before the runner is kept as written and put before phase one's command too:
//! `VAR=value` assignments, `env [-i] [-u NAME] VAR=value …`, and a project tool that runs the
//! command in the project's environment (`uv run`, `poetry run`, `pdm run`, `hatch run`).

/// A command without shell syntax, split into words: what goes before the runner (assignments,
/// `env`, `uv run` …), then the program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandWords<'a> {
    /// Every word, the prefix first.
    pub all: Vec<&'a str>,
    /// Where the program is in `all` (after the prefix).
    pub at: usize,
}

impl<'a> CommandWords<'a> {
    /// The program's basename (`.venv/bin/pytest` → `pytest`, hatch's `test:pytest` →
    /// `pytest`); `None`: only a prefix.
    pub fn program(&self) -> Option<&'a str> {
        let w = self.all.get(self.at)?;
        let hatch = self.all[..self.at]
            .windows(2)
            .any(|p| program_name(p[0]) == "hatch" && p[1] == "run");
        let w = match w.split_once(':') {
            Some((_, p)) if hatch && !w.contains('/') => p,
            _ => w,
        };
        Some(program_name(w))
    }

    /// The program and its arguments.
    pub fn rest(&self) -> &[&'a str] {
        &self.all[self.at..]
    }
}

/// Why a command's words are not plain ones a selection can be added to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotPlain {
    /// `&&`, pipes, redirections, quotes, variables, globs or comments.
    ShellSyntax,
    /// A prefix option that changes the directory or splits a string into more words
    /// (`env -C DIR`, `env -S`, `uv run --directory`), or one not known here.
    PrefixOption,
}

/// `command` as words, or `None` when it holds shell syntax (`&&`, pipes, redirections, quotes,
/// variables, globs, comments) or a prefix option that moves or rewrites it: a selection
/// appended to such a line would not reach the runner it names, or not as written.
pub fn command_words(command: &str) -> Option<CommandWords<'_>> {
    split_words(command).ok()
}

/// [`command_words`], with why a command is not plain.
pub fn split_words(command: &str) -> Result<CommandWords<'_>, NotPlain> {
    if command
        .chars()
        .any(|c| ";&|<>$`()'\"\\*?{}[]~#\n".contains(c))
    {
        return Err(NotPlain::ShellSyntax);
    }
    let all: Vec<&str> = command.split_whitespace().collect();
    let mut at = 0;
    loop {
        let before = at;
        at += all[at..].iter().take_while(|w| is_assignment(w)).count();
        match all.get(at).map(|w| program_name(w)) {
            Some("env") => at = env_options(&all, at + 1)?,
            Some(tool @ ("uv" | "poetry" | "pdm" | "hatch")) if all.get(at + 1) == Some(&"run") => {
                at = tool_options(tool, &all, at + 2)?
            }
            _ => {}
        }
        if at == before {
            break;
        }
    }
    Ok(CommandWords { all, at })
}

/// Past `env`'s options from `i`: `-i`, `-`, `-u NAME`, `--unset=NAME`, `-0`/`-v` are kept as
/// written; any other (`-C DIR`, `-S`, `--split-string`) is refused.
fn env_options(all: &[&str], mut i: usize) -> Result<usize, NotPlain> {
    while let Some(&w) = all.get(i) {
        match w {
            "-i" | "--ignore-environment" | "-" | "-0" | "--null" | "-v" | "--debug" => i += 1,
            "-u" | "--unset" => {
                all.get(i + 1).ok_or(NotPlain::PrefixOption)?;
                i += 2;
            }
            "--" => return Ok(i + 1),
            w if w.starts_with("--unset=") || (w.starts_with("-u") && w.len() > 2) => i += 1,
            w if w.starts_with('-') => return Err(NotPlain::PrefixOption),
            _ => break,
        }
    }
    Ok(i)
}

/// Past a project tool's `run` options from `i`. Options that take a value take the next word
/// (or `--opt=value`); those that run elsewhere (`--directory`, `--project`, uv's `--script`,
/// pdm's `-p`) are refused, as is any option not known here.
fn tool_options(tool: &str, all: &[&str], mut i: usize) -> Result<usize, NotPlain> {
    let (flags, valued): (&[&str], &[&str]) = match tool {
        "uv" => (
            &[
                "--frozen",
                "--locked",
                "--no-sync",
                "--isolated",
                "--all-extras",
                "--no-dev",
                "--dev",
                "--all-groups",
                "--no-default-groups",
                "--only-dev",
                "--offline",
                "--no-project",
                "--active",
                "--exact",
                "--no-env-file",
                "--quiet",
                "-q",
                "--verbose",
                "-v",
                "--module",
            ],
            &[
                "--with",
                "--with-editable",
                "--with-requirements",
                "--python",
                "-p",
                "--extra",
                "--group",
                "--only-group",
                "--no-group",
                "--package",
                "--env-file",
                "--index",
                "--default-index",
                "--index-url",
                "--extra-index-url",
            ],
        ),
        "poetry" => (&["--quiet", "-q", "--no-interaction", "-n", "-v"], &[]),
        "pdm" => (
            &["--site-packages", "-s", "--quiet", "-q", "--verbose", "-v"],
            &[],
        ),
        // `hatch run ENV:CMD`: the environment is glued to the program's word.
        _ => (&[], &[]),
    };
    while let Some(&w) = all.get(i) {
        let name = w.split('=').next().unwrap_or(w);
        if w == "--" {
            return Ok(i + 1);
        }
        if !w.starts_with('-') {
            break;
        }
        if flags.contains(&w) || (valued.contains(&name) && w.contains('=')) {
            i += 1;
        } else if valued.contains(&w) {
            all.get(i + 1).ok_or(NotPlain::PrefixOption)?;
            i += 2;
        } else {
            return Err(NotPlain::PrefixOption);
        }
    }
    Ok(i)
}

/// A path's last component: the program a word names.
pub fn program_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

fn is_assignment(w: &str) -> bool {
    w.split_once('=').is_some_and(|(k, _)| {
        !k.is_empty()
            && !k.starts_with(|c: char| c.is_ascii_digit())
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_go_before_the_program_and_shell_lines_are_refused() {
        let w = command_words("A=1 B_2=x ./bin/pytest -q").unwrap();
        assert_eq!((w.at, w.program()), (2, Some("pytest")));
        assert_eq!(w.rest(), ["./bin/pytest", "-q"]);
        assert_eq!(command_words("1A=x go").unwrap().program(), Some("1A=x"));
        assert_eq!(command_words("X=1").unwrap().program(), None);
        for shell in ["a && b", "a | b", "a $X", "a 'b'", "a *.py", "a # c"] {
            assert_eq!(split_words(shell), Err(NotPlain::ShellSyntax), "{shell}");
        }
    }

    #[test]
    fn env_and_project_tools_go_before_the_program() {
        let program = |c: &'static str| {
            let w = command_words(c).unwrap();
            (w.all[..w.at].join(" "), w.program().unwrap_or_default())
        };
        assert_eq!(
            program("env PYTHONPATH=src .venv/bin/python -m pytest tests -q"),
            ("env PYTHONPATH=src".into(), "python")
        );
        assert_eq!(
            program("env -i -u HOME --unset=LANG -uX - A=1 B=2 pytest"),
            ("env -i -u HOME --unset=LANG -uX - A=1 B=2".into(), "pytest")
        );
        assert_eq!(
            program("CI=1 uv run --frozen --extra test --python=3.11 pytest"),
            (
                "CI=1 uv run --frozen --extra test --python=3.11".into(),
                "pytest"
            )
        );
        assert_eq!(
            program("poetry run python -m pytest"),
            ("poetry run".into(), "python")
        );
        assert_eq!(
            program("pdm run -s pytest -x"),
            ("pdm run -s".into(), "pytest")
        );
        assert_eq!(
            program("hatch run test:pytest"),
            ("hatch run".into(), "pytest")
        );
        assert_eq!(program("hatch run pytest"), ("hatch run".into(), "pytest"));
        assert_eq!(
            program("env uv run -- pytest"),
            ("env uv run --".into(), "pytest")
        );
        // A file path with a colon is not hatch's environment.
        assert_eq!(program("./a:b/pytest"), ("".into(), "pytest"));
        for moved in [
            "env -C sub pytest",
            "env -S pytest",
            "uv run --directory sub pytest",
            "uv run --project sub pytest",
            "pdm run -p sub pytest",
            "uv run --with",
            "env -u",
            "poetry run --unknown pytest",
        ] {
            assert_eq!(split_words(moved), Err(NotPlain::PrefixOption), "{moved}");
        }
    }
}
