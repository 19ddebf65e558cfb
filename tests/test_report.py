"""analysis_lib.report: summary frames, reproducible figures, LaTeX tables and macros, snippets."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from analysis_lib.report import figures, latex, markdown, paper, tables


def _metrics() -> pd.DataFrame:
    """Two profiles, two tasks, two repetitions; one infra error (empty success) in profile b."""
    rows = []
    for profile, tokens, succ in (("a", [100, 300, 200, 200], [True, False, True, True]),
                                  ("b", [50, 150, 100, 300], [True, True, None, False])):
        for i, (t, s) in enumerate(zip(tokens, succ, strict=True)):
            rows.append({"profile": profile, "task_id": f"t{i // 2}", "repetition": i % 2 + 1, "success": s,
                         "total_tokens": t, "total_cost_usd": t / 1000, "calls_read": 2, "calls_edit": 1,
                         "calls_mcp": 3 if profile == "b" else 0,
                         "tool_distribution": json.dumps({"Read": 2, "Edit": 1})})
    return pd.DataFrame(rows)


def _comparisons() -> pd.DataFrame:
    """Two rows as the comparison engine writes them (only the columns the report reads are set)."""
    from analysis_lib.inference.comparisons import COLUMNS

    rows = [
        dict(tier="primary", metric="success", label="resolve rate (task majority)", unit="pp", scale="rate",
             test="McNemar exact", correction="holm", profile_a="a", profile_b="b", n_pairs=2, n_undefined=0,
             a_value=0.5, b_value=0.75, estimate=0.25, ci_low=-0.2, ci_high=0.6, interval="Tango score", p_value=0.5,
             p_adjusted=1.0, significant=False, odds_ratio=2.0, odds_ratio_low=0.1, odds_ratio_high=40.0, n_a_only=1,
             n_b_only=2, estimand="difference in resolve rate (task majority), B − A"),
        dict(tier="primary", metric="total_tokens", label="total tokens", unit="%", scale="ratio",
             test="Wilcoxon signed-rank (exact)", correction="holm", profile_a="a", profile_b="b", n_pairs=2,
             n_undefined=0, a_value=200.0, b_value=100.0, estimate=-50.0, ci_low=-75.0, ci_high=-25.0,
             interval="inverted Wilcoxon", p_value=0.0004, p_adjusted=0.0008, significant=True,
             total_change_pct=-48.0, total_change_low=-70.0, total_change_high=-20.0,
             estimand="typical per-task change, 100 (exp(HL of log B/A) − 1) %"),
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def test_resolve_rates_wilson_matches_newcombe_example():
    # Newcombe (1998), Stat Med 17:857, Table I example (a): 81/263 -> Wilson score 0.2553 to 0.3662.
    m = pd.DataFrame({"profile": ["p"] * 263, "task_id": range(263), "success": [True] * 81 + [False] * 182})
    r = tables.resolve_rates(m).iloc[0]
    assert (r.successes, r.n_trials) == (81, 263)
    assert r.ci_low == pytest.approx(0.2553, abs=1e-4) and r.ci_high == pytest.approx(0.3662, abs=1e-4)


def test_resolve_rates_exclude_infra_errors_and_read_csv_booleans(tmp_path):
    path = tmp_path / "m.csv"
    _metrics().to_csv(path, index=False)  # success becomes "True"/"False"/"" as in metrics_detail.csv
    r = tables.resolve_rates(pd.read_csv(path)).set_index("profile")
    assert r.loc["a", ["n_trials", "successes", "infra_errors"]].tolist() == [4, 3, 0]
    assert r.loc["b", ["n_trials", "successes", "infra_errors"]].tolist() == [3, 2, 1]
    assert r.loc["b", "resolve_rate"] == pytest.approx(2 / 3)


def test_paired_differences_are_per_task_means_b_minus_a():
    d = tables.paired_differences(_metrics(), "total_tokens", "a").set_index("task_id")
    # t0: a mean (100+300)/2 = 200, b mean (50+150)/2 = 100 -> -100, -50 %; t1: a 200, b 200 -> 0.
    assert d.loc["t0", ["baseline_value", "value", "difference", "relative_change_pct"]].tolist() == [200, 100, -100, -50]
    assert d.loc["t1", "difference"] == 0
    with pytest.raises(ValueError, match="baseline='zz'.*allowed"):
        tables.paired_differences(_metrics(), "total_tokens", "zz")


def test_tool_mix_shares_sum_to_one_and_empty_profile_has_none():
    mix = tables.tool_mix(tables.tool_calls_from_metrics(_metrics()))
    shares = mix.groupby("profile")["share"].sum()
    assert shares.to_dict() == pytest.approx({"a": 1.0, "b": 1.0})
    b = mix[mix.profile == "b"].set_index("category")["share"]
    assert b["mcp"] == pytest.approx(12 / 24)  # 4 trials x 3 mcp calls of 4 x (2 + 1 + 3) calls
    zero = tables.tool_mix(pd.DataFrame({"profile": ["z"], "category": ["read"], "calls": [0]}))
    assert zero["share"].isna().all()


def test_macro_names_are_letters_only():
    assert latex.macro_name("resolve_rate", "code-graph") == "ResolveRateCodeGraph"
    assert latex.macro_name("gpt-5.2", "p1") == "GptFiveTwoPOne"
    with pytest.raises(ValueError):
        latex.macro_name("__", "--")
    with pytest.raises(ValueError, match="letters only"):
        latex.Macro("Bad1", "1", "m", "s").line()


def test_macros_file_has_header_metric_ids_and_sources():
    from analysis_lib.inference.rates import profile_rates

    inputs = paper.PaperInputs(_metrics(), _comparisons(), profile_rates(_metrics(), n_boot=200), simulated=True,
                               baseline="a", sources={"metrics": "results/x/metrics_detail.csv",
                                                      "comparisons": "results/x/comparisons.csv",
                                                      "rates": "results/x/profile_rates.csv"})
    macros = paper.quoted_macros(inputs)
    text = latex.render_macros(macros, True, "results/x/metrics_detail.csv")
    lines = text.splitlines()
    assert lines[0].startswith("% GENERATED") and "SIMULATED" in lines[1]
    body = [ln for ln in lines if ln.startswith("\\newcommand")]
    assert len(body) == len(macros) and len(set(m.name for m in macros)) == len(macros)
    for ln in body:
        assert re.match(r"^\\newcommand\{\\[A-Za-z]+\}\{[^\n]*\}  % [a-z_]+.*; source: results/x/\w+\.csv$", ln), ln
    by_name = {m.name: m for m in macros}
    assert by_name["PassRateA"].text == "\\num{75.0}\\,\\%"  # 3 of 4 trials
    assert by_name["ResolveRateA"].text == "\\num{50.0}\\,\\%"  # t0 2/2, t1 1/2 (a tie fails)
    assert by_name["PassRateB"].text == "\\num{66.7}\\,\\%"  # 2 of 3 known outcomes
    # The engine's numbers, as they are: estimate and interval of the same estimand, p in words.
    assert by_name["TotalTokensBVsAEst"].text == "\\num{-50.0}\\,\\%"
    assert (by_name["TotalTokensBVsALow"].text, by_name["TotalTokensBVsAHigh"].text) == ("\\num{-75.0}\\,\\%", "\\num{-25.0}\\,\\%")
    assert by_name["TotalTokensBVsAP"].text == "\\ensuremath{p < 0.001}"
    assert by_name["SuccessBVsAEst"].text == "\\num{+25.0}\\,pp"
    assert by_name["SuccessBVsAP"].text == "\\ensuremath{p = 0.500}"
    assert "SIMULATED" not in latex.render_macros(macros, False, "x")
    with pytest.raises(ValueError, match="duplicate"):
        latex.render_macros(macros + macros[:1], False, "x")


def test_booktabs_table_escapes_and_uses_rules():
    tex = latex.booktabs_table(pd.DataFrame({"profile_name": ["code_graph"], "rate": [0.5]}), "Rates 50%", "tab:r",
                               formatters={"rate": lambda v: latex.fmt_pct(v)})
    for rule in ("\\toprule", "\\midrule", "\\bottomrule"):
        assert rule in tex
    assert "code\\_graph" in tex and "profile\\_name" in tex and "50.0\\%" in tex and "Rates 50\\%" in tex


def test_figures_are_byte_reproducible_and_marked_simulated(tmp_path):
    from analysis_lib.inference.rates import profile_rates

    rates = profile_rates(_metrics(), n_boot=200)
    out = []
    for folder in ("one", "two"):
        fig = figures.plot_rates(rates, simulated=True)
        assert "simulated data" in fig.axes[0].get_title()
        out.append([p.read_bytes() for p in figures.save_figure(fig, tmp_path / folder, "resolve_rate")])
    assert out[0] == out[1]
    png, pdf = out[0]
    assert png.startswith(b"\x89PNG") and b"matplotlib" not in png.lower()
    assert pdf.startswith(b"%PDF") and b"CreationDate" not in pdf and b"Producer" not in pdf
    fig = figures.plot_rates(rates, simulated=False)
    assert "simulated" not in fig.axes[0].get_title()
    assert fig.get_size_inches()[0] == pytest.approx(figures.WIDTH_IN)


def test_forest_rows_draw_the_engine_numbers_unchanged():
    rows = figures.forest_rows(_comparisons()).set_index("metric")
    # success: a difference in points (x 100), with its own (Tango) interval; tokens: the % change as it is.
    assert rows.loc["success", ["estimate", "low", "high"]].tolist() == pytest.approx([25, -20, 60])
    assert rows.loc["total_tokens", ["estimate", "low", "high"]].tolist() == pytest.approx([-50, -75, -25])


def test_paper_snippets_quote_macros_not_numbers(tmp_path):
    from analysis_lib.inference.rates import profile_rates

    inputs = paper.PaperInputs(_metrics(), _comparisons(), profile_rates(_metrics(), n_boot=200), simulated=True,
                               baseline="a", plan=paper.PlanRecord("f" * 64, "plan", "2026-01-01T00:00:00Z"))
    (tmp_path / "figs").mkdir()
    written = paper.write_paper_snippets(inputs, tmp_path / "paper", tmp_path / "figs")
    for name in ("macros", "rates", "profile_summary", "comparisons", "results", "figures"):
        text = written[name].read_text()
        assert text.startswith("% GENERATED") and "SIMULATED DATA" in text.splitlines()[1], name
    results = written["results"].read_text().split("\n", 2)[2]
    assert results.startswith("\\textbf{SIMULATED DATA")
    # Prose holds no typed number: strip macros and the fixed "95\% CI" label, no digit may remain.
    assert not re.search(r"\d", re.sub(r"\\[A-Za-z]+|95\\%", "", results)), results
    assert "\\PlanHash" in results and "without deviation" in results
    md = written["paper_snippets"].read_text()
    assert markdown.BANNER in md and "| profile |" in md
    assert "codecanvas" not in written  # no CodeCanvas table given, none written


def test_the_prose_states_which_family_carries_the_claim_and_follows_it(tmp_path):
    from analysis_lib.inference.hypotheses import COLUMNS as HYP_COLUMNS

    hyp = pd.DataFrame([{"profile_a": "a", "profile_b": "b", "step": 1, "metric": "success", "label": "pass@1",
                         "claim": "noninferior", "margin": 5.0, "margin_low": -5.0, "margin_high": 5.0, "unit": "pp",
                         "confidence": 0.95, "estimate": 8.0, "ci_low": -1.0, "ci_high": 17.0, "result": "holds",
                         "reason": "the worse end of the interval is within the margin"}], columns=HYP_COLUMNS)
    record = paper.PlanRecord("f" * 64, "plan", "2026-01-01T00:00:00Z", claim_family="hypotheses")
    inputs = paper.PaperInputs(_metrics(), _comparisons(), simulated=True, baseline="a", plan=record, hypotheses=hyp)
    macros = paper.quoted_macros(inputs)
    prose = paper._results_paragraph(inputs, macros)
    assert "confirmatory claim is the plan's fixed sequence" in prose and "comparisons below are supportive" in prose
    assert "\\HypothesisSuccessBVsAResult{}" in prose and {"HypothesisSuccessBVsAEst", "HypothesisSuccessBVsALow"} <= {
        m.name for m in macros}
    assert not re.search(r"\d", re.sub(r"\\[A-Za-z]+|95\\%|pass@1", "", prose))  # pass@1 is a name, not a number
    primary = paper._results_paragraph(paper.PaperInputs(_metrics(), _comparisons(), plan=paper.PlanRecord("f" * 64, "p")),
                                       macros)
    assert "confirmatory claim rests on the primary tier" in primary
    assert paper.PlanRecord.from_sidecar({"plan": {"claim_family": "hypotheses"}}).claim_family == "hypotheses"


def test_pipe_table_escapes_pipes():
    assert markdown.pipe_table(pd.DataFrame({"a": ["x|y"], "b": [np.nan]})) == "| a | b |\n|---|---|\n| x\\|y |  |"


def test_llm_snippets_are_quoted_in_markdown_with_demoted_headings(tmp_path):
    inputs = paper.PaperInputs(_metrics(), simulated=False, llm_snippets="# Narratives\n\nAgent b read less.\n")
    written = paper.write_paper_snippets(inputs, tmp_path / "paper", tmp_path)
    md = written["paper_snippets"].read_text()
    assert "### Narratives" in md and "Agent b read less." in md and markdown.BANNER not in md
    assert "comparisons" not in written  # none given: no table, and main.tex inputs it only if present


def test_explore_helpers():
    from analysis_lib.core.trial import Step, ToolCall, Trajectory, Trial
    from analysis_lib.report import explore

    m = _metrics()
    assert len(explore.filter_trials(m, ["b"], (), "infra_error")) == 1
    assert explore.filter_trials(m, (), ["t0"], "failed")["profile"].tolist() == ["a"]
    with pytest.raises(ValueError, match="allowed: any, succeeded, failed, infra_error"):
        explore.filter_trials(m, outcome="lost")
    side = explore.side_by_side(m, "t0", "a", "b", ["total_tokens", "success"])
    # t0: a tokens (100 + 300) / 2 = 200, b (50 + 150) / 2 = 100; success a 1/2, b 2/2.
    assert side.loc["total_tokens"].tolist() == [200, 100, -100]
    assert side.loc["success"].tolist() == [0.5, 1.0, 0.5]
    traj = Trajectory("ATIF-v1.6", steps=[
        Step(1, "user", message="fix it"),
        Step(2, "agent", prompt_tokens=10, completion_tokens=5,
             tool_calls=[ToolCall(2, "Read", {}, is_error=False), ToolCall(2, "Bash", {}, is_error=True)])])
    trial = Trial("b", "t0", 1, "r1", "x", "run_layout", trajectory=traj)
    tl = explore.step_timeline(trial)
    assert tl[["tool_calls", "tool_errors"]].values.tolist() == [[0, 0], [2, 1]]
    assert tl.loc[1, "tools"] == "Read, Bash" and tl.loc[1, "prompt_tokens"] == 10
    assert explore.find_trial([trial], "b", "t0") is trial and explore.find_trial([trial], "a", "t0") is None


def test_provenance_reads_index_json(tmp_path, capsys):
    from analysis_lib.ingest import provenance

    assert provenance.is_simulated(tmp_path) is False and provenance.declared_baseline(tmp_path) is None
    (tmp_path / "index.json").write_text('{"simulated": true, "baseline": "text"}')
    assert provenance.is_simulated(tmp_path) is True and provenance.declared_baseline(tmp_path) == "text"
    (tmp_path / "index.json").write_text('{"simulated": tru')
    assert provenance.is_simulated(tmp_path) is False
    assert capsys.readouterr().out.startswith(f"warning: {tmp_path / 'index.json'}: truncated JSON")


def _arms(infra: tuple[int, int] = (0, 2), no_call: int = 3) -> pd.DataFrame:
    """The design audit's per-arm rows the limitations read: a is the baseline, b was offered MCP tools."""
    return pd.DataFrame({"arm": ["a", "b"], "baseline": [True, False], "n_trials": [4, 4], "n_infra_errors": list(infra),
                         "mcp_offered": [False, True], "n_mcp_known": [4, 4], "n_zero_mcp_calls": [4, no_call]})


def _correlations(r: float) -> pd.DataFrame:
    from analysis_lib.inference.comparisons import COLLINEAR_R, CORRELATION_COLUMNS

    return pd.DataFrame([{"profile_a": "a", "profile_b": "b", "metric_x": "total_tokens", "metric_y": "total_cost_usd",
                          "label_x": "total tokens", "label_y": "cost per trial (USD)", "n_pairs": 2, "r": r,
                          "collinear": abs(r) > COLLINEAR_R}], columns=CORRELATION_COLUMNS)


def test_results_read_as_one_short_paragraph_per_research_question(tmp_path):
    from analysis_lib.inference.rates import profile_rates

    unknown = paper.PaperInputs(_metrics(), _comparisons(), profile_rates(_metrics(), n_boot=200), simulated=True,
                                baseline="a", plan=paper.PlanRecord("f" * 64, "plan", "2026-01-01T00:00:00Z"))
    # Only a plan recorded before the first trial is a pre-registration; when that is unknown, it is "the analysis plan".
    written = paper.write_paper_snippets(unknown, tmp_path / "unknown", tmp_path)
    assert "\\paragraph{Analysis plan.}" in written["results"].read_text()
    assert "pre-registered" not in written["comparisons"].read_text()
    inputs = paper.PaperInputs(_metrics(), _comparisons(), profile_rates(_metrics(), n_boot=200), simulated=True,
                               baseline="a", plan=paper.PlanRecord("f" * 64, "plan", "2025-12-01T00:00:00Z",
                                                                   first_trial_at="2026-01-01T00:00:00Z",
                                                                   fixed_before_first_trial=True))
    written = paper.write_paper_snippets(inputs, tmp_path / "paper", tmp_path)
    assert "pre-registered tests" in written["comparisons"].read_text()
    results = written["results"].read_text()
    paragraphs = [ln for ln in results.splitlines() if ln.startswith("\\paragraph{")]
    assert [p.split("}", 1)[0] for p in paragraphs] == [
        "\\paragraph{Pre-registration.", "\\paragraph{Claim.", "\\paragraph{Data.", "\\paragraph{Success.",
        "\\paragraph{Efficiency."]  # no process column, no MCP call column, no CACE: those questions are left out
    success, efficiency = paragraphs[3], paragraphs[4]
    # Each comparison keeps its estimand's interval and test; every number is a macro.
    assert "\\SuccessBVsAEst{} (Tango score 95\\% CI \\SuccessBVsALow{} to \\SuccessBVsAHigh{}; McNemar exact" in success
    assert "\\TotalTokensBVsAP{}, \\TotalTokensBVsAPAdj{}; \\TotalTokensBVsAPairs{} tasks" in efficiency
    assert "\\TotalTokensBVsATotalLow{}" in efficiency and "(primary)" in efficiency
    assert "confirmatory claim rests on the primary tier" in results
    for text in (results, written["discussion"].read_text(), written["conclusion"].read_text()):
        body = "\n".join(ln for ln in text.splitlines() if not ln.startswith("%"))
        assert not re.search(r"\d", re.sub(r"\\[A-Za-z]+|95\\%", "", body)), body
    # The Markdown holds the same sentences with the macros' values, and no TeX.
    md = written["paper_snippets"].read_text()
    section = md.split("## Results", 1)[1].split("\n## ", 1)[0]
    macros = {m.name: m for m in paper.quoted_macros(inputs)}
    assert "**Efficiency.** For the typical task, total tokens (primary) changed against `a` by −50.0 % under `b`" in section
    assert "p_adj" in section and "\\" not in section and "{" not in section
    assert macros["TotalTokensBVsAEst"].text == "\\num{-50.0}\\,\\%"
    assert md.index("## Results") < md.index("## Discussion and limitations") < md.index("## Conclusion")


def test_limitations_name_only_what_applies():
    from analysis_lib.report.discussion import limitations_tex

    comp = _comparisons()
    every = limitations_tex(simulated=True, data_source=None, arms=_arms(), correlations=_correlations(0.99),
                            comparisons=comp, has_bounds=True, has_cace=True)
    assert every.startswith("\\paragraph{Limitations.} The runs are simulated")
    assert "\\InfraErrorsA{} of the \\TrialsArmA{} \\texttt{a} trials and \\InfraErrorsB{} of the \\TrialsArmB{}" in every
    assert "Table~\\ref{tab:infra-bounds}" in every
    assert "never called in \\TrialsNoMCPCallB{} of \\TrialsMCPKnownB{} \\texttt{b} trials" in every
    assert "nearly collinear (Pearson $r$ = \\CorrelationTotalTokensTotalCostUsdBVsA{}" in every
    assert "only \\MinPrimaryPairs{} paired tasks" in every  # two pairs: below the ten the report asks for
    none = limitations_tex(simulated=False, data_source=None, arms=_arms(infra=(0, 0), no_call=0),
                           correlations=_correlations(0.54), comparisons=comp.assign(n_pairs=24))
    assert "simulated" not in none and "Infrastructure" not in none and "never called" not in none
    assert "collinear (" not in none and "paired tasks:" not in none
    assert "found nothing that limits" in none
    real = limitations_tex(simulated=False, data_source={"name": "x"}, arms=None, correlations=None, comparisons=None)
    assert "made by others and re-analysed" in real


def test_collinear_endpoints_are_said_once_with_r_as_a_macro_from_the_correlations():
    from analysis_lib.report.comparison_report import collinearity_lines

    corr = _correlations(0.987654)
    inputs = paper.PaperInputs(_metrics(), _comparisons(), simulated=True, baseline="a", correlations=corr)
    macros = {m.name: m for m in paper.quoted_macros(inputs)}
    # r of the frame, 3 decimals: 2 would print 0.95 for an r just above the 0.95 threshold
    assert macros["CorrelationTotalTokensTotalCostUsdBVsA"].text == "\\num{0.988}"
    assert macros["CorrelationTotalTokensTotalCostUsdBVsAPairs"].text == "2"
    assert "r = 0.988" in collinearity_lines(corr)[0]  # the comparison report quotes the same r
    quiet = paper.PaperInputs(_metrics(), _comparisons(), simulated=True, baseline="a", correlations=_correlations(0.73))
    assert not any(m.name.startswith("Correlation") for m in paper.quoted_macros(quiet))
    assert collinearity_lines(_correlations(0.73)) == []


def test_conclusion_names_what_held_after_correction_and_says_simulated():
    from analysis_lib.report.discussion import conclusion_tex

    text = conclusion_tex(simulated=True, comparisons=_comparisons())
    assert "\\NumPrimarySignificant{} held" in text and "total tokens of \\texttt{b}" in text
    assert "resolve rate" not in text  # not significant: not named
    assert "runs are simulated" in text
    assert "fixed sequence" in conclusion_tex(simulated=False, comparisons=_comparisons(), claim_family="hypotheses")
    assert "establish no difference" in conclusion_tex(simulated=False, comparisons=_comparisons().assign(significant=False))


def test_prose_markdown_refuses_a_command_it_cannot_render():
    with pytest.raises(ValueError, match=r"\\emph has no Markdown rendering"):
        latex.prose_markdown("\\emph{x}", [])
    assert latex.prose_markdown("\\A{} and \\texttt{b\\_c}", [latex.Macro("A", "\\num{-1.5}\\,\\%", "m", "s")]) == \
        "\u22121.5 % and `b_c`"


def test_mcp_use_states_uptake_and_the_effect_among_users_once_per_metric():
    base = {"profile_a": "a", "profile_b": "b", "metric": "total_tokens", "ci_low": -0.6, "ci_high": -0.1}
    compliance = pd.DataFrame([
        {**base, "estimand": "itt_mean", "label": "total tokens", "scale": "ratio", "unit": "%", "estimate": -0.4},
        {**base, "estimand": "share_used", "label": "total tokens", "scale": "share", "unit": "share", "estimate": 0.75,
         "ci_low": 0.5, "ci_high": 1.0},
        {**base, "estimand": "cace", "label": "total tokens", "scale": "ratio", "unit": "%", "estimate": -0.5},
        {**base, "estimand": "naive_users", "label": "total tokens", "scale": "ratio", "unit": "%", "estimate": -0.6}])
    inputs = paper.PaperInputs(_metrics().assign(mcp_tool_calls=[0, 0, 0, 0, 2, 3, 0, 1]), _comparisons(),
                               simulated=True, baseline="a", beside={"compliance": compliance})
    macros = paper.quoted_macros(inputs)
    mcp = next(ln for ln in paper._results_paragraph(inputs, macros).splitlines() if ln.startswith("\\paragraph{MCP use.}"))
    assert "Median MCP calls per trial: \\MedianMcpToolCallsA{} under \\texttt{a} and \\MedianMcpToolCallsB{}" in mcp
    assert "An MCP tool was called in \\ShareUsedTotalTokensBVsA{} of the \\texttt{b} trials" in mcp
    assert mcp.count("\\CaceTotalTokensBVsAEst{}") == 1 and "total tokens of \\texttt{b}" in mcp
    assert {m.name: m.text for m in macros}["MedianMcpToolCallsB"] == "\\num{2}"  # median of 2, 3, 1: the trial without an outcome is out
