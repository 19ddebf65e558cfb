"""Real-data fidelity of ingest: every trial of other people's logs counted right, or reported.

Inputs are written to ``tmp_path`` in the exact shape of the published files (FORMATS.md); the
real fixtures under ``../shared`` are only read.
"""

from __future__ import annotations

import json
from math import comb
from pathlib import Path

import pytest

from analysis_lib.ingest.discover import discover
from analysis_lib.ingest.load import load_rows, number_repetitions_frame
from analysis_lib.ingest.tb1 import read_tb1_run
from analysis_lib.metrics import trial_metrics

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


def _tb1_run(root: Path, per_trial: list[dict], run_level: dict[str, list[dict]]) -> Path:
    run = root / "2025-08-07__20-46-16"
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
    timestamped second results file: success rate and pass@5 equal TB1's accuracy and pass@5."""
    from analysis_lib.stats import pass_at_k

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
    res = load_rows(run.parent, workers=1)
    assert [e for e in res.errors if e.severity == "error"] == []
    df = number_repetitions_frame(res.frame)
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
    lines += [_token_count("2026-05-13T09:00:05.000Z", (1500, 0, 40), (1500, 0, 40)),
              _token_count("2026-05-13T09:00:09.000Z", (1578, 1400, 60), (3078, 1400, 100)),
              _token_count("2026-05-13T09:00:09.500Z", (1578, 1400, 60), (3078, 1400, 100))]  # repeated event
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

_CC_USER = {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s1", "timestamp": "2026-02-10T10:00:00.000Z",
            "message": {"role": "user", "content": "add a test"}}
_CC_ASSISTANT = {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s1", "timestamp": "2026-02-10T10:00:03.000Z",
                 "requestId": "req_1", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-opus-4-6",
                 "content": [{"type": "text", "text": "Done — café"}], "stop_reason": "end_turn",
                 "usage": {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 100}}}


def _cc_lines() -> list[bytes]:
    return [json.dumps(_CC_USER).encode(), json.dumps(_CC_ASSISTANT, ensure_ascii=False).encode()]


def _run_convert(*args: str) -> tuple[int, str, str]:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "analysis_lib", "convert", *args], cwd=root, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def test_convert_warns_per_file_for_cut_lines_replaced_bytes_and_empty_inputs(tmp_path: Path) -> None:
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
    res = load_rows(tmp_path, workers=1)
    assert len(res.frame) == 1
    assert [(e.severity, e.stage, Path(e.path).name) for e in res.errors] == [("warning", "convert", "session.jsonl")]
    assert "truncated" in res.errors[0].message
