"""The per-trial cache of the trials table: an unchanged re-run reads nothing, a changed trial is read
again alone, and every kind of change is seen."""

from __future__ import annotations

import json
import os
import shutil

import pandas as pd
import pytest
from builders import agent_step, small_runs, trajectory, write_trial

from analysis_lib.metrics import trials_table
from analysis_lib.metrics.trial_metrics import DEFAULT_CONFIG, MetricsConfig
from analysis_lib.study.layer1 import analyse


@pytest.fixture
def runs(tmp_path):
    return small_runs(tmp_path / "runs")  # 2 profiles x 3 tasks


@pytest.fixture
def reads(monkeypatch):
    """The paths of the sources read (not taken from the cache), in this process (workers=1)."""
    seen: list[str] = []
    real = trials_table.source_rows

    def counting(src, config=DEFAULT_CONFIG):
        seen.append(src.path)
        return real(src, config)

    monkeypatch.setattr(trials_table, "source_rows", counting)
    return seen


def _bump(path):
    """Move a file's or folder's mtime on by a second (same-tick writes must not hide a change here)."""
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def _analyse(runs, out, **kw):
    return analyse(runs, out, workers=1, **kw)


def test_an_unchanged_rerun_reads_nothing(runs, tmp_path, reads):
    out = tmp_path / "out"
    cold = _analyse(runs, out)
    assert cold.cache_hits == 0 and len(reads) == 6
    reads.clear()
    warm = _analyse(runs, out)
    assert warm.cache_hits == 6 and reads == []
    pd.testing.assert_frame_equal(cold.metrics, warm.metrics)
    pd.testing.assert_frame_equal(cold.errors, warm.errors)


def test_each_kind_of_change_is_seen(runs, tmp_path, reads):
    out = tmp_path / "out"
    _analyse(runs, out)
    trial = next(runs.glob("*__base/task-1"))

    # A file rewritten in place (same size): its mtime moves; that trial alone is read again.
    reward = trial / "verifier" / "reward.txt"
    reward.write_text("1\n")
    _bump(reward)
    reads.clear()
    res = _analyse(runs, out)
    assert reads == [str(trial)] and res.cache_hits == 5

    # A file that appears in a folder the trial already had (a late CTRF report).
    (trial / "verifier" / "ctrf.json").write_text(json.dumps({"results": {"tests": [{"name": "t", "status": "passed"}]}}))
    _bump(trial / "verifier")
    reads.clear()
    res = _analyse(runs, out)
    assert reads == [str(trial)]
    row = res.metrics[res.metrics.trial_path.str.endswith("__base/task-1")].iloc[0]
    assert row["tests_total"] == 1

    # A new trial folder is found and read alone.
    write_trial(runs, trial.parent.name, "task-new", traj=trajectory([agent_step(1)]))
    reads.clear()
    res = _analyse(runs, out)
    assert reads == [str(trial.parent / "task-new")] and len(res.metrics) == 7

    # A trial folder removed: gone from the table, nothing read.
    shutil.rmtree(trial.parent / "task-new")
    reads.clear()
    res = _analyse(runs, out)
    assert reads == [] and len(res.metrics) == 6 and res.cache_hits == 6


def test_a_late_verifier_folder_invalidates_the_trial(tmp_path, reads):
    """A trial read before its verifier ran: the reward that arrives later is read."""
    runs = tmp_path / "runs"
    trial = write_trial(runs, "2026-01-01__10-00-00__base", "task-a", traj=trajectory([agent_step(1)]), reward=None)
    shutil.rmtree(trial / "verifier")
    out = tmp_path / "out"
    assert _analyse(runs, out).metrics["reward"].isna().all()
    (trial / "verifier").mkdir()
    (trial / "verifier" / "reward.txt").write_text("1\n")
    _bump(trial)
    res = _analyse(runs, out)
    assert res.metrics["reward"].tolist() == [1.0] and res.cache_hits == 0


def test_a_fallback_file_is_read_once_its_first_choice_is_gone(tmp_path):
    """reward.json is read only without reward.txt: removing reward.txt brings it in."""
    runs = tmp_path / "runs"
    trial = write_trial(runs, "2026-01-01__10-00-00__base", "task-a", traj=trajectory([agent_step(1)]), reward="0\n")
    (trial / "verifier" / "reward.json").write_text('{"reward": 1.0}')
    out = tmp_path / "out"
    assert _analyse(runs, out).metrics["reward"].tolist() == [0.0]
    (trial / "verifier" / "reward.txt").unlink()
    _bump(trial / "verifier")
    again = _analyse(runs, out)
    assert again.metrics["reward"].tolist() == [1.0] and again.cache_hits == 0


def test_partly_cached_analysis_equals_a_cold_one(runs, tmp_path):
    """Rows from the cache and newly read rows make the same table, in the same order, as a cold run."""
    out = tmp_path / "out"
    _analyse(runs, out)
    reward = next(runs.glob("*__base/task-0/verifier/reward.txt"))
    reward.write_text("0\n" if reward.read_text().strip() == "1" else "1\n")
    _bump(reward)
    partial = _analyse(runs, out)
    assert partial.cache_hits == 5
    cold = analyse(runs, tmp_path / "cold", cache=False)
    pd.testing.assert_frame_equal(partial.metrics, cold.metrics)
    pd.testing.assert_frame_equal(partial.summary, cold.summary)


def test_a_narrower_selection_keeps_the_rest_cached(runs, tmp_path, reads):
    out = tmp_path / "out"
    _analyse(runs, out)
    assert len(_analyse(runs, out, profiles=["mcp"]).metrics) == 3
    reads.clear()
    assert _analyse(runs, out).cache_hits == 6 and reads == []


def test_another_metrics_configuration_reads_again(runs, tmp_path, reads):
    out = tmp_path / "out"
    _analyse(runs, out)
    reads.clear()
    res = _analyse(runs, out, config=MetricsConfig(tool_misuse_error_rate=0.1))
    assert res.cache_hits == 0 and len(reads) == 6


def test_the_cache_lives_in_the_output_folder_not_in_the_runs(runs, tmp_path):
    before = sorted(p.relative_to(runs) for p in runs.rglob("*"))
    out = tmp_path / "out"
    _analyse(runs, out)
    assert (out / ".cache" / trials_table.CACHE_FILE).is_file()
    assert sorted(p.relative_to(runs) for p in runs.rglob("*")) == before


@pytest.mark.real_fixtures
@pytest.mark.parametrize("layout", ["nested", "beside"])
def test_a_changed_subagent_file_reads_its_session_again(real_fixtures, tmp_path, reads, layout):
    """A Claude Code session's subagent transcripts are part of what its row is read from, in both layouts."""
    src = real_fixtures / "claude-code-spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(src, runs / src.name)
    sub_dir = runs / src.stem / "subagents" if layout == "nested" else runs
    sub_dir.mkdir(parents=True, exist_ok=True)
    sub = sub_dir / "agent-a2898e3.jsonl"
    shutil.copy(src.parent / src.stem / "subagents" / sub.name, sub)
    cache = tmp_path / "cache"
    first = trials_table.trials_table(runs, cache_dir=cache, workers=1)
    assert trials_table.trials_table(runs, cache_dir=cache, workers=1).cache_hits == 1
    lines = sub.read_bytes().splitlines(keepends=True)
    sub.write_bytes(b"".join(lines[: len(lines) // 2]))  # the subagent's transcript, cut in half
    _bump(sub)
    reads.clear()
    again = trials_table.trials_table(runs, cache_dir=cache, workers=1)
    assert again.cache_hits == 0 and reads == [str(runs / src.name)]
    assert again.frame["total_input_tokens"].iloc[0] < first.frame["total_input_tokens"].iloc[0]


def test_the_code_version_covers_every_module_a_row_is_computed_by():
    """A metric is defined and computed by its registry entry: changing the registry (or metrics) must invalidate rows."""
    from analysis_lib.core import registry, success, tools, trial
    from analysis_lib.ingest import read
    from analysis_lib.metrics import pricing, tokens, trial_metrics

    files = set(trials_table.code_files())
    for module in (registry, success, tools, trial, read, trial_metrics, tokens, pricing, trials_table):
        assert os.path.abspath(module.__file__) in files, module.__name__
