"""The one comparison engine: every planned metric for every profile pair, as the plan declares it.

:func:`compare` reads the analysis plan (:mod:`analysis_lib.plan`) and the metric registry
(:mod:`analysis_lib.registry`) and returns one tidy row per metric and profile pair (B against
baseline A, paired on tasks). Every number the project prints about a comparison
(``comparisons.csv``, ``comparison_report.md``, RESULTS.md, the paper's tables, macros and prose,
the forest plot, the notebooks) is read from these rows, so a quantity has one value everywhere.

Each estimate comes with the interval of the same estimand and a test that agrees with it:

* pass/fail (``scale`` rate): the difference in task-majority resolve rate B - A with Tango's
  score interval; McNemar's test as planned (exact, or mid-p), with the discordant-pair odds
  ratio and its exact interval, which excludes 1 exactly when the exact test rejects;
* continuous, ``scale`` ratio: per-task log ratios log(B/A); Hodges-Lehmann estimate with the
  interval that inverts the Wilcoxon signed-rank test on them, shown as 100 (exp(HL) - 1) %;
  tasks where A or B is not positive are undefined and counted; beside it, the budget view: the
  change of the total over the paired tasks with a task bootstrap (``total_change_*``);
* continuous, ``scale`` difference: the same on the differences B - A, in the metric's unit;
* ``cost_per_success``: total cost / total successes per arm, B/A as % change, task bootstrap.

Multiplicity: p-values are adjusted by the tier's declared correction over all rows of the tier,
all profile pairs together. ``significant`` is ``p_adjusted < alpha``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from . import registry, stats
from .plan import AnalysisPlan, Bootstrap, adjust_p

__all__ = ["COLUMNS", "POINT_SCALES", "TEST_LABELS", "usable_trials", "profile_pairs", "plan_columns", "estimate", "compare"]

COLUMNS = [
    "tier", "metric", "label", "unit", "scale", "repetitions", "test", "correction", "profile_a", "profile_b",
    "n_pairs", "n_undefined", "a_value", "b_value", "estimand", "estimate", "ci_low", "ci_high", "interval",
    "p_value", "p_adjusted", "significant", "statistic", "effect_size", "effect_size_name",
    "odds_ratio", "odds_ratio_low", "odds_ratio_high", "n_a_only", "n_b_only",
    "total_change_pct", "total_change_low", "total_change_high", "note",
]
TEST_LABELS = {"mcnemar_exact": "McNemar exact", "mcnemar_midp": "McNemar mid-p", "paired_t": "paired t",
               "sign_flip": "sign-flip randomisation", "gee": "GEE (identity link, exchangeable, task clusters)",
               "wilcoxon_signed_rank": "Wilcoxon signed-rank",
               "descriptive": "descriptive (no test)"}
ESTIMANDS = {
    "rate": "difference in resolve rate (task majority), B − A",
    "pass_rate": "mean over tasks of the per-task pass-rate difference (pass@1), B − A",
    "gee": "marginal difference in pass rate per trial, B − A (GEE, exchangeable within task)",
    "ratio": "typical per-task change, 100 (exp(HL of log B/A) − 1) %",
    "difference": "typical per-task difference B − A (Hodges-Lehmann)",
    "cost_per_success": "change in cost per success, 100 (ratio B/A − 1) %",
}
# Comparison scales whose estimate is a difference of two rates, shown in percentage points.
POINT_SCALES = ("rate", "pass_rate")
# Not the pooled per-trial pass rate: each task weighs the same, whatever its number of repetitions.
PASS_AT_1 = "pass@1 (mean of per-task pass rates)"
GEE_LABEL = "pass rate per trial (GEE, task clusters)"
INTERVALS = {"rate": "Tango score", "ratio": "inverted Wilcoxon", "difference": "inverted Wilcoxon",
             "cost_per_success": "percentile bootstrap over tasks", "paired_t": "t (paired, CR2)",
             "sign_flip": "inverted sign-flip test", "gee": "Wald, robust (sandwich) standard error"}


def _is_true(values: pd.Series) -> np.ndarray:
    return (stats.as_outcome(values.to_numpy()) == 1.0).to_numpy()


def usable_trials(metrics: pd.DataFrame) -> pd.DataFrame:
    """Trials that count: infra errors (``infra_error`` true) are not agent attempts and are left out."""
    if "infra_error" in metrics.columns:
        return metrics[~_is_true(metrics["infra_error"])]
    return metrics


def profile_pairs(profiles: Sequence[str], *, compare: tuple[str, str] | None = None,
                  baseline: str | None = None) -> list[tuple[str, str]]:
    """The (A, B) pairs to compare: ``compare`` alone, or every other profile against ``baseline``.

    The baseline defaults to the first profile in sort order. Raises ValueError naming a profile
    that is not in the data.
    """
    names = sorted(set(map(str, profiles)))
    if compare is not None:
        a, b = map(str, compare)
        for p in (a, b):
            if p not in names:
                raise ValueError(f"--compare: profile {p!r} not found; profiles are {names}")
        if a == b:
            raise ValueError(f"--compare needs two different profiles, got {a!r} twice")
        return [(a, b)]
    if not names:
        return []
    base = names[0] if baseline is None else str(baseline)
    if base not in names:
        raise ValueError(f"baseline profile {base!r} not found; profiles are {names}")
    return [(base, p) for p in names if p != base]


def plan_columns(metrics: pd.DataFrame, metric_id: str) -> list[str]:
    """The columns a plan metric reads: itself, or every ``mcp_calls__*`` column for that family."""
    if metric_id == registry.MCP_TOOL_PREFIX + "*":
        return sorted(c for c in metrics.columns if c.startswith(registry.MCP_TOOL_PREFIX))
    if metric_id in registry.DERIVED:
        return [metric_id] if {"total_cost_usd", "success"} <= set(metrics.columns) else []
    return [metric_id] if metric_id in metrics.columns else []


def _binary_row(trials: pd.DataFrame, column: str, test: str, a: str, b: str, confidence: float) -> dict:
    pairs = stats.pair_tasks(trials, column, a, b, binary=True)
    row: dict[str, Any] = {"n_pairs": len(pairs), "n_undefined": 0}
    if len(pairs) == 0:
        return {**row, "note": "no task with an outcome under both profiles"}
    pa, pb = pairs["a"].to_numpy() > 0.5, pairs["b"].to_numpy() > 0.5
    n10, n01 = int(np.sum(pa & ~pb)), int(np.sum(~pa & pb))
    tango = stats.tango_interval(n10, n01, len(pairs), confidence=confidence).iloc[0]
    odds = stats.conditional_odds_ratio(n10, n01, confidence=confidence).iloc[0]
    row.update(a_value=float(pa.mean()), b_value=float(pb.mean()), estimate=float(tango["difference"]),
               ci_low=float(tango["ci_low"]), ci_high=float(tango["ci_high"]), odds_ratio=float(odds["odds_ratio"]),
               odds_ratio_low=float(odds["ci_low"]), odds_ratio_high=float(odds["ci_high"]), n_a_only=n10, n_b_only=n01)
    if test == "mcnemar_exact":
        t = stats.mcnemar_from_table([[0, n10], [n01, 0]], exact=True).iloc[0]
        row.update(statistic=float(t["statistic"]), p_value=float(t["p_val"]))
    elif test == "mcnemar_midp":
        row.update(statistic=float(min(n10, n01)), p_value=stats.mcnemar_midp(n10, n01))
    return row


def _pass_rate_row(trials: pd.DataFrame, column: str, test: str, a: str, b: str, boot: Bootstrap) -> dict:
    """Every repetition counts: the mean over tasks of the per-task pass-rate difference (pass@1)."""
    pairs = stats.pair_tasks(trials, column, a, b, binary=True, how="mean")
    row: dict[str, Any] = {"n_pairs": len(pairs), "n_undefined": 0, "interval": INTERVALS[test]}
    if len(pairs) == 0:
        return {**row, "note": "no task with an outcome under both profiles"}
    d = pairs["b"].to_numpy(float) - pairs["a"].to_numpy(float)
    row.update(a_value=float(pairs["a"].mean()), b_value=float(pairs["b"].mean()))
    if test == "gee":
        sub = trials[trials["profile"].astype(str).isin([a, b]) & trials["task_id"].astype(str).isin(pairs["task_id"])]
        y = stats.as_outcome(sub[column].to_numpy()).to_numpy()
        is_b = (sub["profile"].astype(str) == b).to_numpy()
        r = stats.gee_difference(y, is_b, sub["task_id"].astype(str).to_numpy(), confidence=boot.confidence).iloc[0]
        row.update(p_value=float(r["p_val"]), statistic=float(r["z"]), a_value=float(np.nanmean(y[~is_b])),
                   b_value=float(np.nanmean(y[is_b])))
    elif test == "sign_flip":
        r = stats.sign_flip(d, confidence=boot.confidence, seed=boot.seed).iloc[0]
        note = None if r["exact"] else f"Monte-Carlo p, standard error {r['mc_se']:.4f}"
        row.update(p_value=float(r["p_val"]), note=note)
    else:
        r = stats.paired_t(d, confidence=boot.confidence).iloc[0]
        row.update(p_value=float(r["p_val"]), statistic=float(r["statistic"]))
    row.update(estimate=float(r["estimate"]), ci_low=float(r["ci_low"]), ci_high=float(r["ci_high"]))
    return row


def _continuous_row(trials: pd.DataFrame, column: str, scale: str, test: str, a: str, b: str,
                    boot: Bootstrap, how: str = "median") -> dict:
    pairs = stats.pair_tasks(trials, column, a, b, binary=False, how=how).dropna(subset=["a", "b"])
    va, vb = pairs["a"].to_numpy(float), pairs["b"].to_numpy(float)
    defined = (va > 0) & (vb > 0) if scale == "ratio" else np.isfinite(va) & np.isfinite(vb)
    row: dict[str, Any] = {"n_pairs": int(defined.sum()), "n_undefined": int((~defined).sum())}
    if not defined.any():
        why = "no task with values under both profiles" if len(pairs) == 0 else \
            "no task with a positive value under both profiles (a ratio needs both)"
        return {**row, "note": why}
    va, vb = va[defined], vb[defined]
    d = np.log(vb / va) if scale == "ratio" else vb - va
    hl = stats.hodges_lehmann(d, confidence=boot.confidence).iloc[0]
    to_scale = (lambda x: 100.0 * np.expm1(x)) if scale == "ratio" else (lambda x: x)  # noqa: E731
    row.update(a_value=float(np.median(va)), b_value=float(np.median(vb)), estimate=float(to_scale(hl["estimate"])),
               ci_low=float(to_scale(hl["ci_low"])), ci_high=float(to_scale(hl["ci_high"])))
    if scale == "ratio":
        # The budget view: the change of the total over the paired tasks (sum B / sum A), task bootstrap.
        one = np.ones_like(va)
        tot = stats.ratio_of_totals(va, one, vb, one, n_boot=boot.n_resamples, seed=boot.seed,
                                    confidence=boot.confidence).set_index("arm").loc["B/A"]
        row.update(total_change_pct=100.0 * (tot["estimate"] - 1.0), total_change_low=100.0 * (tot["ci_low"] - 1.0),
                   total_change_high=100.0 * (tot["ci_high"] - 1.0))
    if test == "wilcoxon_signed_rank":
        w = stats.wilcoxon(d).iloc[0]
        row.update(p_value=float(w["p_val"]), statistic=float(w["V"]), effect_size=float(w["RBC"]),
                   effect_size_name="matched-pairs rank-biserial r", test=f"{TEST_LABELS[test]} ({w['method']})")
    return row


def _cost_per_success_row(trials: pd.DataFrame, a: str, b: str, boot: Bootstrap) -> dict:
    ok = trials[stats.as_outcome(trials["success"].to_numpy()).notna().to_numpy()
                & pd.to_numeric(trials["total_cost_usd"], errors="coerce").notna().to_numpy()]
    per_task = (ok.assign(cost=pd.to_numeric(ok["total_cost_usd"], errors="coerce"),
                          win=stats.as_outcome(ok["success"].to_numpy()).to_numpy())
                .groupby(["profile", "task_id"])[["cost", "win"]].sum().reset_index())
    both = per_task[per_task["profile"] == a].merge(per_task[per_task["profile"] == b], on="task_id", suffixes=("_a", "_b"))
    row: dict[str, Any] = {"n_pairs": len(both), "n_undefined": 0}
    if both.empty:
        return {**row, "note": "no task with cost and outcome under both profiles"}
    r = stats.ratio_of_totals(both["cost_a"], both["win_a"], both["cost_b"], both["win_b"], n_boot=boot.n_resamples,
                              seed=boot.seed, confidence=boot.confidence).set_index("arm")
    row.update(a_value=r.loc["A", "estimate"], b_value=r.loc["B", "estimate"])
    if not np.isfinite(r.loc["B/A", "estimate"]):
        side = " and ".join(p for p, v in ((a, both["win_a"].sum()), (b, both["win_b"].sum())) if v == 0)
        return {**row, "note": f"undefined: no success under {side} on the paired tasks"}
    ratio = r.loc["B/A"]
    note = f"{int(ratio['n_undefined'])} of {boot.n_resamples} resamples without a success in an arm left out" \
        if ratio["n_undefined"] else None
    row.update(estimate=100.0 * (ratio["estimate"] - 1.0), ci_low=100.0 * (ratio["ci_low"] - 1.0),
               ci_high=100.0 * (ratio["ci_high"] - 1.0), note=note)
    return row


def _row(trials: pd.DataFrame, column: str, test: str, a: str, b: str, plan: AnalysisPlan, repetitions: str) -> dict:
    m = registry.metric(column)
    if column == "cost_per_success":
        kind = "cost_per_success"
        row = _cost_per_success_row(trials, a, b, plan.bootstrap)
    elif m.kind == "binary" and repetitions == "all":
        kind = "pass_rate"
        row = _pass_rate_row(trials, column, test, a, b, plan.bootstrap)
    elif m.kind == "binary":
        kind = "rate"
        row = _binary_row(trials, column, test, a, b, plan.bootstrap.confidence)
    else:
        kind = m.scale if m.scale in ("ratio", "difference") else "difference"
        row = _continuous_row(trials, column, kind, test, a, b, plan.bootstrap,
                              "geometric_mean" if repetitions == "all" else "median")
    unit = "%" if kind in ("ratio", "cost_per_success") else ("points" if kind in POINT_SCALES else m.unit)
    label = (GEE_LABEL if kind == "pass_rate" and test == "gee" else PASS_AT_1 if kind == "pass_rate" and column == "success"
             else registry.DERIVED["resolve_rate"].label if column == "success" else m.axis_label)
    estimand = ESTIMANDS[kind] if kind != "rate" or column == "success" else \
        f"difference in task-majority share of {m.label}, B − A"
    if kind == "pass_rate":
        estimand = ESTIMANDS["gee"] if test == "gee" else ESTIMANDS[kind]
    elif repetitions == "all" and kind in ("ratio", "difference"):
        estimand += " of per-task geometric means of the repetitions"
    return {"metric": column, "label": label, "unit": unit, "scale": kind, "estimand": estimand,
            "interval": INTERVALS.get(kind), "repetitions": repetitions, **row}


def estimate(trials: pd.DataFrame, column: str, a: str, b: str, plan: AnalysisPlan, *,
             confidence: float | None = None) -> dict:
    """One comparison row of ``column`` (B against A) as the plan computes it, at another confidence if given.

    The test is the one the plan's way of combining repetitions implies (McNemar exact, paired t,
    Wilcoxon); ``trials`` must already exclude infrastructure errors (:func:`usable_trials`).
    """
    reps = plan.pairing.repetitions
    kind = registry.metric(column).kind
    test = ("mcnemar_exact" if reps == "majority" else "paired_t") if kind == "binary" else "wilcoxon_signed_rank"
    conf = plan.bootstrap.confidence if confidence is None else confidence
    return _row(trials, column, test, a, b, plan.model_copy(update={"bootstrap": plan.bootstrap.model_copy(
        update={"confidence": conf})}), reps)


def compare(metrics: pd.DataFrame, plan: AnalysisPlan, pairs: list[tuple[str, str]], *,
            refused: dict[str, str] | None = None) -> pd.DataFrame:
    """Every planned metric for every profile pair, tier by tier (``COLUMNS``); see the module docstring.

    Infra-error trials are left out. ``refused`` maps a column (e.g. ``success``) to the reason it
    must not be analysed (missing evaluations): its rows carry only that reason. A planned test
    that cannot run (refused, no pairs) counts as p = 1 in its tier's correction, so the family
    keeps its declared size.
    """
    trials = usable_trials(metrics)
    refused = refused or {}
    rows: list[dict] = []
    for tier, spec, tier_def in plan.tier_metrics():
        cols = plan_columns(trials, spec.id)
        for a, b in pairs:
            base = {"tier": tier, "correction": tier_def.correction, "profile_a": a, "profile_b": b,
                    "test": TEST_LABELS[spec.test]}
            if not cols:
                m = registry.metric(spec.id.rstrip("*") + ("x" if spec.id.endswith("*") else ""))
                rows.append({**base, "metric": spec.id, "label": m.label, "n_pairs": 0, "n_undefined": 0,
                             "note": "no MCP tool was called in these runs" if spec.id.endswith("*")
                             else f"column {spec.id!r} is not in the metrics table"})
                continue
            if spec.id.endswith("*"):
                # A tool neither profile of this pair called has nothing to describe.
                pair = trials[trials["profile"].astype(str).isin([a, b])]
                cols_ab = [c for c in cols if pd.to_numeric(pair[c], errors="coerce").fillna(0).ne(0).any()]
                if not cols_ab:
                    rows.append({**base, "metric": spec.id, "label": "MCP calls per tool", "n_pairs": 0,
                                 "n_undefined": 0, "note": f"no MCP tool was called under {a} or {b}"})
            else:
                cols_ab = cols
            for col in cols_ab:
                if col in refused:
                    rows.append({**base, "metric": col, "label": registry.metric(col).label, "n_pairs": 0,
                                 "n_undefined": 0, "note": refused[col]})
                    continue
                rows.append({**base, **_row(trials, col, spec.test, a, b, plan, plan.repetitions_of(spec))})
    out = pd.DataFrame(rows, columns=COLUMNS)
    for c in ("a_value", "b_value", "estimate", "ci_low", "ci_high", "p_value", "p_adjusted", "statistic",
              "effect_size", "odds_ratio", "odds_ratio_low", "odds_ratio_high", "total_change_pct",
              "total_change_low", "total_change_high"):
        out[c] = pd.to_numeric(out[c], errors="coerce").astype(float)
    for c in ("n_pairs", "n_undefined"):
        out[c] = out[c].fillna(0).astype(int)
    for c in ("n_a_only", "n_b_only"):
        out[c] = pd.to_numeric(out[c], errors="coerce").astype("Int64")
    for tier in ("primary", "secondary"):
        idx = out.index[out["tier"] == tier]
        if len(idx):
            p = out.loc[idx, "p_value"].to_numpy(float)
            adj = adjust_p(np.where(np.isnan(p), 1.0, p), getattr(plan.tiers, tier).correction)
            out.loc[idx, "p_adjusted"] = np.where(np.isnan(p), np.nan, adj)
    sig = pd.Series(pd.NA, index=out.index, dtype="boolean")
    has_p = (out["tier"] != "exploratory") & out["p_adjusted"].notna()
    sig[has_p] = out.loc[has_p, "p_adjusted"] < plan.alpha
    out["significant"] = sig
    return out
