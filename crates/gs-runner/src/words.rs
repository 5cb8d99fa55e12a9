//! The plain words of a configured test command, as the two-phase runners (pytest, jest and
//! vitest, cargo test, go test) recognise them before adding their selections.

/// A command without shell syntax, split into words: its `VAR=value` prefix, then the program
/// and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandWords<'a> {
    /// Every word, the assignments first.
    pub all: Vec<&'a str>,
    /// Where the program is in `all` (after the assignments).
    pub at: usize,
}

impl<'a> CommandWords<'a> {
    /// The program's basename (`.venv/bin/pytest` → `pytest`); `None`: only assignments.
    pub fn program(&self) -> Option<&'a str> {
        self.all.get(self.at).map(|w| program_name(w))
    }

    /// The program and its arguments.
    pub fn rest(&self) -> &[&'a str] {
        &self.all[self.at..]
    }
}

/// `command` as words, or `None` when it holds shell syntax (`&&`, pipes, redirections, quotes,
/// variables, globs, comments): a selection appended to such a line would not reach the runner
/// it names, or not as written.
pub fn command_words(command: &str) -> Option<CommandWords<'_>> {
    if command
        .chars()
        .any(|c| ";&|<>$`()'\"\\*?{}[]~#\n".contains(c))
    {
        return None;
    }
    let all: Vec<&str> = command.split_whitespace().collect();
    let at = all.iter().take_while(|w| is_assignment(w)).count();
    Some(CommandWords { all, at })
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
            assert_eq!(command_words(shell), None, "{shell}");
        }
    }
}
