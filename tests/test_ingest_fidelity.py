"""Real-data fidelity of ingest: every trial of other people's logs counted right, or reported.

Inputs are written to ``tmp_path`` in the exact shape of the published files (FORMATS.md); the
real fixtures under ``../shared`` are only read.
"""

from __future__ import annotations

import json
from math import comb
from pathlib import Path

import pandas as pd
import pytest

from analysis_lib.ingest import mini_swe_agent
from analysis_lib.ingest.atif import parse_trajectory
from analysis_lib.ingest.discover import discover
from analysis_lib.ingest.tb1 import read_tb1_run
from analysis_lib.metrics.trial_metrics import trial_metrics
from analysis_lib.metrics.trials_table import trials_table

# --------------------------------------------------------------------------- Terminal-Bench 1

_STAMPS = ("trial_started_at", "trial_ended_at", "agent_started_at", "agent_ended_at", "test_started_at", "test_ended_at")


def _tb1_record(task: str, name: str, resolved: bool | None, mode: str = "unset", *, stamps: bool = True) -> dict:
    """A trial record with every key of TB1's TrialResults, in the published order."""
    rec = {
        "id": f"00000000-0000-4000-8000-{abs(hash(name)) % 10**12:012d}", "trial_name": name, "task_id": task,
        "instruction": "Do the task.", "is_resolved": resolved, "failure_mode": mode,
        "parser_results": ({"test_a": "passed" if resolved else "failed"} if stamps and resolved is not None else None),
        "recording_path": f"{task}/{name}/sessions/agent.cast", "total_input_tokens": 0, "total_output_tokens": 0,
    }
    for i, key in enumerate(_STAMPS):
        rec[key] = f"2025-08-08T06:{10 + i:02d}:00.000000+00:00" if stamps else None
    return rec


def _tb1_run(root: Path, per_trial: list[dict], run_level: dict[str, list[dict]], name: str = "2025-08-07__20-46-16") -> Path:
    run = root / name
    run.mkdir(parents=True)
    (run / "run_metadata.json").write_text(json.dumps({
        "run_id": run.name, "dataset_name": "terminal-bench-core", "dataset_version": "0.1.1",
        "agent_name": "terminus", "model_name": "anthropic/claude-sonnet-4-20250514", "n_attempts": 5}))
    for rec in per_trial:
        d = run / rec["task_id"] / rec["trial_name"]
        d.mkdir(parents=True)
        (d / "results.json").write_text(json.dumps(rec))
    for name, recs in run_level.items():
        (run / name).write_text(json.dumps({"id": "x", "results": recs, "accuracy": 0.0}))
    return run


def test_tb1_trial_names_without_run_suffix_keep_their_repetition(tmp_path: Path) -> None:
    recs = [_tb1_record("eval-mteb.hard", f"eval-mteb.hard.{k}-of-5", k == 3) for k in range(1, 6)]
    recs += [_tb1_record("fix-git", f"fix-git.{k}-of-2.2025-08-07__20-46-16", False) for k in (1, 2)]
    run = _tb1_run(tmp_path, recs[:4] + recs[5:6], {"results.json": recs})
    trials, errors = read_tb1_run(run)
    assert errors == []
    got = sorted((t.task_id, t.repetition, t.metadata["n_attempts"]) for t in trials)
    assert got == [("eval-mteb.hard", k, 5) for k in range(1, 6)] + [("fix-git", 1, 2), ("fix-git", 2, 2)]
    assert [t.repetition for t in trials if t.reward == 1.0] == [3]


@pytest.mark.parametrize("mode,stamps,reward", [
    ("test_timeout", False, 0.0), ("parse_error", False, 0.0), ("agent_timeout", False, 0.0),
    ("unknown_agent_error", False, 0.0), ("context_length_exceeded", False, 0.0),
    ("fatal_llm_parse_error", False, 0.0), ("output_length_exceeded", False, 0.0),
    ("agent_installation_failed", False, None), ("unset", False, None), ("unset", True, 0.0),
])
def test_tb1_null_verdicts_follow_tb1_accounting(tmp_path: Path, mode: str, stamps: bool, reward: float | None) -> None:
    """is_resolved null: a verdict-bearing failure mode is a failure with or without timestamps;
    only an agent that could not be installed (or nothing known) is an infrastructure error."""
    rec = _tb1_record("hello-world", "hello-world.1-of-1", None, mode, stamps=stamps)
    trials, errors = read_tb1_run(_tb1_run(tmp_path, [], {"results.json": [rec]}))
    assert errors == [] and len(trials) == 1
    assert trials[0].reward == reward
    row = trial_metrics(trials[0])
    assert row["infra_error"] is (reward is None)
    assert row["success"] == (None if reward is None else False)


def test_tb1_every_results_file_is_read_and_deduplicated(tmp_path: Path) -> None:
    first = [_tb1_record(f"t{i}", f"t{i}.{k}-of-2", k == 1) for i in range(3) for k in (1, 2)]
    # The timestamped file repeats one trial (same verdict), contradicts another and adds three.
    again = dict(first[0])
    clash = dict(first[2], is_resolved=False)
    extra = [_tb1_record(f"t{i}", f"t{i}.3-of-3", True) for i in range(3)]
    run = _tb1_run(tmp_path, first[:2], {"results.json": first, "2025-08-09__10-00-00_results.json": [again, clash, *extra]})
    trials, errors = read_tb1_run(run)
    assert len(trials) == 9
    assert len({t.trial_path for t in trials}) == 9
    assert [(e.severity, Path(e.path).name) for e in errors] == [("warning", "2025-08-09__10-00-00_results.json")]
    assert "t1.1-of-2" in errors[0].message and "first copy is used" in errors[0].message
    assert next(t for t in trials if t.metadata["trial_name"] == "t1.1-of-2").reward == 1.0
    from_second = [t for t in trials if t.paths["result"].endswith("_results.json")]
    assert sorted(t.metadata["trial_name"] for t in from_second) == ["t0.3-of-3", "t1.3-of-3", "t2.3-of-3"]
    # Discovery sees a run whose only results file is timestamped.
    (run / "results.json").unlink()
    (run / "run_metadata.json").unlink()
    sources, errs = discover(tmp_path)
    assert [(s.kind, Path(s.path).name) for s in sources] == [("tb1_run", run.name)] and errs == []


def _tb1_pass_at_k(recs: list[dict], k: int) -> float:
    """TB1's own estimator (terminal_bench/harness/models.py), written out independently."""
    by_task: dict[str, list[bool]] = {}
    for r in recs:
        by_task.setdefault(r["task_id"], []).append(bool(r["is_resolved"]))
    vals = [1 - comb(len(v) - sum(v), k) / comb(len(v), k) for v in by_task.values() if len(v) >= k]
    return sum(vals) / len(vals)


def test_tb1_rates_match_tb1s_own_numbers(tmp_path: Path) -> None:
    """80 tasks x 5 attempts named <task>.<k>-of-5, null verdicts without timestamps, attempt 5 only in a
    timestamped second results file: pass rate and pass@5 equal TB1's accuracy and pass@5."""
    from analysis_lib.stats.proportions import pass_at_k

    modes = ["unset", "agent_timeout", "test_timeout", "parse_error", "unknown_agent_error"]
    recs = []
    for i in range(80):
        for k in range(1, 6):
            mode = modes[(i + k) % 5]
            resolved = None if mode in ("test_timeout", "parse_error", "unknown_agent_error") else (i * 7 + k) % 4 == 0
            recs.append(_tb1_record(f"task-{i:02d}", f"task-{i:02d}.{k}-of-5", resolved, mode, stamps=resolved is not None))
    first = [r for r in recs if not r["trial_name"].endswith(".5-of-5")]
    second = [r for r in recs if r["trial_name"].endswith(".5-of-5")]
    run = _tb1_run(tmp_path, first[:200], {"results.json": first, "2025-08-09__10-00-00_results.json": second})
    res = trials_table(run.parent, workers=1)
    assert [e for e in res.errors if e.severity == "error"] == []
    df = res.frame
    assert len(df) == 400 and int(df["repetition"].max()) == 5 and not df["infra_error"].any()
    tb1_accuracy = sum(bool(r["is_resolved"]) for r in recs) / len(recs)
    assert df["success"].astype(bool).mean() == pytest.approx(tb1_accuracy)
    pk = pass_at_k(df, 5)
    assert int(pk["n_tasks"].iloc[0]) == 80
    assert float(pk["pass_at_k"].iloc[0]) == pytest.approx(_tb1_pass_at_k(recs, 5))


# --------------------------------------------------------------------------- Codex token counters

def _codex_line(ts: str, kind: str, payload: dict) -> str:
    return json.dumps({"timestamp": ts, "type": kind, "payload": payload})


def _token_count(ts: str, last: tuple[int, int, int], total: tuple[int, int, int]) -> str:
    def usage(u):
        return {"input_tokens": u[0], "cached_input_tokens": u[1], "output_tokens": u[2], "reasoning_output_tokens": 0,
                "total_tokens": u[0] + u[2]}
    return _codex_line(ts, "event_msg", {"type": "token_count", "info": {"last_token_usage": usage(last), "total_token_usage": usage(total)}})


def _codex_session(head: str) -> list[str]:
    return [
        _codex_line(head, "session_meta", {"id": "0199aa00-1111-7222-8333-444455556666", "cwd": "/testbed", "cli_version": "0.46.0"}),
        _codex_line(head, "turn_context", {"cwd": "/testbed", "model": "gpt-5-codex"}),
        _codex_line(head, "response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]}),
    ]


@pytest.mark.parametrize("resume_header", [True, False])
def test_codex_tokens_sum_over_resumed_segments(tmp_path: Path, resume_header: bool) -> None:
    """``codex exec resume`` restarts the cumulative counter: 3,078 + 3,110 input tokens, not the last 3,110."""
    from analysis_lib.ingest.codex import rollout_to_atif

    lines = _codex_session("2026-05-13T09:00:00.000Z")
    lines += [
        _token_count("2026-05-13T09:00:05.000Z", (1500, 0, 40), (1500, 0, 40)),
        _token_count("2026-05-13T09:00:09.000Z", (1578, 1400, 60), (3078, 1400, 100)),
        _token_count("2026-05-13T09:00:09.500Z", (1578, 1400, 60), (3078, 1400, 100)),
    ]  # repeated event
    if resume_header:
        lines += _codex_session("2026-05-13T10:00:00.000Z")
    lines += [_token_count("2026-05-13T10:00:05.000Z", (3110, 0, 70), (3110, 0, 70))]
    p = tmp_path / "rollout-resumed.jsonl"
    p.write_text("\n".join(lines) + "\n")
    fm = rollout_to_atif(p)["final_metrics"]
    assert (fm["total_prompt_tokens"], fm["total_completion_tokens"], fm["total_cached_tokens"]) == (6188, 170, 1400)
    assert "2 segments" in fm["extra"]["source"]


def test_codex_counter_carried_over_a_resume_is_not_counted_twice(tmp_path: Path) -> None:
    from analysis_lib.ingest.codex import rollout_to_atif

    lines = _codex_session("2026-05-13T09:00:00.000Z")
    lines += [_token_count("2026-05-13T09:00:05.000Z", (1000, 0, 10), (1000, 0, 10))]
    lines += _codex_session("2026-05-13T10:00:00.000Z")
    lines += [_token_count("2026-05-13T10:00:05.000Z", (1200, 900, 20), (2200, 900, 30))]
    p = tmp_path / "rollout-carried.jsonl"
    p.write_text("\n".join(lines) + "\n")
    fm = rollout_to_atif(p)["final_metrics"]
    assert (fm["total_prompt_tokens"], fm["total_completion_tokens"]) == (2200, 30)


# --------------------------------------------------------------------------- convert warnings

_CC_USER = {
    "type": "user",
    "uuid": "u1",
    "parentUuid": None,
    "sessionId": "s1",
    "timestamp": "2026-02-10T10:00:00.000Z",
    "message": {"role": "user", "content": "add a test"},
}
_CC_ASSISTANT = {
    "type": "assistant",
    "uuid": "a1",
    "parentUuid": "u1",
    "sessionId": "s1",
    "timestamp": "2026-02-10T10:00:03.000Z",
    "requestId": "req_1",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-4-6",
        "content": [{"type": "text", "text": "Done — café"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 100},
    },
}


def _cc_lines() -> list[bytes]:
    return [json.dumps(_CC_USER).encode(), json.dumps(_CC_ASSISTANT, ensure_ascii=False).encode()]


@pytest.fixture
def _run_convert(run_cli):
    """``python -m analysis_lib convert ARGS`` in this process (the conftest's ``run_cli``): exit code, stdout, stderr."""

    def run(*args: str) -> tuple[int, str, str]:
        proc = run_cli("convert", *args)
        return proc.returncode, proc.stdout, proc.stderr

    return run


def test_convert_warns_per_file_for_cut_lines_replaced_bytes_and_empty_inputs(tmp_path: Path, _run_convert) -> None:
    src = tmp_path / "sessions"
    src.mkdir()
    lines = _cc_lines()
    (src / "cut.jsonl").write_bytes(lines[0] + b"\n" + lines[1] + b"\n" + lines[1][:40])  # cut mid-line
    (src / "latin1.jsonl").write_bytes(lines[0] + b"\n" + lines[1].replace("é".encode(), b"\xe9") + b"\n")  # non-UTF-8 byte
    (src / "empty.jsonl").write_bytes(b"")
    (src / "clean.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    code, out, err = _run_convert(str(src), "--out-dir", str(tmp_path / "out"), "-q")
    assert code == 0, err
    assert out.strip() == "converted 3, failed 0, 3 warnings"
    warns = sorted(line for line in err.splitlines() if line.startswith("warning:"))
    assert len(warns) == 3, err
    assert str(src / "cut.jsonl") in warns[0] and "last line truncated" in warns[0]
    assert str(src / "empty.jsonl") in warns[1] and "empty file" in warns[1]
    assert str(src / "latin1.jsonl") in warns[2] and "invalid UTF-8" in warns[2]
    assert not any("clean.jsonl" in line for line in err.splitlines())
    # A single named file warns the same way.
    code, out, err = _run_convert(str(src / "latin1.jsonl"), "-o", str(tmp_path / "one.json"))
    assert code == 0 and out.strip().endswith("converted 1, failed 0, 1 warning") and "invalid UTF-8" in err


def test_ingest_reports_conversion_losses_as_warning_rows(tmp_path: Path) -> None:
    lines = _cc_lines()
    (tmp_path / "session.jsonl").write_bytes(lines[0] + b"\n" + lines[1] + b"\n" + lines[1][:40])
    res = trials_table(tmp_path, workers=1)
    assert len(res.frame) == 1
    assert [(e.severity, e.stage, Path(e.path).name) for e in res.errors] == [("warning", "convert", "session.jsonl")]
    assert "truncated" in res.errors[0].message


# --------------------------------------------------------------------------- mini-swe-agent and SWE-agent

MINI_REAL = "harbor-rfc-native-examples/mini-swe-agent-trajectory.json"


@pytest.mark.real_fixtures
def test_mini_swe_agent_real_trajectory(real_fixtures: Path, tmp_path: Path) -> None:
    """The RFC's real mini-swe-agent run: one trial, its bash calls, per-call usage and recorded cost."""
    src = real_fixtures / MINI_REAL
    doc = json.loads(src.read_text())
    assistant = [m for m in doc["messages"] if m["role"] == "assistant"]
    usages = [m["extra"]["response"]["usage"] for m in assistant]
    (tmp_path / "hello-world.traj.json").write_bytes(src.read_bytes())  # the name mini-swe-agent gives it
    res = trials_table(tmp_path, workers=1)
    assert res.errors == []
    (row,) = res.frame.to_dict("records")
    assert row["source_format"] == "mini_swe_agent" and row["task_id"] == "hello-world"
    assert row["profile"] == "mini-swe-agent@claude-3-5-sonnet-20241022"
    assert row["tool_calls_count"] == len(assistant) == doc["info"]["model_stats"]["api_calls"]
    assert json.loads(row["tool_distribution"]) == {"bash": len(assistant)}
    assert row["total_input_tokens"] == sum(u["prompt_tokens"] for u in usages)
    assert row["total_output_tokens"] == sum(u["completion_tokens"] for u in usages)
    assert row["total_cost_usd"] == pytest.approx(doc["info"]["model_stats"]["instance_cost"]) and not row["cost_estimated"]
    assert row["files_edited"] == 1  # echo "Hello, world!" > hello.txt
    # No verdict in the file: neither a success nor an infrastructure error.
    assert pd.isna(row["success"]) and not row["infra_error"]
    # Found under the RFC's own name too (by content), beside other native formats.
    sources, _ = discover(real_fixtures / "harbor-rfc-native-examples")
    assert [(s.kind, Path(s.path).name) for s in sources] == [("mini_swe_agent", "mini-swe-agent-trajectory.json")]


@pytest.mark.real_fixtures
def test_mini_swe_agent_format_error_turns_run_nothing(real_fixtures: Path, tmp_path: Path) -> None:
    """mini-swe-agent runs a turn only when its message holds exactly one ```bash block; a message with two or none
    is refused (the run's own format_error_template asks the model again) and nothing runs. Two such turns inserted
    into the real run after its first command: they are agent steps without a call, the sed in one never edited."""
    doc = json.loads((real_fixtures / MINI_REAL).read_text())
    template = doc["info"]["config"]["agent"]["format_error_template"]
    paid = doc["messages"][2]["extra"]  # a refused answer was still a paid call
    refused = [
        {"role": "assistant", "extra": paid,
         "content": "THOUGHT: two steps at once.\n\n```bash\nsed -i 's/a/b/' setup.py\n```\n\n```bash\ncat hello.txt\n```"},
        {"role": "user", "content": template.replace("{{actions|length}}", "2")},
        {"role": "assistant", "extra": paid, "content": "THOUGHT: the file exists; nothing else to run."},
        {"role": "user", "content": template.replace("{{actions|length}}", "0")},
    ]
    doc["messages"][4:4] = refused
    (tmp_path / "hello-world.traj.json").write_text(json.dumps(doc))
    res = trials_table(tmp_path, workers=1)
    assert res.errors == []
    (row,) = res.frame.to_dict("records")
    assert (row["tool_calls_count"], json.loads(row["tool_distribution"])) == (3, {"bash": 3})  # not 4: nothing ran
    assert (row["files_edited"], row["backtrack_count"]) == (1, 0)  # hello.txt only: setup.py was never edited
    assert (row["agent_steps"], row["total_steps"]) == (5, 7)  # system, task, 3 commands and 2 refused turns
    usage = paid["response"]["usage"]
    original = sum(m["extra"]["response"]["usage"]["prompt_tokens"] for m in doc["messages"] if m["role"] == "assistant") - 2 * usage["prompt_tokens"]
    assert row["total_input_tokens"] == original + 2 * usage["prompt_tokens"]
    traj = parse_trajectory(mini_swe_agent.trajectory_to_atif(tmp_path / "hello-world.traj.json"))
    errors = [s for s in traj.steps if s.extra.get("format_error")]
    assert [(s.tool_calls, s.extra["actions_found"]) for s in errors] == [([], 2), ([], 0)]
    assert "EXACTLY ONE action" in errors[0].observations[0]


def test_mini_swe_agent_v2_text_actions_and_format_errors(tmp_path: Path) -> None:
    """mini-swe-agent 2.x with a text model: the commands run are each message's extra.actions; a refused answer
    is only the FormatError feedback's extra (interrupt_type, n_actions, model_response): a step without a call."""
    doc = {
        "info": {"mini_version": "2.1.0", "exit_status": "Submitted", "model_stats": {"instance_cost": 0.0, "api_calls": 3},
                 "config": {"model": {"model_name": "anthropic/claude-sonnet-4-5-20250929"}}},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Fix the bug."},
            {"role": "assistant", "content": "```mswea_bash_command\ncat src/app.py\n```",
             "extra": {"actions": [{"command": "cat src/app.py"}],
                       "response": {"usage": {"prompt_tokens": 900, "completion_tokens": 30}}}},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>def main(): return 1</output>"},
            {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks, found 2 actions.",
             "extra": {"interrupt_type": "FormatError", "n_actions": 2,
                       "model_response": "```mswea_bash_command\nsed -i s/1/2/ src/app.py\n```\n```mswea_bash_command\nls\n```"}},
            {"role": "assistant", "content": "```mswea_bash_command\nsed -i s/1/2/ src/main.py\n```",
             "extra": {"actions": [{"command": "sed -i s/1/2/ src/main.py"}],
                       "response": {"usage": {"prompt_tokens": 1000, "completion_tokens": 20}}}},
            {"role": "user", "content": "<returncode>0</returncode>\n<output></output>"},
        ],
        "trajectory_format": "mini-swe-agent-1.1",
    }
    (tmp_path / "astropy__astropy-1.traj.json").write_text(json.dumps(doc))
    res = trials_table(tmp_path, workers=1)
    assert res.errors == []
    (row,) = res.frame.to_dict("records")
    assert (row["tool_calls_count"], row["files_read"], row["files_edited"]) == (2, 1, 1)  # src/main.py only
    assert (row["agent_steps"], row["grep_before_edit"]) == (3, False)  # the refused `ls` searched nothing


def test_mini_swe_agent_v2_tool_calls(tmp_path: Path) -> None:
    """mini-swe-agent 2.x with a tool-calling model: OpenAI tool_calls and tool messages, one to one."""
    doc = {
        "info": {
            "model_stats": {"instance_cost": 0.0, "api_calls": 2},
            "mini_version": "2.0.0",
            "exit_status": "Submitted",
            "submission": "",
            "config": {"model": {"model_name": "openrouter/anthropic/claude-sonnet-4.5"}},
        },
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Fix the bug."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "cat /repo/app.py"}'}}
                ],
                "extra": {
                    "response": {"usage": {"prompt_tokens": 900, "completion_tokens": 30, "prompt_tokens_details": {"cached_tokens": 800}}}
                },
            },
            {
                "role": "tool",
                "tool_call_id": "call_1",
                "content": "<returncode>1</returncode>\n<output>cat: /repo/app.py: No such file</output>",
            },
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command": "sed -i s/a/b/ /repo/src/app.py"}'},
                    }
                ],
                "extra": {"response": {"usage": {"prompt_tokens": 1000, "completion_tokens": 20}}},
            },
            {"role": "tool", "tool_call_id": "call_2", "content": "<returncode>0</returncode>\n<output></output>"},
        ],
        "trajectory_format": "mini-swe-agent-1.1",
    }
    (tmp_path / "django__django-11099.traj.json").write_text(json.dumps(doc))
    res = trials_table(tmp_path, workers=1)
    assert res.errors == []
    (row,) = res.frame.to_dict("records")
    assert (row["task_id"], row["profile"]) == ("django__django-11099", "mini-swe-agent@claude-sonnet-4-5-20250929")
    assert (row["total_input_tokens"], row["total_output_tokens"], row["total_cached_tokens"]) == (1900, 50, 800)
    assert (row["tool_calls_count"], row["tool_error_count"], row["files_edited"]) == (2, 1, 1)
    assert row["files_read"] == 0  # the read failed


def _swe_agent_traj(function_calling: bool) -> dict:
    turns = [
        {
            "response": "Let me look.",
            "thought": "Let me look.",
            "action": "open src/marshmallow/fields.py",
            "observation": "[File: /repo/src/marshmallow/fields.py (1985 lines total)]",
            "execution_time": 0.2,
            "state": '{"open_file": "/repo/src/marshmallow/fields.py", "working_dir": "/repo"}',
        },
        {
            "response": "Search.",
            "thought": "Search.",
            "action": 'search_dir "TimeDelta" src',
            "observation": "Found 3 matches",
            "execution_time": 0.1,
            "state": "{}",
        },
        {
            "response": "Fix.",
            "thought": "Fix.",
            "action": "edit 1474:1474\n        return int(round(value.total_seconds() / base_unit.total_seconds()))\nend_of_edit",
            "observation": "File updated.",
            "execution_time": 0.3,
            "state": "{}",
        },
        {
            "response": "Run it.",
            "thought": "Run it.",
            "action": "python reproduce.py",
            "observation": 'Traceback (most recent call last):\n  File "reproduce.py"',
            "execution_time": 1.0,
            "state": "{}",
        },
        {
            "response": "Done.",
            "thought": "Done.",
            "action": "submit",
            "observation": "diff --git a/x b/x",
            "execution_time": 0.1,
            "state": "{}",
        },
    ]
    history = [
        {"role": "system", "content": "SETTING: You are an autonomous programmer.", "agent": "main", "message_type": "system_prompt"},
        {
            "role": "user",
            "content": "We're currently solving the following issue within our repository.",
            "agent": "main",
            "message_type": "observation",
        },
    ]
    if function_calling:
        for i, t in enumerate(turns):
            name, args = (
                ("str_replace_editor", {"command": "view", "path": "/repo/src/marshmallow/fields.py"})
                if i == 0
                else ("bash", {"command": t["action"]})
            )
            history.append(
                {
                    "role": "assistant",
                    "content": t["thought"],
                    "agent": "main",
                    "message_type": "action",
                    "tool_calls": [{"id": f"toolu_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}],
                }
            )
            history.append(
                {
                    "role": "tool",
                    "content": t["observation"],
                    "agent": "main",
                    "message_type": "observation",
                    "tool_call_ids": [f"toolu_{i}"],
                }
            )
    return {
        "environment": "swe_main",
        "trajectory": turns,
        "history": history,
        "info": {
            "swe_agent_version": "1.0.1",
            "exit_status": "submitted",
            "submission": "diff --git a/x b/x",
            "model_stats": {"instance_cost": 0.0, "tokens_sent": 48211, "tokens_received": 1312, "api_calls": 5},
        },
        "replay_config": json.dumps({"agent": {"model": {"name": "vertex_ai/claude-3-5-sonnet-v2@20241022"}}}),
    }


@pytest.mark.parametrize("function_calling", [False, True])
def test_swe_agent_traj(tmp_path: Path, function_calling: bool) -> None:
    inst = tmp_path / "marshmallow-code__marshmallow-1867"
    inst.mkdir()
    (inst / "marshmallow-code__marshmallow-1867.traj").write_text(json.dumps(_swe_agent_traj(function_calling)))
    (inst / "marshmallow-code__marshmallow-1867.config.yaml").write_text("agent: {}\n")
    res = trials_table(tmp_path, workers=1)
    assert res.errors == []
    (row,) = res.frame.to_dict("records")
    assert row["source_format"] == "swe_agent" and row["task_id"] == "marshmallow-code__marshmallow-1867"
    assert row["profile"] == "swe-agent@claude-3-5-sonnet-20241022"
    assert (row["total_input_tokens"], row["total_output_tokens"]) == (48211, 1312)
    assert row["tool_calls_count"] == 5 and row["tool_error_count"] == 1  # the traceback
    assert row["total_steps"] == 7  # system prompt, task, five turns
    if not function_calling:
        assert json.loads(row["tool_distribution"]) == {"bash": 1, "edit": 1, "open": 1, "search_dir": 1, "submit": 1}
        assert (row["calls_read"], row["calls_search"], row["calls_edit"]) == (1, 1, 1)
    else:
        assert json.loads(row["tool_distribution"]) == {"bash": 4, "str_replace_editor": 1}
        assert row["calls_read"] == 1 and row["files_read"] == 1


def test_swe_agent_replay_records_no_tokens_and_gets_none(tmp_path: Path) -> None:
    """A SWE-agent replay (``sweagent run-replay``) runs every turn again without a model: its stats say 0 tokens
    sent and received and 0 cost. Unknown, not 0 (README: empty means unknown)."""
    doc = _swe_agent_traj(False)
    doc["info"]["model_stats"] = {"instance_cost": 0.0, "tokens_sent": 0, "tokens_received": 0, "api_calls": 0}
    (tmp_path / "marshmallow-code__marshmallow-1867.traj").write_text(json.dumps(doc))
    (row,) = trials_table(tmp_path, workers=1).frame.to_dict("records")
    assert row["tool_calls_count"] == 5
    for col in ("total_input_tokens", "total_output_tokens", "total_tokens", "total_cost_usd", "token_efficiency"):
        assert pd.isna(row[col]), col
    assert not row["cost_estimated"]


# --------------------------------------------------------------------------- unread agent logs


def test_unread_agent_logs_are_warning_rows(tmp_path: Path) -> None:
    """Beside a readable trial, files that look like agent logs in no format read here give one
    warning row each, named; other JSON files (a config, a CTRF report) do not."""
    lines = _cc_lines()
    (tmp_path / "session.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (tmp_path / "gemini-session.json").write_text(
        json.dumps({"sessionId": "s", "projectHash": "h", "startTime": "t", "messages": [{"type": "user", "content": "hi"}]})
    )
    (tmp_path / "events.json").write_text(json.dumps([{"id": 1, "source": "agent", "action": "run", "observation": "ok"}]))
    (tmp_path / "broken.traj").write_text(json.dumps({"trajectory": "not a list"}))
    (tmp_path / "settings.json").write_text(json.dumps({"model": "x", "temperature": 0}))
    # An mcpbr task log is read through its run's results file, an ATIF subagent through its parent: no warning.
    (tmp_path / "astropy__astropy-12907_mcp_20260101_120000.json").write_text(
        json.dumps(
            {
                "instance_id": "astropy__astropy-12907",
                "run_type": "mcp",
                "events": [{"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}}],
            }
        )
    )
    (tmp_path / "t.trajectory.summarization-1-summary.json").write_text(
        json.dumps(
            {
                "schema_version": "ATIF-v1.5",
                "agent": {"name": "x", "version": "1", "extra": {"parent_session_id": "s"}},
                "steps": [{"step_id": 1, "source": "user", "message": "m", "role": "user"}],
            }
        )
    )
    res = trials_table(tmp_path, workers=1)
    assert len(res.frame) == 1
    warned = sorted((Path(e.path).name, e.severity, e.stage) for e in res.errors)
    assert warned == [
        ("broken.traj", "warning", "discover"),
        ("events.json", "warning", "discover"),
        ("gemini-session.json", "warning", "discover"),
    ]
    assert all("not analysed" in e.message for e in res.errors)


def test_summary_line_counts_unread_logs(tmp_path: Path, run_cli) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "session.jsonl").write_bytes(b"\n".join(_cc_lines()) + b"\n")
    (runs / "events.json").write_text(json.dumps([{"id": 1, "action": "run", "observation": "ok"}]))
    proc = run_cli(runs, "--no-llm", "-o", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert "1 warnings (see errors.csv)" in proc.stdout
    errors_csv = (tmp_path / "out" / "errors.csv").read_text()
    assert "events.json" in errors_csv and "warning" in errors_csv


# --------------------------------------------------------------------------- identifiers


@pytest.mark.parametrize(
    "raw",
    [
        "claude-sonnet-4-20250514",  # Anthropic
        "anthropic/claude-sonnet-4-20250514",  # litellm
        "us.anthropic.claude-sonnet-4-20250514-v1:0",  # Bedrock cross-region inference profile
        "bedrock/anthropic.claude-sonnet-4-20250514-v1:0",  # Bedrock through litellm
        "claude-sonnet-4@20250514",  # Vertex
        "vertex_ai/claude-sonnet-4@20250514",
        "anthropic/claude-sonnet-4",  # OpenRouter
        "openrouter/anthropic/claude-sonnet-4",
        "openai/neulab/claude-sonnet-4-20250514",  # a router in front (TB1's OpenHands run)
        "claude-sonnet-4-0",  # Anthropic's alias
    ],
)
def test_one_name_per_claude_model_across_providers(raw: str) -> None:
    from analysis_lib.ingest.identity import canonical_model

    assert canonical_model(raw) == "claude-sonnet-4-20250514"


def test_canonical_model_other_cases() -> None:
    from analysis_lib.ingest.identity import canonical_model

    assert canonical_model("claude-3-5-sonnet-v2@20241022") == "claude-3-5-sonnet-20241022"  # Vertex's -v2
    assert canonical_model("anthropic/claude-3.5-sonnet") == "claude-3-5-sonnet-20241022"  # OpenRouter's dots
    assert canonical_model("eu.anthropic.claude-3-7-sonnet-20250219-v1:0") == "claude-3-7-sonnet-20250219"
    assert canonical_model("claude-3-5-haiku-latest") == "claude-3-5-haiku-20241022"
    assert canonical_model("anthropic.claude-v2:1") == "claude-v2:1"  # no date: the version stays
    assert canonical_model("claude-opus-4-6") == "claude-opus-4-6"  # an alias not listed stays as written
    assert canonical_model("openai/gpt-4o") == "gpt-4o"
    assert canonical_model("gemini/gemini-2.5-pro") == "gemini-2.5-pro"  # dots of other vendors stay
    assert canonical_model("us.meta.llama3-1-70b-instruct-v1:0") == "llama3-1-70b-instruct-v1:0"
    assert canonical_model("") is None and canonical_model(None) is None


def _harbor_trial(root: Path, name: str, task_name: str, model: str) -> None:
    d = root / "job" / name
    (d / "verifier").mkdir(parents=True)
    (d / "verifier" / "reward.txt").write_text("1\n")
    (d / "result.json").write_text(
        json.dumps(
            {
                "id": "0b5d2c4e-3f1a-4c1e-9a57-9b7e2b0c1d2e",
                "task_name": task_name,
                "trial_name": name,
                "agent_info": {"name": "claude-code", "version": "2.0.1", "model_info": {"name": model, "provider": "bedrock"}},
                "config": {"agent": {"name": "claude-code", "model_name": model}},
                "verifier_result": {"rewards": {"reward": 1.0}},
                "started_at": "2026-03-01T10:00:00Z",
                "finished_at": "2026-03-01T10:05:00Z",
            }
        )
    )


def test_task_prefix_kept_in_a_column_and_profiles_agree_across_providers(tmp_path: Path) -> None:
    _harbor_trial(tmp_path, "hello-world__a1b2c3d", "terminal-bench/hello-world", "us.anthropic.claude-sonnet-4-20250514-v1:0")
    _harbor_trial(tmp_path, "hello-world__e4f5g6h", "hello-world", "anthropic/claude-sonnet-4-20250514")
    res = trials_table(tmp_path, workers=1)
    assert res.errors == []
    rows = res.frame.sort_values("trial_path").to_dict("records")
    assert [r["task_id"] for r in rows] == ["hello-world", "hello-world"]
    assert rows[0]["task_dataset"] == "terminal-bench" and pd.isna(rows[1]["task_dataset"])
    assert {r["profile"] for r in rows} == {"claude-code@claude-sonnet-4-20250514"}
    assert rows[0]["model_name"] == "us.anthropic.claude-sonnet-4-20250514-v1:0"  # the raw id stays


def _atif(agent: dict, steps: list[dict], **extra) -> dict:
    return {"schema_version": "ATIF-v1.6", "session_id": "s-1", "agent": agent, "steps": steps, **extra}


def test_loose_atif_profile_is_agent_at_model(tmp_path: Path) -> None:
    steps = [
        {"step_id": 1, "source": "user", "message": "go"},
        {
            "step_id": 2,
            "source": "agent",
            "message": "ok",
            "model_name": "gpt-4o",
            "metrics": {"prompt_tokens": 10, "completion_tokens": 2},
        },
    ]
    (tmp_path / "fix-git.trajectory.json").write_text(
        json.dumps(_atif({"name": "terminus-2", "version": "1", "model_name": "openai/gpt-4o"}, steps))
    )
    res = trials_table(tmp_path, workers=1)
    (row,) = res.frame.to_dict("records")
    assert (row["profile"], row["task_id"]) == ("terminus-2@gpt-4o", "fix-git")


def test_failed_read_of_a_directory_is_not_a_file_read(tmp_path: Path) -> None:
    """Claude Code's Read of a directory fails with EISDIR: a call, an error, but no file read."""
    steps = [
        {"step_id": 1, "source": "user", "message": "go"},
        {
            "step_id": 2,
            "source": "agent",
            "message": "",
            "tool_calls": [{"tool_call_id": "t1", "function_name": "Read", "arguments": {"file_path": "/repo/src"}}],
            "observation": {
                "results": [
                    {"source_call_id": "t1", "content": "EISDIR: illegal operation on a directory, read", "extra": {"is_error": True}}
                ]
            },
        },
        {
            "step_id": 3,
            "source": "agent",
            "message": "",
            "tool_calls": [{"tool_call_id": "t2", "function_name": "Read", "arguments": {"file_path": "/repo/src/app.py"}}],
            "observation": {"results": [{"source_call_id": "t2", "content": "1\tprint('hi')"}]},
        },
    ]
    (tmp_path / "task.trajectory.json").write_text(
        json.dumps(_atif({"name": "claude-code", "version": "2", "model_name": "claude-opus-4-6"}, steps))
    )
    (row,) = trials_table(tmp_path, workers=1).frame.to_dict("records")
    assert (row["tool_calls_count"], row["tool_error_count"], row["calls_read"]) == (2, 1, 2)
    assert (row["files_read"], row["exploration_breadth"]) == (1, 1)


def test_subagent_calls_priced_at_their_own_models_rate(tmp_path: Path) -> None:
    """A haiku subagent of a sonnet session: its tokens at haiku's price, the rest at sonnet's; and a
    Vertex id is priced through the model's one name."""
    from analysis_lib.metrics import pricing

    # litellm (pinned) ships the offline price map: both models must be in it.
    assert pricing.model_prices("claude-sonnet-4-5-20250929") is not None and pricing.model_prices("claude-haiku-4-5-20251001") is not None
    sub = _atif(
        {"name": "claude-code", "version": "2", "model_name": "claude-haiku-4-5-20251001"},
        [
            {"step_id": 1, "source": "user", "message": "find it"},
            {"step_id": 2, "source": "agent", "message": "found", "metrics": {"prompt_tokens": 400_000, "completion_tokens": 20_000}},
        ],
        trajectory_id="sub-1",
    )
    root = _atif(
        {"name": "claude-code", "version": "2", "model_name": "claude-sonnet-4-5-20250929"},
        [
            {"step_id": 1, "source": "user", "message": "go"},
            {
                "step_id": 2,
                "source": "agent",
                "message": "delegating",
                "metrics": {"prompt_tokens": 100_000, "completion_tokens": 5_000},
                "tool_calls": [{"tool_call_id": "t1", "function_name": "Task", "arguments": {"prompt": "find it"}}],
                "observation": {
                    "results": [{"source_call_id": "t1", "content": "found", "subagent_trajectory_ref": [{"trajectory_id": "sub-1"}]}]
                },
            },
        ],
        subagent_trajectories=[sub],
    )
    root["schema_version"] = sub["schema_version"] = "ATIF-v1.7"
    (tmp_path / "task.trajectory.json").write_text(json.dumps(root))
    (row,) = trials_table(tmp_path, workers=1).frame.to_dict("records")
    assert (row["total_input_tokens"], row["total_output_tokens"]) == (500_000, 25_000)
    assert row["cost_estimated"]
    expected = pricing.estimate_cost("claude-sonnet-4-5-20250929", 100_000, 5_000) + pricing.estimate_cost(
        "claude-haiku-4-5-20251001", 400_000, 20_000
    )
    assert row["total_cost_usd"] == pytest.approx(expected)
    assert row["total_cost_usd"] < pricing.estimate_cost("claude-sonnet-4-5-20250929", 500_000, 25_000)
    assert pricing.model_prices("vertex_ai/claude-sonnet-4-5@20250929") == pricing.model_prices("claude-sonnet-4-5-20250929")


# --------------------------------------------------------------------------- inputs stay as they were


def _tree_digest(root: Path) -> dict[str, str]:
    import hashlib

    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_dir():
            out[rel + "/"] = "dir"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.mark.slow  # analyses every real fixture: ~6 s
@pytest.mark.real_fixtures
def test_analysis_leaves_every_real_fixture_byte_identical(real_fixtures: Path, tmp_path: Path, run_cli) -> None:
    """The whole analysis (Layer 1 and comparisons) over every real fixture folder adds, changes and
    removes nothing in it. It runs on a copy made at test time, so that a failure cannot touch ../shared."""
    import shutil

    runs = tmp_path / "real"
    shutil.copytree(real_fixtures, runs, symlinks=True)
    before = _tree_digest(runs)
    proc = run_cli(runs, "--no-llm", "-o", tmp_path / "out")
    assert (tmp_path / "out" / "errors.csv").is_file(), proc.stderr[-2000:]
    after = _tree_digest(runs)
    added = sorted(set(after) - set(before))
    changed = sorted(k for k in before if after.get(k) != before[k])
    assert (added, changed) == ([], [])


def test_tb1_runs_of_one_profile_numbered_apart(tmp_path: Path) -> None:
    """A leaderboard submission of run1/, run2/ ... each holding <task>.1-of-1 trials: one repetition per run."""
    from analysis_lib.study.layer1 import analyse

    runs = [
        ("run1_2025-08-10__05-27-18", "2025-08-10T05:30:00+00:00", False),
        ("run2_2025-08-10__21-53-39", "2025-08-10T22:00:00+00:00", True),
        ("run3_2025-08-09__01-00-00", "2025-08-09T01:05:00+00:00", False),
    ]
    for folder, started, resolved in runs:
        stamp = folder.split("_", 1)[1]
        rec = _tb1_record("fix-git", f"fix-git.1-of-1.{stamp}", resolved)
        rec["trial_started_at"] = started
        run = _tb1_run(tmp_path, [rec], {}, name=folder)
        (run / "run_metadata.json").write_text(
            json.dumps({"run_id": stamp, "agent_name": "cursor-cli", "model_name": "anthropic/claude-sonnet-4-20250514"})
        )
    df = analyse(tmp_path, None, cache=False, workers=1).metrics.sort_values("repetition")
    assert df["repetition"].tolist() == [1, 2, 3]
    # In the order of the runs' start: run3 (Aug 9), run1, run2 (the resolved one).
    assert df["success"].tolist() == [False, False, True]
    assert set(df["profile"]) == {"cursor-cli@claude-sonnet-4-20250514"}


def test_ingest_imports_nothing_above_it() -> None:
    """Ingest reads sources into trials; metrics, CodeCanvas, the study and the layers above build on it, not in it."""
    import subprocess
    import sys

    code = (
        "import importlib, pkgutil, sys, analysis_lib.ingest as ingest\n"
        "for m in pkgutil.iter_modules(ingest.__path__): importlib.import_module('analysis_lib.ingest.' + m.name)\n"
        "print(sorted(m for m in sys.modules if m.startswith('analysis_lib.')))\n"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True).stdout
    loaded = {m.split(".")[1] for m in eval(out)}  # noqa: S307 (our own printed list)
    assert loaded <= {"ingest", "core"}, loaded
