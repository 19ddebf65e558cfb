"""Importers of legacy formats: Terminal-Bench 1 run directories, Inspect AI eval logs, mcpbr results.

Reference values are read from the fixture files by independent code (plain ``json``) or were read by eye,
as the comments say. Broken variants are written to ``tmp_path``; the real fixtures stay read-only.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from datetime import datetime
from pathlib import Path

import pytest

from analysis_lib.core.trial import Trial
from analysis_lib.ingest.inspect_log import is_inspect_log, read_inspect_log, score_to_reward
from analysis_lib.ingest.mcpbr import is_mcpbr_results, read_mcpbr_results
from analysis_lib.ingest.tb1 import is_tb1_run, read_tb1_run

# The Layer 1 metric ids an importer may carry (the metrics_detail.csv contract).
CARRIED_IDS = {
    "success", "reward", "tests_passed", "tests_failed", "tests_total", "total_input_tokens",
    "total_output_tokens", "total_cached_tokens", "total_cost_usd", "total_steps", "tool_calls_count",
    "elapsed_sec", "tool_distribution", "tool_error_count",
}

TB1_MINI = "tb1-leaderboard/20250825_swe-agent-mini_claude-4-sonnet/2025-08-07__20-46-16"
TB1_OPENHANDS = "tb1-leaderboard/20250711_openhands_claude-4-sonnet/openhands-sonnet"
INSPECT_DIR = "inspect-ai-logs"
INSPECT_FILES = [
    "2024-11-05T13-31-45-05-00_input-task_8zXjbRzCWrL9GXiXo2vus9.json",
    "log_formats.json",
    "log_read_sample.json",
    "log_tool_call_error.json",
]
MCPBR = "mcpbr-readme-example/results.json"
# Files of other formats that every detector must reject.
OTHER_FORMATS = [
    "harbor-golden/terminus_2/hello-world-timeout.trajectory.json",  # ATIF
    "harbor-jobs-saud008/jobs/2026-09-30__08-59-24/check-brickmake-rule-semantics-r__xwL2kAp/result.json",  # Harbor trial
    "harbor-jobs-saud008/jobs/2026-09-30__08-59-24/result.json",  # Harbor job
    "ctrf-spec-examples/comprehensive.json",  # CTRF
]


def _by_task(trials: list[Trial]) -> dict[str, Trial]:
    out = {t.task_id: t for t in trials}
    assert len(out) == len(trials), "task ids must be unique within one run"
    return out


def _check_common(trials: list[Trial], source_format: str) -> None:
    for t in trials:
        assert t.source_format == source_format
        assert set(t.carried_metrics) <= CARRIED_IDS, set(t.carried_metrics) - CARRIED_IDS
        if "success" in t.carried_metrics:
            assert t.carried_metrics["success"] == (t.reward == 1.0)
        assert t.repetition >= 1 and t.task_id and t.profile and t.run_id
    assert len({t.trial_path for t in trials}) == len(trials), "trial_path must identify one trial"


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


# --------------------------------------------------------------------------- Terminal-Bench 1

@pytest.mark.real_fixtures
def test_tb1_detection(real_fixtures: Path, tmp_path: Path) -> None:
    assert is_tb1_run(real_fixtures / TB1_MINI)
    assert is_tb1_run(real_fixtures / TB1_OPENHANDS)  # run_metadata.json only, no run-level results.json
    # The submission folder above a run, a trial folder, a Harbor job, files and an empty folder are not runs.
    assert not is_tb1_run(real_fixtures / TB1_OPENHANDS / "..")
    assert not is_tb1_run(real_fixtures / TB1_MINI / "hello-world" / "hello-world.1-of-1.2025-08-07__20-46-16")
    assert not is_tb1_run(real_fixtures / "harbor-jobs-saud008/jobs/2026-09-30__08-59-24")
    assert not is_tb1_run(real_fixtures / MCPBR)
    assert not is_tb1_run(tmp_path)
    # A folder whose results.json is mcpbr's (tasks[], not results[]) is not a TB1 run.
    shutil.copy(real_fixtures / MCPBR, tmp_path / "results.json")
    assert not is_tb1_run(tmp_path)


@pytest.mark.real_fixtures
def test_tb1_mini_swe_agent_run(real_fixtures: Path) -> None:
    run = real_fixtures / TB1_MINI
    trials, errors = read_tb1_run(run)
    assert errors == []
    _check_common(trials, "tb1")
    records = json.loads((run / "results.json").read_text())["results"]
    assert len(trials) == len(records) == 80
    got = _by_task(trials)
    # Independent reading of the run-level file: resolved ids, and the trials that never started.
    resolved = {r["task_id"] for r in records if r["is_resolved"] is True}
    never_ran = {r["task_id"] for r in records if r["is_resolved"] is None and r["test_started_at"] is None}
    assert len(resolved) == 11 and len(never_ran) == 4
    assert {t.task_id for t in trials if t.carried_metrics.get("success")} == resolved
    # unknown_agent_error is a verdict on the attempt (the agent itself failed): TB1 divides by every
    # trial, so do we; test_timeout / parse_error likewise count as unresolved.
    assert all(got[tid].exception == "TB1 failure_mode: unknown_agent_error" for tid in never_ran)
    assert all(got[tid].reward == 0.0 for tid in never_ran)
    assert got["super-benchmark-upet"].reward == 0.0
    assert sum(t.reward == 0.0 for t in trials) == 80 - 11
    # The pass rate equals TB1's own accuracy field of the run.
    run_level = json.loads((run / "results.json").read_text())
    assert sum(t.reward == 1.0 for t in trials) / len(trials) == run_level["accuracy"] == 0.1375
    assert {t.profile for t in trials} == {"mini-swe-agent@claude-sonnet-4-20250514"}
    assert {t.run_id for t in trials} == {"2025-08-07__20-46-16"}
    # Every record reports 0/0 or null/null tokens: unknown, so never carried.
    assert not any("total_input_tokens" in t.carried_metrics for t in trials)
    assert all(t.metadata["tokens_reported"] is False for t in trials)

    hello = got["hello-world"]
    # Read by eye: is_resolved true although failure_mode is agent_timeout.
    assert hello.reward == 1.0 and hello.carried_metrics["success"] is True
    assert hello.metadata["failure_mode"] == "agent_timeout"
    assert hello.exception == "TB1 failure_mode: agent_timeout"
    assert hello.trial_path.endswith("hello-world.1-of-1.2025-08-07__20-46-16")
    assert hello.paths["result"].endswith("hello-world.1-of-1.2025-08-07__20-46-16/results.json")
    assert [(x.name, x.status) for x in hello.tests] == [("test_hello_file_exists", "passed"), ("test_hello_file_content", "passed")]
    # agent 06:41:22.452662 -> 06:50:52.683584 = 570.230922 s (by eye from the file).
    assert hello.carried_metrics["elapsed_sec"] == pytest.approx(570.230922, abs=1e-6)
    assert hello.timing.started_at == datetime.fromisoformat("2025-08-08T06:39:03.145797+00:00")

    maze = got["blind-maze-explorer-algorithm"]
    assert (maze.carried_metrics["tests_passed"], maze.carried_metrics["tests_failed"], maze.carried_metrics["tests_total"]) == (2, 9, 11)
    assert maze.carried_metrics["success"] is False
    # Trials without a trial folder come from the run-level file, with a unique locator.
    eval_mteb = got["eval-mteb.hard"]
    assert eval_mteb.trial_path.endswith("results.json#eval-mteb.hard.1-of-1.2025-08-07__20-46-16")
    assert eval_mteb.repetition == 1 and eval_mteb.task_id == "eval-mteb.hard"


@pytest.mark.real_fixtures
def test_tb1_openhands_run(real_fixtures: Path) -> None:
    trials, errors = read_tb1_run(real_fixtures / TB1_OPENHANDS)
    assert errors == []
    _check_common(trials, "tb1")
    got = _by_task(trials)
    assert set(got) == {"blind-maze-explorer-5x5", "build-initramfs-qemu"}
    assert {t.profile for t in trials} == {"openhands@claude-sonnet-4-20250514"}
    assert all(t.metadata["model_name"] == "openai/neulab/claude-sonnet-4-20250514" for t in trials)
    maze = got["blind-maze-explorer-5x5"]
    assert maze.reward == 0.0 and maze.metadata["failure_mode"] == "agent_timeout"
    assert maze.carried_metrics["tests_failed"] == 2
    # parser_results keyed by pytest's summary line: split into the file and the error text.
    (test,) = got["build-initramfs-qemu"].tests
    assert test.name == "../tests/test_outputs.py" and test.status == "failed"
    assert test.message.startswith("AssertionError: Expected 'Hello, this is a custom kernel'")
    assert got["build-initramfs-qemu"].exception is None  # failure_mode "unset"


def _copy_run(real_fixtures: Path, rel: str, tmp_path: Path) -> Path:
    dst = tmp_path / Path(rel).name
    shutil.copytree(real_fixtures / rel, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)  # the fixtures are read-only
    return dst


@pytest.mark.real_fixtures
def test_tb1_broken_trial_file_uses_run_level_record(real_fixtures: Path, tmp_path: Path) -> None:
    run = _copy_run(real_fixtures, TB1_MINI, tmp_path)
    broken = run / "hello-world" / "hello-world.1-of-1.2025-08-07__20-46-16" / "results.json"
    _truncate(broken)
    trials, errors = read_tb1_run(run)
    assert len(trials) == 80
    hello = _by_task(trials)["hello-world"]
    assert hello.reward == 1.0
    assert len(hello.warnings) == 1 and str(broken) in hello.warnings[0] and "truncated" in hello.warnings[0]
    # Reported once, as a warning: the trial was still read.
    assert [(e.path, e.severity) for e in errors] == [(str(broken), "warning")]
    assert errors[0].message.endswith("used the run-level record instead")


@pytest.mark.real_fixtures
def test_tb1_broken_trial_file_without_fallback(real_fixtures: Path, tmp_path: Path) -> None:
    run = _copy_run(real_fixtures, TB1_OPENHANDS, tmp_path)
    broken = run / "build-initramfs-qemu" / "build-initramfs-qemu.1-of-1.openhands-sonnet" / "results.json"
    _truncate(broken)
    trials, errors = read_tb1_run(run)
    assert [t.task_id for t in trials] == ["blind-maze-explorer-5x5"]
    assert len(errors) == 1
    assert errors[0].path == str(broken) and errors[0].stage == "import" and "truncated JSON" in errors[0].message
    assert "\n" not in errors[0].line()


@pytest.mark.real_fixtures
def test_tb1_non_utf8_metadata_and_bad_records(real_fixtures: Path, tmp_path: Path) -> None:
    run = _copy_run(real_fixtures, TB1_OPENHANDS, tmp_path)
    (run / "run_metadata.json").write_bytes(b"\xff\xfe\x00garbage \x80\x81")
    bad = run / "blind-maze-explorer-5x5" / "blind-maze-explorer-5x5.1-of-1.openhands-sonnet" / "results.json"
    rec = json.loads(bad.read_text())
    rec["is_resolved"] = "yes"
    bad.write_text(json.dumps(rec))
    (run / "fix-git" / "fix-git.1-of-1.openhands-sonnet").mkdir(parents=True)  # a trial folder without results.json
    trials, errors = read_tb1_run(run)
    assert [t.task_id for t in trials] == ["build-initramfs-qemu"]
    assert trials[0].profile == "tb1"  # run_metadata.json unreadable: the documented fallback profile
    by_path = {e.path: e.message for e in errors}
    assert len(errors) == 3
    assert "malformed JSON" in by_path[str(run / "run_metadata.json")]
    assert "is_resolved is 'yes'" in by_path[str(bad)]
    assert by_path[str(run / "fix-git" / "fix-git.1-of-1.openhands-sonnet")] == "trial directory without results.json"


def test_tb1_tokens_and_repetitions(tmp_path: Path) -> None:
    """Synthetic run: reported tokens are carried, 0/0 is unknown, k-of-n gives the repetition."""
    run = tmp_path / "run1"
    base = {"is_resolved": False, "failure_mode": "unset", "parser_results": {"t": "passed"},
            "trial_started_at": "2025-01-01T00:00:00+00:00", "trial_ended_at": "2025-01-01T00:01:40+00:00"}
    records = [
        {**base, "trial_name": "fix-git.1-of-2.run1", "task_id": "fix-git", "total_input_tokens": 1200, "total_output_tokens": 300},
        {**base, "trial_name": "fix-git.2-of-2.run1", "task_id": "fix-git", "total_input_tokens": 0, "total_output_tokens": 0},
        "not a record",
    ]
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"results": records}))
    assert is_tb1_run(run)
    trials, errors = read_tb1_run(run)
    assert len(errors) == 1 and "results[2]" in errors[0].message
    first, second = trials
    assert (first.repetition, second.repetition) == (1, 2)
    assert first.carried_metrics["total_input_tokens"] == 1200 and first.carried_metrics["total_output_tokens"] == 300
    assert "total_input_tokens" not in second.carried_metrics
    # No agent timestamps: elapsed falls back to the trial's start -> end (100 s).
    assert first.carried_metrics["elapsed_sec"] == 100.0
    assert first.profile == "tb1"


# --------------------------------------------------------------------------- Inspect AI

@pytest.mark.real_fixtures
@pytest.mark.parametrize("name", INSPECT_FILES)
def test_inspect_fixture_imports(real_fixtures: Path, name: str) -> None:
    path = real_fixtures / INSPECT_DIR / name
    assert is_inspect_log(path)
    trials, errors = read_inspect_log(path)
    assert errors == []
    _check_common(trials, "inspect")
    log = json.loads(path.read_text())
    assert len(trials) == len(log["samples"]) == 1
    (t,), (s,) = trials, log["samples"]
    assert t.task_id == str(s["id"]) and t.repetition == s["epoch"] and t.run_id == log["eval"]["run_id"]
    assert t.trajectory is not None
    assert sum(len(st.tool_calls) for st in t.trajectory.steps) == sum(m["role"] == "tool" for m in s["messages"])


@pytest.mark.real_fixtures
def test_inspect_values(real_fixtures: Path) -> None:
    d = real_fixtures / INSPECT_DIR
    (t,), _ = read_inspect_log(d / INSPECT_FILES[0])
    # By eye: model_graded_fact value "C"; sample model_usage 274 in / 189 out; events 13:31:45.581641 -> 13:32:19.917395.
    assert t.reward == 1.0 and t.carried_metrics["success"] is True
    assert (t.carried_metrics["total_input_tokens"], t.carried_metrics["total_output_tokens"]) == (274, 189)
    assert t.carried_metrics["elapsed_sec"] == pytest.approx(34.335754, abs=1e-6)
    assert t.profile == "input_task@gpt-4o-mini" and t.metadata["model_name"] == "openai/gpt-4o-mini"
    assert t.trajectory.final_metrics.prompt_tokens == 274
    assert [s.source for s in t.trajectory.steps] == ["user", "user", "agent"]

    (t,), _ = read_inspect_log(d / "log_formats.json")
    assert t.reward == 0.0 and t.carried_metrics["success"] is False  # match scorer, value "I"
    assert "total_input_tokens" not in t.carried_metrics  # no sample model_usage in this older log

    (t,), _ = read_inspect_log(d / "log_read_sample.json")
    assert t.carried_metrics["elapsed_sec"] == 2.113 and t.metadata["working_time"] == 1.952
    assert (t.carried_metrics["total_input_tokens"], t.carried_metrics["total_output_tokens"]) == (66, 3)

    (t,), _ = read_inspect_log(d / "log_tool_call_error.json")
    calls = [c for s in t.trajectory.steps for c in s.tool_calls]
    assert len(calls) == 11 and all(c.is_error for c in calls) and {c.name for c in calls} == {"bash"}
    assert [c.call_id for c in calls] == [f"bash_{i}" for i in range(1, 12)]
    types = [e["type"] for s in t.trajectory.steps for e in s.extra.get("tool_errors", [])]
    assert types[0] == "parsing" and types[-1] == "output_limit" and len(types) == 11
    assert t.reward is None and "success" not in t.carried_metrics  # this sample has no score
    assert t.repetition == 4


@pytest.mark.parametrize("value, reward", [
    ("C", 1.0), ("I", 0.0), ("P", 0.5), ("N", 0.0), (True, 1.0), (False, 0.0), (1, 1.0), (0.25, 0.25),
    ("0.75", 0.75), ("yes", 1.0), ("False", 0.0), ({"a": 1}, None), ("maybe", None), (None, None),
])
def test_score_to_reward(value, reward) -> None:
    assert score_to_reward(value) == reward


def _agent_log(samples: list[dict]) -> dict:
    return {
        "version": 2, "status": "success",
        "eval": {"run_id": "R1", "task": "swe", "model": "anthropic/claude-x", "task_id": "T"},
        "results": {"scores": [{"name": "verify"}]},
        "samples": samples,
    }


def _agent_sample(sid: str, epoch: int = 1) -> dict:
    return {
        "id": sid, "epoch": epoch, "total_time": 12.5,
        "scores": {"other": {"value": "I"}, "verify": {"value": "C"}},
        "model_usage": {"anthropic/claude-x": {"input_tokens": 100, "output_tokens": 20, "total_tokens": 1170,
                                               "input_tokens_cache_read": 1000, "input_tokens_cache_write": 50}},
        "messages": [
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": [{"type": "text", "text": "looking"}],
             "tool_calls": [{"id": "c1", "function": "bash", "arguments": {"cmd": "ls"}},
                            {"id": "c2", "function": "text_editor", "arguments": "{\"path\": \"a.py\"}"}]},
            {"role": "tool", "tool_call_id": "c1", "function": "bash", "content": "a.py\n"},
            {"role": "tool", "tool_call_id": "c2", "function": "text_editor", "content": "",
             "error": {"type": "file_not_found", "message": "no such file"}},
            {"role": "assistant", "content": "done"},
        ],
        "error": {"message": "RuntimeError: sandbox\nwent away", "traceback": "..."},
    }


def test_inspect_agent_sample(tmp_path: Path) -> None:
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(_agent_log([_agent_sample("django-1")])))
    (t,), errors = read_inspect_log(path)
    assert errors == []
    # The first scorer of results.scores ("verify"), not the first key of the sample's scores.
    assert t.reward == 1.0 and t.metadata["scorer"] == "verify"
    # Inspect's input excludes the cache: 100 + 1000 read + 50 written = 1150 (ATIF semantics).
    assert t.carried_metrics["total_input_tokens"] == 1150
    assert t.carried_metrics["total_cached_tokens"] == 1000
    assert t.carried_metrics["total_output_tokens"] == 20
    assert t.carried_metrics["elapsed_sec"] == 12.5
    assert t.exception == "RuntimeError: sandbox went away"
    assert t.profile == "swe@claude-x" and t.trial_path.endswith("agent.json#django-1_epoch_1")
    agent_steps = [s for s in t.trajectory.steps if s.source == "agent"]
    assert len(agent_steps) == 2 and agent_steps[0].message == "looking"
    c1, c2 = agent_steps[0].tool_calls
    assert (c1.name, c1.arguments, c1.is_error, c1.output) == ("bash", {"cmd": "ls"}, False, "a.py\n")
    assert (c2.name, c2.arguments, c2.is_error, c2.output) == ("text_editor", {"path": "a.py"}, True, "no such file")


@pytest.mark.real_fixtures
def test_inspect_zipped_eval(real_fixtures: Path, tmp_path: Path) -> None:
    """A .eval zip built from a real JSON log reads the same as the JSON; a broken member is one error."""
    src = real_fixtures / INSPECT_DIR / "log_read_sample.json"
    log = json.loads(src.read_text())
    samples = log.pop("samples")
    path = tmp_path / "run.eval"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("header.json", json.dumps(log))
        for s in samples:
            zf.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
        zf.writestr("samples/2_epoch_1.json", '{"id": 2, "epoch": 1, "messages": [')
    assert is_inspect_log(path)
    trials, errors = read_inspect_log(path)
    (from_json,), _ = read_inspect_log(src)
    assert len(trials) == 1
    assert trials[0].carried_metrics == from_json.carried_metrics
    assert (trials[0].task_id, trials[0].run_id, trials[0].profile) == (from_json.task_id, from_json.run_id, from_json.profile)
    assert len(errors) == 1 and errors[0].path == str(path)
    assert errors[0].message.startswith("samples/2_epoch_1.json: truncated JSON")


@pytest.mark.real_fixtures
def test_inspect_broken_variants(real_fixtures: Path, tmp_path: Path) -> None:
    src = real_fixtures / INSPECT_DIR / "log_read_sample.json"
    truncated = tmp_path / "truncated.json"
    truncated.write_bytes(src.read_bytes()[:3000])
    assert is_inspect_log(truncated)  # still claimed, so that the problem is reported rather than ignored
    trials, errors = read_inspect_log(truncated)
    assert trials == [] and len(errors) == 1
    assert errors[0].path == str(truncated) and "truncated JSON" in errors[0].message

    no_eval = tmp_path / "no_eval.json"
    no_eval.write_text(json.dumps({"version": 2, "status": "success", "samples": []}))
    trials, errors = read_inspect_log(no_eval)
    assert trials == [] and [e.message for e in errors] == ["not an Inspect eval log: no eval object"]

    mixed = tmp_path / "mixed.json"
    mixed.write_text(json.dumps(_agent_log([_agent_sample("a"), "junk", {"epoch": 1}, _agent_sample("a", 2)])))
    trials, errors = read_inspect_log(mixed)
    assert [(t.task_id, t.repetition) for t in trials] == [("a", 1), ("a", 2)]
    assert [e.message for e in errors] == ["samples[1]: expected a sample object, got str", "samples[2]: sample without an id"]

    # Invalid UTF-8 inside a string is replaced (lenient reading); outside strings it breaks the JSON.
    raw = json.dumps(_agent_log([_agent_sample("u")])).encode().replace(b"fix it", b"fix \xff it")
    lenient = tmp_path / "lenient.json"
    lenient.write_bytes(raw)
    (t,), errors = read_inspect_log(lenient)
    assert errors == [] and t.trajectory.steps[0].message == "fix \ufffd it"
    junk = tmp_path / "junk.json"
    junk.write_bytes(b'{"version": 2, "eval": {\xff\xfe}, "status": "success"}')
    assert is_inspect_log(junk)
    trials, errors = read_inspect_log(junk)
    assert trials == [] and len(errors) == 1 and errors[0].path == str(junk) and "malformed JSON" in errors[0].message

    empty = tmp_path / "nosamples.json"
    empty.write_text(json.dumps({**_agent_log([]), "status": "error"}))
    trials, errors = read_inspect_log(empty)
    assert trials == [] and [e.severity for e in errors] == ["error", "warning"]
    assert "no samples" in errors[0].message and "status 'error'" in errors[1].message

    # A score without a float reading: the trial is kept without a reward, and the loss is reported.
    sample = _agent_sample("d")
    sample["scores"] = {"verify": {"value": {"accuracy": 1, "style": "C"}}}
    dict_score = tmp_path / "dict_score.json"
    dict_score.write_text(json.dumps(_agent_log([sample])))
    (t,), errors = read_inspect_log(dict_score)
    assert t.reward is None and "success" not in t.carried_metrics
    assert [(e.severity, e.path) for e in errors] == [("warning", str(dict_score))]
    assert errors[0].message.startswith("samples[0]: score 'verify' value") and "no reward" in errors[0].message


@pytest.mark.real_fixtures
def test_inspect_detection_rejects_other_formats(real_fixtures: Path, tmp_path: Path) -> None:
    for rel in [*OTHER_FORMATS, MCPBR, f"{TB1_MINI}/results.json", f"{TB1_MINI}/run_metadata.json"]:
        assert not is_inspect_log(real_fixtures / rel), rel
    assert not is_inspect_log(real_fixtures / INSPECT_DIR)  # a folder
    notzip = tmp_path / "x.eval"
    notzip.write_bytes(b"PK\x03\x04 not really a zip")
    assert not is_inspect_log(notzip)


# --------------------------------------------------------------------------- mcpbr

@pytest.mark.real_fixtures
def test_mcpbr_fixture(real_fixtures: Path) -> None:
    path = real_fixtures / MCPBR
    assert is_mcpbr_results(path)
    trials, errors = read_mcpbr_results(path)
    assert errors == []
    _check_common(trials, "mcpbr")
    raw = json.loads(path.read_text())["tasks"][0]
    got = {t.profile: t for t in trials}
    assert set(got) == {"mcp", "baseline"}
    for kind, t in got.items():
        run = raw[kind]
        assert t.task_id == "astropy__astropy-12907" and t.repetition == 1
        assert t.carried_metrics["success"] is run["resolved"] is True
        assert t.carried_metrics["total_input_tokens"] == run["tokens"]["input"]
        assert t.carried_metrics["total_output_tokens"] == run["tokens"]["output"]
        assert t.carried_metrics["tool_calls_count"] == run["tool_calls"]
        assert t.carried_metrics["total_steps"] == run["iterations"]
        assert t.carried_metrics["tool_distribution"] == run["tool_usage"]
        assert "tool_error_count" not in t.carried_metrics  # no tool_failures in this file: unknown
        assert "total_cached_tokens" not in t.carried_metrics
        assert t.metadata["input_tokens_exclude_cache"] is True
        assert t.run_id == "2026-01-17T07:23:39.871437+00:00"
    # By eye: the mcp run passed 2/2 fail_to_pass and 10/10 pass_to_pass; the baseline lists none.
    assert (got["mcp"].carried_metrics["tests_passed"], got["mcp"].carried_metrics["tests_total"]) == (12, 12)
    assert "tests_total" not in got["baseline"].carried_metrics
    assert got["mcp"].metadata["mcp_server"]["command"] == "npx"


def _comparison_results() -> dict:
    return {
        "metadata": {
            "timestamp": "2026-02-01T10:00:00+00:00",
            "config": {"model": "sonnet", "agent_harness": "claude-code", "comparison_mode": True},
            "mcp_server_a": {"name": "codegraph", "command": "cg", "args": []},
            "mcp_server_b": {"name": "codecanvas", "command": "cc", "args": []},
        },
        "summary": {},
        "tasks": [
            {"instance_id": "a__a-1",
             "mcp_server_a": {"resolved": True, "tokens": {"input": 10, "output": 500}, "iterations": 7, "tool_calls": 9,
                              "tool_usage": {"Bash": 6, "mcp__cg__search": 3}, "tool_failures": {"Bash": 2, "mcp__cg__search": 1},
                              "runtime_seconds": 81.5, "cost": 0.42},
             "mcp_server_b": {"resolved": False, "patch_applied": False, "error": "Docker build failed",
                              "tokens": {"input": 0, "output": 0}, "iterations": 0, "tool_calls": 0, "cost": 0.0}},
            {"instance_id": "a__a-2",
             "mcp_server_a": {"resolved": False, "error": "Timeout", "tokens": {"input": 0, "output": 0}, "iterations": 0, "tool_calls": 0},
             "mcp_server_b": "junk"},
            {"instance_id": "a__a-1", "mcp_server_a": {"resolved": False, "tokens": {"input": 5, "output": 50}}},
            {"mcp_server_a": {"resolved": True}},
            {"instance_id": "a__a-3"},
        ],
    }


def test_mcpbr_comparison_mode(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_comparison_results()))
    assert is_mcpbr_results(path)
    trials, errors = read_mcpbr_results(path)
    _check_common(trials, "mcpbr")
    key = {(t.profile, t.task_id, t.repetition): t for t in trials}
    assert set(key) == {("codegraph", "a__a-1", 1), ("codecanvas", "a__a-1", 1), ("codegraph", "a__a-2", 1), ("codegraph", "a__a-1", 2)}
    good = key[("codegraph", "a__a-1", 1)]
    assert good.carried_metrics == {
        "success": True, "reward": 1.0, "total_input_tokens": 10, "total_output_tokens": 500, "total_steps": 7,
        "tool_calls_count": 9, "tool_distribution": {"Bash": 6, "mcp__cg__search": 3}, "tool_error_count": 3,
        "elapsed_sec": 81.5, "total_cost_usd": 0.42,
    }
    # A harness failure before the agent did anything: no reward (infrastructure error), the error kept.
    infra = key[("codecanvas", "a__a-1", 1)]
    assert infra.reward is None and infra.exception == "Docker build failed"
    assert set(infra.carried_metrics) == {"total_cost_usd"}
    # A timeout stays an agent failure.
    timeout = key[("codegraph", "a__a-2", 1)]
    assert timeout.reward == 0.0 and timeout.exception == "Timeout"
    assert key[("codegraph", "a__a-1", 2)].trial_path.endswith("results.json#a__a-1/mcp_server_a/2")
    assert sorted(e.message for e in errors) == [
        "tasks[1] (a__a-2): mcp_server_b is a str, expected an object",
        "tasks[3]: no instance_id",
        "tasks[4] (a__a-3): no mcp/baseline/mcp_server_a/mcp_server_b result",
    ]


def test_mcpbr_incremental_jsonl(tmp_path: Path) -> None:
    data = _comparison_results()
    path = tmp_path / "incremental_results.jsonl"
    lines = [json.dumps({"type": "metadata", "data": data["metadata"]})]
    lines += [json.dumps({"type": "task_result", "data": t}) for t in data["tasks"][:1]]
    lines.append('{"type": "task_result", "data": {"instance_id": "cut')  # a live run's truncated last line
    path.write_text("\n".join(lines))
    assert is_mcpbr_results(path)
    trials, errors = read_mcpbr_results(path)
    assert errors == [] and sorted(t.profile for t in trials) == ["codecanvas", "codegraph"]


@pytest.mark.real_fixtures
def test_mcpbr_broken_variants(real_fixtures: Path, tmp_path: Path) -> None:
    truncated = tmp_path / "results.json"
    truncated.write_bytes((real_fixtures / MCPBR).read_bytes()[:900])
    assert is_mcpbr_results(truncated)
    trials, errors = read_mcpbr_results(truncated)
    assert trials == [] and len(errors) == 1 and errors[0].path == str(truncated) and "truncated JSON" in errors[0].message

    no_tasks = tmp_path / "no_tasks.json"
    no_tasks.write_text(json.dumps({"metadata": {"config": {"agent_harness": "claude-code"}}, "summary": {}}))
    trials, errors = read_mcpbr_results(no_tasks)
    assert trials == [] and [e.message for e in errors] == ["not an mcpbr results file: no tasks[] list"]

    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"metadata": {"config": {"agent_harness": "claude-code"}}, "tasks": [\xe9\xe8]}')
    trials, errors = read_mcpbr_results(latin)
    assert trials == [] and len(errors) == 1 and errors[0].path == str(latin) and "malformed JSON" in errors[0].message


@pytest.mark.real_fixtures
def test_mcpbr_detection_rejects_other_formats(real_fixtures: Path) -> None:
    others = [*OTHER_FORMATS, f"{TB1_MINI}/results.json", f"{TB1_MINI}/run_metadata.json",
              *(f"{INSPECT_DIR}/{n}" for n in INSPECT_FILES)]
    for rel in others:
        assert not is_mcpbr_results(real_fixtures / rel), rel
    assert not is_mcpbr_results(real_fixtures / "mcpbr-readme-example")  # a folder


def test_mcpbr_odd_resolved_is_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"metadata": {"config": {"agent_harness": "claude-code"}},
                                "tasks": [{"instance_id": "x__x-1", "baseline": {"resolved": "yes", "iterations": 3}}]}))
    (t,), errors = read_mcpbr_results(path)
    assert t.reward is None and t.carried_metrics == {"total_steps": 3}
    assert [(e.severity, e.message) for e in errors] == [
        ("warning", "tasks[0] (x__x-1) baseline: resolved is 'yes', expected true or false; no reward")]


def test_tb1_symlink_loop_is_harmless(real_fixtures: Path, tmp_path: Path) -> None:
    run = _copy_run(real_fixtures, TB1_OPENHANDS, tmp_path)
    (run / "loop").symlink_to(run, target_is_directory=True)  # <run>/loop -> <run>
    trials, errors = read_tb1_run(run)
    # Two fixed levels are listed, never recursed: the loop adds no trial and no hang.
    assert sorted(t.task_id for t in trials) == ["blind-maze-explorer-5x5", "build-initramfs-qemu"]
    assert errors == []


def test_missing_inputs_are_one_error_each(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    for reader, expected in ((read_inspect_log, "file not found"), (read_mcpbr_results, "file not found"),
                             (read_tb1_run, "not a directory")):
        trials, errors = reader(missing)
        assert trials == [] and [(e.path, e.message) for e in errors] == [(str(missing), expected)]
    assert not (is_inspect_log(missing) or is_mcpbr_results(missing) or is_tb1_run(missing))


@pytest.mark.real_fixtures
def test_inspect_layer1_elapsed_is_total_time(real_fixtures: Path) -> None:
    """Through the Layer 1 metrics, elapsed_sec is Inspect's total_time (2.113 s by eye), not the event span (2.115 s)."""
    from analysis_lib.metrics.trial_metrics import trial_metrics

    (t,), _ = read_inspect_log(real_fixtures / INSPECT_DIR / "log_read_sample.json")
    m = trial_metrics(t)
    assert m["elapsed_sec"] == pytest.approx(2.113, abs=1e-9)
    assert (m["total_input_tokens"], m["total_output_tokens"], m["success"]) == (66, 3, True)


@pytest.mark.real_fixtures
def test_layer1_rows_of_legacy_trials(real_fixtures: Path, tmp_path: Path) -> None:
    """The carried values reach metrics_detail columns, and infrastructure errors are told from failures."""
    from analysis_lib.metrics.trial_metrics import trial_metrics

    trials, _ = read_tb1_run(real_fixtures / TB1_MINI)
    rows = {t.task_id: trial_metrics(t) for t in trials}
    assert (rows["hello-world"]["success"], rows["hello-world"]["infra_error"]) == (True, False)
    # unknown_agent_error without a test run: a failure of the attempt, as TB1 counts it, not infrastructure.
    assert (rows["super-benchmark-upet"]["success"], rows["super-benchmark-upet"]["infra_error"]) == (False, False)
    assert rows["blind-maze-explorer-algorithm"]["tests_passed_ratio"] == pytest.approx(2 / 11)
    # TB1's own accuracy is 11/80, and so is Layer 1's.
    decided = [r["success"] for r in rows.values() if r["success"] is not None]
    assert (sum(decided), len(decided)) == (11, 80)

    path = tmp_path / "results.json"
    path.write_text(json.dumps(_comparison_results()))
    trials, _ = read_mcpbr_results(path)
    rows = {(t.profile, t.task_id, t.repetition): trial_metrics(t) for t in trials}
    good = rows[("codegraph", "a__a-1", 1)]
    assert (good["tool_calls_count"], good["tool_error_count"], good["unique_tools"]) == (9, 3, 2)
    assert json.loads(good["tool_distribution"]) == {"Bash": 6, "mcp__cg__search": 3}
    assert good["tool_success_rate"] == pytest.approx(1 - 3 / 9)
    assert rows[("codecanvas", "a__a-1", 1)]["infra_error"] is True
    assert rows[("codegraph", "a__a-2", 1)]["success"] is False


@pytest.mark.real_fixtures
def test_discover_finds_legacy_variants(real_fixtures: Path, tmp_path: Path) -> None:
    """Discovery routes a TB1 run without run_metadata.json, a zipped .eval log and mcpbr's incremental JSONL."""
    from analysis_lib.ingest.discover import discover

    run = _copy_run(real_fixtures, TB1_MINI, tmp_path / "runs")
    (run / "run_metadata.json").unlink()
    log = json.loads((real_fixtures / INSPECT_DIR / "log_read_sample.json").read_text())
    samples = log.pop("samples")
    with zipfile.ZipFile(tmp_path / "runs" / "log.eval", "w") as zf:
        zf.writestr("header.json", json.dumps(log))
        zf.writestr("samples/1_epoch_1.json", json.dumps(samples[0]))
    data = _comparison_results()
    (tmp_path / "runs" / "incremental_results.jsonl").write_text(
        json.dumps({"type": "metadata", "data": data["metadata"]}) + "\n"
        + json.dumps({"type": "task_result", "data": data["tasks"][0]}) + "\n")
    sources, errors = discover(tmp_path / "runs")
    assert errors == []
    assert sorted((s.kind, Path(s.path).name) for s in sources) == [
        ("inspect_log", "log.eval"), ("mcpbr", "incremental_results.jsonl"), ("tb1_run", "2025-08-07__20-46-16")]
