//! `demo`: the main job end to end on the embedded defaults — create a repository, commit, run,
//! start an experiment, commit on it, evaluate and promote it — reporting each step to the caller.

use crate::app::experiment::experiments::{self, Started};
use crate::app::experiment::promote::{promote, PromoteOptions, Promoted};
use crate::app::run::{run_commits, RunOptions};
use crate::app::{experiment::eval, io_err, repo::repos, Context, Repo, Result};
use gs_git::cli;
use gs_git::ObjectId;
use gs_model::{Evaluation, RunRecord, Trigger};
use gs_store::RepoRow;
use std::path::{Path, PathBuf};

/// The name of the demo's experiment.
pub const EXPERIMENT: &str = "average";

/// The steps, in order, with what each does.
pub const STEPS: [&str; 8] = [
    "create an experiment repository",
    "commit a change (a new function and its tests)",
    "run the experiment for each commit (sandboxed checkout, tests, analysis, note)",
    "the result, as git itself shows it (git log shows refs/notes/sandbox)",
    "start an experiment (a branch at main, no commit; its metadata kept outside the tree)",
    "commit on the experiment (a new function and its tests)",
    "evaluate the experiment against main (runs its commits)",
    "promote it: merge into main, run the merged commit",
];

/// What the demo reports as it goes.
pub enum Event<'a> {
    /// Step `n` (1-based) of [`STEPS`] begins.
    Step(usize),
    Created(&'a RepoRow),
    /// A line of git's own output (`git log --oneline`, the note as `git log` shows it).
    Git(&'a str),
    /// A commit's result, with the commit's subject.
    Result(&'a RunRecord, &'a str),
    Started(&'a Started),
    Evaluated(&'a Evaluation),
}

/// How it ended.
pub struct Demo {
    pub root: PathBuf,
    /// Every result the demo produced, in order: main's commits, the experiment's head, and the
    /// merge commit of the promotion.
    pub results: Vec<RunRecord>,
    pub promoted: Promoted,
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

pub fn demo(
    ctx: &Context,
    path: Option<&Path>,
    backfill: repos::Backfill<'_>,
    on: &mut dyn FnMut(Event<'_>),
) -> Result<Demo> {
    let name = format!(
        "demo-{}",
        gs_util::time::compact(gs_util::time::now_millis()).replace('_', "-")
    );
    on(Event::Step(1));
    let created = repos::create(ctx, Some(&name), path, backfill)?;
    let root = PathBuf::from(&created.repo.path);
    on(Event::Created(&created.repo));

    on(Event::Step(2));
    std::fs::write(root.join("tests/test_total.py"), CHANGE)
        .map_err(io_err("cannot write the demo change"))?;
    let env = cli::fallback_identity(&root);
    cli::git(&root, &["add", "tests/test_total.py"])?;
    cli::git_with_env(
        &root,
        &["commit", "-q", "-m", "Add total() with tests"],
        &env,
    )?;
    for l in cli::git(&root, &["log", "--oneline"])?.lines() {
        on(Event::Git(l));
    }

    on(Event::Step(3));
    let repo = gs_git::open(&root)?;
    let main = gs_git::resolve_commits(&repo, "HEAD~1^..HEAD")?;
    let interrupt = gs_git::objects::interrupt_flag();
    let opts = RunOptions::new(Trigger::Manual, Some("refs/heads/main".into()), interrupt);
    let outcome = run_commits(
        Repo::new(ctx, &repo, &created.repo),
        &main,
        &opts,
        &mut |_| {},
    )?;
    let mut results = outcome.records;
    for r in &results {
        let id = ObjectId::from_hex(r.commit.as_bytes()).expect("records hold full ids");
        on(Event::Result(r, &gs_git::commit_info(&repo, id)?.summary));
    }

    on(Event::Step(4));
    // The note git shows is the record's summary (`Sandbox: passed, …`), one line per part.
    let shown = cli::git(&root, &["log", "-1", "--format=%h %s%n%N"])?;
    for l in shown.lines().filter(|l| !l.trim().is_empty()) {
        on(Event::Git(l));
    }

    on(Event::Step(5));
    let hypothesis = Some("average() is worth having, and well tested");
    let started = experiments::start(
        Repo::new(ctx, &repo, &created.repo),
        EXPERIMENT,
        hypothesis,
        None,
        None,
        None,
    )?;
    on(Event::Started(&started));

    on(Event::Step(6));
    cli::git(&root, &["switch", "-q", &started.branch])?;
    let committed = std::fs::write(root.join("tests/test_average.py"), EXPERIMENT_CHANGE)
        .map_err(io_err("cannot write the demo experiment"))
        .and_then(|_| {
            cli::git(&root, &["add", "tests/test_average.py"])?;
            cli::git_with_env(
                &root,
                &["commit", "-q", "-m", "Add average() with tests"],
                &env,
            )?;
            Ok(())
        });
    cli::git(&root, &["switch", "-q", "main"])?;
    committed?;
    for l in cli::git(&root, &["log", "--oneline", "main..", &started.branch])?.lines() {
        on(Event::Git(l));
    }

    on(Event::Step(7));
    // Every commit of the experiment, its start too (which the hooks queued): the demo leaves
    // no job pending for a daemon to find later. The evaluation then has the head's result.
    let branch = gs_git::resolve_commits(&repo, &format!("main..{}", started.branch))?;
    let opts = RunOptions::new(
        Trigger::Manual,
        Some(format!("refs/heads/{}", started.branch)),
        interrupt,
    );
    let outcome = run_commits(
        Repo::new(ctx, &repo, &created.repo),
        &branch,
        &opts,
        &mut |_| {},
    )?;
    for r in outcome.records {
        let id = ObjectId::from_hex(r.commit.as_bytes()).expect("records hold full ids");
        on(Event::Result(&r, &gs_git::commit_info(&repo, id)?.summary));
        results.push(r);
    }
    let ev = eval::evaluate(
        Repo::new(ctx, &repo, &created.repo),
        EXPERIMENT,
        Trigger::Manual,
        interrupt,
    )?;
    on(Event::Evaluated(&ev));

    on(Event::Step(8));
    let opts = PromoteOptions {
        strategy: None,
        force: false,
        dry_run: false,
        watch: None,
        trigger: Trigger::Manual,
    };
    let promoted = promote(
        Repo::new(ctx, &repo, &created.repo),
        EXPERIMENT,
        &opts,
        interrupt,
    )?;
    let merged = cli::git(&root, &["log", "-1", "--format=%h %s", "main"])?;
    on(Event::Git(merged.trim()));
    if let Some(r) = &promoted.result {
        on(Event::Result(r, "main after the promotion"));
        results.push(r.clone());
    }
    Ok(Demo {
        root,
        results,
        promoted,
    })
}
