//! `git sandbox __reference DIR` (hidden): the manual's command reference, one Markdown page per
//! visible command, written from the same clap definition as `--help`, the man pages and the
//! completions. The pages are committed under `docs/src/reference/`; a test regenerates them
//! and fails when they differ, so the reference cannot drift from the binary.

use super::{CmdResult, CommandError};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct ReferenceArgs {
    /// Where to write the pages (`docs/src/reference` in the repository)
    pub dir: PathBuf,
}

pub fn cmd_reference(a: ReferenceArgs) -> CmdResult {
    let pages = pages(super::command());
    std::fs::create_dir_all(&a.dir).map_err(|e| write_error(&a.dir, e))?;
    // Pages of commands that no longer exist go: the directory is the generator's alone.
    if let Ok(entries) = std::fs::read_dir(&a.dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".md") && !pages.iter().any(|(n, _)| *n == name) {
                std::fs::remove_file(e.path()).map_err(|err| write_error(&e.path(), err))?;
            }
        }
    }
    for (name, text) in &pages {
        let path = a.dir.join(name);
        gs_util::write_atomic(&path, text.as_bytes()).map_err(|e| write_error(&path, e))?;
    }
    eprintln!(
        "Wrote {} into {}",
        super::ui::plural(pages.len(), "page"),
        a.dir.display()
    );
    Ok(0)
}

fn write_error(path: &Path, e: std::io::Error) -> CommandError {
    CommandError::environment(format!("cannot write {} ({e})", path.display()))
}

/// `(file name, Markdown)` of every visible command, the top one first (`index.md`).
fn pages(cmd: clap::Command) -> Vec<(String, String)> {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut out = Vec::new();
    let mut index = String::from(
        "# Command reference\n\nGenerated from the binary's own command-line definition (as \
         `--help` and the man pages are): every command, argument and option. The guide pages \
         under [Commands](../commands.md) say how to use them.\n\n",
    );
    walk(&cmd, &[], &mut out, &mut index);
    out.insert(0, ("index.md".to_string(), index));
    out
}

fn walk(cmd: &clap::Command, path: &[&str], out: &mut Vec<(String, String)>, index: &mut String) {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let mut p = path.to_vec();
        p.push(sub.get_name());
        let file = format!("{}.md", p.join("-"));
        let _ = writeln!(
            index,
            "- [`git sandbox {}`]({file}) — {}",
            p.join(" "),
            first_line(sub.get_about().map(|s| s.to_string()).unwrap_or_default())
        );
        out.push((file, page(sub, &p)));
        walk(sub, &p, out, index);
    }
}

fn first_line(s: String) -> String {
    escape(s.lines().next().unwrap_or("").trim())
}

/// Help text as Markdown: what clap's help says literally stays literal (`[promote] minimum`
/// is a config section, not a link), except inside `code spans`, which Markdown leaves alone.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for c in text.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code && matches!(c, '[' | ']' | '<' | '>' | '*' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn page(cmd: &clap::Command, path: &[&str]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# git sandbox {}\n", path.join(" "));
    let about = cmd
        .get_long_about()
        .or(cmd.get_about())
        .map(|a| a.to_string())
        .unwrap_or_default();
    if !about.trim().is_empty() {
        let _ = writeln!(s, "{}\n", escape(about.trim()));
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.trim_start_matches("Usage:").trim();
    let _ = writeln!(s, "```text\n{usage}\n```\n");
    let subs: Vec<_> = cmd.get_subcommands().filter(|c| !c.is_hide_set()).collect();
    if !subs.is_empty() {
        let _ = writeln!(s, "## Commands\n");
        for c in subs {
            let mut p = path.to_vec();
            p.push(c.get_name());
            let _ = writeln!(
                s,
                "- [`{}`]({}.md) — {}",
                c.get_name(),
                p.join("-"),
                first_line(c.get_about().map(|a| a.to_string()).unwrap_or_default())
            );
        }
        s.push('\n');
    }
    let args: Vec<_> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && a.get_id() != "help" && a.get_id() != "version")
        .collect();
    let (positional, options): (Vec<_>, Vec<_>) = args.into_iter().partition(|a| a.is_positional());
    if !positional.is_empty() {
        let _ = writeln!(s, "## Arguments\n");
        for a in positional {
            let name = a
                .get_value_names()
                .map(|v| {
                    v.iter()
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_else(|| a.get_id().to_string().to_uppercase());
            entry(&mut s, &format!("`{name}`"), a);
        }
    }
    if !options.is_empty() {
        let _ = writeln!(s, "## Options\n");
        for a in options {
            let mut flag = String::new();
            if let Some(c) = a.get_short() {
                let _ = write!(flag, "-{c}, ");
            }
            if let Some(l) = a.get_long() {
                let _ = write!(flag, "--{l}");
            }
            if a.get_action().takes_values() {
                if let Some(v) = a.get_value_names() {
                    let v: Vec<_> = v.iter().map(|n| n.to_string()).collect();
                    let _ = write!(flag, " {}", v.join(" "));
                } else {
                    let _ = write!(flag, " {}", a.get_id().to_string().to_uppercase());
                }
            }
            entry(&mut s, &format!("`{flag}`"), a);
        }
    }
    s
}

fn entry(s: &mut String, name: &str, a: &clap::Arg) {
    let help = a
        .get_long_help()
        .or(a.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let mut extra = Vec::new();
    let values: Vec<String> = a
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if !values.is_empty() && a.get_action().takes_values() {
        extra.push(format!("one of {}", values.join(", ")));
    }
    let defaults: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|v| format!("`{}`", v.to_string_lossy()))
        .collect();
    if !defaults.is_empty() && a.get_action().takes_values() {
        extra.push(format!("default {}", defaults.join(" ")));
    }
    // Continuation lines indented under the list item keep the help's paragraphs and lists.
    let help = escape(help.trim())
        .replace('\n', "\n  ")
        .replace("\n  \n", "\n\n");
    let _ = write!(s, "- {name}");
    if !help.is_empty() {
        let _ = write!(s, " — {help}");
    }
    if !extra.is_empty() {
        let _ = write!(s, " ({})", extra.join("; "));
    }
    s.push('\n');
    s.push('\n');
}
