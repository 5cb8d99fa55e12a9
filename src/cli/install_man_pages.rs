use super::{CmdResult, CommandError};
use std::path::{Path, PathBuf};

/// Write a man page for git-sandbox and each of its commands (`git-sandbox.1`,
/// `git-sandbox-run.1`, …) into DIR/man1, so that `git help sandbox`, `git sandbox --help` and
/// `man git-sandbox-run` open them.
///
/// The default DIR, `<directory of the binary>/../share/man` (`~/.cargo/share/man` for a binary
/// in `~/.cargo/bin`), is where man finds pages for programs on your PATH without any set-up.
///
/// Examples: `git sandbox install-man-pages`, `git sandbox install-man-pages ~/.local/share/man`
#[derive(clap::Args)]
pub struct InstallManPagesArgs {
    /// Where to write them (pages go into DIR/man1).
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

pub fn cmd_install_man_pages(args: InstallManPagesArgs) -> CmdResult {
    let dir = match args.dir {
        Some(d) => d,
        None => default_dir()?,
    };
    let man1 = dir.join("man1");
    let failed = |e: std::io::Error| {
        CommandError::io(
            format!("cannot write man pages into {}: {e}", man1.display()),
            &e,
        )
        .hint("name a directory you can write to, e.g. `git sandbox install-man-pages ~/.local/share/man`")
    };
    std::fs::create_dir_all(&man1).map_err(failed)?;
    let pages = write_pages(super::command(), &man1).map_err(failed)?;
    println!(
        "Installed {} into {}",
        super::ui::plural(pages.len(), "man page"),
        man1.display()
    );
    if !man_finds(&dir) {
        eprintln!(
            "hint: man does not look in {} yet; add it to MANPATH, e.g. in ~/.bashrc:\n  export MANPATH=\"{}:$MANPATH\"",
            dir.display(),
            dir.display()
        );
    }
    Ok(0)
}

/// On the first command of an installed binary (not one cargo built under its target dir):
/// write the man pages into the default DIR when it has none and can be written, so that
/// `git sandbox --help` opens a page rather than "No manual entry", and say so in one line on
/// stderr. Quiet otherwise: the command's own work matters more.
pub fn beside_installed_binary() {
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    // cargo marks its build directories with CACHEDIR.TAG: a developer's build is not installed.
    if exe
        .ancestors()
        .skip(1)
        .any(|d| d.join("CACHEDIR.TAG").is_file())
    {
        return;
    }
    let Ok(dir) = default_dir() else { return };
    let man1 = dir.join("man1");
    if man1.join("git-sandbox.1").exists() || std::fs::create_dir_all(&man1).is_err() {
        return;
    }
    if let Ok(pages) = write_pages(super::command(), &man1) {
        eprintln!(
            "Installed {} into {} (for `git sandbox --help`)",
            super::ui::plural(pages.len(), "man page"),
            man1.display()
        );
    }
}

/// `<dir of the binary>/../share/man`: man-db searches `../share/man` next to every PATH entry.
fn default_dir() -> Result<PathBuf, CommandError> {
    let exe = std::env::current_exe().map_err(|e| {
        CommandError::environment(format!("cannot find where git-sandbox is installed ({e})"))
            .hint("name a directory: `git sandbox install-man-pages DIR`")
    })?;
    let bin = exe.parent().unwrap_or(Path::new("/"));
    Ok(bin.parent().unwrap_or(bin).join("share/man"))
}

/// One page per visible command, named the way git looks them up: `git help sandbox` opens
/// `git-sandbox`, and each subcommand is `git-sandbox-<name>` (`git-sandbox-daemon-status`).
fn write_pages(cmd: clap::Command, man1: &Path) -> std::io::Result<Vec<PathBuf>> {
    struct Header {
        date: String,
        source: String,
    }
    fn walk(
        cmd: clap::Command,
        h: &Header,
        man1: &Path,
        out: &mut Vec<PathBuf>,
    ) -> std::io::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub.clone(), h, man1, out)?;
        }
        let synopsis = synopsis(&cmd);
        let man = clap_mangen::Man::new(cmd)
            .date(&h.date)
            .source(&h.source)
            .manual("Git Manual");
        let mut page = Vec::new();
        man.render(&mut page)?;
        let page = with_synopsis(&String::from_utf8_lossy(&page), &synopsis);
        let path = man1.join(man.get_filename());
        std::fs::write(&path, code_in_bold(&page))?;
        out.push(path);
        Ok(())
    }
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let header = Header {
        // The day they were made (the title line needs a date to place the other fields).
        date: gs_util::time::now_rfc3339()[..10].to_string(),
        source: format!("git-sandbox {}", env!("CARGO_PKG_VERSION")),
    };
    let mut out = Vec::new();
    walk(cmd, &header, man1, &mut out)?;
    Ok(out)
}

/// The SYNOPSIS of `cmd` in roff: its name in bold, then each option with its value's name
/// (`[--timeout DUR]`, `[-j|--jobs N]`), then its arguments (`[REV|RANGE]...`). clap's own
/// leaves the value names out.
fn synopsis(cmd: &clap::Command) -> String {
    let dash = |s: &str| s.replace('-', "\\-");
    let name = cmd
        .get_bin_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string();
    let mut words = vec![format!("\\fB{}\\fR", dash(&name))];
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && a.get_id() != "help" && a.get_id() != "version")
        .collect();
    let value = |a: &clap::Arg| {
        a.get_value_names()
            .map(|v| {
                v.iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_else(|| a.get_id().to_string().to_uppercase())
    };
    for a in args.iter().filter(|a| !a.is_positional()) {
        let mut flag = Vec::new();
        if let Some(c) = a.get_short() {
            flag.push(format!("\\fB\\-{c}\\fR"));
        }
        if let Some(l) = a.get_long() {
            flag.push(format!("\\fB\\-\\-{}\\fR", dash(l)));
        }
        let mut w = flag.join("|");
        if a.get_action().takes_values() {
            w.push_str(&format!(" \\fI{}\\fR", dash(&value(a))));
        }
        words.push(if a.is_required_set() {
            w
        } else {
            format!("[{w}]")
        });
    }
    for a in args.iter().filter(|a| a.is_positional()) {
        let many = matches!(a.get_action(), clap::ArgAction::Append);
        let w = format!(
            "\\fI{}\\fR{}",
            dash(&value(a)),
            if many { "..." } else { "" }
        );
        words.push(if a.is_required_set() {
            w
        } else {
            format!("[{w}]")
        });
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        words.push("\\fICOMMAND\\fR".into());
    }
    format!(".SH SYNOPSIS\n{}\n", words.join(" "))
}

/// `page` with its SYNOPSIS section replaced by `synopsis`.
fn with_synopsis(page: &str, synopsis: &str) -> String {
    let Some(start) = page.find(".SH SYNOPSIS\n") else {
        return page.to_string();
    };
    let end = page[start + 1..]
        .find("\n.SH ")
        .map_or(page.len(), |i| start + 1 + i + 1);
    format!("{}{}{}", &page[..start], synopsis, &page[end..])
}

/// The help's `code` spans in bold, as git's own pages show them (roff prints a backtick as it is).
fn code_in_bold(page: &str) -> String {
    page.lines()
        .map(|line| {
            if line.starts_with('.') || line.matches('`').count() % 2 != 0 {
                return line.to_string();
            }
            let mut out = String::new();
            for (i, part) in line.split('`').enumerate() {
                if i % 2 == 1 {
                    out.push_str(&format!("\\fB{part}\\fR"));
                } else {
                    out.push_str(part);
                }
            }
            out
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Whether `man` would look in `dir`: it is on MANPATH, or `man --path` lists it.
fn man_finds(dir: &Path) -> bool {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let listed = std::process::Command::new("manpath")
        .arg("-q")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .or_else(|| std::env::var("MANPATH").ok())
        .unwrap_or_default();
    listed
        .trim()
        .split(':')
        .filter(|p| !p.is_empty())
        .any(|p| std::fs::canonicalize(p).is_ok_and(|p| p == dir))
}
