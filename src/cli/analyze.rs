use super::{cwd, print_json, CmdResult};
use crate::app::{analyze, run::config_for, Context};
use crate::config::ConfigFile;
use crate::model::Analysis;

/// Analyse the code of a revision (default HEAD) or of any directory, and print it. Writes
/// nothing to the repository.
///
/// Examples: `git sandbox analyze`, `git sandbox analyze v1.2`, `git sandbox analyze ~/src/project --json`
#[derive(clap::Args)]
pub struct AnalyzeArgs {
    #[arg(value_name = "REV|DIR")]
    pub target: Option<String>,
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_analyze(args: AnalyzeArgs) -> CmdResult {
    let target = args.target.clone().unwrap_or_else(|| "HEAD".into());
    let as_dir = std::path::Path::new(&target);
    let analysis = if as_dir.is_dir() && (args.target.is_some()) && !looks_like_rev_in_repo(&target)
    {
        let ctx = Context::load()?;
        let cfg = ctx.layers.with_repo_dir(as_dir)?.resolve();
        crate::analysis::analyze_dir(as_dir, &analyze::options(&cfg.analysis)?).map_err(|e| {
            super::CommandError::usage(format!("cannot analyse {}: {e}", as_dir.display()))
        })?
    } else {
        let dir = cwd()?;
        let repo = crate::git::discover(&dir)?;
        let ctx = Context::load()?;
        let commit = crate::git::resolve_commit(&repo, &target)?;
        let info = crate::git::commit_info(&repo, commit)?;
        let cfg = config_for(&ctx, &repo, &info, None, &ConfigFile::default())?;
        analyze::analyze_tree(&ctx.index, &repo, info.tree, &cfg.analysis)?
    };
    if args.json {
        print_json(&analysis);
    } else {
        print_human(&analysis);
    }
    Ok(0)
}

/// A name that is both a directory and a revision (e.g. `main` next to a `main/` folder) is a
/// revision only when written with a revision marker; plain paths win.
fn looks_like_rev_in_repo(s: &str) -> bool {
    s.contains('~') || s.contains('^') || s.contains('@')
}

fn print_human(a: &Analysis) {
    println!(
        "{} files, {} lines: {} code, {} comment, {} blank",
        a.files_analyzed, a.total_lines, a.code_lines, a.comment_lines, a.blank_lines
    );
    println!(
        "{} functions, {} classes, complexity mean {:.2}, max {}",
        a.functions_found, a.classes_found, a.complexity_score, a.complexity_max
    );
    if !a.languages.is_empty() {
        println!();
        let rows: Vec<Vec<String>> = a
            .languages
            .iter()
            .map(|(k, v)| {
                vec![
                    k.clone(),
                    v.files.to_string(),
                    v.code_lines.to_string(),
                    v.functions.to_string(),
                    v.classes.to_string(),
                    v.complexity_total.to_string(),
                ]
            })
            .collect();
        super::ui::table(
            &[
                "LANGUAGE",
                "FILES",
                "CODE",
                "FUNCTIONS",
                "CLASSES",
                "COMPLEXITY",
            ],
            &rows,
        );
    }
    for key in ["frameworks", "dependencies"] {
        if let Some(v) = a.extra.get(key) {
            if !v.is_null()
                && v.as_array().is_none_or(|x| !x.is_empty())
                && v.as_object().is_none_or(|x| !x.is_empty())
            {
                println!("{key}: {v}");
            }
        }
    }
    if !a.potential_issues.is_empty() {
        println!("\n{} potential issues:", a.potential_issues.len());
        for i in &a.potential_issues {
            println!("  {}:{} {}: {}", i.path, i.line, i.kind, i.message);
        }
    }
}
