//! Words for `/bin/sh -c`, quoted by `shlex`, which knows every character POSIX sh (and bash,
//! dash, zsh) treats specially, so a word comes out of the shell as it went in.

use std::borrow::Cow;

/// `word` as one shell word. A NUL byte can be in no command line (the kernel's argv is C
/// strings), so a word holding one is refused: the caller names it.
pub fn quote(word: &str) -> Result<Cow<'_, str>, shlex::QuoteError> {
    shlex::try_quote(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `sh` makes of `line`: its words.
    fn through_sh(line: &str) -> Vec<String> {
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(format!("for w in {line}; do printf '%s\\0' \"$w\"; done"))
            .output()
            .unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .split_terminator('\0')
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn every_word_comes_out_of_sh_as_it_went_in() {
        let words = [
            "plain",
            "",
            "two words",
            "it's",
            "\"quoted\"",
            "$HOME",
            "`id`",
            "a\nb",
            "tab\there",
            "*",
            "~",
            "a=b",
            "50%",
            "x,y",
            "{a,b}",
            "!bang",
            "^caret",
            "back\\slash",
            "é ü ✓",
            "#not-a-comment",
        ];
        let line: Vec<_> = words.iter().map(|w| quote(w).unwrap()).collect();
        assert_eq!(through_sh(&line.join(" ")), words);
    }

    #[test]
    fn a_nul_is_refused() {
        assert!(quote("a\0b").is_err());
    }
}
