"""The tidy frames agree with each other and with the metrics table."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from analysis_lib.ingest.load import load_trials
from analysis_lib.study import frames
from analysis_lib.study.frames import steps_df, tool_calls_df, trials_df


def test_frames_on_sample_runs(sample_runs):
    trials, errors = load_trials(sample_runs)
    assert not [e for e in errors if e.severity == "error"]
    trials = [t for t in trials if t.task_id in sorted({t.task_id for t in trials})[:4]]
    tdf, sdf, cdf, xdf = trials_df(trials), steps_df(trials), tool_calls_df(trials), frames.tests_df(trials)
    key = ["profile", "task_id", "repetition", "run_id", "trial_path"]
    assert len(tdf) == len(trials)
    calls = cdf.groupby(key).size()
    merged = tdf.set_index(key)["tool_calls_count"].dropna()
    assert (calls.reindex(merged.index).fillna(0) == merged).all()
    # Steps: agent steps per trial equal the metric; step timestamps parse to UTC.
    agent = sdf[(sdf.source == "agent") & (sdf.subagent == "")].groupby(key).size()
    assert (agent.reindex(tdf.set_index(key)["agent_steps"].dropna().index).fillna(0) == tdf.set_index(key)["agent_steps"].dropna()).all()
    assert str(sdf["timestamp"].dt.tz) == "UTC"
    # Tests: passed counts equal the metric.
    passed = xdf[xdf.status == "passed"].groupby(key).size()
    want = tdf.set_index(key)["tests_passed"].dropna()
    assert (passed.reindex(want.index).fillna(0) == want).all()
    # Tool distribution of the metrics table equals the calls frame's counts.
    row = tdf.dropna(subset=["tool_distribution"]).iloc[0]
    sub = cdf[(cdf.trial_path == row.trial_path)]
    assert json.loads(row.tool_distribution) == sub["name"].value_counts().to_dict()
    assert set(cdf["category"]) <= {"read", "search", "edit", "execute", "mcp", "other"}


def _same_table(runs, out):
    """trials_df of a runs folder is the frame analyse returns and writes as metrics_detail.csv."""
    from analysis_lib.core.fileio import atomic_write_csv
    from analysis_lib.study.layer1 import analyse

    res = analyse(runs, out, cache=False)
    df = trials_df(runs)
    pd.testing.assert_frame_equal(df, res.metrics)
    assert atomic_write_csv(out / "again.csv", df).read_bytes() == (out / "metrics_detail.csv").read_bytes()
    return df


def test_trials_df_of_the_sample_runs_is_metrics_detail(sample_runs, tmp_path):
    df = _same_table(sample_runs, tmp_path / "out")
    assert len(df) == 216 and "informed_editing_score" in df and df["simulated"].all()


@pytest.mark.real_fixtures
def test_trials_df_of_a_real_fixture_folder_is_metrics_detail(real_fixtures, tmp_path):
    df = _same_table(real_fixtures / "harbor-golden", tmp_path / "out")
    assert len(df) >= 5 and not df["trial_path"].str.startswith("/").any()


def test_trials_df_of_loaded_trials_has_the_same_rows(sample_runs):
    """Of loaded trials: the same rows as of the folder, paths as the trials give them, no simulated column."""
    trials, _ = load_trials(sample_runs)
    trials = [t for t in trials if t.profile == "codecanvas"][:6]
    of_trials = trials_df(trials)
    of_folder = trials_df(sample_runs)
    rel = of_trials["trial_path"].map(lambda p: os.path.relpath(p, sample_runs))
    want = of_folder.set_index("trial_path").loc[rel].reset_index().drop(columns="simulated")
    # Compared as values: a column typed from these six rows alone may differ in dtype (all empty: object,
    # not str; CodeCanvas counts without a gap: int, not float).
    def values(df):
        return df.astype(object).where(df.notna(), None)

    pd.testing.assert_frame_equal(values(of_trials.assign(trial_path=rel.values)), values(want[of_trials.columns]), check_dtype=False)
