"""The explorer's notebook helpers: integer counts, one profile chosen twice, the static fallback, the
schedule pair, and the widget wiring (a grid cell selects its task and repetition)."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from analysis_lib.core.trial import Trial
from analysis_lib.ingest.load import load_trials
from analysis_lib.report import explore, pair_view
from analysis_lib.study import frames


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
    (_dd_a, dd_b, dd_sort), grid_holder, (dd_task, dd_rep), out = (
        app.children[0].children, app.children[1], app.children[2].children, app.children[3])
    legend, grid = grid_holder.children
    assert "repetition &times; arm" in legend.value and "B&minus;A" in legend.value
    cells = [w for w in grid.children if "pv-cell" in w._dom_classes]
    assert len(cells) == 24 * 3 * 2
    target = cells[2 * 3 * 5 + 3]  # 6th task row, repetition 2, arm B
    task, rep = target.tooltip.split(", ")[1], int(target.tooltip.split("repetition ")[1].split(":")[0])
    target.click()
    assert (dd_task.value, dd_rep.value) == (task, rep)
    # The paired view below follows: the figure (a PNG in a kernel, its repr here), then the pair's header.
    assert len(out.outputs) == 2 and out.outputs[0]["data"]["text/plain"].startswith("<Figure size")
    assert f"{task}, repetition {rep}" in out.outputs[-1]["data"]["text/html"]
    assert list(dd_rep.options) == [("1", 1), ("2", 2), ("3", 3)]  # bounds from the data
    dd_sort.value = "task"
    first = grid_holder.children[1].children[8]
    assert first.value.endswith(">fix-async-retry-backoff</span>")
    dd_b.value = "text"  # same as A: no grid (the paired view alone says why), no tasks, no crash
    assert grid_holder.children == () and dd_task.value is None
    assert [o["data"]["text/html"] for o in out.outputs] == [
        "<p class='pv-message'><b>A and B are both 'text': pick two different profiles to compare.</b></p>"]
    dd_b.value = "codegraph"
    assert dd_task.value is not None


def test_live_output_redraws_when_a_control_changes():
    import ipywidgets as widgets
    from IPython.display import HTML

    from analysis_lib.report.live_output import live_output

    controls = {"n": widgets.IntSlider(value=1), "word": widgets.Dropdown(options=["a", "b"], value="a")}
    out = live_output(lambda n, word: HTML(f"<p>{word * n}</p>"), controls)
    assert [o["data"]["text/html"] for o in out.outputs] == ["<p>a</p>"]
    controls["n"].value, controls["word"].value = 3, "b"
    assert [o["data"]["text/html"] for o in out.outputs] == ["<p>bbb</p>"]  # replaced, not appended


def test_no_output_widget_is_drawn_by_capture():
    """``with out:`` / ``interactive_output`` / ``Output.clear_output`` make papermill's executor answer on the
    kernel's shell channel, and a run then stalls under load (:mod:`analysis_lib.report.live_output`)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    capture = re.compile(r"interactive_output\(|\binteract\(|\bwith (out|view|\w+_out)\b|\.clear_output\(")
    sources = [*root.glob("notebooks/*.py"), *root.glob("analysis_lib/**/*.py")]
    found = [f"{p.relative_to(root)}:{i}" for p in sources
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if capture.search(line) and not line.lstrip().startswith(("#", '"', "``"))]
    assert len(sources) > 50 and found == []


def test_metric_table_takes_labels_and_precision_from_the_registry():
    from analysis_lib.core import registry

    df = pd.DataFrame({"profile": ["a"], "task_id": ["t"], "success": [True], "total_cost_usd": [0.12345],
                       "elapsed_sec": [95.584], "total_tokens": [62986.0]})
    shown = explore.metric_table(df)
    assert list(shown.columns) == ["profile", "task", "success", registry.metric("total_cost_usd").axis_label,
                                   "wall-clock time (s)", "total tokens"]
    # 3 decimals for USD, 1 for seconds, counts whole with thousands separators (the registry's precision)
    assert shown.iloc[0].tolist() == ["a", "t", "yes", "0.123", "95.6", "62,986"]
    means = pd.DataFrame({"A": [1 / 3, 16.333, 108898.0], "B": [1.0, 9.0, 67108.667]},
                         index=pd.Index(["success", "tool_calls_count", "total_tokens"], name="metric"))
    means["difference"] = means["B"] - means["A"]
    table = explore.metric_table(means, means=True)
    assert table.loc["success"].tolist() == ["33.3 %", "100.0 %", "+66.7 pp"]  # a mean of a flag is a pass rate
    assert table.loc["tool calls"].tolist() == ["16.3", "9", "\u22127.3"]  # a real minus, as numbers.difference
    assert table.loc["total tokens"].tolist() == ["108,898", "67,109", "\u221241,789"]
    assert list(table.columns) == ["A", "B", "B \u2212 A"]


def _visible_text(html_text: str) -> str:
    """The text of an HTML fragment (tags and inline images dropped), roughly as a reader sees it."""
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<img[^>]*>", " ", html_text)))


def _raw_ids(text: str) -> list[str]:
    """Metric ids (the registry's that differ from their label, and the CodeCanvas columns) that appear as words in
    ``text``."""
    import re

    from analysis_lib.codecanvas.metrics import METRIC_COLUMNS
    from analysis_lib.core import registry

    ids = [m.id for m in list(registry.METRICS.values()) + list(registry.DERIVED.values()) if m.id != m.label]
    ids += list(METRIC_COLUMNS)
    return [i for i in ids if re.search(rf"(?<![\w-]){re.escape(i)}(?![\w-])", text)]


def test_static_views_name_metrics_by_label_and_explain_the_grid(sample):
    trials, metrics = sample
    cols = ["profile", "task_id", "repetition", "success", "total_tokens", "total_cost_usd", "agent_steps",
            "tool_calls_count", "tool_error_count", "mcp_tool_calls"]
    views = {"explorer": explore.pair_explorer_html(trials, metrics, "text", "codecanvas", True),
             "filter": explore.filter_html(metrics, cols, tasks=("fix-async-retry-backoff",)),
             "timeline": explore.timeline_html(trials, "text", "fix-async-retry-backoff", 1, True),
             "side by side": explore.side_by_side_html(metrics, "fix-async-retry-backoff", "text", "codecanvas")}
    for name, view in views.items():
        text = _visible_text(view)
        assert _raw_ids(text) == [], name
        assert not re.search(r"(?<![\w-])-\d", text), f"{name}: an ASCII minus before a number"
        assert not re.search(r"\d\.\d{4,}", text), f"{name}: a number printed past its registry precision"
    explorer = _visible_text(views["explorer"])
    for words in ("succeeded", "failed", "infrastructure error", "no trial", "repetition × arm", "B−A",
                  "percentage points", "1A", "3B"):
        assert words in explorer, words
    assert "+100.0 pp" in explorer and "wall-clock time (s)" in explorer
    assert "B \u2212 A" in _visible_text(views["side by side"]) and "\u2212" in _visible_text(views["side by side"])
    assert "repetition" in explore.side_by_side_html(metrics, "fix-async-retry-backoff", "text", "codecanvas")
    assert "pick two different profiles" in explore.side_by_side_html(metrics, "fix-async-retry-backoff", "text", "text")


def test_the_raw_id_check_finds_an_id():
    assert _raw_ids("total_tokens, files_read and informed_editing_score") == ["total_tokens", "files_read",
                                                                                 "informed_editing_score"]
    assert _raw_ids("total tokens, fix-async-retry-backoff") == []
