use super::{cwd, print_json, ui, CmdResult, CommandError};
use crate::app::config::adopted;
use crate::app::records::explain::Decision;
use crate::app::run::{run_commits, run_commits_parallel, Progress, RunOptions};
use crate::app::Context;
use crate::app::{intake::session::Session, select, Repo};
use gs_config::ConfigFile;
use gs_git::revs::Walk;
use gs_model::{Status, Trigger};
use std::io::IsTerminal;

/// Run the experiment for commits now, in the foreground, oldest first: checkout into a
/// throw-away directory, tests, analysis, result as a note under refs/notes/sandbox.
///
/// Revisions as git takes them: `REV` (that commit only; several are run in the order given),
/// `OLDER..NEWER`, `A...B`, `^REV` to leave a history out, `--all` for every watched branch. With
/// a range, `^REV` or `--all`, every commit they name is run, as `git rev-list --reverse` lists
/// them. `ROOT^..B` includes the first commit.
///
/// `--staged` runs the index as it is, `--worktree` the work tree with its uncommitted changes,
/// neither touching them; the result is kept by tree, so committing that tree later is served
/// from it.
///
/// Examples: `git sandbox run` (HEAD), `git sandbox run main~5..main`, `git sandbox run --all`,
/// `git sandbox run --force HEAD`, `git sandbox run --worktree`
#[derive(clap::Args)]
pub struct RunArgs {
    /// Commits (default HEAD), ranges OLDER..NEWER or A...B, exclusions ^REV.
    #[arg(value_name = "REV|RANGE")]
    pub revs: Vec<String>,
    /// Every commit of every watched branch (`[watch] branches`).
    #[arg(long, conflicts_with_all = ["staged", "worktree"])]
    pub all: bool,
    /// Run what is staged (what `git commit` would commit), leaving the index untouched.
    #[arg(long, conflicts_with_all = ["revs", "worktree"])]
    pub staged: bool,
    /// Run the work tree as it is: tracked changes and untracked files that are not ignored
    /// (what `git add -A && git commit` would commit), leaving index and work tree untouched.
    #[arg(long, conflicts_with = "revs")]
    pub worktree: bool,
    /// Run again even when a result for the same tree and config exists.
    #[arg(long)]
    pub force: bool,
    /// Run with no build-cache layer (what earlier runs left in `target/`, `node_modules/` or
    /// the home is not seen); implies --force. Its writes become a new base of the branch's
    /// cache when the commit is on the branch.
    #[arg(long)]
    pub clean: bool,
    /// Try another test command: a trial, printed but not recorded as the commit's result.
    #[arg(long, value_name = "CMD")]
    pub command: Option<String>,
    /// Try another test timeout ("90s", "5m"): a trial, printed but not recorded.
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Run up to N commits at once, each in its own sandbox (default: one per core, or with
    /// `[limits] cpu_cores` as many as the cores hold at that share each; `-j 1` runs them one
    /// after another).
    #[arg(short = 'j', long = "jobs", value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
    /// Run nothing: say for each commit whether its result would be its own, served from
    /// another commit of its tree, or made again, and why (the config, the tools).
    #[arg(long)]
    pub explain_cache: bool,
    /// Run nothing: say for each commit which test files (crates, for cargo test) the probe
    /// beside its run would run and why (which changed file each reaches through which imports,
    /// which changed crate it depends on, or the tests of it that failed in the parent's run),
    /// or why it would have no probe.
    #[arg(long, conflicts_with = "explain_cache")]
    pub explain_selection: bool,
    /// Run a failing commit again, up to N times, while every test that failed on it is known
    /// to be flaky or is quarantined (see `git sandbox flaky`); the record says how often it was
    /// retried. Default: `[test] retries` (unset: none; a quarantine retries once).
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(0..=10))]
    pub retry_flaky: Option<u32>,
    /// Print the records as a JSON array.
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_run(args: RunArgs) -> CmdResult {
    let flags = trial_flags(&args)?;
    let dir = cwd()?;
    let Session { ctx, repo, row } = Session::open(&dir)?;
    super::notice_hooks(&repo);
    crate::app::run::check_ahead(&ctx, &repo);
    let walk = Walk {
        oldest_first: true,
        max_count: None,
        plain_means_listed: true,
    };
    let snapshot = if args.staged {
        Some(gs_git::snapshot::Snapshot::Staged)
    } else if args.worktree {
        Some(gs_git::snapshot::Snapshot::Worktree)
    } else {
        None
    };
    let commits = match snapshot {
        Some(what) => vec![gs_git::snapshot::take(&repo, what)?.0],
        None => select::commits(&ctx, &repo, &args.revs, args.all, walk)?,
    };
    if commits.is_empty() {
        eprintln!("{}: no commits to run", ui::revisions(&args.revs, args.all));
        if args.json {
            print_json(&Vec::<gs_model::RunRecord>::new());
        }
        return Ok(0);
    }
    let refname = if snapshot.is_some() {
        select::branch_named(&repo, &args.revs, args.all)
    } else {
        let (refname, cold) = select::run_branch(&ctx, &repo, &args.revs, args.all)?;
        let tip = *commits.last().expect("commits is not empty");
        let notes = cold
            .into_iter()
            .chain(adopted::worktree_differs(&repo, tip));
        for note in notes {
            eprintln!("note: {note}");
        }
        refname
    };
    if args.explain_cache {
        return explain_cache(
            Repo::new(&ctx, &repo, &row),
            &commits,
            refname.as_deref(),
            args.json,
        );
    }
    if args.explain_selection {
        return explain_selection(
            Repo::new(&ctx, &repo, &row),
            &commits,
            refname.as_deref(),
            args.json,
        );
    }
    let _ = gix::interrupt::init_handler_default(1);
    // On stderr, with --json too: it is progress, told the moment it is known.
    let first_failure = |commit: &str, test: &str, ms: u64| {
        eprintln!(
            "{} {}: first failure after {}: {}",
            ui::mark(Status::Failed),
            gs_util::short(commit),
            ui::duration(ms),
            ui::escape(test)
        );
    };
    let opts = RunOptions {
        on_first_failure: Some(&first_failure),
        force: args.force || args.clean,
        clean: args.clean,
        flags,
        unnoted: snapshot.is_some(),
        retry_flaky: args.retry_flaky,
        ..RunOptions::new(Trigger::Manual, refname, &gix::interrupt::IS_INTERRUPTED)
    };
    let bar = (commits.len() > 1 && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(commits.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar
    });
    let json = args.json;
    let mut summaries = std::collections::HashMap::new();
    for &c in &commits {
        if let Ok(info) = gs_git::commit_info(&repo, c) {
            summaries.insert(c.to_string(), info.summary);
        }
    }
    // Lines come out in the order of the commits, whichever worker finished first: a line
    // waits for those of the commits before it.
    let position: std::collections::HashMap<String, usize> = commits
        .iter()
        .enumerate()
        .map(|(i, c)| (c.to_string(), i))
        .collect();
    let waiting = std::sync::Mutex::new((0usize, std::collections::BTreeMap::new()));
    let print = |line: String| match &bar {
        Some(b) if !json => b.println(line),
        None if !json => println!("{line}"),
        _ => {}
    };
    let flush = |all: bool| {
        let mut w = waiting.lock().unwrap_or_else(|e| e.into_inner());
        let (next, lines) = &mut *w;
        while let Some((&pos, _)) = lines.first_key_value() {
            if pos != *next && !all {
                break;
            }
            let (pos, line) = lines.pop_first().expect("a first line");
            print(line);
            *next = pos + 1;
        }
    };
    let mut on_progress = |p: Progress<'_>| match p {
        Progress::Started { commit, .. } => {
            if let Some(b) = &bar {
                b.set_message(gs_util::short(&commit.to_string()).to_string());
            }
        }
        Progress::Finished { record, .. } => {
            let summary = summaries.get(&record.commit).map_or("", String::as_str);
            let line = if record.status == Status::Error && record.error.is_some() {
                // Its error follows on stderr (`error: …`), once.
                let mut r = record.clone();
                r.error = None;
                ui::oneline(&r, summary)
            } else {
                ui::oneline(record, summary)
            };
            if let Some(b) = &bar {
                b.inc(1);
            }
            let pos = position.get(&record.commit).copied().unwrap_or(usize::MAX);
            waiting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .1
                .insert(pos, line);
            flush(false);
        }
    };
    let trial = opts.is_trial();
    // A range runs on as many workers as the machine's cores hold, unless -j says otherwise.
    let jobs = args.jobs.map_or_else(
        || crate::app::run::default_workers(&ctx.layers.resolve().limits),
        usize::from,
    );
    // A probe beside a run (the tests a change reaches) takes a slot of these that no run holds.
    crate::app::run::slots::set_capacity(jobs);
    let outcome = if jobs > 1 && commits.len() > 1 {
        let progress: std::sync::Mutex<&mut (dyn FnMut(Progress<'_>) + Send)> =
            std::sync::Mutex::new(&mut on_progress);
        run_commits_parallel(&dir, &row, &commits, &opts, jobs, &progress)?
    } else {
        run_commits(
            Repo::new(&ctx, &repo, &row),
            &commits,
            &opts,
            &mut on_progress,
        )?
    };
    // Lines still waiting for a commit that was never done (interrupted).
    flush(true);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    tell_outcome(&ctx, &row, &outcome, commits.len(), trial, json)
}

/// The config a trial run lays over the commit's (`--command`, `--timeout`): nothing recorded.
fn trial_flags(args: &RunArgs) -> Result<ConfigFile, CommandError> {
    let mut flags = ConfigFile::default();
    if let Some(c) = &args.command {
        flags.test.command = Some(c.clone());
    }
    if let Some(t) = &args.timeout {
        flags.test.timeout = Some(gs_config::parse_duration(t).ok_or_else(|| {
            CommandError::usage(format!("invalid --timeout {t:?}"))
                .hint("write a duration like \"90s\", \"5m\" or \"1h\"")
        })?);
    }
    Ok(flags)
}

/// `run --explain-cache`: for each commit, whether its result stands, is served or would be
/// made, and why.
fn explain_cache(
    at: Repo<'_>,
    commits: &[gs_git::ObjectId],
    refname: Option<&str>,
    json: bool,
) -> CmdResult {
    let text = |e: &crate::app::records::explain::Explanation| {
        let what = match (e.decision, &e.from) {
            (Decision::Own, _) => "keeps its own result".to_string(),
            (Decision::Tree, Some(from)) => format!("is served from {}", gs_util::short(from)),
            _ => "would run".to_string(),
        };
        format!(
            "{} {what}: {}\n",
            ui::yellow(gs_util::short(&e.commit)),
            ui::escape(&e.reasons.join("; "))
        )
    };
    explain_each(commits, json, text, |c| {
        crate::app::records::explain::explain(at, c, refname)
    })
}

/// `run --explain-selection`: for each commit, which tests phase one would run, and why.
fn explain_selection(
    at: Repo<'_>,
    commits: &[gs_git::ObjectId],
    refname: Option<&str>,
    json: bool,
) -> CmdResult {
    explain_each(commits, json, explained_text, |c| {
        crate::app::run::selection::explain(at, c, refname)
    })
}

/// Each commit's explanation, printed as `text` says as it comes, or all as JSON at the end.
fn explain_each<E: serde::Serialize>(
    commits: &[gs_git::ObjectId],
    json: bool,
    text: impl Fn(&E) -> String,
    explain: impl Fn(gs_git::ObjectId) -> crate::app::Result<E>,
) -> CmdResult {
    let mut all = Vec::new();
    for &c in commits {
        let e = explain(c)?;
        if !json {
            print!("{}", text(&e));
        }
        all.push(e);
    }
    if json {
        print_json(&all);
    }
    Ok(0)
}

/// What the run left to say once its commits are done: warnings (notes that did not read,
/// commits that could not run here, notes written again), a trial's output, the errors; and
/// the exit code (0 when every commit passed, 130 when interrupted).
fn tell_outcome(
    ctx: &Context,
    row: &gs_store::RepoRow,
    outcome: &crate::app::run::Outcome,
    commits: usize,
    trial: bool,
    json: bool,
) -> CmdResult {
    if let Some(w) = crate::app::records::results::invalid_warning(&outcome.invalid_notes) {
        eprintln!("warning: {w}");
    }
    for a in &outcome.attempts {
        eprintln!(
            "warning: {} could not run here: {}; the result of the same tree and config stands (`git sandbox show {}`)",
            gs_util::short(&a.commit),
            ui::escape(ui::first_line(a.error.as_deref().unwrap_or("its tests could not run"))),
            gs_util::short(&a.commit)
        );
    }
    if outcome.restored > 0 {
        eprintln!(
            "warning: a concurrent writer dropped {} of the notes just written; they were written again",
            outcome.restored
        );
    }
    if !trial && !outcome.records.is_empty() {
        // Statuses, notifications and auto-push: a running daemon delivers them; else this
        // run does, briefly.
        super::drain_outbox(ctx);
        // A production commit due a test map has one made, off the critical path.
        crate::app::run::testmap::after(ctx, row, &outcome.records);
    }
    if trial && !outcome.records.is_empty() {
        // Nothing records a trial, so `show` cannot tell how it failed: say it here.
        for r in outcome
            .records
            .iter()
            .filter(|r| r.status != Status::Passed)
        {
            let Some(t) = r.tests.as_ref().filter(|t| !t.output_tail.is_empty()) else {
                continue;
            };
            eprintln!("{} output (last lines):", gs_util::short(&r.commit));
            for l in t.output_tail.lines() {
                eprintln!("    {}", ui::escape(l));
            }
            let log = crate::app::records::logs::trial_path(ctx, row, r);
            if log.is_file() {
                eprintln!("  whole output: {}", log.display());
            }
        }
        eprintln!(
            "trial run (--command/--timeout): not recorded; the commit's own result is unchanged"
        );
    }
    if json {
        print_json(&outcome.records);
    }
    if outcome.interrupted {
        eprintln!(
            "interrupted: {} of {} done; their results are saved",
            outcome.records.len(),
            ui::plural(commits, "commit")
        );
        return Ok(130);
    }
    for r in outcome.records.iter().filter(|r| r.status == Status::Error) {
        if let Some(e) = &r.error {
            let short = gs_util::short(&r.commit);
            let e = ui::escape(ui::first_line(e));
            // A config error already opens with the commit (`ab7947e:.sandbox.toml:3: …`).
            if e.starts_with(short) {
                eprintln!("error: {e}");
            } else {
                eprintln!("error: {short}: {e}");
            }
        }
    }
    Ok(i32::from(
        outcome.records.iter().any(|r| r.status != Status::Passed),
    ))
}

/// `run --explain-selection`'s lines for one commit.
pub fn explained_text(e: &crate::app::run::selection::Explained) -> String {
    use crate::app::run::selection::Why;
    let s = &e.selection;
    let head = ui::yellow(gs_util::short(&e.commit));
    if let Some(why) = &s.one_phase {
        return format!(
            "{head} one phase, the whole suite: {}\n",
            ui::escape(&why.to_string())
        );
    }
    let unit = match s.selects {
        crate::app::run::selection::Selects::TestFiles => "test files",
        crate::app::run::selection::Selects::Crates => "crates",
        crate::app::run::selection::Selects::Packages => "packages with tests",
    };
    let singles = s.files.keys().filter(|k| k.contains("::")).count();
    let whole = s.files.len() - singles;
    let mut out = if singles == 0 {
        format!(
            "{head} phase one runs {whole} of {} {unit} beside the whole suite\n",
            s.test_files
        )
    } else {
        format!(
            "{head} phase one runs {whole} of {} {unit} whole and {singles} single tests beside the whole suite\n",
            s.test_files
        )
    };
    for (file, whys) in &s.files {
        for why in whys {
            let text = match why {
                Why::Reaches { path } => {
                    let mut chain: Vec<&str> = path.iter().map(String::as_str).rev().collect();
                    let changed = chain.pop().unwrap_or_default();
                    chain.push(changed);
                    if chain.len() == 1 {
                        "changed itself".to_string()
                    } else {
                        format!("imports {} (changed)", chain[1..].join(" → "))
                    }
                }
                Why::DependsOn { path } if path.len() == 1 => "changed itself".to_string(),
                Why::DependsOn { path } => {
                    let chain: Vec<&str> = path[..path.len() - 1]
                        .iter()
                        .rev()
                        .map(String::as_str)
                        .collect();
                    format!("depends on {} (changed)", chain.join(" → "))
                }
                Why::FailedBefore { tests } => {
                    format!("failed in the parent's run: {}", tests.join(", "))
                }
                Why::Called { file, lines, map } => {
                    let lines: Vec<String> = lines.iter().map(u32::to_string).collect();
                    format!(
                        "called the function holding {file}:{} (changed), by the test map of {}",
                        lines.join(","),
                        gs_util::short(map)
                    )
                }
                Why::FailedWhenChanged {
                    file,
                    commit,
                    tests,
                } => format!(
                    "failed the last time {file} changed ({}): {}",
                    gs_util::short(commit),
                    tests.join(", ")
                ),
                Why::Named { file } => format!("named for {file} (changed)"),
                Why::NamedForFunction { file, function } => {
                    format!("named for {function} of {file} (changed): first")
                }
                Why::Calls { file, map } => format!(
                    "calls functions of {file} (changed), by the test map of {}",
                    gs_util::short(map)
                ),
                Why::Ran { file, lines } => {
                    let lines: Vec<String> = lines.iter().map(u32::to_string).collect();
                    format!(
                        "ran {file}:{} (changed) in the parent's run",
                        lines.join(",")
                    )
                }
            };
            out.push_str(&format!("  {}  {}\n", ui::escape(file), ui::escape(&text)));
        }
    }
    if e.command.is_none() {
        out.push_str("  (the test command is detected when the tree is checked out; a probe needs pytest, jest, vitest, cargo test or go test)\n");
    }
    out
}
