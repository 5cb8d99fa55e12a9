use super::{cwd, print_json, ui, CmdResult};
use crate::app::{analysis::analyze, Context};
use gs_model::Analysis;

/// Analyse the code of a revision (default HEAD) or of any directory, and print it. Writes
/// nothing to the repository.
///
/// An argument that names a revision of the repository you are in is taken as the revision, even
/// when a directory has the same name (write `./NAME` for the directory).
///
/// Examples: `git sandbox analyze`, `git sandbox analyze v1.2`, `git sandbox analyze ~/src/project --json`
#[derive(clap::Args)]
pub struct AnalyzeArgs {
    /// A revision (default HEAD) or a directory.
    #[arg(value_name = "REV|DIR")]
    pub target: Option<String>,
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_analyze(args: AnalyzeArgs) -> CmdResult {
    let dir = cwd()?;
    let ctx = Context::load()?;
    let analyzed = analyze::analyze(&ctx, &dir, args.target.as_deref())?;
    if let Some(note) = &analyzed.note {
        eprintln!("note: {note}");
    }
    if args.json {
        print_json(&analyzed.analysis);
    } else {
        print_human(&analyzed.analysis);
    }
    Ok(0)
}

fn print_human(a: &Analysis) {
    println!(
        "{}, {}: {} code, {} comment, {} blank",
        ui::plural(a.files_analyzed, "file"),
        ui::plural(a.total_lines, "line"),
        a.code_lines,
        a.comment_lines,
        a.blank_lines
    );
    println!(
        "{}, {}, complexity mean {:.2}, max {}",
        ui::plural(a.functions_found, "function"),
        ui::plural(a.classes_found, "class"),
        a.complexity_score,
        a.complexity_max
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
        ui::table(
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
    if let Some(p) = a.extra.get("partially_parsed") {
        let n = |k: &str| p[k].as_u64().unwrap_or(0);
        // Not issues: tree-sitter's limits (C and C++ are parsed without their preprocessor).
        println!(
            "\n{} parsed in part ({} tree-sitter could not read): their metrics cover the rest",
            ui::plural(n("files"), "file"),
            ui::plural(n("regions"), "region"),
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
        println!(
            "\n{}:",
            ui::plural(a.potential_issues.len(), "potential issue")
        );
        for i in &a.potential_issues {
            let path = ui::quote_path(&i.path);
            println!(
                "  {path}:{} {}: {}",
                i.line,
                ui::escape(&i.kind),
                ui::escape(&i.message)
            );
        }
    }
}
