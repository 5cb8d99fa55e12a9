use super::ui::say;
use super::{cwd, print_json, ui, CmdResult, CommandError};
use crate::app::{intake::session::Session, records::history, records::results, Context, Repo};
use gs_model::{Attempt, RunRecord};

/// Show the full result of a commit (default HEAD), like `git show` does for the commit itself.
///
/// Example: `git sandbox show HEAD~1 --json`
#[derive(clap::Args)]
pub struct ShowArgs {
    #[arg(value_name = "REV")]
    pub rev: Option<String>,
    /// Print the run record exactly as stored in the note (with `could_not_run_here` beside it
    /// when runs since could not run its tests on this machine).
    #[arg(long)]
    pub json: bool,
    /// Print the sandbox's full layer table for the run (the note keeps a summary).
    #[arg(long)]
    pub isolation: bool,
}

pub fn cmd_show(args: ShowArgs) -> CmdResult {
    let Session { ctx, repo, row } = Session::open(&cwd()?)?;
    super::notice_hooks(&repo);
    let rev = args.rev.as_deref().unwrap_or("HEAD");
    let commit = gs_git::resolve_commit(&repo, rev)?;
    let mut reader = results::NoteReader::new(&repo)?;
    let found = results::find_record(Repo::new(&ctx, &repo, &row), &mut reader, commit)?;
    if let Some(w) = reader.warning() {
        eprintln!("warning: {w}");
    }
    let Some(record) = found else {
        return Err(CommandError::failed(format!(
            "{} has no result yet",
            gs_util::short(&commit.to_string())
        ))
        .hint(format!("run it with `git sandbox run {rev}`")));
    };
    if args.isolation {
        return print_isolation(&ctx, &record, args.json);
    }
    let attempt = history::attempts_beside(&ctx, &row, &[&record])?.remove(&record.commit);
    if args.json {
        match &attempt {
            // Beside the record, not in it: the note keeps the result alone.
            Some(a) => {
                let mut shown = serde_json::to_value(&record).expect("records serialize");
                shown["could_not_run_here"] = serde_json::json!(a);
                print_json(&shown);
            }
            None => print_json(&record),
        }
        return Ok(0);
    }
    let info = gs_git::commit_info(&repo, commit)?;
    let logs = |check: Option<&str>| {
        Some(crate::app::records::logs::check_path(
            &ctx, &row, &record, check,
        ))
        .filter(|p| p.is_file())
    };
    let setup_log =
        Some(crate::app::records::logs::setup_path(&ctx, &row, &record)).filter(|p| p.is_file());
    let mut out = String::new();
    render(
        &mut out,
        &record,
        attempt.as_ref(),
        &info.summary,
        &logs,
        setup_log.as_deref(),
    );
    print!("{out}");
    Ok(0)
}

/// What the run's time went to, when it is more than the tests': the setup step's share, or
/// that the result was served from an earlier run (whose times the record keeps).
fn duration_parts(r: &RunRecord) -> String {
    let Some(t) = &r.tests else {
        return String::new();
    };
    if let Some(from) = &r.cached_from {
        // Served by a run, the duration is the serving's; served where it is read (the commit
        // has no note of its own), it is that run's: no claim of which, only where from.
        return format!(
            " — served from the run of {}, whose tests took {}",
            ui::escape(gs_util::short(from)),
            ui::duration(t.duration_ms)
        );
    }
    match t.setup.as_ref().filter(|s| s.duration_ms > 0) {
        Some(s) => format!(
            " (setup step {}, tests {}; the rest checkout, analysis and checks)",
            ui::duration(s.duration_ms),
            ui::duration(t.duration_ms)
        ),
        None => format!(
            " (tests {}; the rest checkout, analysis and checks)",
            ui::duration(t.duration_ms)
        ),
    }
}

/// The setup step the tests ran after: its command, how it came to be ready, its log.
fn setup_lines(out: &mut String, s: &gs_model::SetupRun, log: Option<&std::path::Path>) {
    let how = match s.how.as_str() {
        "built" => format!("ran for {}", ui::duration(s.duration_ms)),
        "reused" => "reused the layer an earlier run built for the same lockfiles".into(),
        "inline" => format!(
            "ran for {} just before them, in their sandbox",
            ui::duration(s.duration_ms)
        ),
        other => ui::escape(other).into_owned(),
    };
    say!(
        out,
        "  setup:    {} — {how}{}",
        ui::escape(&s.command),
        if s.network { ", with the network" } else { "" }
    );
    if let Some(n) = &s.traffic {
        say!(out, "  setup network: {}", ui::escape(&network_line(n)));
    }
    if let Some(log) = log {
        say!(out, "  setup log: {}", log.display());
    }
}

/// Where the output of the tests (`None`) or of a named check is kept on this machine.
type Logs<'a> = &'a dyn Fn(Option<&str>) -> Option<std::path::PathBuf>;

/// A run's record as `show` prints it: the header, the tests, the named checks, coverage,
/// analysis and changes, each a section of its own.
fn render(
    out: &mut String,
    r: &RunRecord,
    attempt: Option<&Attempt>,
    summary: &str,
    logs: Logs<'_>,
    setup_log: Option<&std::path::Path>,
) {
    header(out, r, attempt, summary);
    tests_section(out, r, logs, setup_log);
    checks_section(out, r, logs);
    coverage_section(out, r);
    analysis_section(out, r);
    changes_section(out, r);
}

/// Which commit, how it ended and who vouches for it, when and why it ran, its message and
/// the error that ended it.
fn header(out: &mut String, r: &RunRecord, attempt: Option<&Attempt>, summary: &str) {
    say!(
        out,
        "{} {}",
        ui::yellow(&format!("run {}", r.commit)),
        r.refname
            .as_deref()
            .map(|x| format!("({})", ui::escape(x)))
            .unwrap_or_default()
    );
    match &r.verified {
        Some(v) => {
            if r.no_tests() {
                say!(
                    out,
                    "Status:   {} no tests (recorded {}: nothing was tested)",
                    ui::dim("○"),
                    r.status
                );
            } else {
                say!(out, "Status:   {} {}", ui::mark(r.status), r.status);
            }
            say!(out, "Signed:   by {} ({})", ui::escape(&v.signer), v.key);
        }
        None => {
            say!(
                out,
                "Status:   {} {} — reported by {}, not verified (nobody this machine trusts signed it): not evidence",
                ui::dim("?"),
                r.status,
                ui::escape(r.reporter())
            );
        }
    }
    if let Some(a) = attempt {
        // A later run that could not run the tests here: the status above is still the result.
        say!(
            out,
            "          {} {} ({}{})",
            ui::yellow("could not run here:"),
            ui::escape(ui::first_line(&a.reason)),
            a.finished_at,
            if a.attempts > 1 {
                format!(", the last of {} attempts", a.attempts)
            } else {
                String::new()
            }
        );
    }
    say!(out, "Started:  {}", ui::escape(&r.started_at));
    say!(
        out,
        "Duration: {}{}",
        ui::duration(r.duration_ms),
        duration_parts(r)
    );
    say!(out, "Trigger:  {}", r.trigger.as_str());
    if let Some(c) = &r.cached_from {
        say!(
            out,
            "Cached:   from {} (same tree and config)",
            ui::escape(c)
        );
    }
    if let Some(by) = &r.superseded_by {
        let by = ui::escape(by);
        say!(out, "Skipped:  its branch had moved on to {by} before its run ([watch] mode = \"latest\"); run it with `git sandbox run {}`", gs_util::short(&r.commit));
    }
    if let Some(rt) = &r.retried {
        say!(
            out,
            "Retried:  {}{} after only known-flaky or quarantined tests failed: {} (--retry-flaky, [test] retries)",
            ui::plural(rt.attempts as usize, "time"),
            if rt.alone { ", the failing tests alone," } else { "" },
            ui::escape(&rt.flaky.join(", "))
        );
        if r.excused_alone() {
            say!(
                out,
                "          excused: each passed a retry alone; the suite's own run failed them"
            );
        }
        for t in &rt.tests {
            say!(
                out,
                "          {}: {}",
                ui::escape(&t.test),
                t.outcomes.join(", ")
            );
        }
    }
    if let Some(e) = &r.experiment {
        say!(out, "Experiment: {}", ui::escape(e));
    }
    say!(out, "\n    {}\n", ui::escape(summary));
    if let Some(e) = &r.error {
        say!(out, "Error: {}\n", ui::escape(e));
    }
}

/// The tests new to the commit, run again to catch a flaky one at birth.
fn new_tests_line(n: &gs_model::NewTests) -> String {
    let mut line = format!(
        "{} run {} times",
        ui::plural(n.tested as usize, "new test"),
        n.runs
    );
    if n.omitted > 0 {
        line.push_str(&format!(" ({} more ran once)", n.omitted));
    }
    if n.flaky.is_empty() {
        line.push_str(", the same outcome each time");
    } else {
        let each: Vec<String> = n
            .flaky
            .iter()
            .map(|f| format!("{} ({})", f.test, f.outcomes.join(", ")))
            .collect();
        line.push_str(&format!("; flaky at birth: {}", each.join("; ")));
    }
    if let Some(e) = &n.error {
        line.push_str(&format!("; {e}"));
    }
    line
}

/// The tests: counts, command, setup step, exit, resources, where the log is, the sandbox,
/// the failures and (unless they passed) the output's last lines.
fn tests_section(
    out: &mut String,
    r: &RunRecord,
    logs: Logs<'_>,
    setup_log: Option<&std::path::Path>,
) {
    match &r.tests {
        Some(t) => {
            say!(
                out,
                "Tests: {} ({})",
                ui::counts(r),
                ui::escape(
                    t.framework
                        .as_ref()
                        .map_or("unknown framework", |f| f.as_str())
                )
            );
            say!(out, "  command:  {}", ui::escape(&t.command));
            if let Some(e) = &r.environment {
                say!(
                    out,
                    "  image:    {}@{} ({}){}",
                    ui::escape(&e.image),
                    ui::escape(&e.digest),
                    ui::escape(&e.platform),
                    if e.offline {
                        ", offline: the digest its tag resolved to last"
                    } else {
                        ""
                    }
                );
            }
            if let Some(s) = &t.setup {
                setup_lines(out, s, setup_log);
            }
            say!(
                out,
                "  exit:     {}{}",
                t.exit_code.map_or("-".into(), |c| c.to_string()),
                t.killed_by
                    .as_ref()
                    .map(|k| format!(" (killed by {})", ui::escape(k.as_str())))
                    .unwrap_or_default()
            );
            say!(
                out,
                "  duration: {}  cpu: {}ms  max rss: {} KiB",
                ui::duration(t.duration_ms),
                t.resources.cpu_ms,
                t.resources.max_rss_kb
            );
            if let Some(cores) = t.limits.as_ref().and_then(|l| l.cpu_cores) {
                say!(out, "  cores:    {cores} (the run cgroup's CPU quota)");
            }
            if let Some(n) = &t.network {
                say!(out, "  network:  {}", ui::escape(&network_line(n)));
            }
            if let Some(n) = &t.new_tests {
                say!(out, "  new:      {}", ui::escape(&new_tests_line(n)));
            }
            if let Some(log) = logs(None) {
                say!(out, "  log:      {}", log.display());
            }
            if let Some(iso) = &t.isolation {
                use gs_model::LayerStatus;
                let missing: Vec<String> = iso
                    .not_enforced
                    .iter()
                    .filter(|l| l.status != LayerStatus::Off)
                    .map(|l| format!("{} ({})", l.layer, l.detail))
                    .collect();
                let off: Vec<&str> = iso
                    .not_enforced
                    .iter()
                    .filter(|l| l.status == LayerStatus::Off)
                    .map(|l| l.layer.as_str())
                    .collect();
                let off = if off.is_empty() {
                    String::new()
                } else {
                    format!(", off on purpose: {}", off.join(", "))
                };
                // A note from another machine says what it likes here.
                let off = ui::escape(&off);
                if missing.is_empty() {
                    say!(
                        out,
                        "  sandbox:  {} layers enforced{off} (profile {})",
                        iso.enforced,
                        ui::escape(&iso.profile)
                    );
                } else {
                    say!(
                        out,
                        "  sandbox:  degraded, {} layers enforced; unavailable: {}{off}",
                        iso.enforced,
                        ui::escape(&missing.join("; "))
                    );
                }
            }
            for f in &t.failures {
                say!(
                    out,
                    "  ✘ {}{}",
                    ui::escape(&f.name),
                    if f.message.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", ui::escape(ui::first_line(&f.message)))
                    }
                );
            }
            if !t.output_tail.is_empty() && r.status != gs_model::Status::Passed {
                say!(out, "  output (last lines):");
                for l in t.output_tail.lines() {
                    say!(out, "    {}", ui::escape(l));
                }
            }
        }
        // The setup step failed (the error above says so): the tests never ran.
        None if setup_log.is_some() => {
            say!(out, "Tests: not run (the setup step before them failed)");
            if let Some(log) = setup_log {
                say!(out, "  setup log: {}", log.display());
            }
        }
        None => say!(out, "Tests: none configured or detected"),
    }
}

/// Coverage: the total, and each changed file's.
fn coverage_section(out: &mut String, r: &RunRecord) {
    if let Some(c) = &r.coverage {
        let branches = match (c.branches_covered, c.branches_total) {
            (Some(b), Some(n)) => format!(
                " ({} of {} statements, {b} of {n} branches)",
                c.lines_covered, c.lines_total
            ),
            _ => format!(" of {}", ui::plural(c.lines_total, "line")),
        };
        say!(
            out,
            "\nCoverage: {:.2}%{branches} ({} report {}, written by {})",
            c.percent,
            ui::escape(&c.format),
            ui::quote_path(&c.report),
            ui::escape(&c.check)
        );
        for f in &c.changed_files {
            say!(
                out,
                "  {:>6.2}%  {} ({} of {} lines)",
                f.percent,
                ui::quote_path(&f.path),
                f.lines_covered,
                f.lines_total
            );
        }
    }
}

/// The analysis of the commit's code: sizes, complexity, languages, the first issues.
fn analysis_section(out: &mut String, r: &RunRecord) {
    if let Some(a) = &r.analysis {
        say!(
            out,
            "\nAnalysis: {}, {} ({} code, {} comment, {} blank), {}, {}",
            ui::plural(a.files_analyzed, "file"),
            ui::plural(a.total_lines, "line"),
            a.code_lines,
            a.comment_lines,
            a.blank_lines,
            ui::plural(a.functions_found, "function"),
            ui::plural(a.classes_found, "class")
        );
        say!(
            out,
            "  complexity: mean {:.2}, max {}",
            a.complexity_score,
            a.complexity_max
        );
        let langs: Vec<String> = a
            .languages
            .iter()
            .map(|(k, v)| format!("{} {}", ui::escape(k), ui::plural(v.files, "file")))
            .collect();
        if !langs.is_empty() {
            say!(out, "  languages:  {}", langs.join(", "));
        }
        for i in a.potential_issues.iter().take(20) {
            let path = ui::quote_path(&i.path);
            say!(
                out,
                "  ! {path}:{} {}: {}",
                i.line,
                ui::escape(&i.kind),
                ui::escape(&i.message)
            );
        }
        if a.potential_issues.len() > 20 {
            say!(
                out,
                "  … and {} (--json shows all)",
                ui::plural(a.potential_issues.len() - 20, "more issue")
            );
        }
    }
}

/// The commit's changes as `git diff --stat` counts them, the first 50 files listed.
fn changes_section(out: &mut String, r: &RunRecord) {
    if let Some(c) = &r.changes {
        say!(
            out,
            "\n{}",
            ui::diffstat_summary(c.files_changed, c.insertions, c.deletions)
        );
        for f in c.files.iter().take(50) {
            let counts = if f.binary {
                "Bin".to_string() // as `git diff --stat` says for a binary file
            } else {
                format!("+{} -{}", f.insertions, f.deletions)
            };
            say!(
                out,
                "  {:<9} {} ({counts})",
                ui::escape(f.status.as_str()),
                ui::quote_path(&f.path)
            );
        }
    }
}

/// The named checks: one line each, with the command, log and last lines of those that did not
/// pass.
fn checks_section(out: &mut String, r: &RunRecord, logs: Logs<'_>) {
    if r.checks.is_empty() {
        return;
    }
    say!(out, "\nChecks:");
    let width = r
        .checks
        .iter()
        .map(|(n, _)| ui::escape(n).chars().count())
        .max()
        .unwrap_or(0);
    for (name, c) in r.checks.iter() {
        let name = ui::escape(name);
        let t = &c.run;
        let exit = match (&t.killed_by, t.exit_code) {
            (Some(k), _) => format!("killed by {}", ui::escape(k.as_str())),
            (None, Some(code)) => format!("exit {code}"),
            (None, None) => "no exit code".into(),
        };
        say!(
            out,
            "  {} {name:<width$}  {:<7}  {exit}, {}{}",
            ui::mark(c.status()),
            c.status().as_str(),
            ui::duration(t.duration_ms),
            if c.required { "" } else { "  (optional)" }
        );
        if c.status() == gs_model::Status::Passed {
            continue;
        }
        say!(out, "      command: {}", ui::escape(&t.command));
        if let Some(e) = &c.error {
            say!(out, "      error:   {}", ui::escape(ui::first_line(e)));
        }
        if let Some(log) = logs(Some(&name)) {
            say!(out, "      log:     {}", log.display());
        }
        for f in &t.failures {
            say!(out, "      ✘ {}", ui::escape(&f.name));
        }
        for l in t.output_tail.lines() {
            say!(out, "      | {}", ui::escape(l));
        }
    }
}

fn print_isolation(ctx: &Context, r: &RunRecord, json: bool) -> CmdResult {
    let Some(summary) = r.tests.as_ref().and_then(|t| t.isolation.as_ref()) else {
        let short = gs_util::short(&r.commit);
        return Err(
            CommandError::failed(format!("{short} ran no test command, so no sandbox"))
                .hint(format!("see `git sandbox show {short}`")),
        );
    };
    let Some(layers) = crate::app::records::views::profile(ctx, &summary.profile)? else {
        return Err(CommandError::failed(format!(
            "the sandbox profile {} of this run is not in this machine's index (it ran elsewhere)",
            summary.profile
        ))
        .hint("`git sandbox doctor` shows this machine's"));
    };
    if json {
        print_json(&serde_json::json!({
            "profile": summary.profile,
            "degraded": summary.degraded,
            "layers": layers,
        }));
        return Ok(0);
    }
    println!(
        "sandbox profile {}{}",
        summary.profile,
        if summary.degraded { " (degraded)" } else { "" }
    );
    for l in &layers {
        let mark = match l.status {
            gs_model::LayerStatus::Enforced => "✔",
            gs_model::LayerStatus::Off => "-",
            _ => "✘",
        };
        println!("{mark} {:<17} {}", l.layer, l.detail);
    }
    Ok(0)
}

/// One line of what a run reached of the network: its policy, the hosts it contacted, what it
/// was refused.
fn network_line(n: &gs_model::NetworkUse) -> String {
    if n.policy == "host" {
        return "the host's own network (network = \"host\"): nothing was watched".into();
    }
    let allowed = if n.allow == ["*"] {
        "any public host".to_string()
    } else {
        n.allow.join(", ")
    };
    let contacted: Vec<String> = n
        .contacted
        .iter()
        .map(|c| {
            format!(
                "{}:{} ({} request{}, {} B in)",
                c.host,
                c.port,
                c.requests,
                if c.requests == 1 { "" } else { "s" },
                c.bytes_in
            )
        })
        .collect();
    let mut line = format!(
        "through the proxy, to {allowed}; contacted {}",
        if contacted.is_empty() {
            "nothing".into()
        } else {
            contacted.join(", ")
        }
    );
    if let Some(r) = n.refused.first() {
        line.push_str(&format!(
            "; refused {} ({}:{}: {}{})",
            n.refused.len(),
            r.host,
            r.port,
            r.reason,
            if n.refused.len() > 1 { ", …" } else { "" }
        ));
    }
    line
}
