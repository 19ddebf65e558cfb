"""ATIF reader: every real trajectory, every version rule, references and usage dedupe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import agent_step, trajectory

from analysis_lib.core.trial import InputError
from analysis_lib.ingest.atif import is_atif, parse_trajectory, read_trajectory
from analysis_lib.metrics.trial_metrics import trajectory_tokens


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
    steps = [
        agent_step(1, prompt=26882, completion=40, cached=26874),
        agent_step(2, [("Read", {"file_path": "a"})], prompt=26882, completion=40, cached=26874),
        agent_step(3, prompt=27000, completion=50, cached=26900),
    ]
    t = parse_trajectory(trajectory(steps))
    tok = trajectory_tokens(t)
    assert tok["input"] == 26882 + 27000 and tok["output"] == 90 and tok["cached"] == 26874 + 26900


def test_odd_types_are_read_leniently(tmp_path):
    doc = trajectory([agent_step(1, [("Bash", {"command": "ls"})])])
    doc["steps"][1]["metrics"]["prompt_tokens"] = "12"  # a string where an int belongs
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    assert read_trajectory(p).steps[1].prompt_tokens == 12


def test_equal_usage_of_other_producers_is_not_merged():
    steps = [agent_step(1, prompt=500, completion=20), agent_step(2, prompt=500, completion=20)]
    t = parse_trajectory(trajectory(steps, agent="gemini-cli"))
    assert trajectory_tokens(t)["input"] == 1000  # two real calls that happen to cost the same


def test_usage_dedupe_copied_context_and_errored_results_reach_the_metrics():
    """Hand-checked: split Claude Code calls and repeated message ids counted once, copied context left out."""
    from analysis_lib.core.trial import Trial
    from analysis_lib.metrics.trial_metrics import trial_metrics

    steps = [
        agent_step(
            1,
            [("Bash", {"command": "ls"})],
            prompt=900,
            completion=30,
            cached=800,
            results=[{"content": "bash: foo: command not found"}],
            timestamp="2026-01-01T00:00:00Z",
        ),
        agent_step(2, [("Read", {"file_path": "a.py"})], prompt=900, completion=30, cached=800),  # same call, split
        agent_step(3, prompt=1000, completion=40, extra={"message_id": "m3"}),
        agent_step(4, prompt=1000, completion=40, extra={"message_id": "m3"}),  # the same message id again
        agent_step(5, [("Edit", {"file_path": "a.py"})], prompt=50, completion=5, is_copied_context=True),
    ]
    doc = trajectory(steps)
    doc["steps"][2]["metrics"]["extra"] = {"request_id": None, "service_tier": "standard"}
    m = trial_metrics(Trial("p", "t", 1, "r", "x", "atif", trajectory=parse_trajectory(doc)))
    # Steps: user + 4 agent steps (the copied one is not counted); one timestamp gives no span.
    assert (m["total_steps"], m["agent_steps"], m["elapsed_sec"]) == (5, 4, None)
    # 900 once (steps 1-2 are one Claude Code call), 1000 once (one message id): copied context excluded.
    assert (m["total_input_tokens"], m["total_output_tokens"], m["total_cached_tokens"]) == (1900, 70, 800)
    assert (m["tool_calls_count"], m["tool_error_count"], m["files_edited"]) == (2, 1, 0)
