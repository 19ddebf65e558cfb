"""Transcript -> ATIF conversion (Claude Code JSONL / stream-json / export, Codex rollouts) and its CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import orjson
import pytest

from analysis_lib.core.trial import InputError
from analysis_lib.ingest.claude_code import claude_export_to_atif, stream_json_to_atif, transcript_to_atif
from analysis_lib.ingest.codex import rollout_to_atif
from analysis_lib.ingest.convert import convert_file, detect_transcript_kind

ROOT = Path(__file__).resolve().parents[1]
STREAM_SAMPLE = ROOT / "tests" / "data" / "claude_stream_json_sample.jsonl"
MAIN_SESSION = "claude-code-spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"

# Every Claude Code / Codex transcript among the real fixtures, with the kind it must be detected as.
FIXTURES = {
    MAIN_SESSION: "claude_code_jsonl",
    "claude-code-spotter/short.jsonl": "claude_code_jsonl",
    "claude-code-spotter/subagent.jsonl": "claude_code_jsonl",
    "claude-code-spotter/tool_heavy.jsonl": "claude_code_jsonl",
    "claude-code-spotter/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl": "claude_code_jsonl",
    "claude-code-spotter/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-acompact-e1f845.jsonl": "claude_code_jsonl",
    "claude-code-log/dag_compact_after_rewind.jsonl": "claude_code_jsonl",
    "claude-code-log/edge_cases.jsonl": "claude_code_jsonl",
    "claude-code-log/representative_messages.jsonl": "claude_code_jsonl",
    "claude-code-log/session_b.jsonl": "claude_code_jsonl",
    "claude-code-log/todowrite_examples.jsonl": "claude_code_jsonl",
    "ccusage/claude/projects/project-alpha/session-alpha/chat.jsonl": "claude_code_jsonl",
    "ccusage/claude/projects/project-beta/session-beta/chat.jsonl": "claude_code_jsonl",
    "ccusage/test-transcript.jsonl": "claude_code_jsonl",
    "ccusage/codex/sessions/project-alpha/session-alpha.jsonl": "codex_rollout",
    "claude-code-transcripts-simonw/sample_session.jsonl": "claude_code_jsonl",
    "claude-code-transcripts-simonw/sample_session.json": "claude_export",
}


def _check_atif_shape(traj: dict) -> None:
    """Structural rules of ATIF that hold for every converted trajectory (and its subagents)."""
    assert traj["schema_version"] in ("ATIF-v1.6", "ATIF-v1.7")
    assert traj["agent"]["name"] and isinstance(traj["agent"]["version"], str)
    assert [s["step_id"] for s in traj["steps"]] == list(range(1, len(traj["steps"]) + 1))
    for s in traj["steps"]:
        assert s["source"] in ("user", "agent", "system")
        assert isinstance(s["message"], str)
        if s["source"] != "agent":
            assert "tool_calls" not in s and "metrics" not in s and "reasoning_content" not in s
        ids = {c["tool_call_id"] for c in s.get("tool_calls", [])}
        for c in s.get("tool_calls", []):
            assert isinstance(c["arguments"], dict) and c["function_name"]
        for r in s.get("observation", {}).get("results", []):
            assert r["source_call_id"] in ids  # a result sits on the step of its call
    assert traj["final_metrics"]["total_steps"] == len(traj["steps"])
    for sub in traj.get("subagent_trajectories", []):
        assert sub["trajectory_id"]
        _check_atif_shape(sub)
    orjson.dumps(traj)  # serialisable as is


@pytest.mark.parametrize("rel,kind", sorted(FIXTURES.items()))
def test_every_transcript_fixture_converts(real_fixtures, rel, kind):
    path = real_fixtures / rel
    assert detect_transcript_kind(path) == kind
    traj = convert_file(path)
    _check_atif_shape(traj)
    assert traj["steps"], rel
    assert traj["extra"]["converter"]["source_format"] == kind


def _independent_claude_totals(path: Path) -> tuple[dict[str, int], int, dict[str, int]]:
    """Totals read with plain json: one usage per (message.id, requestId), the one with most output.

    Returns the deduplicated ATIF totals, the number of distinct calls and the naive per-line sums.
    """
    calls: dict = {}
    naive = defaultdict(int)
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = json.loads(raw)
        if line.get("type") != "assistant":
            continue
        u = line["message"]["usage"]
        key = (line["message"]["id"], line.get("requestId"))
        if key not in calls or u["output_tokens"] >= calls[key]["output_tokens"]:
            calls[key] = u
        naive["prompt"] += u["input_tokens"] + u.get("cache_read_input_tokens", 0) + u.get("cache_creation_input_tokens", 0)
        naive["completion"] += u["output_tokens"]
    tot = defaultdict(int)
    for u in calls.values():
        tot["prompt"] += u["input_tokens"] + u.get("cache_read_input_tokens", 0) + u.get("cache_creation_input_tokens", 0)
        tot["cached"] += u.get("cache_read_input_tokens", 0)
        tot["completion"] += u["output_tokens"]
    return dict(tot), len(calls), dict(naive)


@pytest.mark.parametrize("rel", ["claude-code-spotter/tool_heavy.jsonl", "claude-code-spotter/subagent.jsonl"])
def test_token_totals_count_each_api_call_once(real_fixtures, rel):
    path = real_fixtures / rel
    expected, n_calls, naive = _independent_claude_totals(path)
    traj = transcript_to_atif(path)
    fm = traj["final_metrics"]
    assert (fm["total_prompt_tokens"], fm["total_cached_tokens"], fm["total_completion_tokens"]) == (
        expected["prompt"], expected["cached"], expected["completion"])
    assert fm["extra"]["api_calls"] == n_calls
    assert sum(1 for s in traj["steps"] if s["source"] == "agent") == n_calls
    # The repeated usage really is there: summing lines would over-count.
    assert naive["prompt"] > expected["prompt"]
    step_sum = sum(s["metrics"]["prompt_tokens"] for s in traj["steps"] if "metrics" in s)
    assert step_sum == fm["total_prompt_tokens"]
    assert "total_cost_usd" not in fm  # these transcripts carry no cost


def test_subagent_files_are_embedded_and_counted(real_fixtures):
    path = real_fixtures / MAIN_SESSION
    with_subs = transcript_to_atif(path)
    alone = transcript_to_atif(path, include_subagents=False)
    assert with_subs["schema_version"] == "ATIF-v1.7" and alone["schema_version"] == "ATIF-v1.6"
    assert "subagent_trajectories" not in alone
    subs = {s["trajectory_id"]: s for s in with_subs["subagent_trajectories"]}
    assert set(subs) == {"agent-a2898e3", "agent-acompact-e1f845"}

    main_expected, _, _ = _independent_claude_totals(path)
    assert alone["final_metrics"]["total_prompt_tokens"] == main_expected["prompt"]
    sub_prompt = sub_completion = 0
    for tid in subs:
        exp, n, _ = _independent_claude_totals(path.with_suffix("") / "subagents" / f"{tid}.jsonl")
        assert subs[tid]["final_metrics"]["total_prompt_tokens"] == exp["prompt"]
        assert subs[tid]["final_metrics"]["extra"]["api_calls"] == n
        sub_prompt += exp["prompt"]
        sub_completion += exp["completion"]
    fm = with_subs["final_metrics"]
    assert fm["total_prompt_tokens"] == main_expected["prompt"] + sub_prompt
    assert fm["total_completion_tokens"] == main_expected["completion"] + sub_completion
    assert fm["extra"]["includes_subagents"] is True

    # The Task call that ran agent a2898e3 points at its embedded trajectory.
    refs = [(c["function_name"], r["subagent_trajectory_ref"]) for s in with_subs["steps"] for c in s.get("tool_calls", [])
            for r in s.get("observation", {}).get("results", []) if r["source_call_id"] == c["tool_call_id"] and "subagent_trajectory_ref" in r]
    assert refs == [("Task", [{"trajectory_id": "agent-a2898e3", "session_id": "4d5611e5-241a-462a-8d15-5122611a9569"}])]
    # The compaction agent is spawned by no tool call: listed, not linked.
    assert with_subs["extra"]["unlinked_subagents"] == ["agent-acompact-e1f845"]
    assert with_subs["extra"]["compactions"][0]["trigger"] == "auto"
    assert any(s.get("extra", {}).get("is_compact_summary") for s in with_subs["steps"])
    # Parallel tool calls give a line several children; that is not a rewind.
    assert not any(s.get("extra", {}).get("on_abandoned_branch") for s in with_subs["steps"])


def test_subagent_files_beside_their_session_are_linked_as_in_the_nested_layout(real_fixtures, tmp_path):
    """Claude Code 2.0 kept a subagent's transcript beside its session (``agent-<id>.jsonl``, its lines naming the
    session), 2.1.2 and later under ``<session>/subagents/``. The real session moved into the 2.0 layout reads
    the same: one trial, the subagents' tokens and calls its own, no subagent reported missing."""
    import shutil

    from analysis_lib.ingest.discover import discover
    from analysis_lib.metrics.trials_table import trials_table

    src = real_fixtures / MAIN_SESSION
    nested, flat = tmp_path / "nested", tmp_path / "flat"
    shutil.copytree(src.parent / src.stem, nested / src.stem)
    shutil.copy(src, nested / src.name)
    flat.mkdir()
    shutil.copy(src, flat / src.name)
    for f in (src.parent / src.stem / "subagents").glob("agent-*.jsonl"):
        shutil.copy(f, flat / f.name)
    sources, errors = discover(flat)
    assert [Path(s.path).name for s in sources] == [src.name] and not errors
    assert [Path(f).name for f in sources[0].meta["subagents"]] == ["agent-a2898e3.jsonl", "agent-acompact-e1f845.jsonl"]
    a, b = transcript_to_atif(nested / src.name), transcript_to_atif(flat / src.name)
    assert b["final_metrics"] == a["final_metrics"] and len(b["subagent_trajectories"]) == 2
    assert [s["agent"]["extra"]["source_file"] for s in b["subagent_trajectories"]] == ["agent-a2898e3.jsonl",
                                                                                         "agent-acompact-e1f845.jsonl"]
    rows = {name: trials_table(d, workers=1) for name, d in (("nested", nested), ("flat", flat))}
    assert [len(r.frame) for r in rows.values()] == [1, 1] and all(not r.errors for r in rows.values())
    cols = ["total_input_tokens", "total_output_tokens", "tool_calls_count", "duplicate_reads", "total_cost_usd"]
    assert rows["flat"].frame[cols].equals(rows["nested"].frame[cols])


def _cc_line(kind: str, uuid: str, parent: str | None, content, **extra) -> dict:
    line = {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "5e55-0001", "version": "2.0.30",
            "timestamp": f"2025-11-01T10:00:{len(uuid):02d}Z", "message": {"role": kind, "content": content}}
    line.update(extra)
    return line


def test_a_claude_code_2_0_subagent_file_is_not_a_trial_of_its_own(tmp_path):
    """The smallest 2.0 session (no such real fixture exists): a Task call whose result names agent ab12cd3, and
    ``agent-ab12cd3.jsonl`` beside the session with the subagent's sidechain lines (documented layout: FORMATS.md §7)."""
    from analysis_lib.metrics.trials_table import trials_table

    usage = {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 0}
    session = [
        _cc_line("user", "u1", None, "Find where main is defined."),
        _cc_line("assistant", "a1", "u1", [{"type": "tool_use", "id": "toolu_task", "name": "Task",
                                            "input": {"subagent_type": "Explore", "prompt": "find main"}}],
                 requestId="r1", message={"id": "m1", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
                                          "content": [{"type": "tool_use", "id": "toolu_task", "name": "Task",
                                                       "input": {"subagent_type": "Explore", "prompt": "find main"}}],
                                          "usage": usage}),
        _cc_line("user", "u2", "a1", [{"type": "tool_result", "tool_use_id": "toolu_task", "content": "src/app.py"}],
                 toolUseResult={"status": "completed", "agentId": "ab12cd3", "totalToolUseCount": 1}),
    ]
    agent = [
        _cc_line("user", "s1", None, "find main", isSidechain=True, agentId="ab12cd3"),
        _cc_line("assistant", "s2", "s1", None, isSidechain=True, agentId="ab12cd3", requestId="r2",
                 message={"id": "m2", "role": "assistant", "model": "claude-haiku-4-5-20251001",
                          "content": [{"type": "tool_use", "id": "toolu_grep", "name": "Grep", "input": {"pattern": "def main"}}],
                          "usage": {**usage, "input_tokens": 20}}),
        _cc_line("user", "s3", "s2", [{"type": "tool_result", "tool_use_id": "toolu_grep", "content": "src/app.py:1"}],
                 isSidechain=True, agentId="ab12cd3"),
    ]
    (tmp_path / "5e55-0001.jsonl").write_text("".join(json.dumps(x) + "\n" for x in session))
    (tmp_path / "agent-ab12cd3.jsonl").write_text("".join(json.dumps(x) + "\n" for x in agent))
    res = trials_table(tmp_path, workers=1)
    assert not res.errors  # no "agent-ab12cd3.jsonl is missing" warning
    (row,) = res.frame.to_dict("records")
    assert row["task_id"] == "5e55-0001"
    assert (row["tool_calls_count"], row["grep_before_edit"], row["calls_search"]) == (2, None, 1)  # Task, then its Grep
    assert (row["total_input_tokens"], row["total_output_tokens"]) == (110 + 120, 10)  # ATIF input = input + cache reads


def test_lines_repeated_by_a_resumed_session_count_once(real_fixtures, tmp_path):
    src = real_fixtures / "claude-code-spotter/tool_heavy.jsonl"
    once = transcript_to_atif(src)
    p = tmp_path / "resumed.jsonl"
    p.write_bytes(src.read_bytes() * 2)
    twice = transcript_to_atif(p)
    assert twice["final_metrics"] == once["final_metrics"]
    assert twice["steps"] == once["steps"]
    assert twice["extra"]["converter"]["skipped"]["duplicate_line"] > 0


def test_missing_subagent_file_is_a_warning(real_fixtures):
    traj = transcript_to_atif(real_fixtures / "claude-code-spotter/subagent.jsonl")
    warnings = traj["extra"]["converter"]["warnings"]
    assert any("afb92ff" in w and "missing" in w for w in warnings)


def test_inline_sidechains_become_subagents(tmp_path):
    """Older CLIs kept subagent lines in the session file (isSidechain: true, no agentId)."""
    lines = [
        {
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "sessionId": "s",
            "isSidechain": False,
            "message": {"role": "user", "content": "go"},
        },
        {
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "sessionId": "s",
            "isSidechain": False,
            "requestId": "r1",
            "message": {
                "id": "m1",
                "role": "assistant",
                "model": "claude-x",
                "content": [{"type": "tool_use", "id": "t1", "name": "Task", "input": {"prompt": "look"}}],
                "usage": {"input_tokens": 10, "output_tokens": 3},
            },
        },
        {
            "type": "user",
            "uuid": "su1",
            "parentUuid": None,
            "sessionId": "s",
            "isSidechain": True,
            "message": {"role": "user", "content": "look"},
        },
        {
            "type": "assistant",
            "uuid": "sa1",
            "parentUuid": "su1",
            "sessionId": "s",
            "isSidechain": True,
            "requestId": "r2",
            "message": {
                "id": "m2",
                "role": "assistant",
                "model": "claude-x",
                "content": [{"type": "text", "text": "found"}],
                "usage": {"input_tokens": 7, "output_tokens": 2},
            },
        },
        {
            "type": "user",
            "uuid": "u2",
            "parentUuid": "a1",
            "sessionId": "s",
            "isSidechain": False,
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "found"}]},
        },
    ]
    p = tmp_path / "old.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    traj = transcript_to_atif(p)
    assert [s["trajectory_id"] for s in traj["subagent_trajectories"]] == ["sidechain-1"]
    assert traj["final_metrics"]["total_prompt_tokens"] == 17
    assert [s["source"] for s in traj["steps"]] == ["user", "agent"]
    alone = transcript_to_atif(p, include_subagents=False)
    assert alone["final_metrics"]["total_prompt_tokens"] == 10


def test_tool_results_pair_with_calls_and_keep_is_error(real_fixtures):
    traj = transcript_to_atif(real_fixtures / "claude-code-log/edge_cases.jsonl")
    results = {
        r["source_call_id"]: (c["function_name"], r)
        for s in traj["steps"]
        for c in s.get("tool_calls", [])
        for r in s.get("observation", {}).get("results", [])
        if r["source_call_id"] == c["tool_call_id"]
    }
    name, failing = results["tool_edge_001"]
    assert name == "FailingTool"
    assert failing["extra"] == {"is_error": True}
    assert failing["content"].startswith("Error: Tool execution failed")
    # Edge lines: three JSON non-objects, a message that is a string, one object without type.
    lines = traj["extra"]["converter"]["lines"]
    assert lines["non_object"] == 3 and lines["unparsable"] == 0
    skipped = traj["extra"]["converter"]["skipped"]
    assert skipped["malformed_message"] == 1 and skipped["skipped_type:none"] == 1 and skipped["skipped_type:summary"] == 1

    rep = transcript_to_atif(real_fixtures / "claude-code-log/representative_messages.jsonl")
    paired = [
        (c["function_name"], r["content"][:20])
        for s in rep["steps"]
        for c in s.get("tool_calls", [])
        for r in s.get("observation", {}).get("results", [])
        if r["source_call_id"] == c["tool_call_id"]
    ]
    assert ("Edit", "File created success") in paired
    assert all(
        "extra" not in r or r["extra"] == {"is_error": False} for s in rep["steps"] for r in s.get("observation", {}).get("results", [])
    )


def test_rewind_and_compaction_dag(real_fixtures):
    traj = transcript_to_atif(real_fixtures / "claude-code-log/dag_compact_after_rewind.jsonl")
    steps = traj["steps"]
    abandoned = [s["message"] for s in steps if s.get("extra", {}).get("on_abandoned_branch")]
    assert abandoned == ["First attempt", "First answer"]
    # Every call was paid for, the abandoned branch too: 5 calls of 10 in / 5 out.
    assert traj["final_metrics"]["total_prompt_tokens"] == 50
    assert traj["final_metrics"]["total_completion_tokens"] == 25
    summary = [s for s in steps if s.get("extra", {}).get("is_compact_summary")]
    assert len(summary) == 1 and summary[0]["source"] == "user"
    assert traj["extra"]["compactions"] == [{"timestamp": "2025-07-01T10:30:00.000Z", "trigger": "auto", "pre_tokens": 150000}]
    assert steps[-1]["message"] == "Final answer"


def test_cost_usd_lines_and_minimal_usage_lines(real_fixtures):
    traj = transcript_to_atif(real_fixtures / "ccusage/claude/projects/project-alpha/session-alpha/chat.jsonl")
    fm = traj["final_metrics"]
    # (100+25+10) + (200+50+20) + (300+0+40) prompt tokens; costUSD 0.12 + 0.34 + 0.56.
    assert fm["total_prompt_tokens"] == 745 and fm["total_cached_tokens"] == 70 and fm["total_completion_tokens"] == 250
    assert fm["total_cost_usd"] == pytest.approx(1.02)
    assert [s["metrics"]["cost_usd"] for s in traj["steps"]] == [0.12, 0.34, 0.56]
    assert traj["steps"][0]["metrics"]["extra"]["cache_creation_input_tokens"] == 25
    # No usage anywhere: totals unknown, not zero.
    bare = transcript_to_atif(real_fixtures / "claude-code-transcripts-simonw/sample_session.jsonl")
    assert "total_prompt_tokens" not in bare["final_metrics"]


def _write_lines(path: Path, lines: list[str], tail: bytes = b"") -> Path:
    path.write_bytes("\n".join(lines).encode() + b"\n" + tail)
    return path


def test_truncated_last_line_is_skipped_and_counted(real_fixtures, tmp_path):
    src = real_fixtures / "claude-code-log/session_b.jsonl"
    good = transcript_to_atif(src)
    p = _write_lines(tmp_path / "live.jsonl", src.read_text().splitlines(), b'{"type": "assistant", "message": {"id": "msg_x", "con')
    traj = transcript_to_atif(p)
    assert traj["extra"]["converter"]["lines"]["truncated_last_line"] is True
    assert traj["extra"]["converter"]["lines"]["unparsable"] == 1
    assert any("truncated" in w for w in traj["extra"]["converter"]["warnings"])
    assert len(traj["steps"]) == len(good["steps"])
    assert traj["final_metrics"] == good["final_metrics"]


def test_non_utf8_bytes_are_replaced_not_fatal(tmp_path):
    user = b'{"type":"user","sessionId":"s","uuid":"u1","message":{"role":"user","content":"caf\xe9 \xff bytes"}}'
    asst = json.dumps(
        {
            "type": "assistant",
            "uuid": "a1",
            "requestId": "r",
            "message": {
                "id": "m",
                "role": "assistant",
                "content": [{"type": "text", "text": "ok"}],
                "usage": {"input_tokens": 4, "output_tokens": 1},
            },
        }
    ).encode()
    p = tmp_path / "bytes.jsonl"
    p.write_bytes(user + b"\n" + asst + b"\n")
    traj = convert_file(p)
    assert traj["steps"][0]["message"] == "caf\ufffd \ufffd bytes"
    assert traj["final_metrics"]["total_prompt_tokens"] == 4


@pytest.mark.parametrize(
    "content,message",
    [
        (b"", "empty file"),
        (b"\n  \n", "empty file"),
        (b'"just a string"\n42\n[1]\n', "no JSON object line"),
        (
            b'{"type":"progress","data":{"type":"hook_progress"}}\n{"type":"summary","summary":"x"}\n',
            "no Claude Code user or assistant message",
        ),
    ],
)
def test_unusable_transcripts_give_one_line_errors(tmp_path, content, message):
    p = tmp_path / "bad.jsonl"
    p.write_bytes(content)
    with pytest.raises(InputError) as exc:
        transcript_to_atif(p)
    assert message in str(exc.value) and str(p) in str(exc.value)
    assert "\n" not in str(exc.value)


def test_not_a_transcript_is_refused(real_fixtures, tmp_path):
    atif = real_fixtures / "phoenix-atif-fixtures/v17_embedded_subagents.json"
    assert detect_transcript_kind(atif) is None
    assert detect_transcript_kind(real_fixtures / "ccusage/statusline-test.json") is None
    with pytest.raises(InputError, match="not a recognised transcript"):
        convert_file(atif)
    with pytest.raises(InputError, match="file not found"):
        convert_file(tmp_path / "missing.jsonl")


# --- stream-json -------------------------------------------------------------------------


def test_stream_json_sample_result_wins_over_step_sums():
    assert detect_transcript_kind(STREAM_SAMPLE) == "claude_stream_json"
    traj = stream_json_to_atif(STREAM_SAMPLE)
    _check_atif_shape(traj)
    assert traj["session_id"] == "5b3c9e1a-7d2f-4c8e-9a61-2f0d8c4b7e13"
    assert traj["agent"]["version"] == "2.0.76" and traj["agent"]["model_name"] == "claude-sonnet-4-5-20250929"
    main = [s for s in traj["steps"] if s["source"] == "agent"]
    # Six API calls of the main agent, two of them written as two events each.
    assert len(main) == 6
    assert main[0]["reasoning_content"].startswith("The failing test")
    assert main[0]["metrics"] == {
        "prompt_tokens": 3 + 5120,
        "completion_tokens": 96,
        "cached_tokens": 0,
        "extra": main[0]["metrics"]["extra"],
    }
    fm = traj["final_metrics"]
    # result.usage: 208 input + 9030 cache writes + 31126 cache reads; it includes a background
    # call that never appears as an event, so it is larger than the steps' sums.
    assert fm["total_prompt_tokens"] == 208 + 9030 + 31126
    assert fm["total_completion_tokens"] == 680 and fm["total_cached_tokens"] == 31126
    assert fm["total_cost_usd"] == pytest.approx(0.0468997)
    # Steps: main (8 in, 6832 writes, 29078 reads) + subagent (20 in, 2198 writes, 2048 reads).
    assert fm["extra"]["step_sums"]["total_prompt_tokens"] == (8 + 6832 + 29078) + (20 + 2198 + 2048)
    assert traj["extra"]["result"]["num_turns"] == 7

    task = next(s for s in main if s.get("tool_calls", [{}])[0].get("function_name") == "Task")
    ref = task["observation"]["results"][0]["subagent_trajectory_ref"][0]["trajectory_id"]
    sub = next(t for t in traj["subagent_trajectories"] if t["trajectory_id"] == ref)
    assert sub["agent"]["model_name"] == "claude-haiku-4-5-20251001"
    assert [c["function_name"] for s in sub["steps"] for c in s.get("tool_calls", [])] == ["Grep"]
    bash = next(s for s in main if s.get("tool_calls", [{}])[0].get("function_name") == "Bash")
    assert bash["observation"]["results"][0]["extra"] == {"is_error": True}
    mcp = next(s for s in main if s.get("tool_calls", [{}])[0].get("function_name", "").startswith("mcp__"))
    assert json.loads(mcp["observation"]["results"][0]["content"])["matches"][0]["line"] == 42


def test_stream_json_accepts_lines_events_and_mcpbr_logs(tmp_path):
    from_path = stream_json_to_atif(STREAM_SAMPLE)
    raw_lines = STREAM_SAMPLE.read_text(encoding="utf-8").splitlines()
    assert stream_json_to_atif(raw_lines)["final_metrics"] == from_path["final_metrics"]
    events = [json.loads(x) for x in raw_lines]
    assert stream_json_to_atif(events)["final_metrics"] == from_path["final_metrics"]
    log = {"instance_id": "django__django-11099", "run_type": "mcp", "events": events}
    p = tmp_path / "django__django-11099_mcp_20260101_120000.json"
    p.write_text(json.dumps(log, indent=2))
    assert detect_transcript_kind(p) == "claude_stream_json"
    traj = convert_file(p)
    assert traj["final_metrics"] == from_path["final_metrics"]
    assert traj["extra"]["mcpbr"] == {"instance_id": "django__django-11099", "run_type": "mcp"}
    assert stream_json_to_atif(log)["final_metrics"] == from_path["final_metrics"]


def test_stream_json_without_result_sums_steps():
    events = [json.loads(x) for x in STREAM_SAMPLE.read_text(encoding="utf-8").splitlines() if '"type":"result"' not in x]
    traj = stream_json_to_atif(events)
    fm = traj["final_metrics"]
    assert fm["total_prompt_tokens"] == (8 + 6832 + 29078) + (20 + 2198 + 2048)
    assert "total_cost_usd" not in fm


def test_claude_export(real_fixtures):
    traj = claude_export_to_atif(real_fixtures / "claude-code-transcripts-simonw/sample_session.json")
    _check_atif_shape(traj)
    calls = [c for s in traj["steps"] for c in s.get("tool_calls", [])]
    assert calls and calls[0]["function_name"] == "Write"
    assert traj["steps"][1]["reasoning_content"].startswith("The user wants a simple addition function")


# --- Codex ------------------------------------------------------------------------------


def test_codex_fixture_uses_last_cumulative_total(real_fixtures):
    traj = rollout_to_atif(real_fixtures / "ccusage/codex/sessions/project-alpha/session-alpha.jsonl")
    fm = traj["final_metrics"]
    assert (fm["total_prompt_tokens"], fm["total_completion_tokens"], fm["total_cached_tokens"]) == (3500, 425, 750)
    # Per-call last_token_usage sums to the cumulative total.
    assert sum(s["metrics"]["prompt_tokens"] for s in traj["steps"]) == 3500
    assert traj["agent"]["model_name"] == "gpt-5.2-codex"


def test_codex_rollout_calls_outputs_and_repeated_token_counts(tmp_path):
    def line(kind, payload, ts="2026-05-13T09:00:00.000Z"):
        return json.dumps({"timestamp": ts, "type": kind, "payload": payload})

    usage1 = {"input_tokens": 900, "cached_input_tokens": 0, "output_tokens": 60, "reasoning_output_tokens": 40, "total_tokens": 960}
    usage2 = {"input_tokens": 1100, "cached_input_tokens": 896, "output_tokens": 30, "reasoning_output_tokens": 0, "total_tokens": 1130}
    total2 = {k: usage1[k] + usage2[k] for k in usage1}
    rows = [
        line(
            "session_meta",
            {"id": "0199aa00-1111-7222-8333-444455556666", "cwd": "/testbed", "originator": "codex_cli_rs", "cli_version": "0.46.0"},
        ),
        line("turn_context", {"cwd": "/testbed", "model": "gpt-5-codex", "approval_policy": "never"}),
        line(
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/testbed</cwd>\n</environment_context>"}],
            },
        ),
        line("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the failing test"}]}),
        line("event_msg", {"type": "user_message", "message": "fix the failing test"}),
        line(
            "response_item",
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "**Running tests**"}], "encrypted_content": "gAAA"},
        ),
        line(
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "arguments": json.dumps({"command": ["bash", "-lc", "pytest -q"]}),
                "call_id": "call_A",
            },
        ),
        line("event_msg", {"type": "token_count", "info": {"total_token_usage": usage1, "last_token_usage": usage1}}),
        # Codex repeats a token_count without a new call (e.g. a rate-limit update): same total.
        line("event_msg", {"type": "token_count", "info": {"total_token_usage": usage1, "last_token_usage": usage1}}),
        line(
            "response_item",
            {
                "type": "function_call_output",
                "call_id": "call_A",
                "output": json.dumps({"output": "1 failed", "metadata": {"exit_code": 1, "duration_seconds": 0.4}}),
            },
        ),
        line(
            "response_item",
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "The test fails; fixing."}]},
        ),
        line(
            "response_item",
            {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "input": "*** Begin Patch\n*** End Patch",
                "call_id": "call_B",
                "status": "completed",
            },
        ),
        line("event_msg", {"type": "token_count", "info": {"total_token_usage": total2, "last_token_usage": usage2}}),
        line(
            "response_item",
            {"type": "custom_tool_call_output", "call_id": "call_B", "output": "Success. Updated the following files:\nM src/app.py"},
        ),
        '{"timestamp": "2026-05-13T09:00:09.000Z", "type": "event_msg", "payload": {"type": "token_co',
    ]
    p = tmp_path / "rollout-2026-05-13T09-00-00-0199aa00.jsonl"
    p.write_text("\n".join(rows) + "\n")
    assert detect_transcript_kind(p) == "codex_rollout"
    traj = convert_file(p)
    _check_atif_shape(traj)
    assert traj["session_id"] == "0199aa00-1111-7222-8333-444455556666"
    assert traj["agent"] == {
        "name": "codex",
        "version": "0.46.0",
        "model_name": "gpt-5-codex",
        "extra": {"cwd": "/testbed", "originator": "codex_cli_rs"},
    }
    assert [s["source"] for s in traj["steps"]] == ["user", "user", "agent", "agent"]
    assert traj["steps"][0]["extra"] == {"is_meta": True} and "extra" not in traj["steps"][1]
    first, second = traj["steps"][2], traj["steps"][3]
    assert first["reasoning_content"] == "**Running tests**"
    assert first["tool_calls"][0]["arguments"] == {"command": ["bash", "-lc", "pytest -q"]}
    assert first["observation"]["results"][0] == {
        "source_call_id": "call_A",
        "content": "1 failed",
        "extra": {"exit_code": 1, "is_error": True},
    }
    assert first["metrics"]["prompt_tokens"] == 900
    assert second["message"] == "The test fails; fixing." and second["tool_calls"][0]["function_name"] == "apply_patch"
    assert second["metrics"] == {"prompt_tokens": 1100, "completion_tokens": 30, "cached_tokens": 896, "extra": usage2}
    fm = traj["final_metrics"]
    assert (fm["total_prompt_tokens"], fm["total_completion_tokens"], fm["total_cached_tokens"]) == (2000, 90, 896)
    conv = traj["extra"]["converter"]
    assert conv["skipped"]["repeated_token_count"] == 1 and conv["lines"]["truncated_last_line"] is True


# --- CLI: one real subprocess (exit codes 1 and 0), the rest in process (run_cli) --------


def _run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The real command: a fresh interpreter, as users start it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "analysis_lib", "convert", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_cli_converts_good_files_and_names_bad_ones(real_fixtures, tmp_path, run_cli):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    out = tmp_path / "out"
    proc = run_cli(
        "convert", str(real_fixtures / "claude-code-spotter/short.jsonl"), str(STREAM_SAMPLE), str(empty), "--out-dir", str(out), cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "converted 2, failed 1"
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and str(empty) in err[0] and "empty file" in err[0]
    written = sorted(p.name for p in out.iterdir())
    assert written == ["claude_stream_json_sample.trajectory.json", "short.trajectory.json"]  # no temp files left
    doc = json.loads((out / "short.trajectory.json").read_text())
    assert doc["final_metrics"] == transcript_to_atif(real_fixtures / "claude-code-spotter/short.jsonl")["final_metrics"]


def test_cli_exit_code_1_when_nothing_converts_and_single_output(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hello": "world"}\n')
    proc = _run_cli(str(bad), "-o", str(tmp_path / "x.json"), cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.strip() == "converted 0, failed 1"
    assert "not a recognised transcript" in proc.stderr and str(bad) in proc.stderr
    assert not (tmp_path / "x.json").exists()
    proc = _run_cli(str(STREAM_SAMPLE), "-o", str(tmp_path / "one.json"), "-q", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "converted 1, failed 0"
    assert json.loads((tmp_path / "one.json").read_text())["schema_version"] == "ATIF-v1.7"


def test_cli_folder_skips_subagent_files_and_non_transcripts(real_fixtures, tmp_path, run_cli):
    proc = run_cli(
        "convert",
        str(real_fixtures / "claude-code-spotter"),
        str(real_fixtures / "phoenix-atif-fixtures"),
        "--out-dir",
        str(tmp_path),
        "-q",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    # subagent.jsonl names a subagent whose transcript was not kept: converted, and said once.
    assert proc.stdout.strip() == "converted 4, failed 0, 1 warning"
    assert "subagent.jsonl" in proc.stderr and "agent-afb92ff.jsonl is missing" in proc.stderr
    assert not any(p.name.startswith("agent-") for p in tmp_path.iterdir())


def test_converted_trajectories_parse_with_the_atif_reader(real_fixtures):
    """The output must be readable by the project's own ATIF parser."""
    from analysis_lib.ingest import atif

    for rel in (MAIN_SESSION, "claude-code-log/edge_cases.jsonl", "ccusage/codex/sessions/project-alpha/session-alpha.jsonl"):
        doc = convert_file(real_fixtures / rel)
        traj = atif.parse_trajectory(doc, str(real_fixtures / rel))
        assert len(traj.steps) == len(doc["steps"])
        assert traj.final_metrics.prompt_tokens == doc["final_metrics"]["total_prompt_tokens"]
    doc = stream_json_to_atif(STREAM_SAMPLE)
    traj = atif.parse_trajectory(doc, str(STREAM_SAMPLE))
    assert [len(s.steps) for s in traj.subagents] == [len(doc["subagent_trajectories"][0]["steps"])]
    bash = next(c for s in traj.steps for c in s.tool_calls if c.name == "Bash")
    assert bash.is_error is True


@pytest.mark.slow  # Harbor's side environment (tests/side_envs.py): built once, 1-3 min
def test_converted_trajectories_validate_with_harbor_models(real_fixtures, harbor_python):
    """Strict when writing: Harbor's own ATIF models (extra='forbid'), in Harbor's side environment, accept the output."""
    from side_envs import run_json

    docs = [convert_file(real_fixtures / rel) for rel in sorted(FIXTURES)] + [stream_json_to_atif(STREAM_SAMPLE)]
    check = (
        "import json, sys\nfrom pydantic import ValidationError\nfrom harbor.models.trajectories import Trajectory\n"
        "errors = []\nfor doc in json.load(sys.stdin):\n"
        "    try:\n        Trajectory.model_validate(doc)\n        errors.append(None)\n"
        "    except ValidationError as exc:\n        errors.append(str(exc)[:2000])\nprint(json.dumps(errors))\n"
    )
    assert run_json(harbor_python, check, docs) == [None] * len(docs)


def test_discovery_reads_subagent_files_only_through_their_session(real_fixtures):
    from analysis_lib.ingest.convert import is_subagent_transcript
    from analysis_lib.ingest.discover import discover

    folder = real_fixtures / "claude-code-spotter"
    sources, errors = discover(folder)
    assert not errors
    assert sorted(Path(s.path).name for s in sources) == [
        "4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
        "short.jsonl",
        "subagent.jsonl",
        "tool_heavy.jsonl",
    ]
    sub = folder / "4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl"
    assert is_subagent_transcript(sub)
    assert not is_subagent_transcript(folder / "short.jsonl")
