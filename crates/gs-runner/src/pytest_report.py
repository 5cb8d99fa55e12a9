# git-sandbox's pytest reporter: each test's outcome, as pytest's own summary counts it, one JSON
# line per outcome, to the file git-sandbox named for this run. It changes nothing of the run:
# no order, no selection, no output. git-sandbox loads it through PYTEST_PLUGINS under a module
# name made for the run (so no file of the commit can stand in for it) and reads the file back as
# the run's per-test results, beside pytest's summary line.
import json
import os

# Taken once, so that a session started by a test (pytester, a subprocess) reports nothing here.
_OUT = os.environ.pop("GIT_SANDBOX_PYTEST_REPORT", None)
_taken = []


def _outcome(report):
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if report.passed:
            return "xpassed" if xfail else "passed"
        if report.failed:
            return "failed"
        return "xfailed" if xfail else "skipped"
    if report.failed:
        return "error"
    if report.skipped:
        return "xfailed" if xfail else "skipped"
    return None


class GitSandboxReport:
    def __init__(self, path):
        self.out = open(path, "a", encoding="utf-8")

    def pytest_runtest_logreport(self, report):
        # A subtest (pytest's `subtests`, unittest's `subTest`, pytest-subtests) counts in the
        # summary's "failed" when it fails, and in a word of its own ("5 subtests passed")
        # otherwise; its test reports for itself.
        if type(report).__name__.lower() == "subtestreport" and not report.failed:
            return
        outcome = _outcome(report)
        if outcome is not None and getattr(report, "outcome", "") != "rerun":
            self._write(report.nodeid, outcome)

    def pytest_collectreport(self, report):
        if report.failed:
            self._write(report.nodeid, "error")

    def _write(self, nodeid, outcome):
        # A report that cannot be written is no report (git-sandbox then reads the output);
        # it never stops the tests.
        if self.out is None:
            return
        try:
            self.out.write(json.dumps({"id": nodeid, "outcome": outcome}) + "\n")
            self.out.flush()
        except Exception:
            self.out = None


def pytest_configure(config):
    # A worker of pytest-xdist reports through its controller.
    if _OUT is None or _taken or hasattr(config, "workerinput"):
        return
    _taken.append(True)
    try:
        report = GitSandboxReport(_OUT)
    except Exception:
        return
    config.pluginmanager.register(report, "git-sandbox-report")
