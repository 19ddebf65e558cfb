"""A real public A/B study end to end: CodeScaleBench's paired Harbor trials (../shared/fixtures/real-ab).

Claude Code + Haiku 4.5 without (``baseline``) and with (``mcp``) a Sourcegraph MCP server, run as
separate Harbor jobs of one agent and model; the MCP arm names its tasks ``mcp_<task>_<random>``.
The study's own per-trial ``task_metrics.json`` is the reference the analysis must agree with.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis_lib import analyse
from analysis_lib.report.audit import read_audit

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "params" / "studies" / "codescalebench.yaml"


def _tree_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()}


def _study_metrics(runs: Path) -> pd.DataFrame:
    """One row per trial with the study's own task_metrics.json: arm, task folder, status, reward, tokens."""
    rows = []
    for path in sorted(runs.rglob("task_metrics.json")):
        tm = json.loads(path.read_text())
        rel = path.parent.relative_to(runs).parts  # group/suite/arm/task/trial
        rows.append({"arm": rel[2], "task_id": rel[3], "passed": tm["status"] == "passed", "reward": tm["reward"],
                     "input": tm["input_tokens"] + tm["cache_read_tokens"] + tm["cache_creation_tokens"],
                     "output": tm["output_tokens"], "trial_path": "/".join(rel)})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def study_result(codescalebench, tmp_path_factory):
    before = _tree_digest(codescalebench)
    out = tmp_path_factory.mktemp("csb")
    result = analyse(codescalebench, out, design=STUDY, workers=1, cache=False)
    assert _tree_digest(codescalebench) == before  # the runs are read-only input
    return result, out


def test_without_a_study_file_the_arms_pool_with_a_warning_naming_what_differs(codescalebench):
    result = analyse(codescalebench, None, workers=1, cache=False)
    assert result.metrics["profile"].nunique() == 1 and len(result.metrics) == 18
    pooled = [f.message for f in result.audit.findings if f.check == "pooled"]
    assert len(pooled) == 1
    assert "environment.override_storage_mb" in pooled[0]
    assert "8 tasks appear under two names" in pooled[0] and "mcp_" in pooled[0]
    assert "sibling folders 'baseline' and 'mcp'" in pooled[0] and "--study" in pooled[0]


def test_the_study_file_forms_two_arms_and_pairs_eight_tasks(study_result):
    result, _ = study_result
    m = result.metrics
    assert m.groupby("profile").size().to_dict() == {"baseline": 9, "mcp": 9}
    assert not m["task_id"].str.startswith("mcp_").any()
    arms = result.audit.arms.set_index("arm")
    assert arms.loc["mcp", "n_pairs_complete"] == 8 and arms.loc["mcp", "n_pairs_incomplete"] == 2
    assert result.baseline.name == "baseline" and result.baseline.source == "the study file"


def test_pass_rates_and_mean_rewards_equal_the_studys_own_metrics(study_result, codescalebench):
    result, _ = study_result
    ref = _study_metrics(codescalebench)
    m = result.metrics.assign(path=result.metrics["trial_path"].astype(str))
    both = m.merge(ref, left_on="path", right_on="trial_path", suffixes=("", "_study"))
    assert len(both) == 16  # every trial with its task_metrics.json
    for arm, sub in both.groupby("profile"):
        assert sub["success"].astype(bool).mean() == pytest.approx(sub["passed"].mean(), abs=1e-12), arm
        assert sub["reward"].mean() == pytest.approx(sub["reward_study"].mean(), abs=1e-12), arm
    # Over all trials (the two without task_metrics.json included): the study's summary, expected.json.
    expected = json.loads((codescalebench / "expected.json").read_text())["per_arm"]
    for arm, sub in m.groupby("profile"):
        assert sub["success"].astype(bool).mean() == pytest.approx(expected[arm]["success_rate_all_trials"], abs=1e-12)
        assert sub["reward"].mean() == pytest.approx(expected[arm]["mean_reward_all_trials"], abs=1e-12)


def test_tokens_are_the_studys_counts_once_per_call_and_say_their_source(study_result, codescalebench):
    result, _ = study_result
    ref = _study_metrics(codescalebench).set_index("trial_path")
    m = result.metrics.set_index(result.metrics["trial_path"].astype(str))
    with_study = m.loc[ref.index]
    counted = with_study[with_study["token_source"] == "study_metrics"]
    assert len(counted) == 14  # the two rate-limited trials keep their (zero) trajectory counts
    assert (counted["total_input_tokens"] == ref.loc[counted.index, "input"]).all()
    assert (counted["total_output_tokens"] == ref.loc[counted.index, "output"]).all()
    assert set(with_study["token_source"]) == {"study_metrics", "trajectory"}
    # Harbor's result.json repeats usage per content block: 2.0-2.8 times the counts once per call.
    ratio = counted["other_input_tokens"] / counted["total_input_tokens"]
    assert (counted["other_token_source"] == "harbor_result").all() and ratio.between(2.0, 2.8).all()


def test_the_audit_lists_the_slices_real_problems(study_result):
    result, out = study_result
    found = {f.check: f for f in result.audit.findings}
    assert "element-web-unread-indicators-diverge-fix-001" in found["coverage"].message  # baseline only
    assert "webclients-excessive-repeated-api-fix-001" in found["coverage"].message  # mcp only
    never = [f for f in result.audit.findings if "never reached the model" in f.message]
    assert never and "You've hit your limit" in never[0].message and "baseline 1, mcp 1" in never[0].message
    assert "mcp was offered MCP tools" in found["mcp_use"].message
    tokens = [f.message for f in result.audit.findings if f.check == "tokens"]
    assert any("result.json" in t and "run high" in t for t in tokens)  # two trials have Harbor's counts only
    assert any("baseline 2.14×" in t and "mcp 2.23×" in t for t in tokens)  # the disagreement per arm
    arms = result.audit.arms.set_index("arm")
    assert arms["mcp_offered"].tolist() == [False, True]  # baseline, mcp: as the study file declares
    assert arms.loc["baseline", "n_never_reached_model"] == 1 and arms.loc["baseline", "span_hours"] < 2
    written = read_audit(out)
    assert written is not None and len(written[0]) == 2 and len(written[1]) == len(result.audit.findings)


@pytest.mark.slow
def test_the_paper_pipeline_runs_on_the_real_study(codescalebench, tmp_path):
    """``make paper PARAMS=params/codescalebench.yaml``: notebooks 00-05 and real TeX, in a copy of the project."""
    from analysis_lib.cli import pipeline

    if os.environ.get("CI") == "true":
        assert shutil.which("pdflatex"), "CI=true but pdflatex is missing: .ci/run installs TeX"
    root = tmp_path / "project"
    shutil.copytree(ROOT / "notebooks", root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copytree(ROOT / "params", root / "params")
    (root / "paper").mkdir()
    shutil.copyfile(ROOT / "paper" / "main.tex", root / "paper" / "main.tex")
    params = (ROOT / "params" / "codescalebench.yaml").read_text()
    yaml_params = params.replace("runs_dir: ../shared/fixtures/real-ab/codescalebench",
                                 f"runs_dir: {os.path.relpath(codescalebench, root)}")
    (root / "params" / "codescalebench.yaml").write_text(yaml_params)
    pipeline.run_pipeline(root / "params" / "codescalebench.yaml", root, quiet=True, latex=shutil.which("pdflatex") is not None)
    paper_dir = root / "results" / "codescalebench" / "paper"
    snippets = {p.name: p.read_text() for p in (paper_dir / "snippets").glob("*.tex")}
    assert not any("SIMULATED" in text for text in snippets.values())
    assert "Real runs of a public study" in snippets["data.tex"] and "CodeScaleBench" in snippets["data.tex"]
    assert "tab:design-audit" in snippets["design_audit.tex"] and "never reached the model" in snippets["design_audit.tex"]
    assert (root / "results" / "codescalebench" / "notebooks" / "05_paper.ipynb").exists()
    # One study everywhere: notebook 01's study, the comparisons and the paper's macros count the same 13 of 18
    # passes (reward > 0) of the same two arms against the same baseline.
    study = json.loads((root / "results" / "codescalebench" / "analytics" / "study.json").read_text())
    assert (study["arms"], study["baseline"], study["success_rule"]) == (["baseline", "mcp"], "baseline", "reward > 0")
    detail = pd.read_csv(root / "results" / "codescalebench" / "analytics" / "metrics_detail.csv")
    assert (len(detail), int(detail["success"].sum())) == (18, 13)
    comp = pd.read_csv(root / "results" / "codescalebench" / "comparisons" / "comparisons.csv")
    assert set(zip(comp["profile_a"], comp["profile_b"], strict=True)) == {("baseline", "mcp")}
    macros = snippets["macros.tex"]
    successes = [int(m) for m in re.findall(r"\\newcommand\{\\Successes[A-Za-z]+\}\{(\d+)\}", macros)]
    assert sorted(successes) == [6, 7] and sum(successes) == 13, macros
    # Notebook 00 plans no benchmark for runs made elsewhere: no other benchmark's dry-run plan in this study's results.
    assert not (root / "results" / "codescalebench" / "benchmark").exists()
    # The limitations name what the audit found on this slice, each once. Every mcp trial whose agent ran called an
    # MCP tool (the one that never reached the model is not an attempt): no "offered and never called".
    limits = snippets["discussion.tex"]
    assert "never reached the model" in limits and "one arm only" in limits and "never called" not in limits
    assert "SIMULATED" not in limits and "simulated" not in limits
    # Honest words: no "pre-registered" (the plan was recorded after the runs); the conclusion names direction and
    # size; the success comparison (8 pairs, 2 discordant) is uninformative; the mean reward stands beside pass/fail.
    text = "\n".join(snippets.values())
    assert "pre-registered" not in text and "Pre-registration" not in text
    macros = snippets["macros.tex"]
    assert "\\newcommand{\\TotalTokensMcpVsBaselineEst}{\\num{+96.8}\\,\\%}" in macros
    assert "\\newcommand{\\TotalCostUsdMcpVsBaselineEst}{\\num{+64.9}\\,\\%}" in macros
    conclusion = snippets["conclusion.tex"]
    assert "total tokens of \\texttt{mcp} rose by \\TotalTokensMcpVsBaselineEst{}" in conclusion
    assert "cost per trial of \\texttt{mcp} rose by \\TotalCostUsdMcpVsBaselineEst{}" in conclusion
    assert "resolve rate (task majority) of \\texttt{mcp} is uninformative at this size" in conclusion
    assert "cannot reject at this size: the smallest p McNemar exact can give with 2 discordant tasks of 8 pairs" in \
        snippets["comparisons.tex"]
    assert "\\newcommand{\\MeanRewardBaseline}{\\num{0.600}}" in macros and "\\newcommand{\\MeanRewardMcp}{\\num{0.464}}" in macros
    assert "\\newcommand{\\RewardMcpVsBaselineMeanPairedTEst}{\\num{-0.027}}" in macros
    assert "\\MeanRewardBaseline{}" in snippets["results.tex"] and "\\RewardMcpVsBaselineMeanPairedTEst{}" in snippets["results.tex"]
    # The Method is the study's: its title, agent, model and treatment, its success rule, where each number came from
    # per arm (the study's metrics 7, Harbor 1, the trajectory 1), what the time measures and the token policy.
    assert "\\newcommand{\\StudyTitle}{Claude Code with and without a Sourcegraph MCP server" in snippets["title.tex"]
    method = snippets["method.tex"]
    assert "agent \\texttt{claude-code} with model \\texttt{anthropic/claude-haiku-4-5-20251001}" in method
    assert "a Sourcegraph MCP server (code search and navigation" in method and "baseline-local-direct job" in method
    assert "its reward is above 0, so any partial credit is a pass" in method and "\\texttt{reward > 0}" in method
    for arm in ("baseline", "mcp"):
        assert (f"\\texttt{{{arm}}}: Harbor's result.json for 1 of 9 trials, the study's own per-trial metrics for 7 of 9 "
                "trials and the trajectory (each API call counted once) for 1 of 9 trials") in method
    assert "Wall-clock time is the agent's execution phase" in method
    assert "The tokens and cost of 2 trials (1 in \\texttt{baseline} and 1 in \\texttt{mcp}) are left out" in method
    assert "from each trial's trajectory" not in (paper_dir / "main.tex").read_text()
    # One token policy: the two Harbor-only trials' costs (one estimated from 8.8 M tokens) leave Table 2's cost per
    # success, as they left the comparisons, and the table says so.
    rates = pd.read_csv(root / "results" / "codescalebench" / "comparisons" / "profile_rates.csv").set_index("profile")
    kept = detail[detail["token_source"] != "harbor_result"]
    for arm in ("baseline", "mcp"):
        sub = kept[(kept["profile"] == arm) & kept["total_cost_usd"].notna()]
        assert rates.loc[arm, "cost_per_success"] == pytest.approx(sub["total_cost_usd"].sum() / sub["success"].sum())
    assert "are left out, as everywhere" in snippets["rates.tex"] and "are left out, as everywhere" in snippets["profile_summary.tex"]
    if shutil.which("pdflatex"):
        assert (paper_dir / "main.pdf").stat().st_size > 10_000
        assert "Overfull \\hbox" not in (paper_dir / "main.log").read_text(errors="replace")  # 7-digit token counts fit


@pytest.mark.slow  # a papermill run of the explorer (about 20 s)
def test_the_explorer_reads_the_study_file_and_opens_on_its_two_arms(codescalebench, tmp_path):
    import papermill

    out = tmp_path / "explore.ipynb"
    papermill.execute_notebook(str(ROOT / "notebooks" / "explore.ipynb"), str(out), progress_bar=False,
                               parameters={"project_root": str(ROOT), "runs_dir": str(codescalebench),
                                           "study_file": str(STUDY), "output_dir": str(tmp_path / "results")},
                               execution_timeout=300)
    text = out.read_text(encoding="utf-8")
    # The study's success rule (reward > 0) scores the trials, as on the command line and in the paper: 13 of 18.
    assert ("18 trials, 13 passed (success: reward > 0), 2 profiles, 10 tasks, 0 unreadable; "
            "A (baseline): baseline (the study file)") in text
    assert "A-vs-B explorer (baseline vs mcp)" in text


def test_a_trial_that_never_reached_the_model_has_unknown_process_and_mcp_use(study_result, codescalebench):
    result, _ = study_result
    m = result.metrics
    never = m[m["never_reached_model"].notna()]
    assert sorted(never["profile"]) == ["baseline", "mcp"] and set(never["task_id"]) == {"bustub-hyperloglog-impl-001"}
    for col in ("mcp_tool_calls", "tool_calls_count", "agent_steps", "total_steps", "files_edited", "mcp_used",
                "mcp_calls_by_tool"):
        assert never[col].isna().all(), col  # unknown, not 0: no agent attempted the task
    assert (never["reward"] == 0).all() and (never["total_tokens"] == 0).all()  # as the source recorded them
    # Every mcp trial whose agent ran called MCP (the study's own tool_calls_mcp: 7 of 7, 161 calls in all).
    mcp = m[(m["profile"] == "mcp") & m["mcp_tool_calls"].notna()]
    assert len(mcp) == 7 and mcp["mcp_used"].astype(bool).all()
    assert mcp["mcp_tool_calls"].mean() == pytest.approx(23.0) and mcp["mcp_tool_calls"].sum() == 161
    audit = result.audit.arms.set_index("arm")
    assert (audit.loc["mcp", "n_mcp_known"], audit.loc["mcp", "n_zero_mcp_calls"]) == (7, 0)
    use = next(f for f in result.audit.findings if f.check == "mcp_use")
    assert use.severity == "note" and "all 7 trials with a call record called an MCP tool" in use.message
    assert "1 trial never reached the model" in use.message


def test_per_tool_mcp_counts_and_files_modified_come_from_the_studys_metrics(study_result, codescalebench):
    from analysis_lib.inference.comparisons import compare
    from analysis_lib.study.plan import load_plan

    result, _ = study_result
    m = result.metrics.set_index(result.metrics["trial_path"].astype(str))
    tools = [c for c in m.columns if c.startswith("mcp_calls__")]
    for path in codescalebench.rglob("task_metrics.json"):
        tm = json.loads(path.read_text())
        row = m.loc[str(path.parent.relative_to(codescalebench))]
        by_name = tm["tool_calls_by_name"]
        if by_name is None:  # the rate-limited trials: nothing recorded
            continue
        mcp = {k: v for k, v in by_name.items() if k.startswith("mcp__")}
        assert sum(mcp.values()) == tm["tool_calls_mcp"] == row["mcp_tool_calls"]
        assert {c: row[c] for c in tools if row[c]} == {"mcp_calls__" + k.removeprefix("mcp__"): v for k, v in mcp.items()}
        assert (row["files_edited"] == tm["files_modified"]) or (tm["files_modified"] is None and pd.isna(row["files_edited"]))
    assert m[tools].sum().sum() == 161
    # The plan's exploratory per-tool family describes those counts; none of its rows says no tool was called.
    table = compare(result.metrics, load_plan(ROOT / "params" / "analysis_plan.yaml"), [("baseline", "mcp")])
    per_tool = table[table["metric"].str.startswith("mcp_calls__")]
    assert "mcp_calls__sourcegraph__sg_keyword_search" in set(per_tool["metric"]) and per_tool["estimate"].notna().all()
    assert not table["note"].fillna("").str.contains("no MCP tool was called").any()


def test_partial_credit_reports_mean_reward_per_arm_and_the_paired_mean_difference(study_result):
    """The slice scores partial credit (rewards 0.167, 0.53, 0.7, 0.833...): beside pass/fail, the mean reward."""
    from scipy import stats as sps

    from analysis_lib.inference.comparisons import compare, partial_credit
    from analysis_lib.inference.rates import profile_rates
    from analysis_lib.study.plan import load_plan

    result, _ = study_result
    m = result.metrics
    assert partial_credit(m)
    rates = profile_rates(m, n_boot=200).set_index("profile")
    for arm, mean in (("baseline", 0.600), ("mcp", 0.464)):
        rewards = m.loc[m["profile"] == arm, "reward"].astype(float)
        ci = sps.ttest_1samp(rewards, 0).confidence_interval()  # one trial per task: the one-sample t interval
        assert rates.loc[arm, "mean_reward"] == pytest.approx(mean, abs=5e-4)
        assert (rates.loc[arm, "mean_reward_low"], rates.loc[arm, "mean_reward_high"]) == pytest.approx(
            (ci.low, ci.high), rel=1e-9)
    table = compare(m, load_plan(ROOT / "params" / "analysis_plan.yaml"), [("baseline", "mcp")])
    rows = table[table["tier"] == "partial_credit"].set_index("test")
    assert list(rows.index) == ["paired t", "sign-flip randomisation"] and (rows["metric"] == "reward").all()
    assert (rows["n_pairs"] == 8).all() and rows["estimate"].to_numpy() == pytest.approx(-0.027083, abs=1e-6)
    assert rows["p_adjusted"].isna().all() and rows["significant"].isna().all()  # described beside, no verdict
    pairs = m.pivot_table(index="task_id", columns="profile", values="reward").dropna()
    ref = sps.ttest_rel(pairs["mcp"], pairs["baseline"])  # scipy: t = -0.369, p = 0.7233
    ci = ref.confidence_interval()
    t_row = rows.loc["paired t"]
    assert (t_row["p_value"], t_row["ci_low"], t_row["ci_high"]) == pytest.approx((ref.pvalue, ci.low, ci.high), rel=1e-9)
    d = (pairs["mcp"] - pairs["baseline"]).to_numpy()
    perm = sps.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf)  # exact over 2^8 signs
    assert rows.loc["sign-flip randomisation", "p_value"] == pytest.approx(perm.pvalue, abs=1e-12)


def test_the_report_on_the_slice_says_what_its_tests_can_say(codescalebench, tmp_path, run_cli):
    """The plan was recorded after the runs (not a pre-registration); 8 pairs with 2 discordant cannot reject; 7 pairs
    give tokens the smallest p the Wilcoxon test can; an undefined secondary row says it counted as p = 1."""
    out = tmp_path / "out"
    res = run_cli(codescalebench, "--study", STUDY, "--no-llm", "-q", "-o", out)
    assert res.returncode == 0, res.stderr
    report = (out / "comparison_report.md").read_text()
    assert "pre-registered" not in report and "## Primary metrics (planned tests, Holm over the tier" in report
    assert "nan %" not in report and "nan" not in report.split("## Repetitions", 1)[1].split("##", 1)[0]
    comp = pd.read_csv(out / "comparisons.csv").set_index(["tier", "metric"])
    success = comp.loc[("primary", "success")]
    # McNemar exact with 2 discordant tasks: at best binom.test(2, 2) gives p = 0.5 (scipy.stats.binomtest(2, 2).pvalue).
    assert success["p_min"] == pytest.approx(0.5) and (success["n_a_only"], success["n_b_only"]) == (1, 1)
    assert "cannot reject at this size" in success["note"] and "2 discordant tasks of 8 pairs" in success["note"]
    tokens = comp.loc[("primary", "total_tokens")]
    # Wilcoxon exact with 7 pairs, all of one sign: 2 / 2^7 = 0.015625 (R: wilcox.test(1:7)$p.value).
    assert tokens["p_value"] == tokens["p_min"] == pytest.approx(2 / 2**7)
    assert "is the smallest p Wilcoxon signed-rank can give with 7 pairs" in tokens["note"]
    files = comp.loc[("secondary", "exploration_breadth")]
    assert np.isnan(files["p_value"]) and "counted as p = 1 in the tier's Benjamini-Hochberg correction" in files["note"]
    # The Benjamini-Hochberg p of the secondary tier are redone from the rows shown, the untested one as p = 1.
    from statsmodels.stats.multitest import multipletests

    sec = comp.loc["secondary"]
    redone = multipletests(sec["p_value"].fillna(1.0), method="fdr_bh")[1]
    assert sec["p_adjusted"].dropna().to_numpy() == pytest.approx(redone[sec["p_value"].notna().to_numpy()])
    rates = pd.read_csv(out / "profile_rates.csv").set_index("profile")
    assert (rates["design_effect"] == 1.0).all()  # one trial per task: one 7/9, one interval
    assert (rates["pass_rate_low"] == rates["resolve_rate_low"]).all()


def test_the_audit_lists_what_differs_between_the_arms_besides_the_treatment(study_result):
    """With a study file the configuration check stays: storage is set in every baseline trial and unset in 3 of the 9
    mcp trials; the arms ran as separate jobs; the mcp arm's instruction (which tells the agent to use the MCP server
    and that no local checkout exists) is several times longer. The MCP server's own keys are the treatment."""
    result, _ = study_result
    by = {}
    for f in result.audit.findings:
        by.setdefault(f.check, []).append(f.message)
    assert by["configuration"] == ["mcp differs from baseline beyond the treatment: environment.override_storage_mb = "
                                   "10240 (9) in baseline, 10240 (6), unset (3) in mcp"]
    assert "baseline: baseline-local-direct; mcp: mcp-remote-direct" in by["assignment"][0]
    assert "not assigned at random within each task" in by["assignment"][0]
    arms = result.audit.arms.set_index("arm")
    ratio = arms.loc["mcp", "instruction_ratio_median"]
    assert arms.loc["mcp", "instruction_tasks"] == 8 and 2.4 < ratio < 4.8 and "instructions are 3.0× as long" in by["instructions"][0]
    # The per-trial lengths: the trajectory's first user message where one was kept (bustub), else the study's metrics.
    m = result.metrics.set_index(["profile", "task_id"])
    assert m.loc[("mcp", "bustub-hyperloglog-impl-001"), "instruction_chars"] == 6710
    assert m.loc[("baseline", "linux-hda-intel-suspend-fault-001"), "instruction_chars"] == 3051
    assert any("token counts come from more than one source within an arm" in t for t in by["tokens"])


def test_the_audit_finds_unequal_agent_time_limits_with_and_without_a_study_file(skillsbench, tmp_path):
    """SkillsBench: both arms' gravitational-wave trials timed out, the With-Skills agent after 3,600 s and the
    No-Skills agent after 5,400 s (the task's own limit differs between the two copies of the task)."""
    runs = skillsbench
    study = tmp_path / "skills.yaml"
    study.write_text("name: SkillsBench slice\nbaseline: no_skills\narms:\n  no_skills: {paths: ['*/no_skills/**']}\n"
                     "  skills: {paths: ['*/skills/**']}\n")
    result = analyse(runs, None, design=study, workers=1, cache=False)
    limits = [f.message for f in result.audit.findings if f.message.startswith("agent time limits differ")]
    assert limits == ["agent time limits differ: no_skills 90 min (2 trials), skills 60 min (2 trials) (as the trials "
                      "record them: a configured limit, or the one a timeout reports); one arm had more time to work"]
    pooled = next(f.message for f in analyse(runs, None, workers=1, cache=False).audit.findings if f.check == "pooled")
    assert "agent time limits 60 min (2), 90 min (2)" in pooled


def _slice_of(codescalebench: Path, into: Path, tasks: dict[str, list[str]]) -> Path:
    """A copy of some of the slice's trial folders: {arm: [suite/task, ...]}, in the slice's own layout."""
    for arm, names in tasks.items():
        for name in names:
            suite, task = name.split("/")
            shutil.copytree(codescalebench / "csb_sdlc" / suite / arm / task, into / "csb_sdlc" / suite / arm / task)
    return into


def _pipeline_project(root: Path, runs: Path) -> Path:
    """A copy of the project's notebooks, params and paper skeleton, with parameters for ``runs`` and its study file."""
    shutil.copytree(ROOT / "notebooks", root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copytree(ROOT / "params", root / "params")
    (root / "paper").mkdir()
    shutil.copyfile(ROOT / "paper" / "main.tex", root / "paper" / "main.tex")
    params = root / "params" / "small.yaml"
    params.write_text(f"runs_dir: {os.path.relpath(runs, root)}\nstudy_file: params/studies/codescalebench.yaml\n"
                      "output_dir: results/small\nfigures_dir: results/small/figures\npaper_dir: results/small/paper\n"
                      "manifest: ''\n")
    return params


@pytest.mark.slow  # the paper pipeline with real TeX on two trials (about 30 s)
def test_one_complete_pair_of_the_slice_gives_a_readable_paper(codescalebench, tmp_path):
    """Two trials (one task, both arms): every interval is open to infinity and every test cannot reject at this
    size; the pipeline still writes a paper that says so, in TeX and in Markdown."""
    from analysis_lib.cli import pipeline

    runs = _slice_of(codescalebench, tmp_path / "runs", {a: ["csb_sdlc_debug/linux-iwlwifi-subdevice-fault-001"]
                                                         for a in ("baseline", "mcp")})
    root = tmp_path / "project"
    params = _pipeline_project(root, runs)
    if os.environ.get("CI") == "true":
        assert shutil.which("pdflatex"), "CI=true but pdflatex is missing: .ci/run installs TeX"
    pipeline.run_pipeline(params, root, quiet=True, latex=shutil.which("pdflatex") is not None)
    paper_dir = root / "results" / "small" / "paper"
    snippets = {p.name: p.read_text() for p in (paper_dir / "snippets").glob("*.tex")}
    assert "\\ensuremath{+\\infty}" in snippets["macros.tex"] and "\\num{{" not in snippets["macros.tex"]
    assert "cannot reject at this size" in snippets["comparisons.tex"]
    # The Markdown's prose renders the open ends (the table of quoted macros below it shows their TeX as written).
    prose = (paper_dir / "paper_snippets.md").read_text().split("## Quoted numbers")[0]
    assert "## Method" in prose and "+∞" in prose and "\\infty" not in prose
    if shutil.which("pdflatex"):
        assert (paper_dir / "main.pdf").stat().st_size > 10_000


def test_a_study_with_no_complete_pair_stops_before_any_notebook(codescalebench, tmp_path):
    """Two arms that share no task: nothing can be compared, so the pipeline says so in one line and writes nothing."""
    from analysis_lib.cli import pipeline

    runs = _slice_of(codescalebench, tmp_path / "runs", {"baseline": ["csb_sdlc_fix/element-web-unread-indicators-diverge-fix-001"],
                                                         "mcp": ["csb_sdlc_fix/webclients-excessive-repeated-api-fix-001"]})
    root = tmp_path / "project"
    params = _pipeline_project(root, runs)
    allowed = pipeline.allowed_parameters(pipeline.pipeline_notebooks(root / "notebooks"))
    with pytest.raises(pipeline.ParamsError) as err:
        pipeline.preflight(params, pipeline.load_params(params, allowed), root, allowed)
    line = str(err.value)
    assert "\n" not in line and "the design cannot support the planned comparisons" in line
    assert line.endswith("nothing was run or written") and not (root / "results").exists()
