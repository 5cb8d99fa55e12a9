# git-sandbox's pytest reporter: each test's outcome, as pytest's own summary counts it, one JSON
# line per outcome, to the file git-sandbox named for this run. It changes nothing of the run:
# no order, no selection, no output (but in a probe, never the recorded run: there the tests the
# selection names by test run before the others, GIT_SANDBOX_PYTEST_FIRST). git-sandbox loads it through PYTEST_PLUGINS under a module
# name made for the run (so no file of the commit can stand in for it) and reads the file back as
# the run's per-test results, beside pytest's summary line.
import json
import os

import pytest

# Taken once, so that a session started by a test (pytester, a subprocess) reports nothing here.
_OUT = os.environ.pop("GIT_SANDBOX_PYTEST_REPORT", None)
_MAP = os.environ.pop("GIT_SANDBOX_PYTEST_MAP", None)
_FIRST = os.environ.pop("GIT_SANDBOX_PYTEST_FIRST", None)
_taken = []

# A probe's pytest read "--assert=plain" first in PYTEST_ADDOPTS before it imported this module:
# the variable is given back as the user had it.
if os.environ.pop("GIT_SANDBOX_PYTEST_PLAIN", None):
    _addopts = os.environ.get("PYTEST_ADDOPTS", "")
    if _addopts.startswith("--assert=plain"):
        _addopts = _addopts[len("--assert=plain") :].lstrip(" ")
        if _addopts:
            os.environ["PYTEST_ADDOPTS"] = _addopts
        else:
            os.environ.pop("PYTEST_ADDOPTS", None)


class GitSandboxFirst:
    """A probe's order: the collected tests named first, in their order; the rest keep theirs.
    Last of the ordering hooks, so that it is this order the probe runs."""

    def __init__(self, names):
        self.rank = {}
        for i, n in enumerate(names):
            self.rank.setdefault(n, i)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        last = len(self.rank)
        keyed = [(self.rank.get(item.nodeid, last), i) for i, item in enumerate(items)]
        keyed.sort()
        items[:] = [items[i] for _, i in keyed]


def _calls():
    """Starts recording which of the project's functions are called: the set their numbers go
    in, a function that stops the recording, and one that tells what a number is (the
    function's file, first and last line).

    A trace function (or sys.monitoring) runs at every call of every function, pytest's and the
    libraries' too: it doubled flask's suite (3.11; +40% on 3.12). Instead the project's own
    modules, as they are imported, are compiled with a call at the start of each function,
    which adds the function's number to the set (C code, no Python frame): only the project's
    functions pay, about 5% on flask."""
    return _instrument(set())


# The name the compiled call looks up (in builtins, where no module of the project defines it).
_HIT = "__git_sandbox_map_hit__"


def _instrument(seen):
    import ast
    import builtins
    import importlib.machinery
    import sys

    root = os.path.realpath(os.getcwd()) + os.sep
    functions = []  # number -> (file, first line, last line)

    def call(i, at):
        hit = ast.Call(ast.Name(_HIT, ast.Load()), [ast.Constant(i)], [])
        return ast.copy_location(hit, at)

    class Instrument(ast.NodeTransformer):
        def __init__(self, path):
            self.path = path

        def number(self, node):
            # From its first decorator, as its code object's lines start.
            first = min([d.lineno for d in getattr(node, "decorator_list", ())] + [node.lineno])
            functions.append((self.path, first, node.end_lineno or node.lineno))
            return len(functions) - 1

        def visit_FunctionDef(self, node):
            self.generic_visit(node)
            body = node.body
            # After the docstring, which stays the function's.
            at = 1 if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str) else 0
            first = body[at] if at < len(body) else body[-1]
            body.insert(at, ast.copy_location(ast.Expr(call(self.number(node), first)), first))
            return node

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_Lambda(self, node):
            self.generic_visit(node)
            pair = ast.Tuple([call(self.number(node), node.body), node.body], ast.Load())
            node.body = ast.copy_location(ast.Subscript(ast.copy_location(pair, node.body), ast.Constant(-1), ast.Load()), node.body)
            return node

    class Loader(importlib.machinery.SourceFileLoader):
        def get_code(self, fullname):
            source = self.get_data(self.path)
            try:
                tree = Instrument(self.path).visit(ast.parse(source, self.path))
                return compile(ast.fix_missing_locations(tree), self.path, "exec", dont_inherit=True)
            except Exception:
                # The module as it is, unmeasured: the import graph has it.
                return compile(source, self.path, "exec", dont_inherit=True)

    class Finder:
        """Finds a module as the finders after it do; one of the project's own source files
        (under the directory pytest started in, not an installed package) is loaded by Loader."""

        on = True

        def find_spec(self, name, path=None, target=None):
            if not self.on:
                return None
            after = sys.meta_path[sys.meta_path.index(self) + 1:] if self in sys.meta_path else []
            for finder in after:
                find = getattr(finder, "find_spec", None)
                spec = find(name, path, target) if find else None
                if spec is not None:
                    break
            else:
                return None
            origin = spec.origin or ""
            if (
                type(spec.loader) is importlib.machinery.SourceFileLoader
                and origin.endswith(".py")
                and os.path.realpath(origin).startswith(root)
                and "site-packages" not in origin
                and "dist-packages" not in origin
            ):
                spec.loader = Loader(spec.loader.name, spec.loader.path)
            return spec

    finder = Finder()
    setattr(builtins, _HIT, seen.add)
    # After pytest's assertion rewriting (which takes the test files and conftests first).
    at = next((i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder), 0)
    sys.meta_path.insert(at, finder)

    def stop():
        finder.on = False
        setattr(builtins, _HIT, id)

    def span(key):
        return functions[key] if isinstance(key, int) and 0 <= key < len(functions) else None

    return seen, stop, span


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
        self.current, self.stop, self.span = calls
        self.nodeid = None
        self.outside = set()
        self.tests = {}

    def _take(self):
        taken = set(self.current)
        self.current.clear()
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

        def index(key):
            if key in spans:
                return spans[key]
            found = None
            span = self.span(key)
            if span is not None:
                f, first, last = span
                if f.startswith(self.root) and "site-packages" not in f:
                    found = len(functions)
                    functions.append([f[len(self.root):], first, last])
            spans[key] = found
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
            _CALLS[1]()
        return
    # The map is made where the tests run: not under pytest-xdist, whose workers run them.
    if _CALLS is not None:
        try:
            if getattr(config.option, "numprocesses", None):
                raise RuntimeError("pytest-xdist")
            config.pluginmanager.register(GitSandboxMap(config, _MAP, _CALLS), "git-sandbox-map")
        except Exception:
            _CALLS[1]()
    if _FIRST:
        try:
            config.pluginmanager.register(
                GitSandboxFirst([n for n in _FIRST.split("\n") if n]), "git-sandbox-first"
            )
        except Exception:
            pass
    try:
        report = GitSandboxReport(_OUT)
    except Exception:
        return
    config.pluginmanager.register(report, "git-sandbox-report")
