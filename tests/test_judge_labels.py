"""Judge vs human labels on real third-party traces: TRAIL (SWE-bench) and Who&When.

The traces come through the ``judge_labels`` fixture (../shared/fixtures/real/judge-labels); the
failure-root-cause judge runs through the loopback server with scripted answers, so that the
agreement arithmetic can be checked by hand.
"""

from __future__ import annotations

import argparse
import json

import pytest
from judge_fakes import FAILURE, answer_for

from analysis_lib.core.fileio import read_json
from analysis_lib.core.trial import InputError
from analysis_lib.judge.analyses import trial_id
from analysis_lib.judge.labels import (
    TRAIL_TO_ROOT_CAUSE,
    load_human_labels_csv,
    load_trail,
    load_who_and_when,
    normalise_trail_category,
    trail_root_cause,
)
from analysis_lib.judge.run import run_layer2
from analysis_lib.judge.schemas import FailureAnalysis

pytestmark = pytest.mark.real_fixtures

ROOT_CAUSES = set(FailureAnalysis.model_json_schema()["properties"]["root_cause"]["enum"])


def test_every_trail_swe_category_maps_to_one_of_our_root_causes(judge_labels):
    files = sorted((judge_labels / "trail" / "benchmarking" / "processed_annotations_swe_bench").glob("*.json"))
    assert len(files) == 31
    raw = {e["category"] for f in files for e in read_json(f)["errors"]}
    # The quirks of SOURCES.md sec. 16a: spellings differ, all must land on a mapped category.
    assert len({normalise_trail_category(c) for c in raw}) < len(raw)  # variants merged
    for category in raw:
        assert normalise_trail_category(category) in TRAIL_TO_ROOT_CAUSE, category
    assert set(TRAIL_TO_ROOT_CAUSE.values()) <= ROOT_CAUSES


def test_trail_root_cause_takes_the_highest_impact_error():
    errors = [
        {"category": "Formatting Errors", "impact": "MEDIUM"},
        {"category": "Tool-related", "impact": "HIGH"},
        {"category": "Resource Abuse", "impact": "HIGH"},
    ]
    assert trail_root_cause(errors) == "tool_misuse"  # first of the two HIGH errors
    assert trail_root_cause([]) is None


def test_trail_traces_convert_to_trials_with_steps(judge_labels):
    traces = {t.source[:8]: t for t in load_trail(judge_labels / "trail")}
    assert sorted(traces) == ["2102eea2", "58bfe9dd", "72822db6", "81d7ec04", "a18532f8", "e7bdf7bb", "f12834d0"]
    assert traces["a18532f8"].human_root_cause is None  # the negative control has no error
    assert traces["72822db6"].human_root_cause == "correct_approach_poor_execution"
    t = traces["58bfe9dd"].trial
    agent = [s for s in t.trajectory.steps if s.source == "agent"]
    assert [s.step_id for s in agent] == list(range(1, 11))
    assert "getitem" in agent[0].message and agent[1].observations[0].startswith("Execution logs:")
    # a label's location (span id) can be placed on a step
    assert any("c708be764700c5a6" in s.extra["span_ids"] for s in agent)


def test_who_and_when_files_load_with_their_mapped_labels(judge_labels):
    items = load_who_and_when(judge_labels / "who-and-when")
    assert len(items) == 11
    assert {i.human_root_cause for i in items} <= ROOT_CAUSES
    big = next(i for i in items if i.source == "Hand-Crafted/47.json")
    assert len(big.trial.trajectory.steps) == 68  # question + 67 messages


# The judge's scripted answers: agree with the mapped human label on 4 of the 6 labelled traces.
JUDGE = {
    "2102eea2": "tool_misuse",  # human: tool_misuse
    "58bfe9dd": "misunderstood_task",  # human: knowledge_gap
    "72822db6": "correct_approach_poor_execution",  # human: same
    "81d7ec04": "knowledge_gap",  # human: misunderstood_task
    "a18532f8": "premature_termination",  # no human label (negative control)
    "e7bdf7bb": "knowledge_gap",  # human: same
    "f12834d0": "knowledge_gap",  # human: same
}


def test_failure_judge_on_trail_traces_agreement_with_humans(judge_labels, llm_server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    traces = load_trail(judge_labels / "trail")
    trials = [t.trial for t in traces]
    labels = tmp_path / "human.csv"
    lines = ["trial_id,label,analysis"] + [f"{trial_id(t.trial)},{t.human_root_cause},failure" for t in traces if t.human_root_cause]
    labels.write_text("\n".join(lines) + "\n")
    assert len(load_human_labels_csv(labels)) == 6

    def answer(body):
        if body["response_format"]["json_schema"]["name"] == "FailureAnalysis":
            text = body["messages"][-1]["content"]
            tid = next(k for k in JUDGE if f"Task: {k}" in text)
            return json.dumps({**FAILURE, "root_cause": JUDGE[tid]})
        return answer_for(body)

    llm_server.default = answer
    opts = argparse.Namespace(model="openai/loopback-judge", api_base=llm_server.url, human_labels=str(labels), quiet=True, seed=0)
    summary = run_layer2(trials, None, tmp_path, opts)
    assert summary["failed_analyses"] == []
    fail = json.loads((tmp_path / "failure_analyses.json").read_text())
    assert fail["n_ok"] == 7
    # The condensed prompts are much smaller than the raw traces (each 0.3-1.2 MB of spans).
    assert fail["condensation"]["ratio"] < 0.8

    md = (tmp_path / "judge_agreement.md").read_text()
    row = next(line for line in md.splitlines() if "judge vs human labels" in line and line.startswith("| failure"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    # By hand: p_o = 4/6; marginals human {KG 3, TM 1, CAPE 1, MT 1}, judge {KG 3, TM 1, CAPE 1, MT 1}
    # -> p_e = (9 + 1 + 1 + 1) / 36 = 1/3; kappa = (2/3 - 1/3) / (1 - 1/3) = 0.5.
    # Krippendorff: n = 12 values, 4 off-diagonal coincidences, sum_{c!=k} n_c n_k = 144 - (36+4+4+4) = 96
    # -> alpha = 1 - 11 * 4 / 96 = 0.5417.
    # Gwet's AC1: pi = {KG 1/2, TM, CAPE, MT 1/6 each}, q = 4 -> p_e = (1/4 + 3 * 5/36) / 3 = 2/9;
    # AC1 = (2/3 - 2/9) / (7/9) = 0.5714. Each value carries a bootstrap interval around it.
    assert cells[2] == "6" and cells[3] == "0 / 0" and cells[4] == "0.667"
    assert cells[5].startswith("0.500 [") and cells[6].startswith("0.542 [") and cells[7].startswith("0.571 [")
    lo, hi = (float(x) for x in cells[5].split("[")[1].rstrip("]").split(","))
    assert lo < 0.5 < hi
    assert "## Confusion matrix, failure (root_cause)" in md


def test_human_labels_csv_errors_name_the_file(tmp_path):
    bad = tmp_path / "labels.csv"
    bad.write_text("id,lab\n1,x\n")
    with pytest.raises(InputError, match="labels.csv.*trial_id and label"):
        load_human_labels_csv(bad)


def test_agreement_report_says_when_a_bootstrap_interval_is_too_narrow_to_trust():
    from analysis_lib.judge.agreement import agreement_row
    from analysis_lib.judge.run import FEW_UNITS, Layer2Options, agreement_md

    labels = ["a", "b", "a", "c", "b", "a", "a", "b", "c", "a", "b", "a", "c", "a", "b", "a", "b"]  # 17 units
    few = agreement_row("failure (root_cause)", "judge vs human labels", labels, labels[::-1], reps=200)
    text = agreement_md([few], Layer2Options(), 1, {})
    assert few["units"] == 17 < FEW_UNITS and "**Few units:**" in text and "as few as 17" in text
    many = agreement_row("failure (root_cause)", "judge vs human labels", labels * 2, labels[::-1] * 2, reps=200)
    assert "**Few units:**" not in agreement_md([many], Layer2Options(), 1, {})
