"""The real Claude Code CLI (from the npm registry) against the loopback Anthropic API, end to end.

Scripted tool-use turns with known usage (Read, Edit, Bash, an MCP tool of a real stdio MCP
server, a subagent, a turn that hangs past the time limit) go through ``bench full`` and ``bench
spike`` as root or not, then through ingest and Layer 1; every token count is checked against
what the server really answered. The CLI is installed once per version into ``.cache/`` with npm.
Without npm the tests skip with the reason; under ``CI=true`` they must run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from anthropic_server import AnthropicServer, Turn, text, tool_use, usage_totals
from bench_support import make_repo
from ci_rule import skip_or_fail_in_ci
from install_lock import exclusive

from analysis_lib.ingest.atif import parse_trajectory
from analysis_lib.ingest.claude_code import stream_json_to_atif
from analysis_lib.ingest.load import load_trials
from analysis_lib.metrics.trial_metrics import trial_metrics

pytestmark = pytest.mark.slow  # 8 to 30 s each: real CLI processes, and a time limit that must pass

ROOT = Path(__file__).resolve().parents[1]
# 2.1.197 is the newest whose package declares Node >= 18 (Debian's Node 20); 2.1.330 defers MCP
# tools behind ToolSearch and runs subagents in the background. Both ship a native binary.
CLAUDE_CODE_VERSIONS = tuple(os.environ.get("CLAUDE_CODE_TEST_VERSIONS", "2.1.197 2.1.330").split())
MODEL = "claude-sonnet-4-5-20250929"
INSTRUCTION = "TASK-MAIN: make main() return 2."
HANG_INSTRUCTION = "TASK-HANG: make main() return 2."
EXPLORE_INSTRUCTION = "TASK-EXPLORE: make main() return 2."
MCP_SERVER = Path(__file__).with_name("mcp_stdio_server.py")


@pytest.fixture(scope="module", params=CLAUDE_CODE_VERSIONS)
def claude_bin(request) -> str:
    """The pinned Claude Code CLI, installed from the npm registry into .cache/claude-code/<version>."""
    version = request.param
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        skip_or_fail_in_ci("node/npm not found: the real Claude Code CLI cannot be installed")
    prefix = ROOT / ".cache" / "claude-code" / version
    exe = prefix / "node_modules" / ".bin" / "claude"
    with exclusive(prefix.with_name(f"{version}.lock")):  # a parallel worker waits for this install
        if not exe.exists():
            proc = subprocess.run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error",
                                   f"@anthropic-ai/claude-code@{version}"], capture_output=True, text=True, timeout=600)
            if proc.returncode != 0 or not exe.exists():
                skip_or_fail_in_ci(f"npm could not install @anthropic-ai/claude-code@{version}: {proc.stderr.strip()[-300:]}")
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0 or version not in out.stdout:
        skip_or_fail_in_ci(f"Claude Code {version} does not start here: {(out.stderr or out.stdout).strip()[-300:]}")
    return str(exe)


# -- the scripted model -----------------------------------------------------------------------

def _first_text(body: dict) -> str:
    msgs = body.get("messages") or []
    content = msgs[0]["content"] if msgs else ""
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content if isinstance(b, dict))


def _done_ids(body: dict) -> set[str]:
    return {b["id"] for m in body.get("messages") or [] if m["role"] == "assistant" and isinstance(m["content"], list)
            for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"}


def _cwd(body: dict) -> str | None:
    """The trial's checkout, from the environment block (system prompt up to 2.1.2xx, first message later)."""
    m = re.search(
        r"Primary working directory: ([^\s\\]+)|Working directory: ([^\s\\]+)",
        json.dumps(body.get("system")) + json.dumps(body.get("messages")),
    )
    return (m.group(1) or m.group(2)) if m else None


def script(body: dict) -> Turn:
    """The agent's turns, from what the conversation already holds (robust to retries)."""
    first = _first_text(body)
    if "SUBTASK-EXPLORE" in first and "toolu_sub_grep" not in _done_ids(body):
        # The Explore subagent searches before it answers (Grep, or a shell grep where Grep is not offered).
        tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        call = ("Grep", {"pattern": "def main"}) if "Grep" in tools else ("Bash", {"command": "grep -rn 'def main' ."})
        return Turn([tool_use(*call, "toolu_sub_grep")], "explore-grep")
    if "SUBTASK" in first:
        return Turn([text("main is defined in src/app.py.")], "subagent")
    if "TASK-" not in first:
        return Turn([text("ok")], "side")
    cwd = _cwd(body) or "."
    done = _done_ids(body)
    tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
    mcp = sorted(t for t in tools if t.startswith("mcp__"))
    if "TASK-EXPLORE" in first and "toolu_task" not in done:
        agent = "Agent" if "Agent" in tools else "Task"
        return Turn([tool_use(agent, {"description": "Find main", "prompt": "SUBTASK-EXPLORE: where is main defined?",
                                      "subagent_type": "Explore"}, "toolu_task")], "task")
    if "toolu_read" not in done:
        return Turn([text("I will read the file."), tool_use("Read", {"file_path": f"{cwd}/src/app.py"}, "toolu_read")], "read")
    if "TASK-HANG" in first:
        return Turn([text("Thinking...")], "hang", hang=60)
    if "toolu_edit" not in done:
        return Turn(
            [tool_use("Edit", {"file_path": f"{cwd}/src/app.py", "old_string": "return 1", "new_string": "return 2"}, "toolu_edit")], "edit"
        )
    if "TASK-EXPLORE" in first:
        return Turn([text("Done: main() returns 2.")], "final")
    if "toolu_bash" not in done:
        return Turn([tool_use("Bash", {"command": "cat src/app.py", "description": "Show the file"}, "toolu_bash")], "bash")
    if "toolu_mcp" not in done and mcp:
        return Turn([tool_use(mcp[0], {"symbol": "main"}, "toolu_mcp")], "mcp")
    if "toolu_mcp" not in done and "toolu_search" not in done and "ToolSearch" in tools and body.get("_mcp_configured"):
        return Turn([tool_use("ToolSearch", {"query": "select:mcp__codemap__lookup", "max_results": 5}, "toolu_search")], "toolsearch")
    if "toolu_task" not in done:
        agent = "Agent" if "Agent" in tools else "Task"
        return Turn(
            [
                tool_use(
                    agent,
                    {
                        "description": "Find main",
                        "prompt": "SUBTASK: where is main defined?",
                        "subagent_type": "general-purpose",
                        "model": "haiku",
                    },
                    "toolu_task",
                )
            ],
            "task",
        )
    return Turn([text("Done: main() returns 2.")], "final")


class Model:
    """The loopback API plus the truth per trial (calls grouped by the trial's working directory)."""

    def __init__(self):
        self.server = AnthropicServer(self._answer)
        self.cwd_of_call: list[str | None] = []
        self._lock = threading.Lock()

    def _answer(self, body: dict) -> Turn:
        cwd = _cwd(body)
        # The treatment's conversation names the MCP server in its system prompt or tool list.
        body["_mcp_configured"] = "mcp__codemap" in json.dumps(body)
        with self._lock:
            self.cwd_of_call.append(cwd)
        return script(body)

    def trials(self) -> list[dict]:
        """Server truth per trial in order of appearance: summed usage of its completed and all calls."""
        order: list[str | None] = list(dict.fromkeys(self.cwd_of_call))
        out = []
        for cwd in order:
            calls = [c for c, w in zip(self.server.calls, self.cwd_of_call, strict=False) if w == cwd]
            out.append(
                {
                    "cwd": cwd,
                    "all": usage_totals(calls),
                    "completed": usage_totals([c for c in calls if c["completed"]]),
                    "labels": [c["label"] for c in calls],
                    "models": sorted({c["model"] for c in calls}),
                }
            )
        return out


@pytest.fixture
def model():
    m = Model()
    with m.server:
        yield m


def _env(tmp: Path, model: Model) -> dict[str, str]:
    """A user's shell: no activated venv, a HOME of its own, the loopback API and a dummy key."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CLAUDE_CONFIG_DIR") and not k.startswith("ANTHROPIC_")}
    env.update(
        {
            "HOME": str(home),
            "PATH": path,
            "ANTHROPIC_BASE_URL": model.server.url,
            "ANTHROPIC_API_KEY": "sk-ant-loopback-dummy",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "MCP_CALL_LOG": str(tmp / "mcp-calls.jsonl"),
        }
    )
    return env


def _target(tmp: Path) -> str:
    repo = tmp / "target"
    make_repo(repo)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_app.py").write_text(
        "import sys\nsys.path.insert(0, 'src')\nfrom app import main\n\n\ndef test_main():\n    assert main() == 2\n"
    )
    for cmd in (["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "test"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def _manifest(tmp: Path, claude: str, instruction: str, timeout: float = 120) -> Path:
    commit = _target(tmp)
    (tmp / "mcp.json").write_text(json.dumps({"mcpServers": {"codemap": {"command": sys.executable, "args": [str(MCP_SERVER)]}}}))
    obj = {
        "manifest_version": 2,
        "name": "real-claude",
        "environment": {"model": MODEL},
        "budget": {"estimated_cost_per_trial_usd": 0.05},
        "conditions": [
            {"name": "text", "adapter": "claude_code", "settings": {"claude_bin": claude}},
            {"name": "codemap", "adapter": "claude_code", "settings": {"claude_bin": claude, "mcp_config": "mcp.json"}},
        ],
        "tasks": [
            {
                "id": "fix-main",
                "repo": "target",
                "commit": commit,
                "instruction": instruction,
                "timeout_seconds": timeout,
                "evaluation": {
                    "type": "command_json",
                    "timeout_seconds": 120,
                    "command": ["python", "-m", "analysis_lib.bench.pytest_verdict", "--", "tests/test_app.py"],
                },
            }
        ],
    }
    path = tmp / "manifest.json"
    path.write_text(json.dumps(obj, indent=1))
    return path


def _bench(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    # The runner's interpreter by its path, as a user without an activated venv would start it.
    return subprocess.run(
        [sys.executable, "-m", "analysis_lib", "bench", *args],
        cwd=cwd,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )


def _full_args(manifest: Path, tmp: Path, seed: int) -> list[str]:
    """``bench full``, one run per condition, into ``tmp/runs`` and ``tmp/full_run.json``."""
    return [
        "full",
        "--manifest",
        str(manifest),
        "--runs-per-condition",
        "1",
        "--phase-budget-usd",
        "5",
        "--seed",
        str(seed),
        "--runs-dir",
        str(tmp / "runs"),
        "--output",
        str(tmp / "full_run.json"),
    ]


def _no_machine_paths(trial_dir: Path, tmp: Path) -> None:
    for f in [*trial_dir.joinpath("agent").rglob("*"), trial_dir / "result.json"]:
        if f.is_file():
            data = f.read_text(errors="replace")
            assert str(tmp) not in data and "/bench-" not in data and ".claude-config-" not in data, f"machine path in {f.name}"
            assert not re.search(r"(?<!~/\.claude)/tmp/claude-", data), f"{f.name}: Claude Code's temp folder is outside the trial"


def test_full_ab_run_as_a_user_would(claude_bin, model, tmp_path):
    """bench full (root or not), resume, results: completed, evaluated trials whose tokens are the server's."""
    env = _env(tmp_path, model)
    manifest = _manifest(tmp_path, claude_bin, INSTRUCTION)
    args = _full_args(manifest, tmp_path, seed=7)
    proc = _bench(args, env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    full = json.loads((tmp_path / "full_run.json").read_text())
    rows = full["trials"]
    assert [(r["status"], r["outcome"]) for r in rows] == [("completed", "passed")] * 2, proc.stderr
    truth = model.trials()
    assert len(truth) == 2 and all(t["cwd"] for t in truth)
    # the user's own ~/.claude is neither read nor written: each trial had its own config folder
    assert not (tmp_path / "home" / ".claude").exists()
    mcp_log = (tmp_path / "mcp-calls.jsonl").read_text().splitlines()
    assert len(mcp_log) == 1  # the treatment's one MCP call really ran in the stdio server

    trials = {t.profile: t for t in load_trials(tmp_path / "runs")[0]}
    for row, tr in zip(rows, truth, strict=True):
        cond = row["condition"]
        trial_dir = tmp_path / "runs" / row["trial_dir"]
        res = json.loads((trial_dir / "result.json").read_text())
        ar = res["agent_result"]
        assert res["bench"]["token_source"] == "transcript"
        assert (ar["n_input_tokens"], ar["n_cache_tokens"], ar["n_output_tokens"]) == (
            tr["all"]["prompt_tokens"],
            tr["all"]["cache_read_input_tokens"],
            tr["all"]["output_tokens"],
        )
        assert "subagent" in tr["labels"] and len(tr["models"]) == 2  # the subagent ran on its own model
        assert list((trial_dir / "agent" / "sessions").rglob("agent-*.jsonl")), "subagent transcript kept"
        _no_machine_paths(trial_dir, tmp_path)
        # Layer 1 on the transcript path equals the truth
        m = trial_metrics(trials[cond])
        assert (m["total_input_tokens"], m["total_output_tokens"], m["total_cached_tokens"]) == (
            tr["all"]["prompt_tokens"],
            tr["all"]["output_tokens"],
            tr["all"]["cache_read_input_tokens"],
        )
        assert m["success"] is True and m["files_edited"] == 1
        assert m["total_cost_usd"] == pytest.approx(ar["cost_usd"]) and ar["cost_usd"] > 0  # Claude Code's own total_cost_usd
        # the stream-json path (fallback) gives the same totals and the same steps
        stream = stream_json_to_atif(trial_dir / "agent" / "claude-code.txt", prompt=INSTRUCTION)
        traj = json.loads((trial_dir / "agent" / "trajectory.json").read_text())
        fm = stream["final_metrics"]
        assert (fm["total_prompt_tokens"], fm["total_completion_tokens"]) == (tr["all"]["prompt_tokens"], tr["all"]["output_tokens"])
        assert fm["total_steps"] == traj["final_metrics"]["total_steps"]
        ms = trial_metrics(dataclasses.replace(trials[cond], trajectory=parse_trajectory(stream)))
        for k in (
            "total_input_tokens",
            "total_output_tokens",
            "total_cached_tokens",
            "total_steps",
            "steps_to_first_edit",
            "tool_calls_count",
            "mcp_tool_calls",
            "mcp_discovery_calls",
            "native_tool_calls",
            "files_edited",
        ):
            assert ms[k] == m[k], (k, ms[k], m[k])  # Layer 1 on stream-json equals Layer 1 on the transcript
        if cond == "codemap":
            assert m["mcp_tool_calls"] == 1 and res["bench"]["mcp_exposed"] is True and res["bench"]["mcp_used"] is True
            assert m["mcp_discovery_calls"] == ("toolsearch" in tr["labels"])
            assert m["mcp_exposed"] is True and m["mcp_used"] is True
        else:
            assert m["mcp_tool_calls"] == 0 and res["bench"]["mcp_exposed"] is None and m["mcp_exposed"] is None

    n_calls = len(model.server.calls)
    again = _bench(args, env, tmp_path)  # resume: nothing left to run
    assert again.returncode == 0, again.stderr
    assert len(model.server.calls) == n_calls
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "analysis_lib",
            "results",
            str(tmp_path / "full_run.json"),
            "--output",
            str(tmp_path / "RESULTS.md"),
            "--no-record",
        ],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert report.returncode == 0, report.stderr
    assert "codemap" in (tmp_path / "RESULTS.md").read_text()


def test_an_explore_subagents_search_before_the_first_edit_counts(claude_bin, model, tmp_path):
    """The agent starts an Explore subagent, which greps, then reads and edits: grep_before_edit follows the order
    in which the server answered the calls (subagents' calls in call order), whichever CLI version ran."""
    env = _env(tmp_path, model)
    manifest = _manifest(tmp_path, claude_bin, EXPLORE_INSTRUCTION)
    proc = _bench(_full_args(manifest, tmp_path, seed=3), env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads((tmp_path / "full_run.json").read_text())["trials"]
    trials = {t.profile: t for t in load_trials(tmp_path / "runs")[0]}
    for row, tr in zip(rows, model.trials(), strict=True):
        labels = tr["labels"]
        assert "explore-grep" in labels and "edit" in labels, labels  # the subagent ran its search
        truth = labels.index("explore-grep") < labels.index("edit")
        m = trial_metrics(trials[row["condition"]])
        assert m["grep_before_edit"] is truth and m["files_edited"] == 1
        task = next(s for s in trials[row["condition"]].trajectory.steps for c in s.tool_calls if c.name in ("Task", "Agent"))
        if "main is defined" in (task.tool_calls[0].output or ""):  # a foreground subagent: done before the edit
            assert truth is True


def test_killed_trial_keeps_exact_tokens_and_the_run_ends_loud(claude_bin, model, tmp_path):
    """A turn that hangs past the time limit: no result event, yet the transcript gives the tokens
    of every answered call; every trial failing makes the run exit non-zero."""
    env = _env(tmp_path, model)
    manifest = _manifest(tmp_path, claude_bin, HANG_INSTRUCTION, timeout=8)
    proc = _bench(_full_args(manifest, tmp_path, seed=1), env, tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "every trial of condition(s)" in proc.stderr and "agent_timeout: 2" in proc.stdout
    full = json.loads((tmp_path / "full_run.json").read_text())
    truth = model.trials()
    for row, tr in zip(full["trials"], truth, strict=True):
        assert row["status"] == "agent_timeout"
        assert tr["labels"][-1] == "hang" and tr["completed"]["calls"] == tr["all"]["calls"] - 1
        res = json.loads((tmp_path / "runs" / row["trial_dir"] / "result.json").read_text())
        assert res["bench"]["token_source"] == "transcript"
        ar = res["agent_result"]
        assert (ar["n_input_tokens"], ar["n_output_tokens"]) == (tr["completed"]["prompt_tokens"], tr["completed"]["output_tokens"])
        # the budget was charged the price of those tokens, not the manifest's prior
        assert res["bench"]["cost_source"] == "estimate" and 0 < ar["cost_usd"] < 0.05
    for t in load_trials(tmp_path / "runs")[0]:
        m = trial_metrics(t)
        assert m["cost_estimated"] is True and m["total_cost_usd"] > 0 and m["infra_error"] is False


def test_spike_without_manifest_and_permission_denials(claude_bin, model, tmp_path):
    """The spike's own options: the default works as root; permission mode 'default' denies Edit and
    the MCP tool, which the trial reports and Layer 1 does not count as an MCP use."""
    env = _env(tmp_path, model)
    _manifest(tmp_path, claude_bin, INSTRUCTION)  # the target repo and mcp.json
    common = [
        "spike",
        "--task-id",
        "fix-main",
        "--repo-path",
        "target",
        "--instruction",
        INSTRUCTION,
        "--mcp-config",
        "mcp.json",
        "--model",
        MODEL,
        "--claude-bin",
        claude_bin,
    ]
    ok = _bench([*common, "--runs-dir", "runs-ok"], env, tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    rows = json.loads((tmp_path / "runs-ok" / "full_run.json").read_text())["trials"]
    assert {r["status"] for r in rows} == {"completed"} and not any("denied" in w for r in rows for w in r["warnings"])
    # The MCP server's own log of calls. 2.1.197 may begin while the server is still starting (status "pending")
    # and then never offer its tool on a busy machine, so the first spike's count is read, not assumed.
    calls = tmp_path / "mcp-calls.jsonl"
    calls_ok = calls.read_text().count("\n") if calls.exists() else 0

    denied = _bench([*common, "--runs-dir", "runs-denied", "--permission-mode", "default"], env, tmp_path)
    assert denied.returncode == 0, denied.stdout + denied.stderr
    rows = {r["condition"]: r for r in json.loads((tmp_path / "runs-denied" / "full_run.json").read_text())["trials"]}
    assert "Edit" in rows["mcp"]["agent"]["permission_denials"]
    assert any("denied" in w and "permission_mode" in w for w in rows["mcp"]["warnings"])
    assert "warning: Claude Code denied" in denied.stderr
    assert rows["mcp"]["agent"]["mcp_used"] is False
    trial = next(t for t in load_trials(tmp_path / "runs-denied")[0] if t.profile == "mcp")
    m = trial_metrics(trial)
    assert m["mcp_tool_calls"] == 0 and m["files_edited"] == 0  # the Edit was refused: nothing was edited
    assert m["mcp_used"] is False  # assigned to MCP, never used it
    assert (calls.read_text().count("\n") if calls.exists() else 0) == calls_ok  # the denied call never reached the server
