//! What `log`, `show`, `status`, `eval` and `doctor` print, whole: one snapshot each of the
//! human output a user reads, with what changes from run to run (times, durations, paths,
//! keys) and from machine to machine (the sandbox's layers, the limits' backing) as
//! placeholders. A change to any of these outputs shows up here as a diff to review.

use crate::common::{shown::shown, World};

const BROKEN: &str = "import unittest\n\n\nclass TestBroken(unittest.TestCase):\n    def test_sum(self):\n        self.assertEqual(1 + 1, 3)\n";
const MORE: &str = "import unittest\n\n\nclass TestMore(unittest.TestCase):\n    def test_more(self):\n        self.assertEqual(2 * 2, 4)\n";

#[test]
fn log_show_and_status_show_a_passing_and_a_failing_commit_whole() {
    let w = World::new();
    let repo = w.new_repo("shown");
    w.sandbox(&repo, &["run"]).success();
    w.commit(&repo, &[("tests/test_broken.py", BROKEN)], "Break a test");
    let o = w.sandbox(&repo, &["run"]);
    assert_eq!(o.code, 1, "a failing commit fails the run: {o}");

    let log = w.sandbox(&repo, &["log"]).success();
    insta::assert_snapshot!(shown(&log.stdout, &[]), @r#"
        ✘ 062a028 failed Break a test [2 passed, 1 failed, [DUR]]
        ✔ 823d2ff passed Create experiment repository shown [2 passed, [DUR]]
        "#);
    let show = w.sandbox(&repo, &["show"]).success();
    insta::assert_snapshot!(shown(&show.stdout, &["sandbox:", "File \""]), @r#"
        run 062a028e75f3656d75d61f769ef2eeb1005e3dad (refs/heads/main)
        Status:   ✘ failed
        Signed:   by this machine (SHA256:[KEY])
        Started:  [TIME]
        Duration: [DUR] (tests [DUR]; the rest checkout, analysis and checks)
        Trigger:  manual

            Break a test

        Tests: 2 passed, 1 failed (unittest)
          command:  python3 -m unittest discover -s tests -v
          exit:     1
          duration: [DUR]  cpu: [DUR]  max rss: [N] KiB
          log:      [TMP]/data/logs/repo_[ID]/062a028e75f3656d75d61f769ef2eeb1005e3dad.log
          sandbox:[MACHINE]
          ✘ test_sum (test_broken.TestBroken.test_sum): AssertionError: 2 != 3
          output (last lines):
            test_sum (test_broken.TestBroken.test_sum) ... FAIL
            test_addition (test_example.TestBaseline.test_addition) ... ok
            test_strings (test_example.TestBaseline.test_strings) ... ok
            
            ======================================================================
            FAIL: test_sum (test_broken.TestBroken.test_sum)
            ----------------------------------------------------------------------
            Traceback (most recent call last):
              File "[MACHINE]
                self.assertEqual(1 + 1, 3)
            AssertionError: 2 != 3
            
            ----------------------------------------------------------------------
            Ran 3 tests in [DUR]
            
            FAILED (failures=1)

        Analysis: 2 files, 25 lines (14 code, 1 comment, 10 blank), 4 functions, 2 classes
          complexity: mean 1.00, max 1
          languages:  python 2 files

         1 file changed, 6 insertions(+)
          added     tests/test_broken.py (+6 -0)
        "#);
    let status = w.sandbox(&repo, &["status"]).success();
    insta::assert_snapshot!(shown(&status.stdout, &[]), @r#"
        home:          [TMP]/data
        repositories:  1
        experiments:   0 (0 active, 0 promoted, 0 killed)
        runs:          2 (50% passed)
        mean duration: [DUR]
        queue:         0 pending, 0 running
        daemon:        not running (start it with `git sandbox daemon`)

        REPOSITORY  EXPERIMENTS  RUNS  PASSED  PENDING  PATH
        shown       0            2     50%     0        [TMP]/data/repos/shown
        "#);
}

#[test]
fn eval_shows_its_verdict_and_the_numbers_behind_it_whole() {
    let w = World::new();
    let repo = w.new_repo("judged");
    w.sandbox(&repo, &["experiment", "start", "more"]).success();
    w.commit_on(
        &repo,
        "experiment/more",
        &[("tests/test_more.py", MORE)],
        "One test more",
    );
    let eval = w.sandbox(&repo, &["eval", "more"]).success();
    insta::assert_snapshot!(shown(&eval.stdout, &[]), @r#"
        Evaluation: STRONGLY_RECOMMEND — every criterion passes and it improves: 3 passing tests against 2 (56d9ff3 against main 319021e)
          ✔ tests_pass     value {"failed_or_errors":0,"status":"passed"}, threshold {"failed_or_errors":0,"status":"passed"}
          ✔ passing_tests  value 3, threshold 2
          ✔ complexity     value {"mean_delta":0.0,"new_issues":0}, threshold {"mean_delta":0.0,"new_issues":0}
          ✔ has_data       value true, threshold true
        "#);
}

#[test]
fn doctor_lists_every_layer_limit_and_network_policy_whole() {
    let w = World::new();
    let doctor = w.sandbox(&w.work(), &["doctor"]);
    // Which layers hold, and how, is this machine's: the snapshot keeps their names and order.
    let text: Vec<String> = doctor
        .stdout
        .lines()
        .map(|l| match l.split_once(' ') {
            Some((mark, rest)) if ["✔", "✘", "-"].contains(&mark) => {
                format!("· {}", rest.split_whitespace().next().unwrap_or(""))
            }
            _ => l.to_string(),
        })
        .collect();
    let machine = [
        "git-sandbox ",
        "memory_mb",
        "processes",
        "cpu_seconds",
        "cpu_cores",
        "open_files",
        "file_size_mb",
        "disk_mb",
    ];
    insta::assert_snapshot!(shown(&text.join("\n"), &machine), @r#"
        git-sandbox [MACHINE]
        · environment
        · session
        · timeout
        · kept_checkout
        · output_cap
        · cgroup
        · user_namespace
        · mount_namespace
        · pid_namespace
        · ipc_namespace
        · uts_namespace
        · network
        · read_only_root
        · private_tmp
        · secrets_hidden
        · disk_limit
        · unprivileged_uid
        · rlimits
        · landlock
        · seccomp

        limits, and what enforces each here (the probe's run, default policy):
          memory_mb[MACHINE]
          processes[MACHINE]
          cpu_seconds[MACHINE]
          cpu_cores[MACHINE]
          open_files[MACHINE]
          file_size_mb[MACHINE]
          disk_mb[MACHINE]
          timeout       the supervisor's wall clock, then the whole tree is killed
          output_bytes  the supervisor, reading the output
          checkout_mb   the supervisor, from object sizes before the checkout is written

        network (your policy):
          tests         none (network = false)
          setup, RUN    none (setup_network = false)

        build caches: none kept

        images ([environment] in your user config):
          registries    docker.io, ghcr.io, quay.io
          plain HTTP    none
          store         [TMP]/data/images (0 images, 0 B)
        (cached in [TMP]/data/probe.json)
        "#);
    assert!(
        doctor.code == 0 || doctor.stdout.contains('✘'),
        "doctor fails only for a layer that is missing: {doctor}"
    );
}
