"""Beside intention to treat, end to end: the plan declares it, the CSVs hold it, every report shows the same numbers."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from analysis_lib.cli.results import write_results
from analysis_lib.inference.results import FILES
from analysis_lib.report import numbers as fmt
from analysis_lib.report import paper
from analysis_lib.report.beside_itt import read_beside
from analysis_lib.simulate.full_run import write_full_run
from analysis_lib.simulate.model import Effects
from analysis_lib.simulate.runs import simulate_runs
from analysis_lib.study import plan as P


def _plan_file(tmp_path, **beside) -> str:
    d = P.load_plan().model_dump(mode="json", exclude_none=True)
    d["bootstrap"]["n_resamples"] = 500
    if beside:
        d["beside_itt"] = beside
    path = tmp_path / "plan.yaml"
    path.write_text(P.plan_yaml(d))
    return str(path)


def test_the_section_is_optional_and_leaves_the_plan_hash_alone(sample_runs):
    plan = P.load_plan()
    assert plan.beside_itt is None and plan.beside() == P.BesideItt()
    d = plan.beside()
    assert (d.compliance, d.infrastructure_bounds, d.divergence, d.mediation) == (True, True, True, False)
    assert d.metrics_for_compliance(plan) == ["success", "total_tokens", "total_cost_usd"]
    lock = pd.read_json(sample_runs / "analysis_plan.lock.json", typ="series")
    assert P.plan_hash(plan) == lock["analysis_plan_sha256"]  # the sample's pre-registration still matches
    declared = P.parse_plan({**plan.model_dump(mode="json", exclude_none=True), "beside_itt": {"mediation": True}})
    assert declared.beside().mediation and P.plan_hash(declared) != P.plan_hash(plan)


@pytest.mark.parametrize(("section", "message"), [
    ({"mediators": ["nope"]}, "plan.yaml: invalid analysis plan: beside_itt: mediators[0]: unknown metric 'nope'"),
    ({"compliance_metrics": ["cost_per_success"]}, "compliance_metrics[0]: cost_per_success is not a per-trial metric"),
    ({"cace": True}, "beside_itt.cace: unknown key"),
])
def test_a_bad_section_is_one_line_naming_the_key(section, message):
    with pytest.raises(P.PlanError, match=re.escape(message)):
        P.parse_plan({**P.load_plan().model_dump(mode="json", exclude_none=True), "beside_itt": section}, "plan.yaml")


def _section(text: str, title: str) -> str:
    return text.split(f"### {title}", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]


def test_real_study_report_shows_itt_cace_bounds_and_divergence(codescalebench, tmp_path, run_cli):
    out = tmp_path / "out"
    res = run_cli(codescalebench, "--study", "params/studies/codescalebench.yaml", "--no-llm", "-q", "-o", out,
                  "--plan", _plan_file(tmp_path))
    assert res.returncode == 0, res.stderr
    frames = read_beside(out)
    assert set(frames) == {"compliance", "bounds", "divergence"}  # mediation is not declared by default
    report = (out / "comparison_report.md").read_text()
    assert "## Beside intention to treat" in report and "by assignment (intention to treat)" in report
    comp = frames["compliance"].set_index(["metric", "estimand"])
    # 8 paired tasks, but bustub's two trials never reached the model: no agent attempted them, their MCP use is
    # unknown, and they leave the uptake and the CACE (the bounds below count them). Every mcp trial whose agent ran
    # called MCP (the study's own tool_calls_mcp: 7 of 7), so the CACE is the ITT of the same 7 tasks.
    share = comp.loc[("success", "share_used")]
    assert (share["n_used"], share["n_trials_b"], share["n_tasks"], share["estimate"]) == (7, 7, 7, 1.0)
    for metric in ("success", "total_tokens", "total_cost_usd"):
        itt, cace = comp.loc[(metric, "itt_mean")], comp.loc[(metric, "cace")]
        assert (cace["estimate"], cace["ci_low"], cace["ci_high"]) == pytest.approx(
            (itt["estimate"], itt["ci_low"], itt["ci_high"]), abs=1e-12), metric
        assert cace["interval"].startswith("delta method")  # a share of 1 with no spread: g = 0, no Fieller set
    row = next(r for r in frames["compliance"].itertuples() if r.metric == "success" and r.estimand == "cace")
    cace_text = _section(report, "Effect among trials that used MCP")
    assert f"{fmt.estimate(row)} {fmt.interval(row)}" in cace_text and "100.0 % " in cace_text and "(7 of 7)" in cace_text
    assert "exclusion restriction" in cace_text and "biased" in cace_text and "schemas" in cace_text
    # Bounds: bustub's two trials (one per arm) never reached the model; the planned success estimate is 0.
    b = frames["bounds"].set_index("metric").loc["success"]
    assert (b["n_affected_a"], b["n_affected_b"], b["estimate"]) == (1, 1, 0)
    assert (b["bound_low"], b["bound_high"]) == pytest.approx((-1 / 8, 1 / 8))
    assert "never reached the model ×1" in _section(report, "Infrastructure failures")
    div_text = _section(report, "Where discordant trajectories diverge")
    assert "| mcp vs baseline | mcp | 1 | 1 |" in div_text and "could not be compared" in div_text


def test_sample_report_and_declared_mediation(sample_runs, tmp_path, run_cli):
    out = tmp_path / "out"
    res = run_cli(sample_runs, "--no-llm", "-q", "-o", out, "--plan", _plan_file(tmp_path, mediation=True))
    assert res.returncode == 0, res.stderr
    frames = read_beside(out)
    assert set(frames) == set(FILES)
    comp = frames["compliance"]
    # The sample's trials carry no mcp_used: use is derived from the MCP calls (an MCP call ran).
    shares = comp[(comp["estimand"] == "share_used") & (comp["metric"] == "success")].set_index("profile_b")
    audit = pd.read_csv(out / "design_audit.csv").set_index("arm")
    for arm in ("codegraph", "codecanvas"):
        assert shares.loc[arm, "n_trials_b"] - shares.loc[arm, "n_used"] == audit.loc[arm, "n_zero_mcp_calls"]
    report = (out / "comparison_report.md").read_text()
    for title in ("Effect among trials that used MCP", "Infrastructure failures", "Where discordant trajectories diverge",
                  "Mediation through trajectory behaviour"):
        assert f"### {title}" in report
    assert "sequential ignorability" in _section(report, "Mediation through trajectory behaviour")
    assert report.index("## Beside intention to treat") > report.index("## Primary metrics")
    # Turning everything off removes the companion files of the earlier run.
    res = run_cli(sample_runs, "--no-llm", "-q", "-o", out, "--plan", _plan_file(
        tmp_path, compliance=False, infrastructure_bounds=False, divergence=False))
    assert res.returncode == 0 and read_beside(out) == {}
    assert "### Effect among trials" not in (out / "comparison_report.md").read_text()


def test_results_md_shows_the_same_section(tmp_path):
    simulate_runs(tmp_path / "runs", seed=3, n_tasks=8, repetitions=2, effects=Effects(n_infra_errors=2))
    full = write_full_run(tmp_path / "runs", tmp_path / "results" / "full_run.json")
    out = tmp_path / "RESULTS.md"
    res = write_results(full, out, plan_path=_plan_file(tmp_path), record=False)
    text = out.read_text()
    assert res.refused  # the infrastructure errors have no verdict: accuracy is refused, the rest goes on
    assert "## Beside intention to treat" in text and "### Infrastructure failures" in text
    comp = text.split("### Effect among trials that used MCP", 1)[1].split("###", 1)[0]
    assert "`total_tokens`" in comp and "`success`" not in comp  # the refused outcome is left out here too


def test_paper_gets_a_table_and_macros_from_the_csvs(sample_runs, tmp_path, run_cli):
    out = tmp_path / "out"
    # tokens get a declared support (the per-trial budget); cost none, so its bounds are unbounded
    plan = _plan_file(tmp_path, support={"total_tokens": {"high": 2_000_000}})
    assert run_cli(sample_runs, "--no-llm", "-q", "-o", out, "--plan", plan).returncode == 0
    beside = read_beside(out)
    inputs = paper.PaperInputs(metrics=pd.read_csv(out / "metrics_detail.csv"), comparisons=pd.read_csv(out / "comparisons.csv"),
                               simulated=True, beside=beside, sources={"beside": "results/sample/comparisons"})
    written = paper.write_paper_snippets(inputs, tmp_path / "paper", tmp_path / "figures")
    tex = written["beside_itt"].read_text()
    assert "\\label{tab:cace}" in tex and "\\label{tab:infra-bounds}" in tex and "\u2212" not in tex
    cost = beside["bounds"].query("metric == 'total_cost_usd' and profile_b == 'codegraph'").iloc[0]
    assert cost["note"].startswith("unbounded: no support declared") and "& unbounded & unbounded" in tex
    macros = (tmp_path / "paper" / "snippets" / "macros.tex").read_text()
    row = beside["compliance"].query("metric == 'success' and estimand == 'cace' and profile_b == 'codecanvas'").iloc[0]
    assert f"\\newcommand{{\\CaceSuccessCodecanvasVsTextEst}}{{\\num{{{fmt.tex_number(100 * row.estimate, 1, sign=True)}}}" \
           "\\,pp}" in macros
    assert "\\InfraBoundTotalTokensCodegraphVsTextLow" in macros and "results/sample/comparisons/infra_bounds.csv" in macros
    assert "\\InfraBoundTotalCostUsdCodegraphVsTextLow" not in macros  # no number for an unbounded bound
    assert "## Beside intention to treat" in (tmp_path / "paper" / "paper_snippets.md").read_text()


def test_the_paper_shows_bounds_only_when_a_trial_was_lost(sample_runs, tmp_path, run_cli):
    """A bounds table whose every row lost nothing repeats the planned estimates as both bounds: it is left out."""
    from analysis_lib.report.beside_itt import beside_tex, lost_any

    out = tmp_path / "out"
    assert run_cli(sample_runs, "--no-llm", "-q", "-o", out).returncode == 0
    beside = read_beside(out)
    assert lost_any(beside["bounds"]) and "\\label{tab:infra-bounds}" in beside_tex(beside, True)
    nothing_lost = {**beside, "bounds": beside["bounds"].assign(n_affected_a=0, n_affected_b=0)}
    assert not lost_any(nothing_lost["bounds"]) and "tab:infra-bounds" not in beside_tex(nothing_lost, True)
