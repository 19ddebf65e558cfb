"""The labelling workflow: a blinded, stratified sample of our own trials labelled by people.

The terminal front end runs as a real subprocess with its answers piped into stdin, once per
rater; the report puts inter-human agreement before judge-vs-human agreement.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys

import pytest
from judge_fakes import answer_for

from analysis_lib.judge.analyses import trial_id
from analysis_lib.judge.labelling import LABEL_CLASSES, draw_sample, labelling_report, make_items, outcome_of, study_rows
from analysis_lib.judge.run import run_layer2
from analysis_lib.study.study import study_of_trials


def label_cmd(*args, cwd, answers=None, env=None) -> subprocess.CompletedProcess:
    """``python -m analysis_lib label ARGS`` as a real subprocess, ``answers`` on its stdin."""
    return subprocess.run(
        [sys.executable, "-m", "analysis_lib", "label", *map(str, args)],
        input=answers,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )


def label(runs, csv_path, rater, answers, *extra):
    return label_cmd(
        runs,
        "--rater",
        rater,
        "--labels",
        csv_path,
        "--per-stratum",
        "1",
        "--max-chars",
        "800",
        *extra,
        answers=answers,
        cwd=csv_path.parent,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )


@pytest.mark.slow  # terminal front end as real subprocesses: ~4 s
def test_two_raters_label_a_blinded_stratified_sample_in_the_terminal(sample_runs, tmp_path):
    labels = tmp_path / "labels.csv"
    ann = label(sample_runs, labels, "ann", "1\n" * 40)  # always the first offered class
    assert ann.returncode == 0, ann.stderr
    bob = label(sample_runs, labels, "bob", "nonsense\n" + "2\n" * 40)  # a wrong answer is asked again
    assert bob.returncode == 0, bob.stderr
    assert "not a choice: 'nonsense'" in bob.stdout
    for out in (ann.stdout, bob.stdout):
        assert "6 trials drawn (1 per profile x outcome, seed 0)" in out
        for name in ("codegraph", "codecanvas", "mcp__", "Profile"):
            assert name not in out  # the arm is hidden from people too
    rows = list(csv.DictReader(labels.open()))
    by_rater = {r: [x for x in rows if x["rater"] == r] for r in ("ann", "bob")}
    assert len(by_rater["ann"]) == len(by_rater["bob"]) > 6
    assert all(x["label"] in LABEL_CLASSES[x["analysis"]] for x in rows)
    strata = {(x["trial_id"].split("/")[0], x["trial_id"]) for x in by_rater["ann"]}
    assert {p for p, _ in strata} == {"text", "codegraph", "codecanvas"}
    # The same seed gives both raters the same trials; a second session of ann asks nothing again.
    assert {x["trial_id"] for x in by_rater["ann"]} == {x["trial_id"] for x in by_rater["bob"]}
    again = label(sample_runs, labels, "ann", "1\n" * 40)
    assert "0 labels recorded" in again.stdout
    report = label_cmd(sample_runs, "--labels", labels, "--report", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "| strategy (primary_strategy) | human ann vs human bob (ceiling) |" in report.stdout


def test_sample_is_stratified_seeded_and_report_puts_the_ceiling_before_the_judge(sample_runs, tmp_path, llm_server, no_keys):
    study, trials = study_of_trials(sample_runs)
    rows = study_rows(study.metrics)  # the outcomes the study scored
    sample = draw_sample(trials, rows, per_stratum=2, seed=3)
    assert [trial_id(t) for t in sample] == [trial_id(t) for t in draw_sample(trials, rows, per_stratum=2, seed=3)]
    assert [trial_id(t) for t in sample] != [trial_id(t) for t in draw_sample(trials, rows, per_stratum=2, seed=4)]
    strata = {(t.profile, outcome_of(t, rows)) for t in sample}
    assert strata == {(p, o) for p in ("text", "codegraph", "codecanvas") for o in ("success", "failure")}
    assert len(sample) == 12
    items = make_items(sample, rows, trials, 800)
    assert all("codegraph" not in i.text and "codecanvas" not in i.text for i in items)
    # Two raters: ann says grep_and_fix everywhere, bob agrees on all but the first trial.
    path = tmp_path / "labels.csv"
    rows = ["trial_id,analysis,rater,label"]
    for n, i in enumerate(items):
        rows.append(f"{i.trial_id},strategy,ann,grep_and_fix")
        rows.append(f"{i.trial_id},strategy,bob,{'chaotic' if n == 0 else 'grep_and_fix'}")
    path.write_text("\n".join(rows) + "\n")
    llm_server.default = answer_for  # the judge says grep_and_fix for every trial
    opts = argparse.Namespace(model="openai/loopback-judge", api_base=llm_server.url, quiet=True, seed=0,
                              baseline=study.require_baseline())
    run_layer2(sample, study.metrics, tmp_path / "llm", opts)
    md = labelling_report(path, tmp_path / "llm", reps=200)
    lines = [line for line in md.splitlines() if line.startswith("| strategy")]
    assert [line.split("|")[2].strip() for line in lines] == [
        "human ann vs human bob (ceiling)",
        "judge vs human ann",
        "judge vs human bob",
    ]
    assert lines[0].split("|")[5].strip() == "0.917"  # 11 of 12
    assert lines[1].split("|")[5].strip() == "1.000"


@pytest.mark.slow  # a real `python -m analysis_lib label` subprocess over the sample runs (~12 s of CPU)
def test_a_malformed_label_csv_is_a_one_line_error_naming_the_file(sample_runs, tmp_path):
    bad = tmp_path / "mine.csv"
    bad.write_text("who,what\n1,2\n")
    r = label_cmd(sample_runs, "--labels", bad, "--report", cwd=tmp_path)
    assert r.returncode == 2 and "mine.csv" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # a real `python -m analysis_lib label` subprocess: imports the judge and litellm (~12 s of CPU)
def test_a_missing_runs_folder_is_a_one_line_error(tmp_path):
    r = label_cmd(tmp_path / "nope", "--rater", "x", "--labels", tmp_path / "l.csv", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == f"error: {tmp_path / 'nope'}: no such folder"
    assert not (tmp_path / "l.csv").exists()


def test_label_command_reports_agreement_and_refuses_bad_arguments(tmp_path, run_cli):
    """``python -m analysis_lib label``: --report over a label CSV; a missing rater or folder is exit 2."""
    from analysis_lib.judge.labelling import append_label

    labels = tmp_path / "labels.csv"
    for trial, (ann, bob) in {"t1": ("x", "x"), "t2": ("y", "y"), "t3": ("x", "y"), "t4": ("y", "y")}.items():
        append_label(labels, trial, "failure", "ann", ann)
        append_label(labels, trial, "failure", "bob", bob)
    res = run_cli("label", tmp_path, "--report", "--labels", labels)
    assert res.returncode == 0, res.stderr
    row = next(line for line in res.stdout.splitlines() if "human ann vs human bob" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    # 3 of 4 agree; kappa = (0.75 - 0.5) / (1 - 0.5) with marginals ann 2/2, bob 1/3.
    assert cells[2] == "4" and cells[4] == "0.750" and cells[5].startswith("0.500 ")

    no_rater = run_cli("label", tmp_path)
    assert no_rater.returncode == 2 and "--rater is required" in no_rater.stderr
    missing = run_cli("label", tmp_path / "nowhere", "--rater", "ann")
    assert missing.returncode == 2 and "no such folder" in missing.stderr


def test_every_argument_of_label_has_help(tmp_path):
    from analysis_lib.cli.label import build_parser

    undocumented = [a.dest for a in build_parser()._actions if not a.help]
    assert undocumented == []
    shown = label_cmd("--help", cwd=tmp_path)
    assert shown.returncode == 0
    assert "folder of runs to draw the sample from" in shown.stdout and "what to label for each trial" in shown.stdout
