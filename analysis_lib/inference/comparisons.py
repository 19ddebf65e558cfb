"""The one comparison engine: every planned metric for every profile pair, as the plan declares it.

:func:`compare` reads the analysis plan (:mod:`analysis_lib.study.plan`) and the metric registry
(:mod:`analysis_lib.core.registry`) and returns one tidy row per metric and profile pair (B against
baseline A, paired on tasks). Every number the project prints about a comparison
(``comparisons.csv``, ``comparison_report.md``, RESULTS.md, the paper's tables, macros and prose,
the forest plot, the notebooks) is read from these rows, so a quantity has one value everywhere.
:func:`rule` decides, for a metric and a test, how repetitions combine, which estimand is reported
and with which interval; :func:`compare` and :func:`estimate` (the hypotheses' intervals) both use it.

Each estimate comes with the interval of the same estimand and a test; where the two can disagree,
the row's ``note`` says so:

* pass/fail (``scale`` rate): the difference in task-majority resolve rate B - A with Tango's
  score interval; McNemar's test as planned (exact, or mid-p), with the discordant-pair odds
  ratio and its exact interval, which excludes 1 exactly when the exact test rejects. Tango's
  interval is a score interval: it can exclude 0 while the exact test does not reject (or the
  reverse), and the row's note says so where it happens;
* continuous, ``scale`` ratio: per-task log ratios log(B/A); Hodges-Lehmann estimate with the
  interval that inverts the Wilcoxon signed-rank test on them (zeros by Pratt's rule in both, ties
  on the log ratios rounded to 9 decimals), shown as 100 (exp(HL) - 1) %; beside it, the budget
  view: the change of the total over the paired tasks with a task bootstrap (``total_change_*``);
* continuous, ``scale`` difference: the same on the differences B - A, in the metric's unit;
* ``cost_per_success``: total cost / total successes per arm, B/A as % change, task bootstrap.

Every task both profiles ran is either paired (``n_pairs``) or counted in ``n_undefined`` with the
reason in ``note`` (no value, a geometric mean or a ratio undefined, no outcome).

Multiplicity: p-values are adjusted by the tier's declared correction over all rows of the tier,
all profile pairs together. ``significant`` is ``p_adjusted < alpha``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .. import stats
from ..core import registry
from ..stats.multicomp import adjust_p
from ..study.plan import AnalysisPlan, Bootstrap

__all__ = [
    "COLUMNS", "POINT_SCALES", "RATE_DIFFERENCE_UNIT", "scale_unit", "TEST_LABELS", "Rule", "rule",
    "repetition_aggregate", "task_pairs",
    "per_task_value", "sides_summary", "planned_test", "usable_trials",
    "plan_columns", "estimate", "compare", "excludes_zero", "interval_note",
    "COLLINEAR_R", "endpoint_correlations", "collinear_endpoints", "FEW_PAIRS", "PARTIAL_TIER", "partial_credit",
    "p_floor_note"
]

COLUMNS = [
    "tier", "metric", "label", "unit", "scale", "repetitions", "test", "correction", "profile_a", "profile_b",
    "n_pairs", "n_undefined", "a_value", "b_value", "estimand", "estimate", "ci_low", "ci_high", "ci_open", "interval",
    "p_value", "p_min", "p_adjusted", "significant", "statistic", "effect_size", "effect_size_name",
    "odds_ratio", "odds_ratio_low", "odds_ratio_high", "n_a_only", "n_b_only", "a_b_summary",
    "total_change_pct", "total_change_low", "total_change_high", "note",
]
TEST_LABELS = {"mcnemar_exact": "McNemar exact", "mcnemar_midp": "McNemar mid-p", "paired_t": "paired t",
               "sign_flip": "sign-flip randomisation",
               "gee": "GEE (identity link, exchangeable, task clusters; bias-reduced SE, t with tasks − 1 df)",
               "wilcoxon_signed_rank": "Wilcoxon signed-rank",
               "descriptive": "descriptive (no test)"}
ESTIMANDS = {
    "rate": "difference in resolve rate (task majority), B − A",
    "pass_rate": "mean over tasks of the per-task pass-rate difference (pass@1), B − A",
    "gee": "marginal difference in pass rate per trial, B − A (GEE, exchangeable within task)",
    "ratio": "typical per-task change, 100 (exp(HL of log B/A) − 1) %",
    "difference": "typical per-task difference B − A (Hodges-Lehmann)",
    "cost_per_success": "change in cost per success, 100 (ratio B/A − 1) %",
    "mean": "difference in the mean, B − A: mean over tasks of the per-task difference of the trials' mean",
}
# The corrections a plan may declare, by name.
CORRECTION_NAMES = {"holm": "Holm", "fdr_bh": "Benjamini-Hochberg", "none": "none"}
# The tier of the mean outcome a partial-credit study reports beside pass/fail (the plan's partial_credit): described
# beside the planned tiers, with no correction and no verdict of its own.
PARTIAL_TIER = "partial_credit"
# Comparison scales whose estimate is a difference of two rates, shown in percentage points.
POINT_SCALES = ("rate", "pass_rate")
# The unit of a rate difference, everywhere (CSV column, tables, macros, figures): "pp", percentage points.
# Not "points" (score points?) and never "%", which is the relative change the ratio metrics report beside it.
RATE_DIFFERENCE_UNIT = "pp"
# Below this many paired tasks a p-value says little: the comparison report and the paper's limitations say so.
FEW_PAIRS = 10
# Not the pooled per-trial pass rate: each task weighs the same, whatever its number of repetitions.
PASS_AT_1 = "pass@1 (mean of per-task pass rates)"
GEE_LABEL = "pass rate per trial (GEE, task clusters)"
INTERVALS = {"rate": "Tango score", "ratio": "inverted Wilcoxon", "difference": "inverted Wilcoxon",
             "cost_per_success": "percentile bootstrap over tasks", "paired_t": "t (paired, CR2)",
             "sign_flip": "inverted sign-flip test", "gee": "t, bias-reduced (Mancl-DeRouen) sandwich",
             "mean_paired_t": "t (paired, tasks)", "mean_sign_flip": "inverted sign-flip test"}
# Ties and zeros of the Wilcoxon test are found on differences rounded this far: log ratios to 9
# decimals (a ratio known to one part in a billion), differences to 6 decimals below the metric's own
# precision. Floating-point noise (log 6/4 against log 3/2) is then no longer taken for a difference.
LOG_RATIO_DECIMALS = 9
EXTRA_DECIMALS = 6
# Two endpoints whose per-task log ratios correlate beyond this are one finding counted twice.
COLLINEAR_R = 0.95
CORRELATION_COLUMNS = ["profile_a", "profile_b", "metric_x", "metric_y", "label_x", "label_y", "n_pairs", "r",
                       "collinear"]


@dataclass(frozen=True)
class Rule:
    """How one comparison is made: the test, how a task's repetitions combine, the estimand and its interval."""

    metric: str
    test: str
    repetitions: str
    scale: str  # rate, pass_rate, ratio, difference or cost_per_success
    how: str  # stats.aggregate_repetitions' way of combining a task's repetitions
    label: str
    unit: str
    estimand: str
    interval: str

    @property
    def decimals(self) -> int:
        """The precision at which ties and zeros of the per-task differences are found."""
        return LOG_RATIO_DECIMALS if self.scale == "ratio" else registry.metric(self.metric).decimals + EXTRA_DECIMALS


def scale_unit(scale: str, metric_unit: str = "") -> str:
    """The unit of an estimate on ``scale``: ``pp`` (rate differences), ``%`` (ratios, cost per success) or the
    metric's own; the one rule behind the ``unit`` columns and every printed unit of a comparison."""
    if scale in POINT_SCALES:
        return RATE_DIFFERENCE_UNIT
    if scale in ("ratio", "cost_per_success"):
        return "%"
    return metric_unit if isinstance(metric_unit, str) else ""  # a unitless metric (reward) reads back from CSV as NaN


def repetition_aggregate(metric_id: str, repetitions: str) -> str:
    """How a comparison of ``metric_id`` combines a task's repetitions into the one value it pairs
    (:func:`analysis_lib.stats.pairing.aggregate_repetitions`' ``how``): under ``majority`` the majority verdict or the
    median, under ``all`` the pass rate or the registry's mean (geometric, or arithmetic where zeros occur)."""
    m = registry.metric(metric_id)
    if metric_id == "cost_per_success":
        return "sum"
    if m.kind == "binary":
        return "mean" if repetitions == "all" else "majority"
    return m.mean_of_repetitions if repetitions == "all" else "median"


def task_pairs(trials: pd.DataFrame, metric_id: str, a: str, b: str, repetitions: str) -> pd.DataFrame:
    """The per-task values a comparison of ``metric_id`` pairs, A against B (:func:`analysis_lib.stats.pairing.pair_tasks`
    with :func:`repetition_aggregate`): the rows behind an estimate, for the engine and the per-task figure alike."""
    return stats.pair_tasks(trials, metric_id, a, b, binary=registry.metric(metric_id).kind == "binary",
                            how=repetition_aggregate(metric_id, repetitions))


_AGGREGATE_NOUNS = {"median": "medians", "mean": "means", "geometric_mean": "geometric means",
                    "majority": "majority verdicts", "sum": "sums"}


def per_task_value(how: str) -> str:
    """A task's value in words: ``per-task median of the repetitions`` (``how`` as :func:`repetition_aggregate`)."""
    return f"per-task {_AGGREGATE_NOUNS[how].removesuffix('s')} of the repetitions"


def sides_summary(scale: str, how: str, test: str = "") -> str:
    """What a comparison row's A and B values are, with their unit of aggregation (over tasks, over trials)."""
    if scale == "rate":
        return "share of tasks passed (majority of the repetitions)"
    if scale == "pass_rate":
        return "pass rate over trials" if test in ("gee", TEST_LABELS["gee"]) else "mean over tasks of per-task pass rates"
    if scale == "cost_per_success":
        return "total cost / successes over the paired tasks"
    if scale == "mean":
        return "mean over the paired tasks of per-task means"
    return f"median over tasks of per-task {_AGGREGATE_NOUNS[how]}"


def rule(metric_id: str, test: str, repetitions: str) -> Rule:
    """The one rule for a comparison of ``metric_id`` by ``test`` with repetitions combined as ``repetitions``."""
    m = registry.metric(metric_id)
    how = repetition_aggregate(metric_id, repetitions)
    if m.kind != "binary" and test in ("paired_t", "sign_flip"):
        # The mean outcome of a partial-credit study: per-task means of the repetitions, their mean difference.
        return Rule(metric_id, test, repetitions, "mean", "mean", f"mean {m.label}", m.unit, ESTIMANDS["mean"],
                    INTERVALS["mean_" + test])
    if metric_id == "cost_per_success":
        scale = "cost_per_success"
    elif m.kind == "binary":
        scale = "pass_rate" if repetitions == "all" else "rate"
    else:
        scale = m.scale if m.scale in ("ratio", "difference") else "difference"
    unit = scale_unit(scale, m.unit)
    label = (GEE_LABEL if scale == "pass_rate" and test == "gee" else PASS_AT_1 if scale == "pass_rate" and metric_id == "success"
             else registry.DERIVED["resolve_rate"].label if metric_id == "success" else m.axis_label)
    if scale == "pass_rate":
        estimand = ESTIMANDS["gee"] if test == "gee" else ESTIMANDS[scale]
    elif scale == "rate" and metric_id != "success":
        estimand = f"difference in task-majority share of {m.label}, B − A"
    else:
        estimand = ESTIMANDS[scale]
    if repetitions == "all" and scale in ("ratio", "difference"):
        estimand += " of per-task " + ("geometric means" if how == "geometric_mean" else "means") + " of the repetitions"
    interval = INTERVALS[test if test in ("sign_flip", "gee") else "paired_t"] if scale == "pass_rate" else INTERVALS[scale]
    return Rule(metric_id, test, repetitions, scale, how, label, unit, estimand, interval)


def planned_test(plan: AnalysisPlan, metric_id: str) -> tuple[str, str]:
    """The test and the way of combining repetitions that ``plan`` declares for ``metric_id``.

    The row of a primary or secondary tier that names the metric; a metric the tiers do not test gets
    the default of its kind: McNemar exact on majority verdicts, the paired t on pass rates with every
    repetition, Wilcoxon signed-rank for continuous metrics.
    """
    for tier, spec, _ in plan.tier_metrics():
        if tier in ("primary", "secondary") and spec.id == metric_id:
            return spec.test, plan.repetitions_of(spec)
    reps = plan.pairing.repetitions
    if registry.metric(metric_id).kind == "binary":
        return ("mcnemar_exact" if reps == "majority" else "paired_t"), reps
    return "wilcoxon_signed_rank", reps


def _is_true(values: pd.Series) -> np.ndarray:
    return (stats.as_outcome(values.to_numpy()) == 1.0).to_numpy()


def usable_trials(metrics: pd.DataFrame) -> pd.DataFrame:
    """Trials that count: infra errors (``infra_error`` true) are not agent attempts and are left out."""
    if "infra_error" in metrics.columns:
        return metrics[~_is_true(metrics["infra_error"])]
    return metrics


def plan_columns(metrics: pd.DataFrame, metric_id: str) -> list[str]:
    """The columns a plan metric reads: itself, or every ``mcp_calls__*`` column for that family."""
    if metric_id == registry.MCP_TOOL_PREFIX + "*":
        return sorted(c for c in metrics.columns if c.startswith(registry.MCP_TOOL_PREFIX))
    if metric_id in registry.DERIVED:
        return [metric_id] if {"total_cost_usd", "success"} <= set(metrics.columns) else []
    return [metric_id] if metric_id in metrics.columns else []


def _ran_by_both(metrics: pd.DataFrame, a: str, b: str) -> list[str]:
    """Tasks with at least one trial under each profile (infrastructure errors included): every one of them
    is a pair of the row or counted in its ``n_undefined``."""
    prof, task = metrics["profile"].astype(str), metrics["task_id"].astype(str)
    return sorted(set(task[prof == a]) & set(task[prof == b]))


def _undefined(reasons: Counter) -> tuple[int, str | None]:
    """``n_undefined`` and the sentence that says why, from a count of tasks per reason."""
    n = sum(reasons.values())
    if not n:
        return 0, None
    parts = [f"{k} {why}" for why, k in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))]
    return n, f"{n} of the tasks both profiles ran left out: " + "; ".join(parts)


def _missing_tasks(ran: list[str], pairs: pd.DataFrame, why: str) -> Counter:
    missing = len(set(ran) - set(pairs["task_id"].astype(str)))
    return Counter({why: missing}) if missing else Counter()


def fmt_count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _join(*notes: str | None) -> str | None:
    kept = [n for n in notes if n]
    return "; ".join(kept) if kept else None


def _open_at(row: Any, side: str) -> bool:
    """Whether the row's interval is open at its ``low`` or ``high`` end: a comparison row's ``ci_open``, or
    the ``low_closed`` / ``high_closed`` of :func:`analysis_lib.stats.nonparametric.hodges_lehmann`."""
    get = row.get if isinstance(row, dict) else lambda k, d=None: getattr(row, k, d)
    ci_open, closed = get("ci_open"), get(f"{side}_closed")
    return (isinstance(ci_open, str) and side in ci_open) or closed is False or closed is np.False_


def excludes_zero(row: Any) -> bool:
    """Whether a comparison row's interval excludes 0, an open end at 0 (a shift the test itself rejects) excluding it."""
    get = row.get if isinstance(row, dict) else lambda k, d=None: getattr(row, k, d)
    lo, hi = get("ci_low"), get("ci_high")
    if lo == 0 and _open_at(row, "low") or hi == 0 and _open_at(row, "high"):
        return True
    return not (lo <= 0 <= hi)


def interval_note(row: Any, alpha: float, *, with_p: bool = True) -> str | None:
    """The sentence a row needs beside its p-value where interval and test seem to, or do, disagree.

    A Tango score interval beside McNemar's exact test can exclude 0 while the test does not reject (or the
    reverse); an inverted interval that is open at 0 prints as ``[.., 0]`` although it excludes 0. Without
    ``with_p`` the sentence quotes no number (the paper's prose gives the p-value as a macro beside it).
    """
    get = row.get if isinstance(row, dict) else lambda k, d=None: getattr(row, k, d)
    p, lo, hi = get("p_value"), get("ci_low"), get("ci_high")
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return None
    at_zero = (lo == 0 and _open_at(row, "low")) or (hi == 0 and _open_at(row, "high"))
    if at_zero and get("estimate") == 0:  # most differences are 0; the test looks at the others, which lean one way
        return ("the estimate is 0 (most differences are 0) but the interval is open at 0: its test, which sets the "
                "zeros aside, rejects 0 itself because the other differences lean one way")
    if p is None or pd.isna(p):
        return "the interval is open at 0: its test rejects at 0 itself and accepts every shift just inside" if at_zero \
            else None
    excludes = excludes_zero(row)
    if excludes == (p < alpha):
        return ("the interval is open at 0 (it excludes 0): the test rejects at 0 itself and accepts every shift just "
                "inside") if at_zero else None
    if get("scale") == "rate":
        test = get("test") or "McNemar's exact test"
        return (f"Tango's score interval {'excludes' if excludes else 'holds'} 0 while {test} "
                f"{'does not reject' if excludes else 'rejects'}{f' (p = {p:.3f})' if with_p else ''}: a score interval "
                "and an exact test can "
                "disagree near the boundary; the exact odds-ratio interval follows the exact test")
    return (f"the interval {'excludes' if excludes else 'holds'} 0 while the test "
            f"{'does not reject' if excludes else 'rejects'}" + (f" (p = {p:.3f})" if with_p else ""))


def _binary_row(metrics: pd.DataFrame, trials: pd.DataFrame, r: Rule, a: str, b: str, confidence: float) -> dict:
    ran = _ran_by_both(metrics, a, b)
    pairs = task_pairs(trials, r.metric, a, b, r.repetitions)
    n_undef, why = _undefined(_missing_tasks(ran, pairs, "without an outcome under one profile (infrastructure errors)"))
    row: dict[str, Any] = {"n_pairs": len(pairs), "n_undefined": n_undef, "note": why}
    if len(pairs) == 0:
        return {**row, "note": _join("no task with an outcome under both profiles", why)}
    pa, pb = pairs["a"].to_numpy() > 0.5, pairs["b"].to_numpy() > 0.5
    n10, n01 = int(np.sum(pa & ~pb)), int(np.sum(~pa & pb))
    tango = stats.tango_interval(n10, n01, len(pairs), confidence=confidence).iloc[0]
    odds = stats.conditional_odds_ratio(n10, n01, confidence=confidence).iloc[0]
    row.update(a_value=float(pa.mean()), b_value=float(pb.mean()), estimate=float(tango["difference"]),
               ci_low=float(tango["ci_low"]), ci_high=float(tango["ci_high"]), odds_ratio=float(odds["odds_ratio"]),
               odds_ratio_low=float(odds["ci_low"]), odds_ratio_high=float(odds["ci_high"]), n_a_only=n10, n_b_only=n01)
    if r.test == "mcnemar_exact":
        t = stats.mcnemar_from_table([[0, n10], [n01, 0]], exact=True).iloc[0]
        # The smallest p this test can give on these pairs: every discordant task on one side.
        floor = stats.mcnemar_from_table([[0, n10 + n01], [0, 0]], exact=True).iloc[0]["p_val"]
        row.update(statistic=float(t["statistic"]), p_value=float(t["p_val"]), p_min=float(floor))
    elif r.test == "mcnemar_midp":
        row.update(statistic=float(min(n10, n01)), p_value=stats.mcnemar_midp(n10, n01),
                   p_min=stats.mcnemar_midp(n10 + n01, 0))
    row["note"] = _join(interval_note({**row, "scale": r.scale, "test": TEST_LABELS[r.test]}, 1 - confidence), why)
    return row


def _pass_rate_row(metrics: pd.DataFrame, trials: pd.DataFrame, r: Rule, a: str, b: str, boot: Bootstrap) -> dict:
    """Every repetition counts: the mean over tasks of the per-task pass-rate difference (pass@1)."""
    ran = _ran_by_both(metrics, a, b)
    pairs = task_pairs(trials, r.metric, a, b, r.repetitions)
    n_undef, why = _undefined(_missing_tasks(ran, pairs, "without an outcome under one profile (infrastructure errors)"))
    row: dict[str, Any] = {"n_pairs": len(pairs), "n_undefined": n_undef, "note": why}
    if len(pairs) == 0:
        return {**row, "note": _join("no task with an outcome under both profiles", why)}
    d = pairs["b"].to_numpy(float) - pairs["a"].to_numpy(float)
    row.update(a_value=float(pairs["a"].mean()), b_value=float(pairs["b"].mean()))
    if r.test == "gee":
        sub = trials[trials["profile"].astype(str).isin([a, b]) & trials["task_id"].astype(str).isin(pairs["task_id"])]
        y = stats.as_outcome(sub[r.metric].to_numpy()).to_numpy()
        is_b = (sub["profile"].astype(str) == b).to_numpy()
        res = stats.gee_difference(y, is_b, sub["task_id"].astype(str).to_numpy(), confidence=boot.confidence).iloc[0]
        row.update(p_value=float(res["p_val"]), statistic=float(res["t"]), a_value=float(np.nanmean(y[~is_b])),
                   b_value=float(np.nanmean(y[is_b])), p_min=0.0)
    elif r.test == "sign_flip":
        res = _sign_flip(d, boot, row, why)
    else:
        res = stats.paired_t(d, confidence=boot.confidence).iloc[0]
        if r.test == "paired_t":
            row.update(p_value=float(res["p_val"]), statistic=float(res["statistic"]), p_min=0.0)
    row.update(estimate=float(res["estimate"]), ci_low=float(res["ci_low"]), ci_high=float(res["ci_high"]))
    row["note"] = _join(interval_note(row, 1 - boot.confidence), row.get("note"))
    return row


def _sign_flip(d: np.ndarray, boot: Bootstrap, row: dict, why: str | None) -> pd.Series:
    """The sign-flip test of the paired differences ``d`` into ``row`` (p, its floor, a Monte-Carlo note); its result."""
    res = stats.sign_flip(d, confidence=boot.confidence, seed=boot.seed).iloc[0]
    mc = None if res["exact"] else f"Monte-Carlo p, standard error {res['mc_se']:.4f}"
    row.update(p_value=float(res["p_val"]), note=_join(mc, why), p_min=_sign_flip_floor(d, boot))
    return res


def _mean_row(metrics: pd.DataFrame, trials: pd.DataFrame, r: Rule, a: str, b: str, boot: Bootstrap) -> dict:
    """The paired mean difference of a continuous outcome over tasks (per-task means of the repetitions): the
    paired t with its interval, or the sign-flip randomisation test with the interval that inverts it."""
    ran = _ran_by_both(metrics, a, b)
    pairs = stats.pair_tasks(trials, r.metric, a, b, binary=False, how="mean").dropna(subset=["a", "b"])
    n_undef, why = _undefined(_missing_tasks(ran, pairs, "with no value under one profile"))
    row: dict[str, Any] = {"n_pairs": len(pairs), "n_undefined": n_undef, "note": why}
    if len(pairs) == 0:
        return {**row, "note": _join("no task with values under both profiles", why)}
    d = pairs["b"].to_numpy(float) - pairs["a"].to_numpy(float)
    row.update(a_value=float(pairs["a"].mean()), b_value=float(pairs["b"].mean()))
    if r.test == "sign_flip":
        res = _sign_flip(d, boot, row, why)
    else:
        res = stats.paired_t(d, confidence=boot.confidence).iloc[0]
        row.update(p_value=float(res["p_val"]), statistic=float(res["statistic"]), p_min=0.0)
    row.update(estimate=float(res["estimate"]), ci_low=float(res["ci_low"]), ci_high=float(res["ci_high"]))
    row["note"] = _join(interval_note(row, 1 - boot.confidence), row.get("note"))
    return row


def partial_credit(trials: pd.DataFrame, metric: str = "reward", profiles: Sequence[str] | None = None) -> bool:
    """Whether ``metric`` (the reward) scores partial credit among ``trials`` (of ``profiles``): some known value is
    neither 0 nor 1. Pass/fail then loses what the rewards say, and their mean is reported beside it."""
    if metric not in trials:
        return False
    sub = trials if profiles is None else trials[trials["profile"].astype(str).isin(list(profiles))]
    values = pd.to_numeric(sub[metric], errors="coerce").dropna()
    return bool(len(values)) and not values.isin([0.0, 1.0]).all()


def _continuous_row(metrics: pd.DataFrame, trials: pd.DataFrame, r: Rule, a: str, b: str, boot: Bootstrap) -> dict:
    ran = _ran_by_both(metrics, a, b)
    pairs = task_pairs(trials, r.metric, a, b, r.repetitions)
    va, vb = pairs["a"].to_numpy(float), pairs["b"].to_numpy(float)
    reasons = _missing_tasks(ran, pairs, "with no value under one profile")
    nan = np.isnan(va) | np.isnan(vb)  # only a geometric mean is NaN: a repetition that is not positive
    if nan.any():
        reasons["with a repetition at 0 (a geometric mean needs positive values)"] = int(nan.sum())
    defined = ~nan & ((va > 0) & (vb > 0) if r.scale == "ratio" else True)
    if (~nan & ~defined).any():
        reasons["with a value of 0 (a ratio needs positive values under both profiles)"] = int((~nan & ~defined).sum())
    n_undef, why = _undefined(reasons)
    row: dict[str, Any] = {"n_pairs": int(defined.sum()), "n_undefined": n_undef, "note": why}
    if not defined.any():
        return {**row, "note": _join("no task with values under both profiles", why)}
    va, vb = va[defined], vb[defined]
    d = np.log(vb / va) if r.scale == "ratio" else vb - va
    hl = stats.hodges_lehmann(d, confidence=boot.confidence, zero_method="pratt", decimals=r.decimals).iloc[0]
    to_scale = (lambda x: 100.0 * np.expm1(x)) if r.scale == "ratio" else (lambda x: x)  # noqa: E731
    open_ends = [side for side, closed in (("low", hl["low_closed"]), ("high", hl["high_closed"])) if not closed]
    row.update(a_value=float(np.median(va)), b_value=float(np.median(vb)), estimate=float(to_scale(hl["estimate"])), ci_low=float(to_scale(hl["ci_low"])),
               ci_high=float(to_scale(hl["ci_high"])), ci_open=" and ".join(open_ends) or None)
    if r.scale == "ratio":
        # The budget view: the change of the total over the paired tasks (sum B / sum A), task bootstrap.
        one = np.ones_like(va)
        tot = stats.ratio_of_totals(va, one, vb, one, n_boot=boot.n_resamples, seed=boot.seed,
                                    confidence=boot.confidence).set_index("arm").loc["B/A"]
        row.update(total_change_pct=100.0 * (tot["estimate"] - 1.0), total_change_low=100.0 * (tot["ci_low"] - 1.0),
                   total_change_high=100.0 * (tot["ci_high"] - 1.0))
    if r.test == "wilcoxon_signed_rank":
        # The smallest p the test can give on these pairs: every difference on one side (zeros and ties as they are).
        floor = stats.wilcoxon(np.abs(d), zero_method="pratt", decimals=r.decimals).iloc[0]["p_val"]
        row.update(p_value=float(hl["p_val"]), statistic=float(hl["V"]), effect_size=float(hl["RBC"]), p_min=float(floor),
                   effect_size_name="matched-pairs rank-biserial r",
                   test=f"{TEST_LABELS[r.test]} ({hl['method'].removeprefix('Walsh averages; Wilcoxon ')}"
                        + (f"; {fmt_count(int(hl['n_zero']), 'zero difference')} ranked by Pratt's rule" if hl["n_zero"] else "")
                        + ")")
    row["note"] = _join(interval_note(row, 1 - boot.confidence), why)
    return row


def _cost_per_success_row(metrics: pd.DataFrame, trials: pd.DataFrame, a: str, b: str, boot: Bootstrap) -> dict:
    ran = _ran_by_both(metrics, a, b)
    ok = trials[stats.as_outcome(trials["success"].to_numpy()).notna().to_numpy()
                & pd.to_numeric(trials["total_cost_usd"], errors="coerce").notna().to_numpy()]
    per_task = (ok.assign(cost=pd.to_numeric(ok["total_cost_usd"], errors="coerce"),
                          win=stats.as_outcome(ok["success"].to_numpy()).to_numpy())
                .groupby(["profile", "task_id"])[["cost", "win"]].sum().reset_index())
    both = per_task[per_task["profile"] == a].merge(per_task[per_task["profile"] == b], on="task_id", suffixes=("_a", "_b"))
    n_undef, why = _undefined(_missing_tasks(ran, both, "without cost and outcome under one profile"))
    row: dict[str, Any] = {"n_pairs": len(both), "n_undefined": n_undef, "note": why}
    if both.empty:
        return {**row, "note": _join("no task with cost and outcome under both profiles", why)}
    res = stats.ratio_of_totals(both["cost_a"], both["win_a"], both["cost_b"], both["win_b"], n_boot=boot.n_resamples,
                                seed=boot.seed, confidence=boot.confidence).set_index("arm")
    row.update(a_value=res.loc["A", "estimate"], b_value=res.loc["B", "estimate"])
    if not np.isfinite(res.loc["B/A", "estimate"]):
        side = " and ".join(p for p, v in ((a, both["win_a"].sum()), (b, both["win_b"].sum())) if v == 0)
        return {**row, "note": _join(f"undefined: no success under {side} on the paired tasks", why)}
    ratio = res.loc["B/A"]
    note = f"{int(ratio['n_undefined'])} of {boot.n_resamples} resamples without a success in an arm left out" \
        if ratio["n_undefined"] else None
    row.update(estimate=100.0 * (ratio["estimate"] - 1.0), ci_low=100.0 * (ratio["ci_low"] - 1.0),
               ci_high=100.0 * (ratio["ci_high"] - 1.0), note=_join(note, why))
    return row


def _sign_flip_floor(d: np.ndarray, boot: Bootstrap) -> float:
    """The smallest p the sign-flip test can give on these differences: every one on the same side."""
    return float(stats.sign_flip(np.abs(d), confidence=boot.confidence, seed=boot.seed).iloc[0]["p_val"])


def p_floor_note(row: Any, alpha: float) -> str | None:
    """What the smallest attainable p (``p_min``) says of a tested row: that the test cannot reject at this size
    (its smallest p exceeds ``alpha``: the comparison is uninformative), or that the observed p is that smallest p."""
    get = row.get if isinstance(row, dict) else lambda k, d=None: getattr(row, k, d)
    floor, p, n = get("p_min"), get("p_value"), get("n_pairs")
    if floor is None or p is None or pd.isna(floor) or pd.isna(p) or not floor > 0:
        return None
    test = str(get("test") or "the test").split(" (")[0]
    if get("scale") == "rate" and not pd.isna(get("n_a_only")):
        size = f"{fmt_count(int(get('n_a_only')) + int(get('n_b_only')), 'discordant task')} of {fmt_count(int(n), 'pair')}"
    else:
        size = fmt_count(int(n), "pair")
    if floor > alpha:
        return (f"cannot reject at this size: the smallest p {test} can give with {size} is {floor:.3g}, above "
                f"{alpha:g}, whatever the agents did; the comparison is uninformative")
    if abs(p - floor) <= 1e-12 * max(floor, 1e-300):
        return f"p = {p:.3g} is the smallest p {test} can give with {size}"
    return None


def _row(metrics: pd.DataFrame, trials: pd.DataFrame, r: Rule, a: str, b: str, plan: AnalysisPlan) -> dict:
    if r.scale == "cost_per_success":
        row = _cost_per_success_row(metrics, trials, a, b, plan.bootstrap)
    elif r.scale == "pass_rate":
        row = _pass_rate_row(metrics, trials, r, a, b, plan.bootstrap)
    elif r.scale == "rate":
        row = _binary_row(metrics, trials, r, a, b, plan.bootstrap.confidence)
    elif r.scale == "mean":
        row = _mean_row(metrics, trials, r, a, b, plan.bootstrap)
    else:
        row = _continuous_row(metrics, trials, r, a, b, plan.bootstrap)
    out = {"metric": r.metric, "label": r.label, "unit": r.unit, "scale": r.scale, "estimand": r.estimand,
           "interval": r.interval, "repetitions": r.repetitions, "a_b_summary": sides_summary(r.scale, r.how, r.test),
           **row}
    out["note"] = _join(p_floor_note({**out, "test": TEST_LABELS[r.test]}, plan.alpha), out.get("note"))
    return out


def estimate(metrics: pd.DataFrame, column: str, a: str, b: str, plan: AnalysisPlan, *,
             confidence: float | None = None) -> dict:
    """One comparison row of ``column`` (B against A) as :func:`compare` computes it, at another confidence if given.

    The test and the way of combining repetitions are the plan's for that metric (:func:`planned_test`),
    turned into a comparison by the same :func:`rule`; infrastructure errors are left out here.
    """
    test, reps = planned_test(plan, column)
    conf = plan.bootstrap.confidence if confidence is None else confidence
    return _row(metrics, usable_trials(metrics), rule(column, test, reps), a, b, plan.model_copy(update={"bootstrap": plan.bootstrap.model_copy(
        update={"confidence": conf})}))


def _no_tool_rows(trials: pd.DataFrame, where: str = " in these runs") -> str:
    """Why a per-tool family has no row. "No MCP tool was called" only when every trial's MCP calls were counted
    and none ran; otherwise what was (not) recorded: calls counted only as totals, or not counted at all."""
    calls = pd.to_numeric(trials["mcp_tool_calls"], errors="coerce") if "mcp_tool_calls" in trials else pd.Series(dtype=float)
    known = calls.dropna()
    if len(known) and known.eq(0).all():
        if len(known) == len(trials):
            return f"no MCP tool was called{where}"
        return (f"no MCP call in the {fmt_count(len(known), 'trial')} with a call record{where}; "
                f"{len(trials) - len(known)} have none")
    return f"no per-tool counts of MCP calls recorded{where}"


# A process metric known for fewer than this share of an arm's trials is described, not tested.
MIN_KNOWN_SHARE = 0.5
# What a described-only row leaves empty: the estimate, its interval and its test (the per-task values stay).
DESCRIBED_ONLY_BLANK = ("estimate", "ci_low", "ci_high", "p_value", "p_min", "statistic", "effect_size", "odds_ratio",
                        "odds_ratio_low", "odds_ratio_high", "total_change_pct", "total_change_low", "total_change_high")


def _too_few_known(trials: pd.DataFrame, col: str, a: str, b: str) -> str | None:
    """Why a process metric is described, not tested, for the pair (a, b): it is known for fewer than half of either
    arm's trials (the runs kept no trajectory for the rest); None when both arms record it for at least half."""
    if not registry.is_known(col) or not registry.metric(col).process:
        return None
    counts = []
    for arm in (a, b):
        values = pd.to_numeric(trials.loc[trials["profile"].astype(str) == arm, col], errors="coerce")
        counts.append((arm, int(values.notna().sum()), len(values)))
    if all(n and known >= MIN_KNOWN_SHARE * n for _, known, n in counts):
        return None
    said = " and ".join(f"{known} of {n} trials of {arm}" for arm, known, n in counts)
    return f"described, not tested: known for {said} (fewer than half of an arm's trials record it)"


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
                             "note": _no_tool_rows(trials) if spec.id.endswith("*")
                             else f"column {spec.id!r} is not in the metrics table"})
                continue
            if spec.id.endswith("*"):
                # A tool neither profile of this pair called has nothing to describe.
                pair = trials[trials["profile"].astype(str).isin([a, b])]
                cols_ab = [c for c in cols if pd.to_numeric(pair[c], errors="coerce").fillna(0).ne(0).any()]
                if not cols_ab:
                    rows.append({**base, "metric": spec.id, "label": "MCP calls per tool", "n_pairs": 0,
                                 "n_undefined": 0, "note": _no_tool_rows(pair, f" under {a} or {b}")})
            else:
                cols_ab = cols
            for col in cols_ab:
                if col in refused:
                    rows.append({**base, "metric": col, "label": registry.metric(col).label, "n_pairs": 0,
                                 "n_undefined": 0, "note": refused[col]})
                    continue
                row = {**base, **_row(metrics, trials, rule(col, spec.test, plan.repetitions_of(spec)), a, b, plan)}
                sparse = _too_few_known(trials, col, a, b) if tier != "exploratory" else None
                if sparse:  # described, not tested: a test over the few trials that recorded it says little of the arm
                    row.update({k: None for k in DESCRIBED_ONLY_BLANK}, note=_join(sparse, row.get("note")))
                rows.append(row)
    partial = plan.partial()
    for a, b in pairs:
        # Beside pass/fail, the mean outcome when the rewards score partial credit (they are not all 0 or 1).
        if partial.metric in refused or not partial_credit(trials, partial.metric, (a, b)):
            continue
        for test in partial.tests:
            base = {"tier": PARTIAL_TIER, "correction": "none", "profile_a": a, "profile_b": b, "test": TEST_LABELS[test]}
            rows.append({**base, **_row(metrics, trials, rule(partial.metric, test, "all"), a, b, plan)})
    out = pd.DataFrame(rows, columns=COLUMNS)
    for c in ("a_value", "b_value", "estimate", "ci_low", "ci_high", "p_value", "p_min", "p_adjusted", "statistic",
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
            correction = getattr(plan.tiers, tier).correction
            adj = adjust_p(np.where(np.isnan(p), 1.0, p), correction)
            out.loc[idx, "p_adjusted"] = np.where(np.isnan(p), np.nan, adj)
            if correction != "none":  # say so where it happens, so that every adjusted p can be redone from the rows
                untested = idx[np.isnan(p)]
                counted = f"no test: counted as p = 1 in the tier's {CORRECTION_NAMES[correction]} correction"
                out.loc[untested, "note"] = [_join(n if isinstance(n, str) else None, counted) for n in out.loc[untested, "note"]]
    sig = pd.Series(pd.NA, index=out.index, dtype="boolean")
    has_p = (out["tier"] != "exploratory") & out["p_adjusted"].notna()
    sig[has_p] = out.loc[has_p, "p_adjusted"] < plan.alpha
    out["significant"] = sig
    return out


def endpoint_correlations(metrics: pd.DataFrame, comparisons: pd.DataFrame, tier: str = "primary") -> pd.DataFrame:
    """Pearson r between the per-task log ratios log(B/A) of every two ratio-scale endpoints of ``tier``, per pair.

    The tasks are those where both endpoints are defined (positive per-task values under A and B, each task's
    repetitions combined as the comparison rows combine them). ``collinear`` is |r| > :data:`COLLINEAR_R`: the
    two endpoints then move together task by task (tokens and cost when every token is priced alike), so their
    two tests restate one finding. Columns: :data:`CORRELATION_COLUMNS`; r is NaN with fewer than 3 tasks or
    a constant log ratio.
    """
    rows = comparisons[(comparisons["tier"] == tier) & (comparisons["scale"] == "ratio")]
    trials = usable_trials(metrics)
    out = []
    for (a, b), g in rows.groupby(["profile_a", "profile_b"], sort=False):
        logs = {}
        for metric_id, reps, label in dict.fromkeys(zip(g["metric"], g["repetitions"], g["label"], strict=True)):
            # On the ratio scale the test does not change how a task's repetitions combine.
            how = rule(metric_id, "wilcoxon_signed_rank", reps).how
            p = stats.pair_tasks(trials, metric_id, str(a), str(b), binary=False, how=how)
            ok = (p["a"] > 0) & (p["b"] > 0)
            logs[metric_id] = (label, pd.Series(np.log(p.loc[ok, "b"] / p.loc[ok, "a"]).to_numpy(),
                                                index=p.loc[ok, "task_id"].astype(str)))
        ids = list(logs)
        for i, x in enumerate(ids):
            for y in ids[i + 1:]:
                both = pd.concat([logs[x][1], logs[y][1]], axis=1, join="inner").dropna()
                vx, vy = both.iloc[:, 0].to_numpy(float), both.iloc[:, 1].to_numpy(float)
                r = float(np.corrcoef(vx, vy)[0, 1]) if len(both) >= 3 and vx.std() > 0 and vy.std() > 0 else np.nan
                out.append({"profile_a": a, "profile_b": b, "metric_x": x, "metric_y": y, "label_x": logs[x][0],
                            "label_y": logs[y][0], "n_pairs": len(both), "r": r,
                            "collinear": bool(np.isfinite(r) and abs(r) > COLLINEAR_R)})
    return pd.DataFrame(out, columns=CORRELATION_COLUMNS)


def collinear_endpoints(correlations: pd.DataFrame | None) -> pd.DataFrame:
    """The rows of :func:`endpoint_correlations` (or its CSV) whose endpoints are collinear."""
    if correlations is None or correlations.empty:
        return pd.DataFrame(columns=CORRELATION_COLUMNS)
    return correlations[correlations["collinear"].astype(str).str.lower().isin({"true", "1"})]
