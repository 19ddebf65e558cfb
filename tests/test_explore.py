"""The explorer's notebook helpers: integer counts, one profile chosen twice, the static fallback, the
schedule pair, and the widget wiring (a grid cell selects its task and repetition)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from analysis_lib import frames
from analysis_lib.ingest.load import load_trials
from analysis_lib.report import explore, pair_view
from analysis_lib.trial import Trial


@pytest.fixture(scope="module")
def sample(sample_runs):
    trials, _ = load_trials(sample_runs)
    return trials, explore.integer_counts(frames.trials_df(trials))


def test_integer_counts_only_touch_count_metrics():
    df = pd.DataFrame({"total_tokens": [62986.0, None], "total_cost_usd": [1.0, 2.5], "task_id": ["a", "b"]})
    out = explore.integer_counts(df)
    assert str(out["total_tokens"].dtype) == "Int64" and out["total_tokens"].iloc[0] == 62986
    assert "62986.0" not in out.to_string()
    assert out["total_cost_usd"].dtype == float  # a cost is not a count, even when whole


def test_same_profile_is_a_message_not_a_crash(sample):
    _, metrics = sample
    assert explore.same_profile_message("text", "text") == \
        "A and B are both 'text': pick two different profiles to compare."
    assert explore.same_profile_message("text", "codegraph") is None
    with pytest.raises(ValueError, match="profile_b='text' equals profile_a"):
        explore.side_by_side(metrics, "fix-csv-quoting", "text", "text")


def test_show_replaces_the_widget_text_with_the_fallback(monkeypatch):
    import ipywidgets as widgets
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    published = []
    monkeypatch.setattr(shell.display_pub, "publish", lambda data, metadata=None, **kw: published.append(data))
    explore.show(widgets.Button(description="x"), "<p>static</p>", "explorer: run it")
    data = published[-1]
    assert data["text/html"] == "<p>static</p>" and data["text/plain"] == "explorer: run it"
    assert "application/vnd.jupyter.widget-view+json" in data


def test_schedule_pair_is_read_from_the_runner_result(tmp_path):
    result = tmp_path / "result.json"
    result.write_text(json.dumps({"bench": {"pair": 7, "run": 2}}))
    t = Trial(profile="b", task_id="t", repetition=2, run_id="r", trial_path="x", source_format="harbor",
              paths={"result": str(result)})
    u = Trial(profile="a", task_id="t", repetition=2, run_id="r", trial_path="y", source_format="harbor")
    assert pair_view.schedule_pair(t) == 7 and pair_view.schedule_pair(u) is None
    opts = pair_view.pair_options([t, u], "a", "b")
    assert opts.to_dict("records") == [{"task_id": "t", "repetition": 2, "pair": 7}]


def test_explorer_widgets_follow_the_grid_and_the_profiles(sample):
    trials, metrics = sample
    app = explore.pair_explorer(trials, metrics, True, "text", "codecanvas")
    (_dd_a, dd_b, dd_sort), grid_holder, (dd_task, dd_rep), _out = (
        app.children[0].children, app.children[1], app.children[2].children, app.children[3])
    cells = [w for w in grid_holder.children[0].children if "pv-cell" in w._dom_classes]
    assert len(cells) == 24 * 3 * 2
    target = cells[2 * 3 * 5 + 3]  # 6th task row, repetition 2, arm B
    task, rep = target.tooltip.split(", ")[1], int(target.tooltip.split("repetition ")[1].split(":")[0])
    target.click()
    assert (dd_task.value, dd_rep.value) == (task, rep)
    assert list(dd_rep.options) == [("1", 1), ("2", 2), ("3", 3)]  # bounds from the data
    dd_sort.value = "task"
    first = grid_holder.children[0].children[8]
    assert first.value.endswith(">fix-async-retry-backoff</span>")
    dd_b.value = "text"  # same as A: no grid, no tasks, no crash
    assert "pick two different profiles" in grid_holder.children[0].value and dd_task.value is None
    dd_b.value = "codegraph"
    assert dd_task.value is not None


def test_metric_table_takes_labels_and_precision_from_the_registry():
    from analysis_lib import registry

    df = pd.DataFrame({"profile": ["a"], "total_cost_usd": [0.12345], "elapsed_sec": [95.584], "total_tokens": [62986.0]})
    shown = explore.metric_table(df)
    assert list(shown.columns) == ["profile", registry.metric("total_cost_usd").axis_label, "wall-clock time (s)", "total tokens"]
    assert shown.iloc[0].tolist() == ["a", 0.123, 95.6, 62986.0]  # 3 decimals for USD, 1 for seconds (the registry's)
    means = pd.DataFrame({"A": [1 / 3, 16.333, 95.584]}, index=pd.Index(["success", "tool_calls_count", "elapsed_sec"], name="metric"))
    assert explore.metric_table(means, means=True)["A"].tolist() == ["0.33", "16.3", "95.6"]
