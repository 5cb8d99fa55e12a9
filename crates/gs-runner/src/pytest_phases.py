# git-sandbox's pytest plugin for a two-phase run in one session: the tests a change can reach
# run first, then the rest, without a second start of pytest. It collects phase one's files alone
# and runs their selected tests, says where phase one ended with its counts, then collects the
# suite as configured (skipping the files phase one ran whole) and runs what phase one did not.
# So the first failure comes before the rest of the suite is even collected. It tells the first
# failure by its node id the moment it is reported. Its lines go to pytest's terminal, which
# git-sandbox watches; the tests' own output is captured by pytest (git-sandbox runs no session
# this way with capture off).
import os

import pytest

# Phase one: test files (and directories) relative to the directory pytest runs in, or node ids.
PHASE_ONE = []

_PREFIX = "[git-sandbox] "


class GitSandboxPhases:
    def __init__(self, config):
        self.config = config
        self.ids = set()
        self.whole = set()
        self.rest = False
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

    def _root(self):
        params = getattr(self.config, "invocation_params", None)
        return str(params.dir) if params is not None else os.getcwd()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session):
        root = self._root()
        paths = []
        for s in PHASE_ONE:
            path = s.split("::", 1)[0]
            if path not in paths and os.path.exists(os.path.join(root, path)):
                if not self._ignored(session, os.path.join(root, path)):
                    paths.append(path)
        session.items = []
        if paths:
            session.perform_collect(paths)
            session.items[:] = [i for i in session.items if self._selected(i, root)]
        # pytest's progress counts phase one's tests until the rest is collected.
        session.testscollected = len(session.items)
        return True

    def _ignored(self, session, path):
        # A path the suite ignores (`--ignore`, `collect_ignore` in a conftest) is not run by
        # naming it: pytest collects a path given on its command line whatever ignores it.
        try:
            from pathlib import Path

            p = Path(path)
            hook = session.gethookproxy(p)
            return bool(hook.pytest_ignore_collect(collection_path=p, config=self.config))
        except Exception:
            return False

    if int(pytest.__version__.split(".")[0]) >= 7:

        def pytest_ignore_collect(self, collection_path):
            # The rest of the suite: a file phase one ran whole is not collected again.
            if self.rest and self.whole:
                try:
                    rel = os.path.relpath(str(collection_path), self._root())
                except ValueError:
                    return None
                if rel.replace(os.sep, "/") in self.whole:
                    return True
            return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        option = session.config.option
        if session.testsfailed and not option.continue_on_collection_errors:
            raise session.Interrupted(_collection_errors(session.testsfailed))
        one = list(session.items)
        self.ids = set(item.nodeid for item in one)
        self.whole = set(s for s in self.files if os.path.isfile(os.path.join(self._root(), s)))
        self._run(session, one)
        self._end()
        before = session.testsfailed
        self.rest = True
        self._conftests_again(session)
        session.perform_collect()
        if session.testsfailed > before and not option.continue_on_collection_errors:
            raise session.Interrupted(_collection_errors(session.testsfailed - before))
        rest = [i for i in session.items if i.nodeid not in self.ids]
        session.testscollected = len(self.ids) + len(rest)
        self._once_deselected()
        self._run(session, rest)
        return True

    def _conftests_again(self, session):
        # From pytest 9.1 a conftest's fixtures belong to the Directory node collected for its
        # directory, parsed once when that node is first collected: the rest's collection makes
        # new nodes, which get them again this way. Before 9.1 they belong to the node id, and
        # this attribute does not exist.
        fixtures = getattr(session, "_fixturemanager", None)
        pending = getattr(fixtures, "_pending_conftests", None)
        if not isinstance(pending, dict):
            return
        from pathlib import Path

        manager = self.config.pluginmanager
        rootpath = Path(str(self.config.rootpath))
        for plugin in manager.get_plugins():
            name = manager.get_name(plugin) or ""
            if not name.endswith("conftest.py"):
                continue
            directory = Path(os.path.abspath(name)).parent
            try:
                directory.relative_to(rootpath)
            except ValueError:
                continue  # above the rootdir: the session's own, kept
            if directory != rootpath and directory not in pending:
                pending[directory] = plugin

    def _once_deselected(self):
        # A file phase one ran a part of is collected twice: what `-k` or `-m` deselected in
        # it is counted once, as in one collection.
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        stats = getattr(reporter, "stats", None)
        if not isinstance(stats, dict) or not stats.get("deselected"):
            return
        seen = set()
        once = []
        for item in stats["deselected"]:
            key = getattr(item, "nodeid", None) or id(item)
            if key not in seen:
                seen.add(key)
                once.append(item)
        stats["deselected"] = once

    def _run(self, session, items):
        for i, item in enumerate(items):
            nextitem = items[i + 1] if i + 1 < len(items) else None
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)

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


def _collection_errors(n):
    return "%d error%s during collection" % (n, "s" if n != 1 else "")


def pytest_configure(config):
    config.pluginmanager.register(GitSandboxPhases(config), "git-sandbox-phases")
