"""A sequential benchmark run on scripted agents (real subprocesses): looks, the early stop, resume,
RESULTS.md with the adjusted estimates, and the dry run's looks and boundaries."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from bench_support import manifest_obj, read_log, setup_bench, use_bench, write_manifest

from analysis_lib.bench.runner import run_full

ROOT = Path(__file__).resolve().parents[1]

SEQ_PLAN = {
    "name": "scripted-sequential", "alpha": 0.05,
    "pairing": {"unit": "task", "repetitions": "all", "exclude_infra_errors": True, "baseline": "text"},
    "bootstrap": {"n_resamples": 200, "confidence": 0.95, "seed": 0, "method": "percentile"},
    "tiers": {
        "primary": {"correction": "holm", "metrics": [{"id": "success", "test": "sign_flip"},
                                                      {"id": "total_tokens", "test": "wilcoxon_signed_rank"}]},
        "secondary": {"correction": "fdr_bh", "metrics": [{"id": "tool_calls_count", "test": "wilcoxon_signed_rank"}]},
        "exploratory": {"correction": "none", "metrics": [{"id": "duplicate_reads", "test": "descriptive"}]},
    },
    "sequential": {"looks": 3, "efficacy": "pocock", "stop": "all"},
}
TASKS = {f"fix-{i:02d}": "solved" for i in range(12)}


@pytest.fixture()
def bench(tmp_path, monkeypatch):
    b = setup_bench(tmp_path)
    use_bench(b, monkeypatch)
    monkeypatch.chdir(tmp_path)
    # Only the MCP condition solves the task, with 40 % fewer tokens (jittered per task and run).
    monkeypatch.setenv("FAKE_CLAUDE_ONLY_MCP_SOLVES", "1")
    monkeypatch.setenv("FAKE_CLAUDE_MCP_TOKEN_SCALE", "0.6")
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(SEQ_PLAN))
    b["plan"] = plan
    return b


@pytest.mark.slow  # 16 scripted trials (real agent and evaluator processes) and two looks: ~12 s
def test_sequential_run_stops_at_the_boundary_and_reports_adjusted_estimates(bench, capsys):
    m = write_manifest(bench, manifest_obj(bench, TASKS))
    runs = bench["tmp"] / "runs"
    res = run_full(m, 1, 3, 100.0, output=bench["tmp"] / "full_run.json", runs_dir=runs, analysis_plan=bench["plan"])
    seq = res["sequential"]
    # 12 tasks, looks after 4, 8 and 12. Look 1 cannot reject (4 tasks: the smallest p is 2/2^4). At look 2
    # every sign is the same: sign-flip p = 2/2^8 = 0.0078 (exact), Wilcoxon exact p = 2/2^8, both within the
    # Pocock-type boundary of look 2 at alpha/2 = 0.025 per hypothesis (nominal p about 0.011).
    assert res["status"] == "sequential_stop" and seq["stopped"] and seq["stop_look"] == 2
    assert [lk["tasks"] for lk in seq["looks"]] == [4, 8] and seq["look_tasks"] == [4, 8, 12]
    assert [lk["decision"] for lk in seq["looks"]] == ["continue", "efficacy"]
    look2 = {h["metric"]: h for h in seq["looks"][1]["hypotheses"]}
    assert look2["success"]["p_value"] == pytest.approx(2 / 2**8) and look2["success"]["status"] == "rejected"
    assert look2["success"]["p_value"] <= look2["success"]["nominal_p"]
    assert seq["looks"][0]["hypotheses"][0]["status"] == "continue"
    # only the tasks up to the stop ran; the rest is recorded as not needed
    log = read_log(bench["tmp"] / "claude.log")
    assert len(log) == 16 and res["summary"]["skipped_sequential"] == 8 and res["summary"]["finished"] == 16
    ran = {e["task"] for e in log}
    assert ran == set(seq["task_order"][:8])
    # a resumed run continues from the last look: nothing more runs
    again = run_full(m, 1, 3, 100.0, output=bench["tmp"] / "full_run.json", runs_dir=runs, analysis_plan=bench["plan"],
                     quiet=True)
    assert again["status"] == "sequential_stop" and len(read_log(bench["tmp"] / "claude.log")) == 16

    from analysis_lib.cli.results import write_results

    out = bench["tmp"] / "report" / "RESULTS.md"
    r = write_results(bench["tmp"] / "full_run.json", out, plan_path=bench["plan"])
    text = out.read_text()
    assert r.exit_code == 0, r.messages
    assert "## Sequential design" in text and "stopped at look 2 of 3" in text
    assert "repeated confidence interval" in text and "median-unbiased" in text
    assert "fixed-sample, not adjusted" in text
    adj = r.sequential.set_index("metric")
    tok = adj.loc["total_tokens"]
    # the token change is -40 % by construction (jittered): every interval holds it, the adjusted ones are wider
    assert tok["rci_low"] <= tok["naive_ci_low"] < -40 < tok["naive_ci_high"] <= tok["rci_high"]
    assert tok["mue_ci_low"] < tok["mue"] < tok["mue_ci_high"] and -50 < tok["mue"] < -30

    # the paper: notebook 02's path (the looks recomputed from the trial folders, the estimates adjusted) and
    # notebook 05's (macros, the results paragraph, the Markdown) state the design, the stop and the same numbers
    from analysis_lib.inference.sequential import analyse_run
    from analysis_lib.report import paper
    from analysis_lib.report import sequential as seq_report
    from analysis_lib.study.baseline import profile_pairs
    from analysis_lib.study.layer1 import analyse
    from analysis_lib.study.plan import load_plan

    plan = load_plan(bench["plan"])
    metrics = analyse(runs, None, cache=False, workers=1).metrics
    run_seq = json.loads((runs / "full_run.json").read_text())["sequential"]
    ra = analyse_run(run_seq, metrics, plan, profile_pairs(["text", "codegraph"], baseline="text"))
    assert ra.mismatch == [] and [lk["decision"] for lk in ra.record["looks"]] == ["continue", "efficacy"]
    out_dir = bench["tmp"] / "analysis"
    seq_report.write_outputs(out_dir, ra.record, ra.adjusted, plan.bootstrap.confidence)
    record, adjusted = seq_report.read_outputs(out_dir)
    pd.testing.assert_frame_equal(adjusted.set_index("metric")[["mue", "rci_low", "rci_high"]],
                                  r.sequential.set_index("metric")[["mue", "rci_low", "rci_high"]], check_dtype=False)
    from analysis_lib.inference.comparisons import compare

    comparisons = compare(metrics, plan, [("text", "codegraph")])
    inputs = paper.PaperInputs(metrics=metrics, comparisons=comparisons, baseline="text", sequential=record,
                               sequential_estimates=adjusted, sources={"sequential": "analysis/sequential.json"})
    written = paper.write_paper_snippets(inputs, bench["tmp"] / "paper", bench["tmp"] / "figures")
    macros = {m.name: m.text for m in paper.quoted_macros(inputs)}
    assert (macros["SeqStopLook"], macros["SeqStopTasks"], macros["SeqTasksPlanned"], macros["SeqLooksPlanned"]) == \
        ("2", "8", "12", "3")
    assert macros["SeqStopReason"] == "every primary hypothesis crossed its efficacy boundary"
    assert macros["TotalTokensCodegraphVsTextAdjustedMue"] == f"\\num{{{tok['mue']:+.1f}}}\\,\\%"
    results_tex = written["results"].read_text()
    assert "\\paragraph{Sequential design.}" in results_tex and "\\TotalTokensCodegraphVsTextAdjustedRciLow{}" in results_tex
    assert "not adjusted" in results_tex
    md = written["paper_snippets"].read_text()
    assert "## Sequential design" in md and "stopped at look 2 of 3" in md and "**not adjusted**" in md


@pytest.mark.slow  # 8 scripted trials (real agent and evaluator processes) and one look: ~6 s
def test_futility_bound_stops_a_run_where_mcp_does_not_help(bench, monkeypatch):
    # Both conditions solve every task; MCP costs 30 % more tokens (jittered per task and run): no benefit.
    monkeypatch.delenv("FAKE_CLAUDE_ONLY_MCP_SOLVES")
    monkeypatch.setenv("FAKE_CLAUDE_MCP_TOKEN_SCALE", "1.3")
    plan = {**SEQ_PLAN, "sequential": {"looks": 3, "efficacy": "pocock", "futility": "pocock", "power": 0.8, "stop": "all"}}
    bench["plan"].write_text(yaml.safe_dump(plan))
    m = write_manifest(bench, manifest_obj(bench, TASKS))
    runs = bench["tmp"] / "runs"
    res = run_full(m, 1, 3, 100.0, output=bench["tmp"] / "full_run.json", runs_dir=runs, analysis_plan=bench["plan"],
                   quiet=True)
    seq = res["sequential"]
    assert res["status"] == "sequential_stop" and seq["stop_look"] == 1 and seq["decision"] == "futility"
    assert "crossed the futility bound" in seq["reason"]
    # Look 1 (4 of 12 tasks): success differs on no task (Z = 0); every task used more tokens with MCP, so the
    # exact Wilcoxon p is 2/2^4 in the harmful direction (Z < 0). Each hypothesis, at its Holm share 0.05/2, holds
    # its Z against the Pocock-type beta-spending bound of look 1 of the whole three-look design.
    from analysis_lib.stats import group_sequential as gs

    want = gs.design([1 / 3, 2 / 3, 1.0], 0.025, "pocock", "pocock", beta=0.2).futility[0]
    assert 0.5 < want < 1.0  # an interim bound, well below the efficacy bound (about 2.53)
    hyp = {h["metric"]: h for h in seq["looks"][0]["hypotheses"]}
    assert hyp["success"]["z"] == 0 and hyp["total_tokens"]["p_value"] == pytest.approx(2 / 2**4)
    assert hyp["total_tokens"]["z"] < 0
    for h in hyp.values():
        assert h["status"] == "futile" and h["futility_z"] == pytest.approx(want, abs=1e-6)
    assert res["summary"]["finished"] == 8 and res["summary"]["skipped_sequential"] == 16
    assert len(read_log(bench["tmp"] / "claude.log")) == 8

    from analysis_lib.cli.results import write_results

    out = bench["tmp"] / "report" / "RESULTS.md"
    r = write_results(bench["tmp"] / "full_run.json", out, plan_path=bench["plan"])
    text = out.read_text()
    assert r.exit_code == 0, r.messages
    assert "stopped at look 1 of 3 (4 of 12 tasks): every primary hypothesis crossed its futility bound" in text


@pytest.mark.slow  # 14 scripted trials (real agent and evaluator processes) and three looks: ~8 s
def test_a_final_look_forced_by_the_budget_is_held_at_the_fraction_it_reached(bench, monkeypatch):
    """Twelve tasks planned at four looks (3, 6, 9, 12); every pair costs $0.50 and the guardrail ($3.78 of $4.20)
    stops the run after 7 tasks: the final look is at 7/12 of the information, not 1, and its boundary spends the
    alpha left at that fraction, with the correlation of the looks that happened (0.25, 0.5, 0.583)."""
    import numpy as np
    from scipy import stats as sps

    from analysis_lib.stats import group_sequential as gs

    monkeypatch.delenv("FAKE_CLAUDE_ONLY_MCP_SOLVES")  # both solve every task: nothing is rejected early
    d = dict(SEQ_PLAN, sequential={**SEQ_PLAN["sequential"], "looks": 4})
    bench["plan"].write_text(yaml.safe_dump(d))
    m = write_manifest(bench, manifest_obj(bench, TASKS))
    res = run_full(m, 1, 3, 4.2, output=bench["tmp"] / "full_run.json", runs_dir=bench["tmp"] / "runs",
                   analysis_plan=bench["plan"], quiet=True)
    seq = res["sequential"]
    assert res["status"] == "budget_stop" and res["budget"]["spent_usd"] == pytest.approx(3.5)
    assert seq["look_tasks"] == [3, 6, 9, 12] and [lk["tasks"] for lk in seq["looks"]] == [3, 6, 7]
    assert [lk["fraction"] for lk in seq["looks"]] == pytest.approx([0.25, 0.5, 7 / 12])
    last = seq["looks"][-1]
    assert last["decision"] == "budget" and "information fraction 0.583" in last["reason"]
    tok = next(h for h in last["hypotheses"] if h["metric"] == "total_tokens")
    c = gs.efficacy_bounds(np.array([0.25, 0.5, 7 / 12]), tok["level"], "pocock", final=True)
    assert tok["nominal_p"] == pytest.approx(2 * sps.norm.sf(c[-1]), rel=1e-9)
    up, lo = gs.crossing_probabilities(c, -c, np.array([0.25, 0.5, 7 / 12]))
    assert up.sum() + lo.sum() == pytest.approx(tok["level"], abs=1e-6)  # all of the row's alpha, no more


def test_dry_run_prints_the_looks_and_boundaries(run_cli, tmp_path):
    plan = ROOT / "params" / "analysis_plan_sequential.yaml"
    out = tmp_path / "plan.json"
    res = run_cli(*["bench", "full", "--manifest", str(ROOT / "params" / "example_manifest.json"),
                                    "--runs-per-condition", "3", "--phase-budget-usd", "1200", "--seed", "7",
                                    "--output", str(out), "--dry-run", "--analysis-plan", str(plan)])
    code, stdout, stderr = res.returncode, res.stdout, res.stderr
    assert code == 0, stderr
    # three tasks: looks after 1, 2, 3 and 3 tasks collapse to 1, 2, 3; the bound of one hypothesis at 0.05/2
    assert "sequential design: 3 looks (tasks), obrien-fleming alpha spending" in stdout
    lines = [ln for ln in stdout.splitlines() if re.match(r" +\d +\d+ tasks? ", ln)]
    assert len(lines) == 3 and "success: exact boundaries at each look" in stdout
    obj = json.loads(out.read_text())
    assert obj["sequential"]["look_tasks"] == [1, 2, 3] and obj["sequential"]["family"] == 2
    # beside the fixed design: maximum and expected tasks and spend (the manifest's $1.50 per trial, 6 trials a task)
    fixed, sq = obj["sequential"]["planning"]
    assert "expected tasks and spend (one hypothesis at 0.025" in stdout
    assert [ln.split()[0] for ln in stdout.splitlines() if re.match(r"(fixed|sequential) +\d", ln)] == ["fixed", "sequential"]
    assert fixed["n_max"] == sq["n_max"] == 3 and fixed["spend_max_median"] == pytest.approx(27.0)
    # No planned test can reject with 3 tasks (sign-flip and exact Wilcoxon: smallest p 2/2^3 = 0.25, above every
    # boundary): the design's real power is 0 and it runs every task, where normal theory alone promised 80 % power
    # and 2.6 tasks.
    assert sq["power"] == fixed["power"] == 0 and sq["cannot_reject"] == [1, 2, 3] and fixed["cannot_reject"] == [1]
    assert sq["nominal_power"] == pytest.approx(0.8, abs=1e-6) and sq["expected_n_effect"] == sq["expected_n_null"] == 3
    assert sq["expected_spend_effect"] == pytest.approx(27.0)
    assert "look 3 (3 tasks) cannot reject success (sign_flip: smallest p 0.25), total_tokens (wilcoxon_signed_rank: " \
        "smallest p 0.25)" in stdout and "power 0: no look of that design can reject" in stdout
    # the sequential schedule: each task's pairs back to back
    tasks = [e["task_id"] for e in obj["schedule"]]
    assert all(tasks[i] == tasks[i + 1] or tasks[i] not in tasks[i + 1:] for i in range(len(tasks) - 1))


def test_dry_run_with_looks_by_spend_prints_its_looks(run_cli, tmp_path):
    """``timing: spend`` on the example manifest (three tasks): shares of the guardrail that find no new task done
    add no look (before, the repeated look crashed the dry run), and the schedule's end is the final look."""
    d = yaml.safe_load((ROOT / "params" / "analysis_plan_sequential.yaml").read_text())
    d["sequential"]["timing"] = "spend"
    plan = tmp_path / "spend.yaml"
    plan.write_text(yaml.safe_dump(d))
    args = ["bench", "full", "--manifest", ROOT / "params" / "example_manifest.json", "--runs-per-condition", "3",
            "--seed", "7", "--dry-run", "--analysis-plan", plan, "--output", tmp_path / "plan.json"]
    # A guardrail of $27 (budget $30, the whole schedule's $27): looks at $13.50 and $20.25 spent, then the end.
    res = run_cli(*args, "--phase-budget-usd", "30")
    assert res.returncode == 0, res.stderr
    looks = [ln.split() for ln in res.stdout.splitlines() if re.match(r" +\d +(\$|schedule)", ln)]
    assert "sequential design: 3 looks (spend)" in res.stdout
    assert [x[1] for x in looks] == ["$13.50", "$20.25", "schedule"] and [x[3] for x in looks] == ["0.333", "0.667", "1.000"]
    obj = json.loads((tmp_path / "plan.json").read_text())["sequential"]
    assert obj["look_spend_usd"] == [6.75, 13.5, 20.25, 27.0] and [b["tasks"] for b in obj["boundaries"]] == [1, 2, 3]
    # A guardrail of $1,080: every share lies beyond the schedule's $27, so the one look is the end of the schedule.
    res = run_cli(*args, "--phase-budget-usd", "1200")
    assert res.returncode == 0, res.stderr
    assert "sequential design: 1 look (spend)" in res.stdout and re.search(r"\n +1 +schedule end +1\.000", res.stdout)


def test_plan_sequential_section_is_validated():
    from analysis_lib.study.plan import PlanError, parse_plan

    d = yaml.safe_load((ROOT / "params" / "analysis_plan_sequential.yaml").read_text())
    assert parse_plan(d).sequential.fractions() == [0.25, 0.5, 0.75, 1.0]
    for bad, msg in (({"looks": [0.5, 0.4, 1.0]}, "sequential.looks: looks: fractions must increase"),
                     ({"looks": 12}, "sequential.looks: looks: between 2 and 10 looks"),
                     ({"looks": [0.3, 0.6]}, "with timing: tasks the last look is at 1.0"),
                     ({"efficacy": "haybittle"}, "sequential.efficacy: unknown value 'haybittle'"),
                     ({"lookz": 3}, "sequential.lookz: unknown key")):
        with pytest.raises(PlanError, match=msg.replace("(", r"\(")) as e:
            parse_plan({**d, "sequential": {**d["sequential"], **bad}}, "p.yaml")
        assert "\n" not in str(e.value) and str(e.value).startswith("p.yaml: invalid analysis plan:")
    with pytest.raises(PlanError, match="sequential: a plan with fixed-sequence hypotheses"):
        parse_plan({**d, "hypotheses": [{"id": "success", "claim": "superior"}]}, "p.yaml")


def test_replay_of_a_finished_study_shows_the_stop_and_the_spend_saved():
    from analysis_lib.inference import sequential
    from analysis_lib.simulate.model import Effects, simulate_metrics
    from analysis_lib.study.plan import parse_plan

    d = yaml.safe_load((ROOT / "params" / "analysis_plan_sequential.yaml").read_text())
    d["tiers"]["primary"]["metrics"] = [{"id": "total_tokens", "test": "wilcoxon_signed_rank"}]
    d["bootstrap"]["n_resamples"] = 100
    plan = parse_plan(d)
    m = simulate_metrics(11, 40, 3, ("text", "codegraph"), Effects())  # SIMULATED: -20 % tokens
    order = list(dict.fromkeys(m["task_id"]))
    cost = m.groupby("task_id")["total_cost_usd"].sum()
    r = sequential.replay(m, plan, [("text", "codegraph")], order, cost)
    assert r["stop_look"] < 4 and r["tasks_used"] == r["sizes"][r["stop_look"] - 1] < 40
    assert r["spend_saved"] == pytest.approx(cost.sum() - cost.loc[order[: r["tasks_used"]]].sum())
    assert r["saved_share"] > 0.2 and r["matches"]  # the full run rejects too, in the same direction


@pytest.mark.slow  # reads the 216 sample trials and analyses four looks: ~8 s
def test_replay_command_on_a_finished_run_in_time_order(run_cli, tmp_path):
    """``bench replay`` on the sample runs (SIMULATED): the tasks in the order their first trial started, the looks,
    the stop, the spend saved and the decisions against the full run; the runs folder is only read."""
    import pandas as pd

    from analysis_lib.study.layer1 import analyse

    d = yaml.safe_load((ROOT / "params" / "analysis_plan_sequential.yaml").read_text())
    d["tiers"]["primary"]["metrics"] = [{"id": "total_tokens", "test": "wilcoxon_signed_rank"}]
    d["pairing"]["baseline"] = "text"
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(d))
    runs = ROOT / "runs" / "sample"
    before = sorted((p.relative_to(runs), p.stat().st_mtime_ns) for p in runs.rglob("*"))
    out = tmp_path / "replay.json"
    res = run_cli("bench", "replay", runs, "--analysis-plan", plan, "--output", out, "--workers", "1")
    assert res.returncode == 0, res.stderr
    assert "replay: 24 tasks run by every profile, in time order" in res.stdout
    rep = json.loads(out.read_text())
    assert rep["order"] == "time" and rep["sizes"] == [6, 12, 18, 24] and rep["stop_look"] < 4
    # the task order and the spend, recomputed here from the trials: first start per task; cost of every trial
    m = analyse(runs, None, cache=False, workers=1).metrics
    first = pd.to_datetime(m["started_at"], utc=True).groupby(m["task_id"]).min().sort_values()
    assert rep["task_order"] == list(first.index)
    cost = m.groupby("task_id")["total_cost_usd"].sum()
    used = float(cost.loc[rep["task_order"][: rep["tasks_used"]]].sum())
    assert rep["spend_used_usd"] == pytest.approx(used) and rep["spend_total_usd"] == pytest.approx(float(cost.sum()))
    assert rep["saved_share"] == pytest.approx(1 - used / float(cost.sum())) and rep["saved_share"] > 0
    assert f"would have stopped at look {rep['stop_look']} of 4" in res.stdout and "saved $" in res.stdout
    assert rep["matches"] and all(x["sequential"] == "rejected" for x in rep["decisions"])
    assert sorted((p.relative_to(runs), p.stat().st_mtime_ns) for p in runs.rglob("*")) == before
    # bad input: one line each, exit 2
    bad = run_cli("bench", "replay", runs, "--analysis-plan", plan, "--output", runs / "replay.json")
    assert bad.returncode == 2 and "inside the runs folder" in bad.stderr and not (runs / "replay.json").exists()
    bad = run_cli("bench", "replay", runs, "--analysis-plan", ROOT / "params" / "analysis_plan.yaml")
    assert bad.returncode == 2 and "declares no sequential design" in bad.stderr
    bad = run_cli("bench", "replay", runs, "--analysis-plan", plan, "--order", "schedule")
    assert bad.returncode == 2 and "no run record with a schedule" in bad.stderr
    assert run_cli("bench", "replay", "--help").stdout.count("--") >= 6


@pytest.mark.slow  # 24 scripted trials (real agent and evaluator processes) of a fixed design, then the replay: ~20 s
def test_replay_of_a_fixed_run_in_its_blocked_schedule_order(bench, run_cli):
    """A run of the default (fixed) plan, replayed under the sequential plan in the order of its blocked schedule:
    the design would have stopped at look 2 of 3, as the sequential run of the same agents does."""
    m = write_manifest(bench, manifest_obj(bench, TASKS))
    runs = bench["tmp"] / "runs"
    res = run_full(m, 1, 3, 100.0, output=bench["tmp"] / "full_run.json", runs_dir=runs, quiet=True)
    assert res["status"] == "complete" and "sequential" not in res and res["summary"]["finished"] == 24
    out = bench["tmp"] / "replay.json"
    r = run_cli("bench", "replay", runs, "--analysis-plan", bench["plan"], "--output", out, "--workers", "1")
    assert r.returncode == 0, r.stderr
    rep = json.loads(out.read_text())
    first = sorted(res["trials"], key=lambda t: (t["pair"], t["position"]))
    assert rep["order"] == "schedule" and rep["task_order"] == list(dict.fromkeys(t["task_id"] for t in first))
    assert rep["sizes"] == [4, 8, 12] and rep["stop_look"] == 2 and rep["decision"] == "efficacy"
    assert rep["tasks_used"] == 8 and rep["spend_saved_usd"] == pytest.approx(4 * 2 * 0.25)  # 4 tasks x 2 trials
    assert rep["matches"] and "would have stopped at look 2 of 3 (8 of 12 tasks)" in r.stdout
