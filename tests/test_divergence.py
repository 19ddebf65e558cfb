"""Where discordant trajectories first part ways: the definition, the sample runs and real trajectories."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from analysis_lib.core.trial import Step, ToolCall, Trajectory
from analysis_lib.inference.beside_itt import divergence as DV
from analysis_lib.inference.comparisons import usable_trials
from analysis_lib.ingest.atif import read_trajectory
from analysis_lib.ingest.load import load_trials
from analysis_lib.metrics.actions import Action, actions
from analysis_lib.metrics.trials_table import relative_to_runs
from analysis_lib.study.layer1 import analyse
from analysis_lib.study.study import Study


def _traj(*calls: tuple[str, dict]) -> Trajectory:
    steps = [Step(1, "user", message="fix it")]
    steps += [Step(i + 2, "agent", tool_calls=[ToolCall(i + 2, name, args)]) for i, (name, args) in enumerate(calls)]
    return Trajectory("ATIF-v1.6", steps=steps)


def test_an_action_is_the_tool_and_its_target():
    acts = actions(_traj(("Read", {"file_path": "./src/a.py"}), ("Edit", {"file_path": "src/a.py", "old_string": "x"}),
                            ("Bash", {"command": "pytest -q tests"}), ("Bash", {"command": "cat src/b.py"}),
                            ("Grep", {"pattern": "foo"}), ("mcp__codegraph__search_code", {"query": "foo"})))
    assert [a.key() for a in acts] == [("Read", "src/a.py"), ("Edit", "src/a.py"), ("Bash", "pytest"), ("Bash", "src/b.py"),
                                       ("Grep", ""), ("mcp__codegraph__search_code", "")]
    assert [a.mcp for a in acts] == [False] * 5 + [True]
    assert actions(None) is None


def test_first_divergence_is_the_first_differing_position_or_the_end_of_the_shorter():
    read = lambda p: Action("Read", p, False)  # noqa: E731
    a = [read("x"), read("y"), Action("Edit", "y", False)]
    assert DV.first_divergence(a, list(a)) is None
    assert DV.first_divergence(a, [read("x"), read("z")]) == 2
    assert DV.first_divergence(a, [read("x"), read("z")], names_only=True) == 3  # same tools up to the shorter's end
    assert DV.first_divergence(a, a[:2]) == 3
    assert DV.first_divergence([], a) == 1


@pytest.fixture(scope="module")
def study(sample_runs, tmp_path_factory):
    return analyse(sample_runs, tmp_path_factory.mktemp("sample"), cache=False)


@pytest.fixture(scope="module")
def sample(study):
    return study.metrics


def test_sample_discordant_pairs_diverge_where_the_full_trajectories_say(study, sample, sample_runs):
    offered = {"text": False, "codegraph": True, "codecanvas": True}
    div = DV.divergence_pairs(sample, [("text", "codegraph")], study.actions, offered)
    trials = usable_trials(sample)
    wins = trials.assign(win=trials["success"].astype(bool)).set_index(["profile", "task_id", "repetition"])["win"]
    # Every discordant repetition is listed once, with the arm that passed.
    expected = {(t, r) for (p, t, r), w in wins.items() if p == "text" and ("codegraph", t, r) in wins
                and wins[("codegraph", t, r)] != w}
    assert set(zip(div["task_id"], div["repetition"], strict=True)) == expected and len(div) == len(expected) > 0
    # Recompute from the full trajectories of load_trials (every trial read, not only the discordant ones).
    full, _ = load_trials(sample_runs)
    seqs = {relative_to_runs(t.trial_path, sample_runs): actions(t.trajectory) for t in full}
    for r in div.itertuples():
        sa, sb = seqs[r.trial_path_a], seqs[r.trial_path_b]
        assert r.diverge_at == DV.first_divergence(sa, sb) and r.n_calls_a == len(sa)
        at = r.diverge_at - 1
        assert r.mcp_call == (at < len(sb) and sb[at].mcp)
    table = DV.divergence_table(div)
    assert list(table.columns) == DV.TABLE_COLUMNS
    assert table["n_pairs"].sum() == len(div) == (table["n_at_mcp_call"] + table["n_at_other_call"]).sum()


def test_real_trajectories_become_actions_on_files(real_fixtures):
    path = Path(real_fixtures, "skillsbench-trajectories/shenghan/gemini-cli/gemini3flash/noskills/"
                "gemini-cli-gemini3flash-noskills-3d-scan-calc-a2c944/3d-scan-calc__35QwY5n/agent/trajectory.json")
    acts = actions(read_trajectory(path))
    assert len(acts) == 14 and acts[0].key() == ("read_file", "material_density_table.md")
    assert ("write_file", "calculate_mass.py") in [a.key() for a in acts] and not any(a.mcp for a in acts)


def test_real_study_discordant_pairs_without_trajectories_are_counted_as_such(codescalebench, tmp_path):
    res = analyse(codescalebench, tmp_path, cache=False, design="params/studies/codescalebench.yaml")
    div = DV.divergence_pairs(res.metrics, [("baseline", "mcp")], res.actions, {"baseline": False, "mcp": True})
    # The slice's two discordant tasks: pytorch-optimizer (only mcp passed), vscode (only baseline passed); the
    # source kept no trajectory for either side.
    assert sorted(zip(div["task_id"], div["passed"], strict=True)) == [
        ("pytorch-optimizer-foreach-refac-001", "mcp"), ("vscode-stale-diagnostics-feat-001", "baseline")]
    assert (div["status"] == "no trajectory").all()
    assert DV.divergence_table(div)["n_no_trajectory"].sum() == 2


def test_the_divergence_reads_no_file_the_study_did_not_read_once(sample_runs, tmp_path):
    """Each trial's actions are worked out when it is read for its metrics: with the runs folder gone, a study loaded
    from its output folder gives the same divergence table (and the same actions) as the study that read them."""
    runs = tmp_path / "runs"
    shutil.copytree(sample_runs, runs)
    opened = analyse(runs, tmp_path / "out", cache=False, workers=1)
    shutil.rmtree(runs)
    loaded = Study.load(tmp_path / "out")
    assert loaded.actions == opened.actions and len(opened.actions) == len(opened.metrics)
    offered = {"text": False, "codegraph": True, "codecanvas": True}
    a = DV.divergence_pairs(opened.metrics, [("text", "codegraph")], opened.actions, offered)
    b = DV.divergence_pairs(loaded.metrics, [("text", "codegraph")], loaded.actions, offered)
    assert (a["status"] == "diverged").any()
    assert a.drop(columns=["mcp_call"]).equals(b.drop(columns=["mcp_call"])) and a["mcp_call"].equals(b["mcp_call"])
