"""Two agents working in workspaces through `git sandbox mcp`, over the official MCP Python SDK:
each makes a workspace, writes a test, runs it there, commits, waits for the verdict; one
evaluates and promotes. Started by tests/services/mcp.rs with the binary as argv[1] and the
repository as argv[2]. Every assertion failure ends it non-zero with the reason.
"""

import asyncio
import json
import os
import subprocess
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

BIN, REPO = sys.argv[1], sys.argv[2]

TEST = """import unittest


class TestDouble(unittest.TestCase):
    def test_double(self):
        self.assertEqual(2 * {n}, {twice})


if __name__ == "__main__":
    unittest.main()
"""


def git(*args):
    return subprocess.run(
        ["git", *args], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.strip()


async def call(s, name, args, error=False):
    res = await s.call_tool(name, args)
    text = res.content[0].text
    if error:
        assert res.is_error, f"{name} {args} should fail: {text}"
        lines = text.splitlines()
        assert lines[0].startswith("error: ") and len(lines) > 1, text
        return text
    assert not res.is_error, f"{name} {args} failed: {text}"
    return json.loads(text)


def server():
    return StdioServerParameters(
        command=BIN, args=["mcp", "--repo", REPO], env=dict(os.environ), cwd="/"
    )


async def agent(name, n, promote):
    async with stdio_client(server()) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            made = await call(s, "workspace_new", {"name": name})
            assert made["branch"] == f"experiment/{name}", made
            path = f"tests/test_{name.replace('-', '_')}.py"
            wrote = await call(s, "workspace_write_file",
                               {"name": name, "path": path, "content": TEST.format(n=n, twice=2 * n)})
            assert wrote["created"] is True and wrote["lines_added"] > 5, wrote
            back = await call(s, "workspace_read_file", {"name": name, "path": path})
            assert back["content"] == TEST.format(n=n, twice=2 * n), back
            ran = await call(s, "workspace_exec",
                             {"name": name, "command": ["python3", "-m", "unittest", "-v", path.replace("/", ".")[:-3]]})
            assert ran["exit_code"] == 0 and "test_double" in ran["output"], ran
            # The other agent's file is not here.
            other = "tests/test_right.py" if name == "left" else "tests/test_left.py"
            ran = await call(s, "workspace_exec", {"name": name, "command": ["test", "!", "-e", other]})
            assert ran["exit_code"] == 0, ran
            # A link out of the tree is made by a command, and committed as a link.
            ran = await call(s, "workspace_exec", {"name": name, "command": ["ln", "-s", "/etc/passwd", "pw"]})
            assert ran["exit_code"] == 0 and ran["kept"] is True, ran
            # Paths out of the workspace are refused.
            for bad in ["../escape.txt", "/etc/passwd", "pw", "pw/x", ".git/hooks/pre-commit"]:
                await call(s, "workspace_write_file", {"name": name, "path": bad, "content": "x"}, error=True)
            await call(s, "workspace_read_file", {"name": name, "path": "pw"}, error=True)
            d = await call(s, "workspace_diff", {"name": name})
            assert d["files_changed"] == 2 and "new file mode 120000" in d["patch"], d
            c = await call(s, "workspace_commit", {"name": name, "message": f"a test of doubling {n}"})
            assert c["branch"] == f"experiment/{name}" and c["queued"] is True, c
            done = await call(s, "run_wait", {"revision": c["commit"], "timeout_seconds": 300})
            assert done["state"] == "done" and done["result"]["status"] == "passed", done
            assert git("cat-file", "-p", f"{c['commit']}:pw") == "/etc/passwd"
            assert git("cat-file", "-t", f"{c['commit']}:pw") == "blob"
            assert "120000" in git("ls-tree", c["commit"], "pw")
            listed = await call(s, "workspace_list", {})
            assert name in [w["name"] for w in listed], listed
            if promote:
                ev = await call(s, "experiment_eval", {"name": name})
                assert ev["recommendation"] in ("STRONGLY_RECOMMEND", "RECOMMEND"), ev
                p = await call(s, "experiment_promote", {"name": name, "dry_run": False})
                assert p["promoted"] is True, p
            gone = await call(s, "workspace_rm", {"name": name})
            assert gone["workspace"] == name, gone
            return c["commit"]


async def main():
    head = git("rev-parse", "HEAD")
    left, right = await asyncio.gather(agent("left", 3, True), agent("right", 4, False))
    assert left != right
    # The user's checkout never moved; production got the promoted workspace's commit.
    assert git("rev-parse", "HEAD") != head or git("status", "--porcelain") == ""
    assert git("status", "--porcelain") == "", git("status", "--porcelain")
    assert "a test of doubling 3" in git("log", "-3", "--format=%s", "main"), git("log", "-3", "--format=%s", "main")
    print(json.dumps({"agents": 2}))


asyncio.run(main())
