use super::complete::{arg_values, Kind};
use super::{CmdResult, CommandError};
use std::io::Write;

/// Print a shell completion script.
///
/// bash: `git sandbox completions bash > ~/.local/share/bash-completion/completions/git-sandbox`
/// (or `source <(git sandbox completions bash)` in ~/.bashrc). The script also defines
/// `_git_sandbox`, which git's own bash completion calls for `git sandbox <TAB>`. zsh: write it as
/// `_git-sandbox` into a directory on `$fpath`. fish: `git sandbox completions fish >
/// ~/.config/fish/completions/git-sandbox.fish`.
#[derive(clap::Args)]
pub struct CompletionsArgs {
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// What git's bash completion needs: it completes `git sandbox …` by calling `_git_sandbox` with
/// the words as typed (`git sandbox ru`); clap's function expects them as `git-sandbox ru`.
const BASH_GIT_ALIAS: &str = r#"
# `git sandbox <TAB>`: git's completion (git-completion.bash) calls _git_<command>.
_git_sandbox() {
    local -a COMP_WORDS=("git-sandbox" "${COMP_WORDS[@]:2}")
    local COMP_CWORD=$((COMP_CWORD - 1))
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    _git__sandbox git-sandbox "$cur" "$prev"
    # git completes with -o nospace: end each whole word with a space, as git's own do.
    local i
    for i in "${!COMPREPLY[@]}"; do
        [[ ${COMPREPLY[i]} == */ ]] || COMPREPLY[i]+=" "
    done
}
"#;

pub fn cmd_completions(args: CompletionsArgs) -> CmdResult {
    // Values asked of the binary as the user types: bash's script can, the others get only
    // the fixed ones.
    let dynamic = matches!(args.shell, Shell::Bash);
    let mut cmd = with_values(without_hidden(super::command()), &[], dynamic);
    let mut script = Vec::new();
    let bin = "git-sandbox";
    match args.shell {
        Shell::Bash => {
            clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, bin, &mut script);
            // clap_complete turns the `-` of `git-sandbox` into `__` where it tracks the words
            // typed but into `__subcmd__` in the case labels that match them, so no subcommand
            // would ever complete its options: make the labels agree.
            let mut fixed = String::from_utf8_lossy(&script)
                .replace("git__subcmd__sandbox__subcmd__", "git__sandbox__subcmd__");
            // Each marker sits in a double-quoted word list (`opts="…"`, `compgen -W "…"`).
            for kind in Kind::ALL {
                fixed = fixed.replace(
                    kind.marker(),
                    &format!(
                        "$(git sandbox __complete {} \"${{cur}}\" 2>/dev/null)",
                        kind.name()
                    ),
                );
            }
            script = fixed.into_bytes();
            script.extend_from_slice(BASH_GIT_ALIAS.as_bytes());
        }
        Shell::Zsh => {
            clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, bin, &mut script)
        }
        Shell::Fish => {
            clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, bin, &mut script)
        }
    }
    let mut out = std::io::stdout().lock();
    out.write_all(&script)
        .and_then(|_| out.flush())
        .map_err(|e| CommandError::io(format!("cannot write the completion script: {e}"), &e))?;
    Ok(0)
}

/// The command line with the values its arguments complete to (see [`arg_values`]) as possible
/// values: clap_complete offers those. Only completion sees them: parsing keeps its own checks
/// and messages. A value asked of the binary stands as its kind's marker in bash's script.
fn with_values(mut cmd: clap::Command, path: &[String], dynamic: bool) -> clap::Command {
    // mut_arg puts an argument last: positionals keep their places by explicit indices.
    let positionals: Vec<String> = cmd
        .get_positionals()
        .map(|a| a.get_id().to_string())
        .collect();
    let args: Vec<(String, String)> = cmd
        .get_arguments()
        .filter_map(|a| {
            let name = a.get_value_names()?.first()?.to_string();
            Some((a.get_id().to_string(), name))
        })
        .collect();
    for (id, value_name) in args {
        let (fixed, kinds) = arg_values(path, &id, &value_name);
        let mut values: Vec<&'static str> = fixed;
        if dynamic {
            values.extend(kinds.iter().map(|k| k.marker()));
        }
        if !values.is_empty() {
            cmd = cmd.mut_arg(id, |a| {
                a.value_parser(clap::builder::PossibleValuesParser::new(values))
            });
        }
    }
    for (i, id) in positionals.into_iter().enumerate() {
        cmd = cmd.mut_arg(id, |a| a.index(i + 1));
    }
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in subs {
        let mut sub_path = path.to_vec();
        sub_path.push(name.clone());
        cmd = cmd.mut_subcommand(name, |s| with_values(s, &sub_path, dynamic));
    }
    cmd
}

/// The command line without its hidden commands (`notify`, the sandbox helper): clap_complete
/// would offer them. clap cannot remove a subcommand, so the root is built anew around the
/// visible ones.
fn without_hidden(cmd: clap::Command) -> clap::Command {
    let mut root = clap::Command::new("git-sandbox")
        .args(cmd.get_arguments().cloned())
        .subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
        .subcommand_required(true);
    if let Some(about) = cmd.get_about() {
        root = root.about(about.clone());
    }
    root.version(env!("CARGO_PKG_VERSION"))
}
