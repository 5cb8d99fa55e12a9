//! Line classification: every line is code, comment or blank, from the comment and string extents
//! the metrics walk found and the bytes themselves.

/// Line counts of one file. `total = code + comment + blank`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineCounts {
    pub total: u64,
    pub code: u64,
    pub comment: u64,
    pub blank: u64,
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c)
}

fn has_token(bytes: &[u8]) -> bool {
    bytes.iter().any(|&b| !is_space(b))
}

/// Classifies lines. A line is code when it has a non-space byte outside every comment, or lies
/// in a string literal that spans lines; otherwise comment when a comment touches it; else blank.
///
/// `comments` are byte ranges in order and disjoint; `strings` are row ranges in document order.
pub fn count_lines(
    src: &[u8],
    comments: &[(usize, usize)],
    strings: &[(usize, usize)],
) -> LineCounts {
    let mut counts = LineCounts::default();
    let mut ci = 0;
    let mut si = 0;
    let mut string_until: Option<usize> = None;
    let mut pos = 0;
    let mut row = 0;
    while pos < src.len() {
        let end = src[pos..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(src.len(), |i| pos + i);
        while si < strings.len() && strings[si].0 <= row {
            string_until = Some(string_until.map_or(strings[si].1, |u| u.max(strings[si].1)));
            si += 1;
        }
        let in_string = string_until.is_some_and(|u| row <= u);

        while ci < comments.len() && comments[ci].1 <= pos {
            ci += 1;
        }
        let mut code = false;
        let mut comment = false;
        let mut p = pos;
        loop {
            match comments.get(ci) {
                Some(&(cs, ce)) if cs < end => {
                    if cs > p && has_token(&src[p..cs]) {
                        code = true;
                    }
                    comment = true;
                    if ce > end {
                        break;
                    }
                    p = ce.max(p);
                    ci += 1;
                }
                _ => {
                    if p < end && has_token(&src[p..end]) {
                        code = true;
                    }
                    break;
                }
            }
        }
        counts.total += 1;
        if code || in_string {
            counts.code += 1;
        } else if comment {
            counts.comment += 1;
        } else {
            counts.blank += 1;
        }
        pos = end + 1;
        row += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(src: &str, needles: &[&str]) -> Vec<(usize, usize)> {
        needles
            .iter()
            .map(|n| {
                let s = src.find(n).unwrap();
                (s, s + n.len())
            })
            .collect()
    }

    #[test]
    fn classifies_code_comment_and_blank_lines() {
        let src = "a = 1 # c\n\n# only\n  \n/* x\n\n y */ b\n";
        let c = ranges(src, &["# c", "# only", "/* x\n\n y */"]);
        let got = count_lines(src.as_bytes(), &c, &[]);
        assert_eq!(
            got,
            LineCounts {
                total: 7,
                code: 2,
                comment: 3,
                blank: 2
            }
        );
    }

    #[test]
    fn every_line_of_a_multiline_string_is_code() {
        let src = "s = \"\"\"\n\n\n\"\"\"\n";
        let got = count_lines(src.as_bytes(), &[], &[(0, 3)]);
        assert_eq!(got.code, 4);
        assert_eq!(got.blank, 0);
    }

    #[test]
    fn last_line_without_newline_counts_and_empty_input_has_none() {
        assert_eq!(count_lines(b"x\ny", &[], &[]).total, 2);
        assert_eq!(count_lines(b"", &[], &[]).total, 0);
        assert_eq!(count_lines(b"\n", &[], &[]).blank, 1);
    }
}
