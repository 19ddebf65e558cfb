"""The comparison engine and everything rendered from it: one value per quantity, each estimate in its interval.

The property test runs many simulated studies through the engine and every output made from it
(``comparisons.csv``, ``comparison_report.md``, the TeX macros and tables, the forest data) and
checks, on the printed numbers, that each estimate lies inside its interval and that interval and
test agree where the method guarantees it (McNemar exact and the odds-ratio interval; Wilcoxon and
the Hodges-Lehmann interval on continuous metrics).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from analysis_lib import Study, write_comparisons
from analysis_lib.inference import comparisons as C
from analysis_lib.inference.rates import profile_rates
from analysis_lib.report import figures, paper
from analysis_lib.simulate.model import Effects, simulate_metrics
from analysis_lib.study import plan as P
from analysis_lib.study.baseline import profile_pairs

MINUS = "\u2212"


def _plan(n_resamples: int = 1000) -> P.AnalysisPlan:
    d = P.load_plan().model_dump(mode="json")
    d["bootstrap"]["n_resamples"] = n_resamples
    return P.parse_plan(d)


def _check(plan: P.AnalysisPlan) -> P.PlanCheck:
    return P.PlanCheck(plan, P.plan_hash(plan), "params/analysis_plan.yaml")


@pytest.fixture(scope="module")
def metrics() -> pd.DataFrame:
    return simulate_metrics(20261121)


def test_one_row_per_planned_metric_and_pair_with_pairs_and_undefined_counted(metrics):
    plan = _plan()
    table = C.compare(metrics, plan, profile_pairs(metrics["profile"].unique(), baseline="text"))
    assert list(table.columns) == C.COLUMNS
    prim = table[table["tier"] == "primary"]
    assert list(prim["metric"]) == ["success"] * 2 + ["total_tokens"] * 2 + ["total_cost_usd"] * 2
    assert (table["n_pairs"] >= 0).all() and (table["n_undefined"] >= 0).all()
    tok = prim[prim["metric"] == "total_tokens"].iloc[0]
    # The estimate is the HL of the per-task log ratios, shown as % change; its test is on the same ratios.
    from analysis_lib import stats

    pairs = stats.pair_tasks(C.usable_trials(metrics), "total_tokens", "text", tok["profile_b"])
    d = np.log(pairs["b"] / pairs["a"])
    hl = stats.hodges_lehmann(d).iloc[0]
    assert tok["estimate"] == pytest.approx(100 * math.expm1(hl["estimate"]))
    assert tok["p_value"] == pytest.approx(stats.wilcoxon(d).iloc[0]["p_val"])
    assert tok["total_change_pct"] == pytest.approx(100 * (pairs["b"].sum() / pairs["a"].sum() - 1))


def test_cost_per_success_is_a_ratio_of_totals_and_never_infinite(metrics):
    plan = _plan()
    m = metrics.copy()
    m.loc[m["profile"] == "codegraph", "success"] = False  # an arm without a single success
    table = C.compare(m, plan, [("text", "codegraph"), ("text", "codecanvas")])
    cps = table[table["metric"] == "cost_per_success"].set_index("profile_b")
    assert math.isnan(cps.loc["codegraph", "estimate"]) and "no success under codegraph" in cps.loc["codegraph", "note"]
    ok = cps.loc["codecanvas"]
    use = C.usable_trials(m)
    arm = lambda p: use.loc[use["profile"] == p, "total_cost_usd"].sum() / use.loc[use["profile"] == p, "success"].astype(bool).sum()  # noqa: E731
    assert ok["a_value"] == pytest.approx(arm("text")) and ok["b_value"] == pytest.approx(arm("codecanvas"))
    assert ok["ci_low"] <= ok["estimate"] <= ok["ci_high"]
    assert not np.isinf(table[["estimate", "ci_low", "ci_high", "p_value"]].to_numpy(float)).any()
    assert table.loc[table["metric"] == "cost_per_success", "p_value"].isna().all()  # never tested


def test_no_pairs_gives_nan_with_a_reason(metrics):
    plan = _plan()
    m = metrics[~((metrics["profile"] == "codegraph") & metrics["task_id"].isin(metrics["task_id"].unique()[:99]))]
    m = pd.concat([m, metrics[metrics["profile"] == "codegraph"].assign(task_id=lambda x: "other-" + x["task_id"])])
    table = C.compare(m, plan, [("text", "codegraph")])
    prim = table[table["tier"] == "primary"]
    assert (prim["n_pairs"] == 0).all() and prim["p_value"].isna().all() and prim["estimate"].isna().all()
    assert prim["note"].str.contains("no task").all()


def _nums(text: str) -> list[float]:
    return [float(x.replace(MINUS, "-").replace(",", "")) for x in re.findall(r"[+\u2212-]?\d[\d,]*\.?\d*", text)]


def _inside(est: float, lo: float, hi: float) -> bool:
    return lo - 1e-9 <= est <= hi + 1e-9


def _study(seed: int, tmp_path) -> tuple[pd.DataFrame, dict]:
    rng = np.random.default_rng(seed)
    effects = Effects() if seed % 3 else Effects.null()
    m = simulate_metrics(seed, n_tasks=int(rng.integers(6, 40)), repetitions=int(rng.integers(1, 4)),
                         profiles=("text", "codegraph"), effects=effects)
    out = tmp_path / f"s{seed}"
    study = write_comparisons(Study.from_table(m, plan=_check(_plan(400)), baseline="text", simulated=True), out)
    inputs = paper.PaperInputs(m, study.comparisons, study.rates, simulated=True, baseline="text")
    rendered = {"report": (out / "comparison_report.md").read_text(), "macros": paper.quoted_macros(inputs),
                "table": paper.comparisons_tex(study.comparisons, True), "forest": figures.forest_rows(study.comparisons),
                "csv": pd.read_csv(out / "comparisons.csv"), "rates": study.rates}
    return study.comparisons, rendered


@pytest.mark.slow  # every estimate of the full sample analysis: ~12 s
def test_every_rendered_estimate_lies_in_its_interval_and_agrees_with_its_test(tmp_path):
    checked = {"csv": 0, "report": 0, "macros": 0, "table": 0, "forest": 0, "agree": 0}
    for seed in range(24):
        comp, r = _study(seed, tmp_path)
        csv = r["csv"]
        has = csv["estimate"].notna()
        assert ((csv.loc[has, "ci_low"] <= csv.loc[has, "estimate"] + 1e-12)
                & (csv.loc[has, "estimate"] <= csv.loc[has, "ci_high"] + 1e-12)).all()
        checked["csv"] += int(has.sum())
        for row in csv[has].itertuples():
            if row.test == "McNemar exact":
                assert (row.p_value < 0.05) == (not row.odds_ratio_low <= 1 <= row.odds_ratio_high)
                assert row.odds_ratio_low <= row.odds_ratio <= row.odds_ratio_high
                checked["agree"] += 1
            elif row.metric in ("total_tokens", "total_cost_usd") and row.test.endswith("(exact)"):
                assert (row.p_value < 0.05) == (not row.ci_low <= 0 <= row.ci_high)
                checked["agree"] += 1
            if not np.isnan(row.total_change_pct):
                assert _inside(row.total_change_pct, row.total_change_low, row.total_change_high)
            if not np.isnan(row.p_value) and C.excludes_zero(row._asdict()) != (row.p_value < 0.05):
                assert isinstance(row.note, str) and "disagree" in row.note  # the reason stands beside the p-value
                checked["agree"] += 1
        # Markdown: each "estimate [low, high]" cell, as printed (rounded alike, so the order holds).
        for cell in re.findall(r"\| ([+\u2212]?[\d.,]+ (?:%|pp|calls|reads|steps)?\s?\[[^\]]+\])", r["report"]):
            est, lo, hi = _nums(cell)[:3]
            assert _inside(est, lo, hi), cell
            checked["report"] += 1
        # Macros: Est / Low / High triplets, as TeX will print them.
        macros = {m.name: m.text for m in r["macros"]}
        for name in macros:
            if name.endswith("Est"):
                stem = name[:-3]
                est, lo, hi = (_nums(macros[stem + k])[0] for k in ("Est", "Low", "High"))
                assert _inside(est, lo, hi), (name, macros[stem + "Est"], macros[stem + "Low"], macros[stem + "High"])
                checked["macros"] += 1
        # TeX table: Change, CI low, CI high columns.
        for line in r["table"].splitlines():
            cells = [c.strip() for c in line.rstrip("\\ ").split("&")]
            if len(cells) == 10 and cells[2].isdigit():  # metric, B, pairs, A, B, change, low, high, p, p_adj
                est, lo, hi = float(cells[5]), float(cells[6]), float(cells[7])
                assert _inside(est, lo, hi), line
                checked["table"] += 1
        f = r["forest"]
        assert ((f["low"] <= f["estimate"] + 1e-9) & (f["estimate"] <= f["high"] + 1e-9)).all()
        checked["forest"] += len(f)
        # One value per quantity: the forest draws the CSV's numbers, unchanged.
        joined = f.merge(comp.assign(label=comp["label"] + ": " + comp["profile_b"]), on="label")
        k = np.where(joined["scale_x"] == "rate", 100.0, 1.0)
        np.testing.assert_allclose(joined["estimate_x"], k * joined["estimate_y"])
    assert min(checked.values()) >= 20, checked


def test_the_sample_quotes_one_value_per_quantity(sample_runs, tmp_path):
    """The comparison report, the macros and the forest data give the same token change for each pair."""
    from analysis_lib.study.layer1 import analyse

    res = analyse(sample_runs, None, cache=False, workers=1)
    res.plan_check = _check(_plan(1000))
    study = write_comparisons(res, tmp_path)
    comp = study.comparisons
    inputs = paper.PaperInputs(res.metrics, comp, study.rates, simulated=True, baseline="text")
    macros = {m.name: m.text for m in paper.quoted_macros(inputs)}
    report = (tmp_path / "comparison_report.md").read_text()
    forest = figures.forest_rows(comp).set_index("label")
    for row in comp[comp["metric"] == "total_tokens"].itertuples():
        key = paper._key(row)
        printed = f"{row.estimate:+.1f}".replace("-", MINUS)
        assert macros[key + "Est"] == f"\\num{{{row.estimate:+.1f}}}\\,\\%"
        assert f"{printed} % [" in report
        assert forest.loc[f"{row.label}: {row.profile_b}", "estimate"] == pytest.approx(row.estimate)
    # No p-value beside an interval that contradicts it without the reason beside it: in the report's table (a
    # numbered note), the paper's table (a letter by the p-value) and the paper's prose.
    prose = paper._results_paragraph(inputs, paper.quoted_macros(inputs))
    tex = paper.comparisons_tex(comp, True)
    contradicted = [r for r in comp.itertuples() if not np.isnan(r.p_value) and C.interval_note(r, 0.05)]
    assert contradicted, "the sample has a Tango interval that excludes 0 beside McNemar's p = 0.070"
    for r in contradicted:
        assert C.interval_note(r, 0.05) in report
        why = C.interval_note(r, 0.05, with_p=False)  # the paper quotes its numbers as macros only
        assert why in tex.replace("\\'", "'") and "p = 0" not in why
        assert re.search(r"\{0\.\d{3}\\textsuperscript\{[a-z]\}\}", tex)
        if r.tier == "primary":
            assert why in prose
    assert "(note 1)" in report.split("resolve rate (task majority), `success` | codecanvas vs text")[1].split("\n")[0]
    rates = profile_rates(res.metrics)
    text_rates = rates.set_index("profile").loc["text"]
    assert text_rates["pass_rate"] != text_rates["resolve_rate"]  # two quantities, two names
    assert "PassRateText" in macros and "ResolveRateText" in macros
    assert "1 profiles" not in report and "e+0" not in report and "e-0" not in report


def test_compare_and_estimate_choose_test_and_estimand_by_one_rule(metrics):
    """estimate() (the hypotheses' intervals) reports each planned metric exactly as compare() does."""
    for path in ("params/analysis_plan.yaml", "params/analysis_plan_all_repetitions.yaml"):
        plan = P.parse_plan({**P.load_plan(path).model_dump(mode="json"), "bootstrap": {"n_resamples": 500}})
        table = C.compare(metrics, plan, [("text", "codegraph")])
        for r in table[table["tier"].isin(["primary", "secondary"])].itertuples():
            row = C.estimate(metrics, r.metric, "text", "codegraph", plan)
            assert (row["scale"], row["estimand"], row["interval"]) == (r.scale, r.estimand, r.interval)
            for k in ("estimate", "ci_low", "ci_high", "p_value"):
                assert row[k] == pytest.approx(getattr(r, k), nan_ok=True), (path, r.metric, k)
    plan = P.load_plan("params/analysis_plan_all_repetitions.yaml")
    assert C.planned_test(plan, "success") == ("paired_t", "all")  # the primary row, not a sensitivity row
    assert C.planned_test(plan, "grep_before_edit") == ("paired_t", "all")  # unplanned: the default of its kind
    assert C.planned_test(P.load_plan(), "success") == ("mcnemar_exact", "majority")
    assert C.rule("duplicate_reads", "descriptive", "all").how == "mean"  # counts keep their zeros
    assert C.rule("total_tokens", "wilcoxon_signed_rank", "all").how == "geometric_mean"


def _zero_study() -> pd.DataFrame:
    """Two profiles, six tasks, three repetitions: counts with zeros, a zero token count, a task without a value
    and a task whose every trial under B is an infrastructure error."""
    rows = []
    for t in range(6):
        for prof in ("a", "b"):
            for rep in range(3):
                infra = t == 5 and prof == "b"
                rows.append({"profile": prof, "task_id": f"t{t}", "repetition": rep, "infra_error": infra,
                             "success": None if infra else bool((t + rep) % 2),
                             "total_tokens": 0.0 if (t == 2 and prof == "b" and rep == 0) else 1000.0 * (t + 1 + rep),
                             "duplicate_reads": np.nan if (t == 3 and prof == "a") else float((t + rep) % 2 * (prof == "b"))})
    return pd.DataFrame(rows)


def test_every_task_both_profiles_ran_is_paired_or_counted_undefined_with_its_reason():
    d = P.load_plan("params/analysis_plan_all_repetitions.yaml").model_dump(mode="json")
    d.update(hypotheses=[], claim_family=None, bootstrap={"n_resamples": 200})
    d["tiers"] = {"primary": {"correction": "holm", "metrics": [{"id": "success", "test": "paired_t"},
                                                                 {"id": "total_tokens", "test": "wilcoxon_signed_rank"}]},
                  "secondary": {"correction": "fdr_bh", "metrics": [{"id": "elapsed_sec", "test": "wilcoxon_signed_rank"}]},
                  "exploratory": {"correction": "none", "metrics": [{"id": "duplicate_reads", "test": "descriptive"}]}}
    plan = P.parse_plan(d)
    table = C.compare(_zero_study(), plan, [("a", "b")]).set_index("metric")
    reads = table.loc["duplicate_reads"]  # per-task means keep the zeros: only tasks without a value are out
    assert (reads["n_pairs"], reads["n_undefined"]) == (4, 2) and "2 with no value under one profile" in reads["note"]
    tokens = table.loc["total_tokens"]  # a geometric mean with a zero repetition is undefined, and counted
    assert (tokens["n_pairs"], tokens["n_undefined"]) == (4, 2)
    assert "1 with a repetition at 0" in tokens["note"] and "1 with no value" in tokens["note"]
    success = table.loc["success"]
    assert (success["n_pairs"], success["n_undefined"]) == (5, 1) and "without an outcome" in success["note"]
    assert (table["n_pairs"] + table["n_undefined"]).drop("elapsed_sec").eq(6).all()
    # the majority plan's medians keep the zero, so the ratio is undefined there instead
    d["pairing"] = {"repetitions": "majority"}
    d["tiers"]["primary"]["metrics"][0]["test"] = "mcnemar_exact"
    maj = C.compare(_zero_study(), P.parse_plan(d), [("a", "b")]).set_index("metric").loc["total_tokens"]
    assert maj["n_pairs"] + maj["n_undefined"] == 6


def test_rows_say_where_interval_and_test_disagree_and_where_an_interval_is_open_at_zero():
    # 7 tasks only under B, 1 only under A, of 24: Tango excludes 0, McNemar exact p = 0.070 does not reject.
    row = {"scale": "rate", "test": "McNemar exact", "p_value": 0.0703, "ci_low": 0.023, "ci_high": 0.465}
    assert "Tango's score interval excludes 0 while McNemar exact does not reject (p = 0.070)" in C.interval_note(row, 0.05)
    hl = {"scale": "ratio", "p_value": 0.03, "ci_low": -20.0, "ci_high": 0.0, "ci_open": "high"}
    assert C.excludes_zero(hl) and "open at 0" in C.interval_note(hl, 0.05)
    assert C.interval_note({**hl, "ci_open": None, "p_value": 0.2}, 0.05) is None
    # mostly zeros: the estimate sits on the open end, and the note says why the two part ways there
    zeros = {"scale": "difference", "p_value": None, "estimate": 0.0, "ci_low": 0.0, "ci_high": 0.17, "ci_open": "low"}
    assert "the estimate is 0 (most differences are 0)" in C.interval_note(zeros, 0.05)


def test_open_interval_ends_print_open_wherever_they_are():
    """A Hodges-Lehmann end in a gap between Walsh averages is left out of the interval whatever its value (the
    Wilcoxon test rejects there); it prints with a parenthesis, as an infinite end does."""
    from types import SimpleNamespace

    from analysis_lib.report import numbers as fmt

    d = P.load_plan().model_dump(mode="json")
    d["bootstrap"]["n_resamples"] = 100
    d["tiers"]["primary"]["metrics"] = [{"id": "tool_calls_count", "test": "wilcoxon_signed_rank"}]
    d["tiers"]["secondary"]["metrics"] = [{"id": "elapsed_sec", "test": "wilcoxon_signed_rank"}]
    rng = np.random.default_rng(0)
    rows = []
    for t in range(12):  # tied small counts: the normal approximation, whose accepted shifts end in gaps
        base = int(rng.integers(5, 20))
        for prof, v in (("A", base), ("B", base + int(rng.integers(-3, 3)))):
            rows.append({"profile": prof, "task_id": f"t{t}", "repetition": 1, "tool_calls_count": float(v), "success": True})
    r = C.compare(pd.DataFrame(rows), P.parse_plan(d), [("A", "B")]).iloc[0]
    assert r["ci_open"] == "low and high" and r["ci_low"] < 0 < r["ci_high"]
    assert fmt.interval(r) == f"({fmt.number(r['ci_low'], 1, sign=True)}, {fmt.number(r['ci_high'], 1, sign=True)})"
    assert fmt.interval(r).startswith("(−24.4, ")  # it printed [−24.4, +8.1] while it leaves both ends out
    ray = SimpleNamespace(scale="ratio", unit="%", metric="total_tokens", ci_low=-12.34, ci_high=math.inf, ci_open=None)
    assert fmt.interval(ray) == "[−12.3, +∞)"
    # McNemar's exact odds ratio when no task passed only under A: its upper end is infinite, so the end is open.
    from analysis_lib.report.comparison_report import mcnemar_lines

    wins = [{"profile": prof, "task_id": f"t{t}", "repetition": 1, "success": prof == "B" or t < 2}
            for t in range(6) for prof in ("A", "B")]
    d["tiers"]["primary"]["metrics"] = [{"id": "success", "test": "mcnemar_exact"}]
    r = C.compare(pd.DataFrame(wins), P.parse_plan(d), [("A", "B")]).iloc[0]
    assert (r["n_a_only"], r["n_b_only"]) == (0, 4) and r["odds_ratio_high"] == math.inf
    assert re.search(r"exact 95% CI \[\d\.\d\d, ∞\) \(McNemar exact", mcnemar_lines(pd.DataFrame([r]))[0])


def _two_endpoint_frame(cost_of_tokens) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Six tasks, two repetitions each, under text and mcp; cost from tokens by ``cost_of_tokens``."""
    tokens = {"text": [[1000, 1200], [5000, 5400], [800, 800], [20000, 18000], [3000, 3300], [700, 900]],
              "mcp": [[900, 1000], [5200, 5600], [400, 500], [15000, 16000], [3100, 3500], [1400, 1500]]}
    rows = [{"profile": p, "task_id": f"t{i}", "repetition": k, "total_tokens": float(v),
             "total_cost_usd": float(cost_of_tokens(p, i, v)), "success": True}
            for p, per_task in tokens.items() for i, reps in enumerate(per_task) for k, v in enumerate(reps)]
    comp = pd.DataFrame({"tier": "primary", "scale": "ratio", "metric": ["total_tokens", "total_cost_usd"],
                         "repetitions": "majority", "label": ["total tokens", "cost per trial (USD)"],
                         "profile_a": "text", "profile_b": "mcp"})
    return pd.DataFrame(rows), comp


def _log_ratios_by_hand(metrics: pd.DataFrame, column: str) -> np.ndarray:
    med = metrics.groupby(["profile", "task_id"])[column].median().unstack("profile")  # a task's repetitions: median
    return np.log(med["mcp"] / med["text"]).sort_index().to_numpy()


def test_endpoint_correlation_is_pearson_r_of_per_task_log_ratios_and_flags_collinear_endpoints():
    from analysis_lib.report.comparison_report import collinearity_lines

    # Every token priced alike: cost is proportional to tokens, so the log ratios coincide (r = 1).
    metrics, comp = _two_endpoint_frame(lambda p, i, v: 3e-6 * v)
    row = C.endpoint_correlations(metrics, comp).iloc[0]
    ref = np.corrcoef(_log_ratios_by_hand(metrics, "total_tokens"), _log_ratios_by_hand(metrics, "total_cost_usd"))[0, 1]
    assert ref == pytest.approx(1.0)  # numpy.corrcoef on the hand-computed log ratios
    assert row["r"] == pytest.approx(ref, abs=1e-12) and row["n_pairs"] == 6 and bool(row["collinear"])
    lines = collinearity_lines(C.endpoint_correlations(metrics, comp))
    assert len([ln for ln in lines if ln]) == 1
    assert "total tokens and cost per trial (USD) of mcp against text" in lines[0] and "r = 1.00" in lines[0]

    # A price that differs per task in the MCP arm breaks the proportionality: r is well below the threshold.
    price = [1.0, 4.0, 0.5, 2.0, 0.25, 3.0]
    metrics, comp = _two_endpoint_frame(lambda p, i, v: 3e-6 * v * (price[i] if p == "mcp" else 1.0))
    row = C.endpoint_correlations(metrics, comp).iloc[0]
    ref = np.corrcoef(_log_ratios_by_hand(metrics, "total_tokens"), _log_ratios_by_hand(metrics, "total_cost_usd"))[0, 1]
    assert abs(ref) < C.COLLINEAR_R  # numpy.corrcoef: 0.674 on these values
    assert row["r"] == pytest.approx(ref, abs=1e-12) and not row["collinear"]
    assert collinearity_lines(C.endpoint_correlations(metrics, comp)) == []
    assert C.collinear_endpoints(C.endpoint_correlations(metrics, comp)).empty
