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
        let man = clap_mangen::Man::new(cmd)
            .date(&h.date)
            .source(&h.source)
            .manual("Git Manual");
        out.push(man.generate_to(man1)?);
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
