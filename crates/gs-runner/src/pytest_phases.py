# git-sandbox's pytest plugin for a two-phase run in one session: the tests a change can reach
# run first, then the rest, without a second start of pytest. It moves phase one's items to the
# front of the collected items (after every other plugin's reordering and deselection), tells the
# first failure by its node id the moment it is reported, and tells where phase one ended with
# its counts. Its lines go to pytest's terminal, which git-sandbox watches; the tests' own output
# is captured by pytest (git-sandbox runs no session this way with capture off).
import os

import pytest

# Phase one: test files (and directories) relative to the directory pytest runs in, or node ids.
PHASE_ONE = []

_PREFIX = "[git-sandbox] "


class GitSandboxPhases:
    def __init__(self, config):
        self.config = config
        self.ids = set()
        self.left = -1
        self.ended = False
        self.failure_told = False
        self.counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
        self.files = set(s for s in PHASE_ONE if "::" not in s)
        self.nodes = [s for s in PHASE_ONE if "::" in s]

    def _selected(self, item, root):
        path = getattr(item, "path", None) or getattr(item, "fspath", None)
        if path is None:
            return False
        try:
            rel = os.path.relpath(str(path), root).replace(os.sep, "/")
        except ValueError:
            return False
        parts = rel.split("/")
        if any("/".join(parts[:i]) in self.files for i in range(1, len(parts) + 1)):
            return True
        if not self.nodes:
            return False
        inner = item.nodeid.split("::", 1)
        node = rel + ("::" + inner[1] if len(inner) > 1 else "")
        return any(
            node == s or node.startswith(s + "::") or node.startswith(s + "[")
            for s in self.nodes
        )

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        params = getattr(config, "invocation_params", None)
        root = str(params.dir) if params is not None else os.getcwd()
        one, rest = [], []
        for item in items:
            (one if self._selected(item, root) else rest).append(item)
        items[:] = one + rest
        self.ids = set(item.nodeid for item in one)
        self.left = len(one)

    def pytest_runtest_logreport(self, report):
        if report.failed and not self.failure_told:
            self.failure_told = True
            self._write("first failure: " + report.nodeid)
        if self.ended or report.nodeid not in self.ids:
            return
        if report.when == "call":
            key = "passed" if report.passed else "failed" if report.failed else "skipped"
        elif report.failed:
            key = "errors"
        elif report.skipped:
            key = "skipped"
        else:
            return
        self.counts[key] += 1

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid, location):
        # Phase one selected nothing the session collected: it ended before the first test.
        if self.left == 0 and not self.ended:
            self._end()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_logfinish(self, nodeid, location):
        yield
        if not self.ended and nodeid in self.ids:
            self.left -= 1
            if self.left <= 0:
                self._end()

    def _end(self):
        self.ended = True
        c = self.counts
        self._write(
            "phase one ended: %d tests, %d passed, %d failed, %d errors, %d skipped"
            % (len(self.ids), c["passed"], c["failed"], c["errors"], c["skipped"])
        )

    def _write(self, text):
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        reporter.ensure_newline()
        writer = getattr(reporter, "_tw", None)
        # Quiet progress letters have no file name before them, and write_line would go on
        # after them on the same line: the line must begin with the plugin's words.
        if writer is not None and getattr(writer, "width_of_current_line", 0):
            writer.line()
        reporter.write_line(_PREFIX + text)
        if writer is not None:
            writer.flush()


def pytest_configure(config):
    config.pluginmanager.register(GitSandboxPhases(config), "git-sandbox-phases")
