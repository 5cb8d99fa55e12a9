"""A coding agent's whole session against `git sandbox mcp`, through the official MCP Python SDK
over stdio. Started by tests/services/mcp.rs with the binary as argv[1] and the repository as argv[2], in
the test's hermetic environment. Every assertion failure ends it non-zero with the reason.

The agent keeps its own tools: it commits with git, and reads the verification through MCP.
"""

import asyncio
import json
import os
import subprocess
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

BIN, REPO = sys.argv[1], sys.argv[2]
BUDGET = 2048
WRITES = {
    "experiment_start", "run_request", "experiment_eval", "experiment_promote",
    "experiment_kill", "exec", "workspace_new", "workspace_exec", "workspace_write_file",
    "workspace_commit", "workspace_rm",
}
ALL = WRITES | {
    "experiment_list", "experiment_status", "run_wait", "result_get", "failures_list",
    "log_read", "analysis_get", "analysis_diff", "compare", "events_poll", "config_get",
    "flaky_list", "workspace_read_file", "workspace_diff", "workspace_list",
}

PASSING = """import unittest


class TestMore(unittest.TestCase):
    def test_more(self):
        self.assertEqual(2 * 3, 6)


if __name__ == "__main__":
    unittest.main()
"""

FAILING = """import unittest


def parse(text):
    return int(text.strip())


class TestParse(unittest.TestCase):
    def test_negative(self):
        self.assertEqual(parse("-4"), -5)

    def test_positive(self):
        self.assertEqual(parse("7"), 7)


if __name__ == "__main__":
    unittest.main()
"""

answers = []


def git(*args):
    return subprocess.run(
        ["git", *args], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.strip()


def commit(path, body, message):
    full = os.path.join(REPO, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(body)
    git("add", path)
    git("commit", "-q", "-m", message)
    return git("rev-parse", "HEAD")


async def call(s, name, args, detail=False, error=False):
    """Call a tool; check the answer's budget and error flag; return its JSON (or error text)."""
    res = await s.call_tool(name, args)
    text = res.content[0].text
    answers.append((name, len(text)))
    if not detail:
        assert len(text) <= BUDGET, f"{name} answered {len(text)} bytes: {text[:300]}"
    if error:
        assert res.is_error, f"{name} {args} should fail: {text}"
        lines = text.splitlines()
        assert lines[0].startswith("error: "), text
        assert all(l.startswith("hint: ") for l in lines[1:]) and len(lines) > 1, text
        return text
    assert not res.is_error, f"{name} {args} failed: {text}"
    return json.loads(text)


async def main():
    params = StdioServerParameters(
        command=BIN, args=["mcp", "--repo", REPO], env=dict(os.environ), cwd="/"
    )
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            init = await s.initialize()
            assert init.server_info.name == "git-sandbox", init

            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert set(tools) == ALL, sorted(tools)
            for name, t in tools.items():
                assert t.annotations.read_only_hint == (name not in WRITES), name
                assert t.input_schema["type"] == "object", name
            assert tools["experiment_promote"].annotations.destructive_hint is True
            assert tools["experiment_kill"].annotations.destructive_hint is True
            assert tools["run_request"].annotations.destructive_hint is False

            # Start an experiment; the work tree is not touched.
            main_before = git("rev-parse", "main")
            started = await call(s, "experiment_start",
                                 {"name": "faster", "hypothesis": "a parser for negatives"})
            assert started["branch"] == "experiment/faster", started
            assert started["base_commit"] == main_before, started
            assert git("branch", "--show-current") == "main"
            first = await call(s, "events_poll", {"limit": 3})
            assert [e["kind"] for e in first["events"]][-1] == "experiment.started", first
            assert first["cursor"] == first["events"][-1]["id"], first
            err = await call(s, "experiment_start", {"name": "Faster Parser!"}, error=True)
            assert "faster-parser" in err, err

            # The agent works on its branch with git; the hook queues each commit and the server
            # (no daemon runs) verifies it.
            git("switch", "-q", "experiment/faster")
            good = commit("tests/test_more.py", PASSING, "Add a passing test")
            done = await call(s, "run_wait", {"revision": good, "timeout_seconds": 120})
            assert done["state"] == "done", done
            assert done["result"]["status"] == "passed", done
            assert done["result"]["tests"]["passed"] == 3, done

            bad = commit("tests/test_parse.py", FAILING, "Parse negative numbers")
            done = await call(s, "run_wait", {"revision": "experiment/faster", "timeout_seconds": 120})
            assert done["commit"] == bad and done["result"]["status"] == "failed", done
            result = await call(s, "result_get", {"revision": bad})
            assert result["tests"]["failed"] == 1 and result["tests"]["passed"] == 4, result
            assert result["failures"][0]["name"].startswith("test_negative"), result

            fails = await call(s, "failures_list", {"revision": bad})
            assert fails["failed"] == 1 and len(fails["failures"]) == 1, fails
            f = fails["failures"][0]
            assert f["since"] == bad, f
            assert f["location"].startswith("tests/test_parse.py:"), f
            assert "-4" in f["assertion"] or "AssertionError" in f["assertion"], f
            # A second failing commit: the failure began at the first one.
            worse = commit("README.md", "a note\n", "Touch the readme")
            await call(s, "run_wait", {"revision": worse, "timeout_seconds": 120})
            fails = await call(s, "failures_list", {"revision": worse})
            assert fails["failures"][0]["since"] == bad, fails

            # The log, a page at a time, and only the lines that matter.
            page = await call(s, "log_read", {"revision": bad, "limit": 3})
            assert [l["n"] for l in page["lines"]] == [1, 2, 3], page
            assert page["next_offset"] == 3 and page["total_lines"] > 3, page
            page2 = await call(s, "log_read", {"revision": bad, "offset": page["next_offset"], "limit": 3})
            assert page2["lines"][0]["n"] == 4, page2
            seen, offset = [], 0
            while offset is not None:
                p = await call(s, "log_read", {"revision": bad, "offset": offset, "limit": 4})
                seen += [l["n"] for l in p["lines"]]
                offset = p["next_offset"]
            assert seen == list(range(1, page["total_lines"] + 1)), seen
            grep = await call(s, "log_read", {"revision": bad, "grep": "FAIL"})
            assert grep["lines"] and all("FAIL" in l["text"] for l in grep["lines"]), grep

            # Fix it; compare, evaluate, promote (a dry run first).
            fixed = commit("tests/test_parse.py", FAILING.replace("-5)", "-4)"), "Fix the test")
            done = await call(s, "run_wait", {"revision": fixed, "timeout_seconds": 120})
            assert done["result"]["status"] == "passed", done
            assert done["result"]["tests"]["passed"] == 5, done

            status = await call(s, "experiment_status", {"name": "faster"})
            assert status["head"] == fixed and status["result"]["status"] == "passed", status
            assert status["pending"] == 0 and status["running"] == 0, status
            listed = await call(s, "experiment_list", {})
            assert listed["experiments"][0]["name"] == "faster", listed

            diff = await call(s, "analysis_diff", {"head": "faster"})
            added = {f["name"] for f in diff["functions_added"]}
            assert {"parse", "test_negative", "test_more"} <= added, diff
            assert diff["totals"]["functions"] >= 3, diff
            metrics = await call(s, "analysis_get", {"revision": fixed, "path": "tests/test_parse.py"})
            assert [f["path"] for f in metrics["files"]] == ["tests/test_parse.py"], metrics
            assert metrics["most_complex"][0]["name"] == "parse", metrics

            # main's first commit was history when the repository was made: ask for it.
            req = await call(s, "run_request", {"revision": "main"})
            assert req["cached"] is False and req["queued"] is True, req
            assert req["runner"] == "this server", req
            again = await call(s, "run_request", {"revision": "main"})
            assert again["queued"] is False, again
            done = await call(s, "run_wait", {"revision": "main", "timeout_seconds": 120})
            assert done["result"]["status"] == "passed", done
            cmp = await call(s, "compare", {"targets": ["faster", bad]})
            assert cmp["base"]["commit"] == main_before and cmp["base"]["status"] == "passed", cmp
            assert cmp["rows"][0]["status"] == "passed" and cmp["rows"][0]["vs_base"]["passed"] == 3, cmp
            assert cmp["rows"][1]["status"] == "failed" and cmp["rows"][1]["vs_base"]["failed"] == 1, cmp

            ev = await call(s, "experiment_eval", {"name": "faster"})
            assert ev["recommendation"] in ("STRONGLY_RECOMMEND", "RECOMMEND"), ev
            assert ev["head"]["commit"] == fixed, ev

            git("switch", "-q", "main")
            dry = await call(s, "experiment_promote", {"name": "faster"})
            assert dry["dry_run"] is True and dry["promoted"] is False, dry
            assert dry["result"]["status"] == "passed", dry
            assert git("rev-parse", "main") == main_before, "a dry run moved main"
            real = await call(s, "experiment_promote", {"name": "faster", "dry_run": False})
            assert real["promoted"] is True, real
            assert git("rev-parse", real["commit"] + "^{tree}") == git("rev-parse", dry["commit"] + "^{tree}"), real
            assert git("rev-parse", "main") == real["commit"], "main did not move"
            again = await call(s, "experiment_promote", {"name": "faster", "dry_run": False}, error=True)
            assert "already promoted" in again, again

            # The promoted commit was run before main moved: asking again is answered at once.
            cached = await call(s, "run_request", {"revision": "main"})
            assert cached["cached"] is True and cached["state"] == "done", cached
            assert cached["result"]["status"] == "passed", cached

            # exec: any command in the sandbox at a revision, output captured.
            ran = await call(s, "exec", {"revision": bad, "command": ["python3", "-m", "unittest", "tests.test_parse"]})
            assert ran["exit_code"] == 1 and "FAILED" in ran["output"], ran
            ran = await call(s, "exec", {"revision": "main", "command": ["sh", "-c", "echo hi; exit 3"]})
            assert ran["exit_code"] == 3 and ran["output"] == "hi\n", ran

            newer = await call(s, "events_poll", {"cursor": first["cursor"], "kind": "experiment."})
            kinds = [e["kind"] for e in newer["events"]]
            assert kinds == ["experiment.evaluated", "experiment.promoted"], newer
            assert all(e["id"] > first["cursor"] for e in newer["events"]), newer
            assert newer["cursor"] == newer["events"][-1]["id"], newer
            none = await call(s, "events_poll", {"cursor": newer["cursor"], "kind": "experiment."})
            assert none["events"] == [] and none["cursor"] == newer["cursor"], none

            # Every run of a tree so far had one outcome: nothing is flaky.
            flaky = await call(s, "flaky_list", {})
            assert flaky == {"total": 0, "tests": []}, flaky

            config = await call(s, "config_get", {})
            assert config["promote"]["target"] == "main", config
            assert "enforced" in config["sandbox"], config

            # Resources: the whole record and the whole log of a commit.
            uris = [r.uri for r in (await s.list_resources()).resources]
            name = os.path.basename(REPO)
            assert f"sandbox://{name}/result/{bad}" in [str(u) for u in uris], uris
            rec = await s.read_resource(f"sandbox://{name}/result/{bad}")
            assert json.loads(rec.contents[0].text)["commit"] == bad
            log = await s.read_resource(f"sandbox://{name}/log/{bad}")
            assert "test_negative" in log.contents[0].text
            try:
                await s.read_resource(f"sandbox://{name}/result/nope")
                raise AssertionError("an unknown revision was read")
            except MCPError as e:
                assert "nope" in str(e), e

            # Kill keeps the results.
            await call(s, "experiment_start", {"name": "dead-end"})
            killed = await call(s, "experiment_kill", {"name": "dead-end"})
            assert killed["archive"] == "refs/sandbox/archive/dead-end", killed

            # A commit whose config is broken gets an error record, and run_wait shows it.
            await call(s, "experiment_start", {"name": "broken"})
            git("switch", "-q", "experiment/broken")
            broken = commit(".sandbox.toml", "[test\ncommand = 1\n", "Break the config")
            git("switch", "-q", "main")
            done = await call(s, "run_wait", {"revision": broken, "timeout_seconds": 120})
            assert done["state"] == "done" and done["result"]["status"] == "error", done
            assert ".sandbox.toml" in done["result"]["error"], done

            # Bad input: clear tool errors, and the server keeps serving.
            await call(s, "result_get", {"revision": "no-such-rev"}, error=True)
            await call(s, "log_read", {"revision": bad, "limit": -1}, error=True)
            await call(s, "log_read", {"revision": bad, "limit": 0}, error=True)
            await call(s, "log_read", {"revision": bad, "limit": "ten"}, error=True)
            await call(s, "failures_list", {}, error=True)
            await call(s, "run_wait", {"revision": bad, "timeout_seconds": 601}, error=True)
            await call(s, "experiment_status", {"name": "../etc"}, error=True)
            await call(s, "result_get", {"revision": bad, "surprise": 1}, error=True)
            await call(s, "experiment_status", {"name": "nobody"}, error=True)
            try:
                await s.call_tool("no_such_tool", {})
                raise AssertionError("an unknown tool was called")
            except MCPError as e:
                assert "no_such_tool" in str(e), e
            still = await call(s, "experiment_list", {})
            assert still["total"] == 3, still

            # detail asks for more than the compact budget allows.
            big = await call(s, "result_get", {"revision": bad, "detail": True}, detail=True)
            assert "output_tail" in big, big

    # The read-only server lists and serves only the tools that change nothing.
    params = StdioServerParameters(
        command=BIN, args=["mcp", "--read-only"], env=dict(os.environ), cwd=REPO
    )
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            names = {t.name for t in (await s.list_tools()).tools}
            assert names == ALL - WRITES, sorted(names)
            err = await call(s, "run_request", {"revision": "main"}, error=True)
            assert "read-only" in err, err
            ok = await call(s, "result_get", {"revision": "main"})
            assert ok["status"] == "passed", ok

    print(json.dumps({"answers": len(answers), "largest": max(n for _, n in answers if n)}))


asyncio.run(main())
