"""ATIF reader: every real trajectory, every version rule, references and usage dedupe."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from analysis_lib.ingest.atif import is_atif, parse_trajectory, read_trajectory
from analysis_lib.metrics import trajectory_tokens
from analysis_lib.trial import InputError

from builders import agent_step, trajectory


def _atif_files(real: Path) -> list[Path]:
    out = []
    for p in sorted(real.rglob("*.json")):
        if "judge-labels" in p.parts:
            continue
        head = p.read_bytes()[:4096]
        if b'"schema_version"' in head and b"ATIF-" in head:
            out.append(p)
    return out


def test_every_real_atif_file_parses(real_fixtures):
    files = _atif_files(real_fixtures)
    assert len(files) >= 14, files  # goldens v1.5/1.6, gemini v1.2, claude-code v1.7, phoenix v1.6/1.7
    versions = set()
    for p in files:
        t = read_trajectory(p)
        versions.add(t.schema_version)
        assert t.steps, p
        assert [s.step_id for s in t.steps] == sorted(s.step_id for s in t.steps)
    assert {"ATIF-v1.2", "ATIF-v1.5", "ATIF-v1.6", "ATIF-v1.7"} <= versions


def test_gemini_cli_v12_tokens_equal_final_metrics(real_fixtures):
    p = next(real_fixtures.glob("skillsbench-trajectories/shenghan/**/3d-scan-calc__35QwY5n/agent/trajectory.json"))
    doc = json.loads(p.read_text())
    t = parse_trajectory(doc, str(p))
    tok = trajectory_tokens(t)
    # final_metrics in the file: 222272 prompt, 6770 completion, 81181 cached (equal to step sums here).
    assert (tok["input"], tok["output"], tok["cached"]) == (222272, 6770, 81181)
    assert sum(s["metrics"]["prompt_tokens"] for s in doc["steps"] if "metrics" in s) == 222272
    assert tok["cost"] is None  # gemini-cli records no cost
    calls = [c for s in t.steps for c in s.tool_calls]
    assert len(calls) == sum(len(s.get("tool_calls") or []) for s in doc["steps"])
    assert calls[0].name == "read_file" and calls[0].arguments == {"file_path": "material_density_table.md"}
    # "hexdump: command not found" in the second call's result: an error by the documented rule.
    assert calls[1].is_error is True


def test_continuation_chain_uses_cumulative_final_metrics(real_fixtures):
    p = real_fixtures / "harbor-golden/terminus_2/hello-world-context-summarization-linear-history.trajectory.json"
    root = json.loads(p.read_text())
    cont = json.loads((p.parent / "hello-world-context-summarization-linear-history.trajectory.cont-1.json").read_text())
    t = read_trajectory(p)
    assert root["final_metrics"]["total_prompt_tokens"] == 2252
    assert trajectory_tokens(t)["input"] == cont["final_metrics"]["total_prompt_tokens"] == 7802
    copied = sum(1 for s in cont["steps"] if s.get("is_copied_context"))
    assert copied > 0
    assert len(t.steps) == len(root["steps"]) + len(cont["steps"]) - copied


def test_file_subagents_resolved_and_final_metrics_win(real_fixtures):
    p = real_fixtures / "harbor-golden/terminus_2/hello-world-context-summarization.trajectory.json"
    doc = json.loads(p.read_text())
    t = read_trajectory(p)
    assert len(t.subagents) == 3 and not t.warnings
    step_sum = sum(s.get("metrics", {}).get("prompt_tokens", 0) for s in doc["steps"])
    assert step_sum == 6502 and trajectory_tokens(t)["input"] == 7802  # final_metrics include the subagents


def test_embedded_v17_subagents(real_fixtures):
    t = read_trajectory(real_fixtures / "phoenix-atif-fixtures/v17_embedded_subagents.json")
    assert len(t.subagents) == 1
    assert t.subagents[0].steps


def test_version_rules():
    base = trajectory([agent_step(1)])
    for v in ("ATIF-v1.0", "ATIF-v1.8"):
        assert not parse_trajectory(dict(base, schema_version=v)).warnings
    newer = parse_trajectory(dict(base, schema_version="ATIF-v1.12", brand_new_field={"x": 1}))
    assert newer.warnings and "newer" in newer.warnings[0]
    with pytest.raises(InputError, match="unknown ATIF major version"):
        parse_trajectory(dict(base, schema_version="ATIF-v2.0"), "t.json")
    with pytest.raises(InputError, match="custom agent log"):
        parse_trajectory([{"episode": 0, "prompt": "p", "response": "r"}], "t.json")
    with pytest.raises(InputError, match="gemini-cli native session"):
        parse_trajectory({"sessionId": "x", "messages": []}, "t.json")
    assert not is_atif({"schema_version": "1.0"})


def test_non_atif_native_examples_are_named(real_fixtures):
    d = real_fixtures / "harbor-rfc-native-examples"
    for name, words in [("gemini-cli-trajectory.json", "gemini-cli"), ("mini-swe-agent-trajectory.json", "mini-swe-agent"),
                        ("openhands_trajectory.json", "OpenHands")]:
        with pytest.raises(InputError, match=words):
            read_trajectory(d / name)


def test_arguments_as_json_string_and_missing_metrics():
    doc = trajectory([agent_step(1, [("Bash", {"command": "ls"})])])
    doc["steps"][1]["tool_calls"][0]["arguments"] = '{"command": "pytest -q"}'
    del doc["steps"][1]["metrics"]
    t = parse_trajectory(doc)
    call = t.steps[1].tool_calls[0]
    assert call.arguments == {"command": "pytest -q"}
    assert trajectory_tokens(t)["input"] is None  # no usage anywhere: unknown, not zero


def test_repeated_usage_of_one_api_call_counted_once():
    # Harbor's claude-code converter: one step per content block, each repeating the call's usage.
    steps = [agent_step(1, prompt=26882, completion=40, cached=26874), agent_step(2, [("Read", {"file_path": "a"})], prompt=26882, completion=40, cached=26874),
             agent_step(3, prompt=27000, completion=50, cached=26900)]
    t = parse_trajectory(trajectory(steps))
    tok = trajectory_tokens(t)
    assert tok["input"] == 26882 + 27000 and tok["output"] == 90 and tok["cached"] == 26874 + 26900


def test_fast_and_lenient_paths_agree_on_every_real_file(real_fixtures):
    from analysis_lib.ingest.atif import _fast_parse

    used_fast = 0
    for p in _atif_files(real_fixtures):
        data = p.read_bytes()
        fast = _fast_parse(data, str(p))
        if fast is None:
            continue  # subagents/continuations: only the lenient reader resolves them
        used_fast += 1
        slow = parse_trajectory(json.loads(data), str(p))
        assert fast == slow, p
    assert used_fast >= 8


def test_fast_path_falls_back_on_odd_types():
    from analysis_lib.ingest.atif import _fast_parse

    doc = trajectory([agent_step(1, [("Bash", {"command": "ls"})])])
    doc["steps"][1]["metrics"]["prompt_tokens"] = "12"  # a string where an int belongs
    assert _fast_parse(json.dumps(doc).encode(), "x") is None
    assert parse_trajectory(doc).steps[1].prompt_tokens == 12


def test_equal_usage_of_other_producers_is_not_merged():
    steps = [agent_step(1, prompt=500, completion=20), agent_step(2, prompt=500, completion=20)]
    t = parse_trajectory(trajectory(steps, agent="gemini-cli"))
    assert trajectory_tokens(t)["input"] == 1000  # two real calls that happen to cost the same


def _activity_fields(act):
    calls = [(c.step_id, c.name, c.arguments, c.is_error, c.call_id) for c in act.calls]
    return (act.total_steps, act.agent_steps, act.first_timestamp, act.last_timestamp, act.tokens, calls, act.call_steps,
            act.first_step_timestamp, act.model_name)


def test_activity_path_agrees_with_the_full_reader_on_every_real_file(real_fixtures, sample_runs):
    """The metrics-only path (no Step objects) reads what parse_trajectory + metrics.activity read."""
    from analysis_lib.ingest.atif import read_activity
    from analysis_lib.metrics import activity

    files = _atif_files(real_fixtures) + sorted(sample_runs.glob("*/*/agent/trajectory.json"))
    used = 0
    for p in files:
        got = read_activity(p)
        if got is None:
            continue  # subagents, continuations, odd types: the full reader takes these
        used += 1
        act, agent_name, warnings = got
        full = read_trajectory(p)
        assert _activity_fields(act) == _activity_fields(activity(full)), p
        assert (agent_name, warnings) == (full.agent_name, full.warnings), p
    assert used >= 8 + 200


def test_activity_path_rules_on_constructed_trajectories():
    """Usage dedupe, copied context, a one-timestamp trajectory and errored results, hand-checked."""
    from analysis_lib.ingest.atif import read_activity
    from analysis_lib.metrics import activity

    steps = [
        agent_step(1, [("Bash", {"command": "ls"})], prompt=900, completion=30, cached=800,
                   results=[{"content": "bash: foo: command not found"}], timestamp="2026-01-01T00:00:00Z"),
        agent_step(2, [("Read", {"file_path": "a.py"})], prompt=900, completion=30, cached=800),  # same call, split
        agent_step(3, prompt=1000, completion=40, extra={"message_id": "m3"}),
        agent_step(4, prompt=1000, completion=40, extra={"message_id": "m3"}),  # the same message id again
        agent_step(5, [("Edit", {"file_path": "a.py"})], prompt=50, completion=5, is_copied_context=True),
    ]
    doc = trajectory(steps)
    doc["steps"][2]["metrics"]["extra"] = {"request_id": None, "service_tier": "standard"}
    for variant in (doc, trajectory([agent_step(1, prompt=10, completion=1)], agent="gemini-cli")):
        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / "t.json"
            p.write_text(json.dumps(variant))
            act = read_activity(p)[0]
            assert _activity_fields(act) == _activity_fields(activity(read_trajectory(p)))
    act = activity(parse_trajectory(doc))
    # Steps: user + 4 agent steps (the copied one is not counted); one timestamp gives no span.
    assert (act.total_steps, act.agent_steps, act.first_timestamp, act.last_timestamp) == (5, 4, "2026-01-01T00:00:00Z", None)
    # 900 once (steps 1-2 are one Claude Code call), 1000 once (one message id): copied context excluded.
    assert (act.tokens["input"], act.tokens["output"], act.tokens["cached"]) == (1900, 70, 800)
    assert [(c.name, c.is_error) for c in act.calls] == [("Bash", True), ("Read", False)]
