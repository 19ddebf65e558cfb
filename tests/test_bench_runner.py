"""Full runs on scripted agents (real subprocesses): layout, budget stop, evaluation errors,
shell metacharacters, environment warnings, Harbor and command adapters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_support import manifest_obj, read_log, setup_bench, use_bench, write_manifest

from analysis_lib.bench import environment as bench_env
from analysis_lib.bench.journal import PlanMismatchError
from analysis_lib.bench.runner import run_full


@pytest.fixture()
def bench(tmp_path, monkeypatch):
    b = setup_bench(tmp_path)
    use_bench(b, monkeypatch)
    monkeypatch.chdir(tmp_path)
    return b


def _full(b, obj, runs=2, budget=100.0, seed=1, **kw):
    m = write_manifest(b, obj)
    return run_full(m, runs, seed, budget, output=b["tmp"] / "results" / "full_run.json", runs_dir=b["tmp"] / "runs", quiet=True, **kw)


def test_full_run_writes_the_run_layout(bench):
    res = _full(bench, manifest_obj(bench, {"fix-a": "solved", "fix-b": "fail"}))
    runs = bench["tmp"] / "runs"
    assert res["status"] == "complete" and res["summary"]["finished"] == 8
    assert res["summary"]["passed"] == 4 and res["summary"]["failed"] == 4
    # one timestamped folder per (condition, run), each with both tasks
    dirs = sorted(p.name for p in runs.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert len(dirs) == 4 and {d.split("__")[-1] for d in dirs} == {"text", "codegraph"}
    index = json.loads((runs / "index.json").read_text())
    assert index["simulated"] is False and index["seed"] == 1 and index["profiles"] == ["text", "codegraph"]
    assert sorted(r["run_id"] for r in index["runs"]) == dirs
    assert {(r["profile"], r["repetition"]) for r in index["runs"]} == {(c, r) for c in ("text", "codegraph") for r in (1, 2)}
    out = json.loads((bench["tmp"] / "results" / "full_run.json").read_text())
    inside = json.loads((runs / "full_run.json").read_text())
    # Both copies say where the trials are, relative to themselves (no machine path).
    assert inside.pop("runs_dir") == "." and out.pop("runs_dir") == "../runs"
    assert out == inside
    assert out["seed"] == 1 and len(out["schedule"]) == 8 and out["environment"]["pinned"]["model"] == "claude-test-model-20260101"
    for t in out["trials"]:
        d = runs / t["trial_dir"]
        assert (d / "agent" / "claude-code.txt").is_file() and (d / "result.json").is_file()
        result = json.loads((d / "result.json").read_text())
        assert result["agent_result"]["cost_usd"] == 0.25
        # ATIF semantics: input includes cache reads and writes (36 + 3000 + 600)
        assert result["agent_result"]["n_input_tokens"] == 3636 and result["agent_result"]["n_cache_tokens"] == 3000
        assert result["bench"]["seed"] == 1 and result["exception_info"] is None
        reward = (d / "verifier" / "reward.txt").read_text()
        assert reward == ("1\n" if t["task_id"] == "fix-a" else "0\n")
        assert result["verifier_result"]["rewards"]["reward"] == float(reward)
        assert t["environment"]["target_repo_commit"] == bench["commit"]
        assert t["environment"]["adapter_version"] == "9.9.9 (Claude Code)"
        assert "fixed" in (d / "agent" / "patch.diff").read_text()
        # the temp checkout's path never reaches a saved trace
        raw = (d / "agent" / "claude-code.txt").read_text()
        assert "bench-" not in raw and "/workspace/repo/src/app.py" in raw
        if t["task_id"] == "fix-a":
            assert json.loads((d / "verifier" / "ctrf.json").read_text())["results"]["tests"][0]["status"] == "passed"
    assert res["budget"]["spent_usd"] == pytest.approx(2.0) and res["environment_warnings"] == []
    # MCP only for the treatment, model pinned, strict MCP config on both sides
    log = read_log(bench["tmp"] / "claude.log")
    assert len(log) == 8
    assert all(e["mcp"] == (e["condition"] == "codegraph") and e["strict"] and e["model"] == "claude-test-model-20260101" for e in log)
    # executed in schedule order
    assert [(e["task"], e["condition"], int(e["run"])) for e in log] == [(s["task_id"], s["condition"], s["run"]) for s in out["schedule"]]


@pytest.mark.slow  # two scripted runs of real agent processes: ~3 s
def test_budget_stop_is_recorded_and_resume_with_more_budget_continues(bench, monkeypatch):
    obj = manifest_obj(bench, {"fix-a": "solved", "fix-b": "solved"}, cost_prior=0.1)
    monkeypatch.setenv("FAKE_CLAUDE_COST", "0.4")
    # budget 2.0 -> guardrail 1.8; after two pairs (1.6 spent) a third pair (0.8) would pass it
    res = _full(bench, obj, runs=2, budget=2.0)
    assert res["status"] == "budget_stop"
    b = res["budget"]
    assert b["stopped"] and b["stopped_before_pair"] == 2 and b["spent_usd"] == pytest.approx(1.6)
    assert "pair 2 not started" in b["stop_reason"] and "90%" in b["stop_reason"]
    statuses = [t["status"] for t in res["trials"]]
    assert statuses == ["completed"] * 4 + ["skipped_budget"] * 4
    assert len(read_log(bench["tmp"] / "claude.log")) == 4
    res2 = _full(bench, obj, runs=2, budget=10.0)
    assert res2["status"] == "complete" and res2["summary"]["finished"] == 8
    assert len(read_log(bench["tmp"] / "claude.log")) == 8  # only the 4 missing trials ran


@pytest.mark.slow  # scripted agents and evaluators as real processes: ~4 s
def test_evaluation_errors_are_not_failed_tasks(bench):
    res = _full(bench, manifest_obj(bench, {"fix-garbage": "garbage", "fix-hang": "hang", "fix-crash": "crash"}, timeout=1), runs=1)
    assert res["summary"]["evaluation_errors"] == 6 and res["summary"]["failed"] == 0 and res["summary"]["passed"] == 0
    for t in res["trials"]:
        d = bench["tmp"] / "runs" / t["trial_dir"]
        result = json.loads((d / "result.json").read_text())
        assert t["outcome"] == "evaluation_error" and t["status"] == "completed"
        assert not (d / "verifier" / "reward.txt").exists() and result["verifier_result"] is None
        assert result["exception_info"]["exception_type"] == "EvaluationError"
    errors = {t["task_id"]: t["evaluation"]["error"] for t in res["trials"]}
    assert "not JSON" in errors["fix-garbage"] and "timed out" in errors["fix-hang"] and "exited with code 1" in errors["fix-crash"]


def test_task_id_with_shell_metacharacters_creates_no_file(bench):
    evil = "a;touch pwned$(id)"
    obj = manifest_obj(bench, {evil: "solved"})
    obj["conditions"][1] = {
        "name": "scripted",
        "adapter": "command",
        "settings": {
            "command": [
                "claude",
                "-p",
                "task {task_id} in {condition}",
                "--output-format",
                "stream-json",
                "--verbose",
                "--model",
                "{model}",
            ]
        },
    }
    res = _full(bench, obj, runs=1)
    assert res["summary"]["passed"] == 2
    assert not list(bench["tmp"].rglob("pwned*")) and not list(Path.cwd().glob("pwned*"))
    evals = read_log(bench["tmp"] / "eval.log")
    assert {tuple(e["argv"]) for e in evals} == {("solved", evil, "text"), ("solved", evil, "scripted")}
    prompts = [e["argv"][e["argv"].index("-p") + 1] for e in read_log(bench["tmp"] / "claude.log")]
    assert f"task {evil} in scripted" in prompts
    assert all((bench["tmp"] / "runs" / t["trial_dir"]).name == evil for t in res["trials"])


def test_environment_mismatch_within_a_pair_warns(bench, monkeypatch):
    monkeypatch.setenv("FAKE_CLAUDE_REPORT_MODEL_MCP", "claude-other-model")
    res = _full(bench, manifest_obj(bench, {"fix-a": "solved"}), runs=1)
    assert len(res["environment_warnings"]) == 1
    w = res["environment_warnings"][0]
    assert w.startswith("pair 0 (task fix-a, run 1): model differs") and "codegraph=claude-other-model" in w
    assert bench_env.runs_dir_warnings(bench["tmp"] / "runs") == res["environment_warnings"]
    assert bench_env.runs_dir_warnings(bench["tmp"]) == []  # no full_run.json: nothing to check
    trial = next(t for t in res["trials"] if t["condition"] == "codegraph")
    assert any("manifest pins claude-test-model-20260101" in x for x in trial["warnings"])


def test_resume_refuses_another_seed(bench):
    obj = manifest_obj(bench, {"fix-a": "solved"})
    _full(bench, obj, runs=1, seed=1)
    with pytest.raises(PlanMismatchError, match="seed differs"):
        _full(bench, obj, runs=1, seed=2)


def test_agent_failures_are_recorded_and_the_run_goes_on(bench, monkeypatch):
    obj = manifest_obj(bench, {"fix-a": "solved"})
    obj["tasks"].append({**obj["tasks"][0], "id": "bad-commit", "commit": "0" * 40})
    monkeypatch.setenv("FAKE_CLAUDE_EXIT", "3")
    res = _full(bench, obj, runs=1)
    by = {(t["task_id"], t["condition"]): t for t in res["trials"]}
    assert by[("fix-a", "text")]["status"] == "agent_error"
    assert (
        by[("bad-commit", "text")]["status"] == "setup_error"
        and "checkout of target at 0000000000000000000000000000000000000000 failed (git checkout failed: fatal: reference is not a tree"
        in by[("bad-commit", "text")]["setup_error"]
    )
    result = json.loads((bench["tmp"] / "runs" / by[("fix-a", "text")]["trial_dir"] / "result.json").read_text())
    assert result["exception_info"]["exception_type"] == "NonZeroAgentExitCodeError"
    # the agent's edits still get evaluated (as Harbor does after an agent error)
    assert by[("fix-a", "text")]["outcome"] == "passed"
    # the reason is kept (machine paths scrubbed), and a run where nothing was measured says so
    assert by[("fix-a", "text")]["agent"]["stderr_tail"] == "starting\nError: scripted failure /workspace/repo"
    assert sorted(res["summary"]["failed_conditions"]) == ["codegraph", "text"] and res["summary"]["by_status"]["agent_error"] == 2


def test_harbor_adapter_ingests_the_job_directory(bench):
    task_dir = bench["tmp"] / "harbor-task"
    task_dir.mkdir()
    (task_dir / "instruction.md").write_text("do it\n")
    obj = manifest_obj(bench, {"hello-world": ""})
    obj["tasks"][0]["repo"] = "harbor-task"
    obj["conditions"] = [
        {"name": "text", "adapter": "harbor"},
        {"name": "codegraph", "adapter": "harbor", "settings": {"extra_args": ["--ak", "mcp_config={manifest_dir}/mcp.json"]}},
    ]
    res = _full(bench, obj, runs=1)
    by = {t["condition"]: t for t in res["trials"]}
    assert by["codegraph"]["outcome"] == "passed" and by["text"]["outcome"] == "failed"
    assert res["budget"]["spent_usd"] == pytest.approx(1.0)
    for cond, t in by.items():
        d = bench["tmp"] / "runs" / t["trial_dir"]
        assert json.loads((d / "agent" / "trajectory.json").read_text())["schema_version"] == "ATIF-v1.6"
        assert (d / "verifier" / "reward.txt").read_text() == ("1\n" if cond == "codegraph" else "0\n")
        result = json.loads((d / "result.json").read_text())
        assert result["agent_info"]["version"] == "2.0.0" and result["bench"]["condition"] == cond
        assert t["environment"]["adapter_version"] == "0.25.0"
        # Harbor's absolute host paths do not reach our outputs
        assert str(bench["tmp"]) not in (d / "result.json").read_text()
        assert result["config"]["task"]["path"] == "harbor-task" and result["trial_uri"].startswith("file://harbor-jobs/")
    assert not (bench["tmp"] / "runs" / ".bench" / "staging").exists()


def test_command_adapter_with_atif_output(bench):
    agent = bench["tmp"] / "atif_agent.py"
    agent.write_text(
        "import json, os, sys\n"
        "d = os.path.join(sys.argv[1], 'agent'); os.makedirs(d, exist_ok=True)\n"
        "open('solution.txt', 'w').write('x')\n"
        "json.dump({'schema_version': 'ATIF-v1.6', 'session_id': 's', 'agent': {'name': 'mini', 'version': '1'},\n"
        "  'steps': [{'step_id': 1, 'source': 'user', 'message': sys.argv[2]}],\n"
        "  'final_metrics': {'total_prompt_tokens': 10, 'total_completion_tokens': 2, 'total_cost_usd': 0.125}},\n"
        "  open(os.path.join(d, 'trajectory.json'), 'w'))\n"
    )
    import sys

    obj = manifest_obj(bench, {"fix-a": "solved"})
    settings = {
        "command": [sys.executable, str(agent), "{trial_dir}", "{instruction}"],
        "output": "atif",
        "version_command": [sys.executable, "--version"],
    }
    obj["conditions"] = [{"name": name, "adapter": "command", "settings": settings} for name in ("mini-a", "mini-b")]
    res = _full(bench, obj, runs=1)
    assert res["summary"]["passed"] == 2 and res["budget"]["spent_usd"] == pytest.approx(0.25)
    t = res["trials"][0]
    assert t["environment"]["adapter_version"].startswith("Python 3")
    traj = json.loads((bench["tmp"] / "runs" / t["trial_dir"] / "agent" / "trajectory.json").read_text())
    assert traj["steps"][0]["message"] == "Fix task fix-a."


def test_preflight_refuses_to_start_a_run_that_cannot_work(bench):
    obj = manifest_obj(bench, {"fix-a": "solved"})
    obj["conditions"][1]["settings"]["mcp_config"] = "missing-mcp.json"
    obj["conditions"][0]["settings"] = {"claude_bin": "no-such-claude"}
    obj["tasks"].append({**obj["tasks"][0], "id": "elsewhere", "repo": "no-such-repo"})
    with pytest.raises(ValueError) as ei:
        _full(bench, obj, runs=1)
    msg = str(ei.value)
    assert msg.startswith("cannot start, nothing ran:")
    assert "condition text: program not found: no-such-claude" in msg
    assert "condition codegraph: mcp_config missing-mcp.json: no such file" in msg
    assert "task elsewhere: repo no-such-repo: no such folder" in msg
    assert not (bench["tmp"] / "runs").exists() and read_log(bench["tmp"] / "claude.log") == []
    # a dry run still plans, and lists the same problems
    plan_obj = _full(bench, obj, runs=1, dry_run=True)
    assert plan_obj["dry_run"] is True and len(plan_obj["preflight"]) == 3


def test_failed_mcp_server_is_flagged_on_the_treatment_trial(bench, monkeypatch):
    monkeypatch.setenv("FAKE_CLAUDE_MCP_STATUS", "failed")
    res = _full(bench, manifest_obj(bench, {"fix-a": "solved"}), runs=1)
    by = {t["condition"]: t for t in res["trials"]}
    assert by["codegraph"]["warnings"] == ["MCP server codegraph status failed"]
    assert by["codegraph"]["agent"]["mcp_servers"] == ["codegraph"]
    assert by["text"]["warnings"] == [] and by["text"]["agent"]["mcp_servers"] == []


def test_claude_code_permission_flags_and_root(tmp_path, monkeypatch):
    """permission_mode becomes --permission-mode (unless extra_args has its own), allowed_tools
    --allowedTools; IS_SANDBOX=1 only for bypassPermissions under root; a config folder of its own."""
    from pathlib import Path as _P

    from analysis_lib.bench import adapters
    from analysis_lib.bench.manifest import parse_manifest

    def ctx(settings):
        m = parse_manifest(
            {
                "manifest_version": 2,
                "environment": {"model": "m"},
                "conditions": [{"name": "a", "adapter": "claude_code", "settings": settings}, {"name": "b", "adapter": "claude_code"}],
                "tasks": [{"id": "t", "repo": ".", "commit": "HEAD", "instruction": "do"}],
            },
            "<test>",
            base_dir=str(tmp_path),
        )
        return adapters.TrialContext(m, m.tasks[0], m.conditions[0], tmp_path / "trial", tmp_path / "repo", {}, {"PATH": "/bin"})

    argv = adapters.claude_argv(ctx({"allowed_tools": ["Edit", "mcp__x"]}))
    assert argv[argv.index("--permission-mode") + 1] == "bypassPermissions"
    assert argv[argv.index("--allowedTools") + 1] == "Edit,mcp__x"
    argv = adapters.claude_argv(ctx({"extra_args": ["--permission-mode", "acceptEdits"]}))
    assert argv.count("--permission-mode") == 1 and argv[-1] == "acceptEdits"
    assert "--permission-mode" not in adapters.claude_argv(ctx({"permission_mode": None}))
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / ".credentials.json").write_text("{}")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    for uid, mode, sandbox in ((0, "bypassPermissions", "1"), (1000, "bypassPermissions", None), (0, "acceptEdits", None)):
        monkeypatch.setattr(adapters.os, "geteuid", lambda uid=uid: uid)
        cfg = tmp_path / f"cfg-{uid}-{mode}"
        env = adapters.claude_env(ctx({"permission_mode": mode}), cfg)
        assert env.get("IS_SANDBOX") == sandbox and env["CLAUDE_CONFIG_DIR"] == str(cfg) and env["DISABLE_AUTOUPDATER"] == "1"
        assert (cfg / ".credentials.json").is_file() and _P(env["CLAUDE_CONFIG_DIR"]) != home / ".claude"


def test_failed_conditions_are_those_where_nothing_was_measured():
    from analysis_lib.bench.runner import failed_conditions

    rows = [
        {"condition": "a", "status": "agent_error", "outcome": "not_evaluated"},
        {"condition": "a", "status": "completed", "outcome": "evaluation_error"},
        {"condition": "b", "status": "agent_timeout", "outcome": "failed"},
        {"condition": "b", "status": "completed", "outcome": "failed"},
        {"condition": "c", "status": "pending", "outcome": None},
    ]
    assert failed_conditions(rows) == ["a"]


@pytest.mark.parametrize(
    "status, used, warned", [("pending", True, False), ("pending", False, True), ("connected", False, True), ("failed", False, True)]
)
def test_mcp_exposure_is_measured(status, used, warned):
    """A server still `pending` at start is not a failure when an MCP tool then ran; a refused call is no use."""
    from analysis_lib.bench.adapters import AgentOutcome, _mcp_exposure

    calls = [{"tool_call_id": "t1", "function_name": "mcp__codemap__lookup", "arguments": {}}]
    results = [{"source_call_id": "t1", "content": "x", **({} if used else {"extra": {"is_error": True, "permission_denied": True}})}]
    atif = {"steps": [{"source": "agent", "tool_calls": calls, "observation": {"results": results}}]}
    out = AgentOutcome("claude_code", "x")
    _mcp_exposure(out, {"mcp_servers": [{"name": "codemap", "status": status}], "tools": ["Read"]}, atif)
    assert out.mcp_used is used
    assert out.mcp_exposed is (used or status == "connected")
    assert bool(out.warnings) is warned, out.warnings
