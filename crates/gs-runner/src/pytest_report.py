# git-sandbox's pytest reporter: each test's outcome, as pytest's own summary counts it, one JSON
# line per outcome, to the file git-sandbox named for this run. It changes nothing of the run:
# no order, no selection, no output. git-sandbox loads it through PYTEST_PLUGINS under a module
# name made for the run (so no file of the commit can stand in for it) and reads the file back as
# the run's per-test results, beside pytest's summary line.
import json
import os

import pytest

# Taken once, so that a session started by a test (pytester, a subprocess) reports nothing here.
_OUT = os.environ.pop("GIT_SANDBOX_PYTEST_REPORT", None)
_MAP = os.environ.pop("GIT_SANDBOX_PYTEST_MAP", None)
_taken = []


def _calls():
    """Starts recording which functions are called: the set they go in, a function that re-arms
    the recording after the set is emptied, and one that stops it."""
    import sys
    import threading

    seen = set()
    if hasattr(sys, "monitoring"):
        # Python 3.12+: each function's start once per test, then disabled until the next.
        mon = sys.monitoring
        tool = mon.PROFILER_ID
        mon.use_tool_id(tool, "git-sandbox-map")

        def start(code, offset):
            seen.add(code)
            return mon.DISABLE

        mon.register_callback(tool, mon.events.PY_START, start)
        mon.set_events(tool, mon.events.PY_START)
        return seen, mon.restart_events, lambda: mon.set_events(tool, 0)

    # Before 3.12: a global trace function, called at each call and tracing no line.
    def trace(frame, event, arg):
        seen.add(frame.f_code)

    sys.settrace(trace)
    threading.settrace(trace)
    return seen, lambda: None, lambda: (sys.settrace(None), threading.settrace(None))


# The map's recording starts as pytest imports this module (from PYTEST_PLUGINS), before it
# loads the conftest files: what they import, and what runs as it is imported, is called
# outside any test. Started in pytest_configure, it would miss those calls, and a change to a
# function only an import calls (a decorator) would look called by no test.
_CALLS = None
if _MAP is not None:
    try:
        _CALLS = _calls()
    except Exception:
        _CALLS = None


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


class GitSandboxMap:
    """Which functions of the project each test calls: git-sandbox's test map, made by a run of
    its own off the critical path (never the recorded run, whose time it would change). A call
    made outside any test (at import, in collection) or in a fixture wider than one test counts
    for every test. Written once, as JSON, when the session ends."""

    def __init__(self, config, path, calls):
        self.path = path
        self.root = str(config.rootpath) + os.sep
        self.current, self.restart, self.stop = calls
        self.nodeid = None
        self.outside = set()
        self.tests = {}

    def _take(self):
        taken = set(self.current)
        self.current.clear()
        self.restart()
        return taken

    def pytest_runtest_protocol(self, item, nextitem):
        self.outside |= self._take()
        self.nodeid = item.nodeid

    def pytest_runtest_logfinish(self, nodeid, location):
        self.tests.setdefault(nodeid, set()).update(self._take())
        self.nodeid = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        # A fixture wider than a test is set up during the first test that needs it, for all.
        wide = fixturedef.scope != "function"
        if wide and self.nodeid is not None:
            self.tests.setdefault(self.nodeid, set()).update(self._take())
        yield
        if wide:
            self.outside |= self._take()

    def pytest_fixture_post_finalizer(self, fixturedef, request):
        if fixturedef.scope != "function":
            self.outside |= self._take()

    def pytest_sessionfinish(self, session):
        self.stop()
        self.outside |= self._take()
        spans, functions = {}, []

        def index(code):
            if code in spans:
                return spans[code]
            found = None
            f = code.co_filename
            # Functions only (CO_NEWLOCALS): a module's or a class's body spans its whole file
            # or class, and runs as it is imported; a change there is no function body's, and
            # the import graph has it.
            if code.co_flags & 0x2 and f.startswith(self.root) and "site-packages" not in f:
                lines = [l for _, _, l in code.co_lines() if l]
                first, last = min(lines, default=code.co_firstlineno), max(lines, default=code.co_firstlineno)
                found = len(functions)
                functions.append([f[len(self.root):], first, last])
            spans[code] = found
            return found

        def indices(codes):
            return sorted({i for i in map(index, codes) if i is not None})

        out = {
            "version": 1,
            "tests": {t: indices(c) for t, c in self.tests.items()},
            "outside": indices(self.outside),
        }
        out["functions"] = functions
        try:
            with open(self.path, "w", encoding="utf-8") as f:
                json.dump(out, f, separators=(",", ":"))
        except Exception:
            pass


def pytest_configure(config):
    if _taken:
        return
    _taken.append(True)
    # A worker of pytest-xdist reports through its controller.
    if _OUT is None or hasattr(config, "workerinput"):
        if _CALLS is not None:
            _CALLS[2]()
        return
    # The map is made where the tests run: not under pytest-xdist, whose workers run them.
    if _CALLS is not None:
        try:
            if getattr(config.option, "numprocesses", None):
                raise RuntimeError("pytest-xdist")
            config.pluginmanager.register(GitSandboxMap(config, _MAP, _CALLS), "git-sandbox-map")
        except Exception:
            _CALLS[2]()
    try:
        report = GitSandboxReport(_OUT)
    except Exception:
        return
    config.pluginmanager.register(report, "git-sandbox-report")
