use super::{ui, CmdResult};
use crate::app::promote::{promote, PromoteOptions};
use crate::app::run::{run_commits, RunOptions};
use crate::app::{eval, experiments, repos, Context};
use crate::config::ConfigFile;
use crate::git::cli;
use crate::model::{RunRecord, Trigger};

/// The main job end to end on the built-in defaults: create an experiment repository, commit a
/// change, run the experiment for each commit in a sandboxed checkout, show the results, then
/// start an experiment branch, commit on it, evaluate it against main and promote it.
///
/// Example: `git sandbox demo` (or `cargo run --release -- demo` from a source checkout)
#[derive(clap::Args)]
pub struct DemoArgs {
    /// Where to create the demo repository (default `$GIT_SANDBOX_HOME/repos/demo-<time>`).
    #[arg(long, value_name = "DIR")]
    pub path: Option<std::path::PathBuf>,
}

const CHANGE: &str = r#""""A first experiment: a faster way to sum a list, with its tests."""

import unittest


def total(values):
    result = 0
    for v in values:
        if v is None:
            continue
        result += v
    return result


class TestTotal(unittest.TestCase):
    def test_sums(self):
        self.assertEqual(total([1, 2, 3]), 6)

    def test_skips_missing(self):
        self.assertEqual(total([1, None, 2]), 3)


if __name__ == "__main__":
    unittest.main()
"#;

const EXPERIMENT: &str = "average";

const EXPERIMENT_CHANGE: &str = r#""""An experiment: average() next to total(), with its tests."""

import unittest


def average(values):
    return sum(values) / len(values)


class TestAverage(unittest.TestCase):
    def test_average(self):
        self.assertEqual(average([1, 2, 3]), 2)

    def test_one_value(self):
        self.assertEqual(average([5]), 5)


if __name__ == "__main__":
    unittest.main()
"#;

pub fn cmd_demo(args: DemoArgs) -> CmdResult {
    let ctx = Context::load()?;
    let name = format!(
        "demo-{}",
        crate::util::time::compact(crate::util::time::now_millis()).replace('_', "-")
    );
    step(1, "create an experiment repository");
    let created = repos::create(&ctx, Some(&name), args.path.as_deref())?;
    let root = std::path::PathBuf::from(&created.repo.path);
    println!("   {} at {}", created.repo.name, root.display());

    step(2, "commit a change (a new function and its tests)");
    std::fs::write(root.join("tests/test_total.py"), CHANGE).map_err(|e| super::CommandError {
        exit: 1,
        message: format!("cannot write the demo change: {e}"),
    })?;
    let env = cli::fallback_identity(&root);
    cli::git(&root, &["add", "tests/test_total.py"])?;
    cli::git_with_env(
        &root,
        &["commit", "-q", "-m", "Add total() with tests"],
        &env,
    )?;
    let log = cli::git(&root, &["log", "--oneline"])?;
    for l in log.lines() {
        println!("   {l}");
    }

    step(
        3,
        "run the experiment for each commit (sandboxed checkout, tests, analysis, note)",
    );
    let repo = crate::git::open(&root)?;
    let commits = crate::git::resolve_commits(&repo, "HEAD")?;
    let mut all = crate::git::resolve_commits(&repo, &format!("{}~1", commits[0]))?;
    all.extend(commits);
    let _ = gix::interrupt::init_handler_default(1);
    let opts = RunOptions {
        force: false,
        trigger: Trigger::Manual,
        refname: Some("refs/heads/main".into()),
        flags: ConfigFile::default(),
        interrupt: &gix::interrupt::IS_INTERRUPTED,
    };
    let outcome = run_commits(&ctx, &repo, &created.repo, &all, &opts, &mut |_| {})?;
    for r in &outcome.records {
        let info = crate::git::commit_info(
            &repo,
            gix::ObjectId::from_hex(r.commit.as_bytes()).expect("full id"),
        )?;
        println!("   {}", ui::oneline(r, &info.summary));
    }

    step(
        4,
        "the result, as git itself shows it (git log shows refs/notes/sandbox)",
    );
    let shown = cli::git(&root, &["log", "-1", "--format=%h %s%n%N"])?;
    let head: &RunRecord = outcome.records.last().expect("two commits were run");
    let mut lines = shown.lines();
    if let Some(first) = lines.next() {
        println!("   {first}");
    }
    // The note is the whole record; show a few of its keys, each once.
    let mut wanted = vec![
        "\"status\"",
        "\"passed\"",
        "\"failed\"",
        "\"functions_found\"",
        "\"complexity_score\"",
        "\"files_changed\"",
    ];
    for l in lines {
        if let Some(i) = wanted.iter().position(|k| l.trim_start().starts_with(k)) {
            wanted.remove(i);
            println!("   {}", l.trim());
        }
    }

    step(
        5,
        "start an experiment (a branch from main, metadata committed on it)",
    );
    let started = experiments::start(
        &ctx,
        &repo,
        &created.repo,
        EXPERIMENT,
        Some("average() is worth having, and well tested"),
        None,
    )?;
    println!(
        "   {} from {} ({})",
        started.branch,
        started.base,
        crate::util::short(&started.base_commit)
    );

    step(6, "commit on the experiment (a new function and its tests)");
    cli::git(&root, &["switch", "-q", &started.branch])?;
    let written = std::fs::write(root.join("tests/test_average.py"), EXPERIMENT_CHANGE);
    let committed = written
        .map_err(|e| super::CommandError {
            exit: 1,
            message: format!("cannot write the demo experiment: {e}"),
        })
        .and_then(|_| {
            cli::git(&root, &["add", "tests/test_average.py"])?;
            cli::git_with_env(
                &root,
                &["commit", "-q", "-m", "Add average() with tests"],
                &env,
            )
            .map_err(Into::into)
        });
    cli::git(&root, &["switch", "-q", "main"])?;
    committed?;
    let log = cli::git(&root, &["log", "--oneline", "main..", &started.branch])?;
    for l in log.lines() {
        println!("   {l}");
    }

    step(7, "evaluate the experiment against main (runs its head)");
    let interrupt = &gix::interrupt::IS_INTERRUPTED;
    let ev = eval::evaluate(&ctx, &repo, &created.repo, EXPERIMENT, interrupt)?;
    println!("   {} — {}", ev.recommendation, ev.reason);
    for c in &ev.criteria {
        println!("   {} {}", if c.pass { "✔" } else { "✘" }, c.name);
    }

    step(8, "promote it: merge into main, run the merged commit");
    let opts = PromoteOptions {
        strategy: None,
        force: false,
    };
    let promoted = promote(&ctx, &repo, &created.repo, EXPERIMENT, &opts, interrupt)?;
    let merged = cli::git(&root, &["log", "-1", "--format=%h %s", "main"])?;
    println!("   {}", merged.trim());
    if let Some(r) = &promoted.result {
        println!("   {}", ui::oneline(r, "main after the promotion"));
    }

    println!();
    println!(
        "Done: {} commits run, HEAD {}.",
        outcome.records.len(),
        head.status
    );
    println!(
        "Experiment {EXPERIMENT}: {}, promoted into main as {}.",
        promoted.recommendation,
        crate::util::short(&promoted.commit)
    );
    println!("Look around:  cd {}", root.display());
    println!("              git sandbox log      # one line per commit");
    println!("              git sandbox show     # the full result of HEAD");
    println!("              git sandbox status   # totals across repositories");
    println!("              git sandbox experiment show {EXPERIMENT}");
    let merged_ok = promoted
        .result
        .as_ref()
        .is_none_or(|r| r.status.is_success());
    Ok(i32::from(
        !merged_ok || outcome.records.iter().any(|r| !r.status.is_success()),
    ))
}

fn step(n: usize, what: &str) {
    println!("{} {what}", ui::yellow(&format!("[{n}/8]")));
}
