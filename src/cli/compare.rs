use super::{cwd, print_json, ui, CmdResult};
use crate::app::{experiment::compare, intake::session::Session};

/// Experiments or revisions side by side against production (or `--base`), one row each. With
/// no targets, every experiment, ranked best first (active ones first, then by the latest
/// verdict, then passing tests). Times are the tests' own (no checkout or setup step); a result
/// served from an earlier run of the same tree says so (`passed (from abc1234)`) and has that
/// run's times. Only the columns where the rows differ are shown, unless `--all-columns`.
///
/// Examples: `git sandbox compare`, `git sandbox compare faster-parser HEAD~3 --base main`
#[derive(clap::Args)]
pub struct CompareArgs {
    /// Experiments' names or revisions (default: every experiment).
    #[arg(value_name = "EXPERIMENT|REV")]
    pub targets: Vec<String>,
    /// What to compare with (default: the production branch's head).
    #[arg(long, value_name = "REV")]
    pub base: Option<String>,
    /// Show every column, also those where all rows agree.
    #[arg(long)]
    pub all_columns: bool,
    #[arg(long)]
    pub json: bool,
}

/// A row's status, and the run it was served from when that was another commit's (same tree
/// and config): its times are that run's.
fn status(x: &compare::Row) -> String {
    match &x.served_from {
        Some(from) => format!("{} (from {})", x.status, gs_util::short(from)),
        None => x.status.clone(),
    }
}

fn num<T: ToString>(v: Option<T>) -> String {
    v.map_or("–".into(), |v| v.to_string())
}

fn delta<T: PartialOrd + Default + std::fmt::Display>(v: Option<T>) -> String {
    match v {
        Some(d) if d > T::default() => format!("+{d}"),
        Some(d) => d.to_string(),
        None => "–".into(),
    }
}

/// Print a table, leaving out the columns (after the first) where every row's value (`raw`,
/// cell by cell) agrees.
fn print(header: &[&str], rows: Vec<Vec<String>>, raw: &[Vec<String>], all: bool) {
    let keep: Vec<usize> = (0..header.len())
        .filter(|&i| i == 0 || all || raw.len() < 2 || raw.iter().any(|r| r[i] != raw[0][i]))
        .collect();
    let header: Vec<&str> = keep.iter().map(|&i| header[i]).collect();
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|r| keep.iter().map(|&i| r[i].clone()).collect())
        .collect();
    ui::table(&header, &rows);
}

pub fn cmd_compare(args: CompareArgs) -> CmdResult {
    let Session { ctx, repo, row } = Session::open(&cwd()?)?;
    if args.targets.is_empty() && args.base.is_none() {
        let (base, ranked) = compare::ranked(&ctx, &repo, &row)?;
        if args.json {
            print_json(&serde_json::json!({"base": base, "experiments": ranked}));
            return Ok(0);
        }
        if ranked.is_empty() {
            eprintln!("no experiments yet: start one with `git sandbox experiment start NAME`");
            return Ok(0);
        }
        println!(
            "against {} {} ({}, {} passed{})",
            base.target,
            gs_util::short(&base.commit),
            base.status,
            num(base.passed),
            base.served_from
                .as_deref()
                .map(|f| format!(", served from the run of {}", gs_util::short(f)))
                .unwrap_or_default()
        );
        let rows: Vec<Vec<String>> = ranked
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let x = r.row.as_ref();
                vec![
                    format!("{}. {}", i + 1, r.name),
                    r.state.clone(),
                    x.map_or("no head".into(), status),
                    num(x.and_then(|x| x.passed)),
                    num(x.and_then(|x| x.failed)),
                    r.new_failures.len().to_string(),
                    delta(r.complexity_delta),
                    delta(r.duration_delta_ms),
                    r.verdict
                        .map_or("not evaluated".into(), |v| v.as_str().to_string()),
                ]
            })
            .collect();
        let raw = rows.clone();
        print(
            &[
                "experiment",
                "state",
                "status",
                "passed",
                "failed",
                "new failures",
                "Δ complexity",
                "Δ test ms",
                "verdict",
            ],
            rows,
            &raw,
            args.all_columns,
        );
        return Ok(0);
    }
    let targets = if args.targets.is_empty() {
        vec!["HEAD".to_string()]
    } else {
        args.targets.clone()
    };
    let c = compare::compare(&ctx, &repo, &row, &targets, args.base.as_deref())?;
    if args.json {
        print_json(&c);
        return Ok(0);
    }
    let b = &c.base;
    let values = |x: &compare::Row| {
        vec![
            x.target.clone(),
            x.commit.clone(),
            status(x),
            num(x.passed),
            num(x.failed),
            num(x.duration_ms),
            num(x.complexity_mean),
            num(x.potential_issues),
        ]
    };
    let mut raw = vec![values(b)];
    raw.extend(c.rows.iter().map(|r| values(&r.row)));
    let mut rows = vec![vec![
        format!("{} (base)", b.target),
        gs_util::short(&b.commit).to_string(),
        status(b),
        num(b.passed),
        num(b.failed),
        num(b.duration_ms),
        num(b.complexity_mean),
        num(b.potential_issues),
    ]];
    for r in &c.rows {
        let (x, d) = (&r.row, &r.vs_base);
        rows.push(vec![
            x.target.clone(),
            gs_util::short(&x.commit).to_string(),
            status(x),
            format!("{} ({})", num(x.passed), delta(d.passed)),
            format!("{} ({})", num(x.failed), delta(d.failed)),
            format!("{} ({})", num(x.duration_ms), delta(d.duration_ms)),
            format!("{} ({})", num(x.complexity_mean), delta(d.complexity_mean)),
            format!(
                "{} ({})",
                num(x.potential_issues),
                delta(d.potential_issues)
            ),
        ]);
    }
    print(
        &[
            "target",
            "commit",
            "status",
            "passed",
            "failed",
            "test ms",
            "complexity",
            "issues",
        ],
        rows,
        &raw,
        args.all_columns,
    );
    Ok(0)
}
