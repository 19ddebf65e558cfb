"""Infrastructure failures as bounds: how far the trials lost to the harness could move each primary comparison.

The planned comparisons leave infrastructure errors out (no agent attempt, no reward) and count trials
whose agent never reached a model as the source scored them. Neither is neutral when failures hit
one arm more than the other, or hit the trials that would have failed. Beside each primary row of
``comparisons.csv`` this module reports worst- and best-case bounds (Manski 1990, AER 80:319-323):
the affected trials' outcomes are imputed at the ends of what they could have been, and the comparison is
recomputed by the comparison engine itself (:func:`analysis_lib.inference.comparisons.compare`, the plan's own
test and interval):

* pass/fail: every affected trial of B fails and every affected trial of A passes (the lower bound),
  and the reverse (the upper bound);
* continuous metrics: at the ends of the support the plan declares for the metric (``beside_itt.support``,
  :class:`analysis_lib.study.plan.Support`), per task: B at the low end and A at the high end for the lower
  bound, the reverse for the upper. The high end is a cap (the trial budget, the timeout) or a stated multiple
  of the largest value observed on the same task, so a lost trial of a task forty times larger than the others
  is bounded by its own task's scale. On a ratio scale a low end of 0 is the limit as the value goes to 0 (the
  rank-based estimate stops moving once the value is the most extreme; an interval end that keeps moving is
  the scale's own end, -100 % or +inf). Without a declared support the bound is unbounded and no number is
  given: a lost trial could have had any value.

Every estimate of the planned engine is monotone in each trial's value (a majority verdict, a median or a
geometric mean of the repetitions, then a difference, Hodges-Lehmann's pseudo-median or a mean of per-task
differences), so the two imputations give the smallest and the largest estimate any completion of the lost
trials within the support could give: the bounds contain the full-data estimate whenever the lost values lie in
the support (``tests/test_infra_bounds.py`` checks every completion of small studies by brute force).

The bounds are the two recomputed estimates; ``bounds_ci_low`` / ``bounds_ci_high`` are the outer
ends of their two intervals. Which bound is the worst case for B follows the metric's direction.
A note says when the bounds include 0 while the planned interval excludes it: the conclusion then
depends on the trials lost to infrastructure failures.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ... import stats
from ...core import registry
from ...study.plan import AnalysisPlan, MetricSpec, Support, Tier
from ..comparisons import compare, usable_trials

__all__ = ["COLUMNS", "UNBOUNDED", "affected_reasons", "infra_bounds", "is_unbounded"]

COLUMNS = [
    "tier", "metric", "label", "scale", "unit", "profile_a", "profile_b", "estimand", "definition", "estimate", "ci_low",
    "ci_high",
    "n_pairs", "bound_low", "bound_low_ci_low", "bound_low_ci_high", "bound_high", "bound_high_ci_low",
    "bound_high_ci_high", "bounds_ci_low", "bounds_ci_high", "n_pairs_imputed", "worst_case", "n_affected_a",
    "n_affected_b", "n_tasks_affected", "reasons_a", "reasons_b", "support", "imputation", "note",
]
ESTIMAND = "infra_bounds"
DEFINITION = ("worst- and best-case bounds of the planned estimate (its own test and interval) with the trials lost to "
              "infrastructure failures imputed at both ends of what they could have been (pass and fail; a continuous "
              "metric's declared support); estimate, ci_low, ci_high: the planned row itself")
NEVER_REACHED = "never reached the model"
UNBOUNDED = "unbounded"
# A stand-in for 0 on a ratio scale starts this far below the smallest positive value seen, and shrinks by this
# factor until the estimate stops moving (the limit as the value goes to 0).
ZERO_START, ZERO_STEP, ZERO_ROUNDS = 1e-6, 1e-6, 8


def _is_true(values: pd.Series) -> np.ndarray:
    return (stats.as_outcome(values.to_numpy()) == 1.0).to_numpy()


def affected_reasons(metrics: pd.DataFrame) -> pd.Series:
    """Per trial: why its outcome is not an agent's attempt (an infrastructure error, with its exception type,
    or a trial whose agent never reached a model), else None."""
    out = pd.Series(None, index=metrics.index, dtype=object)
    if "never_reached_model" in metrics:
        never = metrics["never_reached_model"].notna().to_numpy()
        out[never] = NEVER_REACHED
    if "infra_error" in metrics:
        infra = _is_true(metrics["infra_error"])
        exc = metrics["exception"] if "exception" in metrics else pd.Series(None, index=metrics.index)
        kinds = exc.map(lambda e: str(e).split(":", 1)[0][:60] if isinstance(e, str) and e else "no reason recorded")
        out[infra] = ("infrastructure error: " + kinds[infra]).to_numpy()
    return out


def _reasons(reasons: pd.Series) -> str:
    counts = reasons.dropna().value_counts().sort_index()
    return "; ".join(f"{k} ×{n}" for k, n in counts.items())


def _one_metric_plan(plan: AnalysisPlan, spec: MetricSpec) -> AnalysisPlan:
    """The plan with only ``spec`` in its primary tier: the same test, interval, pairing and bootstrap."""
    empty = Tier.model_construct(correction="none", metrics=[])
    tiers = plan.tiers.model_copy(update={"primary": Tier.model_construct(correction="none", metrics=[spec]),
                                          "secondary": empty, "exploratory": empty, "sensitivity": None})
    return plan.model_copy(update={"tiers": tiers, "hypotheses": []})


def _support_ends(metrics: pd.DataFrame, metric: str, support: Support, affected: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray] | str:
    """Per trial, the low and high end of the metric's support (the high one per task when it is a multiple of the
    task's largest observed value), or why a lost trial's support cannot be set."""
    low = np.full(len(metrics), float(support.low))
    if support.high is not None:
        return low, np.full(len(metrics), float(support.high))
    seen = usable_trials(metrics[~affected])
    values = pd.to_numeric(seen[metric], errors="coerce")
    task_max = values.groupby(seen["task_id"].astype(str)).max()
    high = metrics["task_id"].astype(str).map(task_max).to_numpy(float) * float(support.high_times_task_max or 1.0)
    missing = sorted(set(metrics.loc[affected & ~np.isfinite(high), "task_id"].astype(str)))
    if missing:
        return (f"unbounded: no value of {metric} observed on task {', '.join(missing[:3])}"
                f"{' ...' if len(missing) > 3 else ''} to scale the support from")
    return low, np.maximum(high, low)


def _imputed(metrics: pd.DataFrame, metric: str, in_a: np.ndarray, in_b: np.ndarray, va, vb) -> pd.DataFrame:
    """``metrics`` with the affected trials of A and B given the values ``va`` and ``vb`` (scalars or per trial)."""
    m = registry.metric(metric)
    out = metrics.copy()
    col = out[metric].astype(object) if m.kind == "binary" else pd.to_numeric(out[metric], errors="coerce").astype(float)
    col[in_a] = va[in_a] if isinstance(va, np.ndarray) else va
    col[in_b] = vb[in_b] if isinstance(vb, np.ndarray) else vb
    out[metric] = col
    if "infra_error" in out:
        flags = out["infra_error"].astype(object)
        flags[in_a | in_b] = False
        out["infra_error"] = flags
    return out


def _same(x: float, y: float) -> bool:
    return bool((np.isnan(x) and np.isnan(y)) or x == y or abs(x - y) <= 1e-9 * max(1.0, abs(x), abs(y)))


def _continuous_bound(metrics: pd.DataFrame, one: AnalysisPlan, metric: str, a: str, b: str, in_a: np.ndarray,
                      in_b: np.ndarray, va: np.ndarray, vb: np.ndarray) -> pd.Series | str:
    """The planned row recomputed with the lost trials at ``va`` (A) and ``vb`` (B); on a ratio scale a value of 0
    is its limit from above (the estimate settles; an interval end that keeps moving is the scale's end)."""
    ratio = registry.metric(metric).scale == "ratio"
    zero_a, zero_b = in_a & (va <= 0), in_b & (vb <= 0)
    if not ratio or not (zero_a | zero_b).any():
        return compare(_imputed(metrics, metric, in_a, in_b, va, vb), one, [(a, b)]).iloc[0]
    seen = pd.to_numeric(usable_trials(metrics[~(in_a | in_b)])[metric], errors="coerce")
    floor = float(seen[seen > 0].min()) if (seen > 0).any() else 1.0
    rows: list[pd.Series] = []
    eps = floor * ZERO_START
    for _ in range(ZERO_ROUNDS):
        got = compare(_imputed(metrics, metric, in_a, in_b, np.where(zero_a, eps, va), np.where(zero_b, eps, vb)), one,
                      [(a, b)]).iloc[0]
        rows.append(got)
        if len(rows) >= 2 and _same(float(rows[-1]["estimate"]), float(rows[-2]["estimate"])):
            break
        eps *= ZERO_STEP
    else:
        return f"{UNBOUNDED}: the estimate does not settle as the lost trials' {metric} goes to 0"
    last, before = rows[-1].copy(), rows[-2]
    # An interval end still moving goes to the end of the % scale: -100 % (log ratio -inf) or +inf.
    if not _same(float(last["ci_low"]), float(before["ci_low"])):
        last["ci_low"] = -100.0
    if not _same(float(last["ci_high"]), float(before["ci_high"])):
        last["ci_high"] = np.inf
    return last


def infra_bounds(metrics: pd.DataFrame, comparisons: pd.DataFrame, plan: AnalysisPlan) -> pd.DataFrame:
    """Per primary row of ``comparisons`` (:func:`analysis_lib.inference.comparisons.compare`): the bounds (module docstring)."""
    reasons = affected_reasons(metrics)
    affected = reasons.notna().to_numpy()
    prof = metrics["profile"].astype(str).to_numpy()
    specs = {(tier, s.id): s for tier, s, _ in plan.tier_metrics()}
    supports = plan.beside().support or {}
    rows = []
    primary = comparisons[(comparisons["tier"] == "primary") & comparisons["scale"].isin(["rate", "pass_rate", "ratio",
                                                                                         "difference"])]
    for r in primary.itertuples():
        spec = specs.get(("primary", r.metric))
        if spec is None:  # a family member (mcp_calls__*): not a primary claim of its own
            continue
        a, b = str(r.profile_a), str(r.profile_b)
        m = registry.metric(r.metric)
        in_a, in_b = affected & (prof == a), affected & (prof == b)
        tasks = set(metrics.loc[in_a | in_b, "task_id"].astype(str))
        worst = {"higher": "low", "lower": "high"}.get(m.direction, "")
        support = supports.get(r.metric)
        if m.kind == "binary":
            imputation, described = "affected trials fail in B and pass in A (lower), the reverse (upper)", None
        elif support is None:
            imputation, described = "none: no support declared for the metric (beside_itt.support)", None
        else:
            described = support.describe(r.metric)
            imputation = ("affected trials at the support's ends, per task: B at the low end and A at the high end "
                          "(lower), the reverse (upper)")
        row = {"tier": r.tier, "metric": r.metric, "label": r.label, "scale": r.scale, "unit": r.unit, "profile_a": a,
               "profile_b": b, "estimand": ESTIMAND, "definition": DEFINITION, "estimate": r.estimate, "ci_low": r.ci_low, "ci_high": r.ci_high,
               "n_pairs": r.n_pairs, "worst_case": worst, "n_affected_a": int(in_a.sum()), "n_affected_b": int(in_b.sum()),
               "n_tasks_affected": len(tasks), "reasons_a": _reasons(reasons[in_a]), "reasons_b": _reasons(reasons[in_b]),
               "support": described, "imputation": imputation}
        if not (in_a | in_b).any():
            row.update(bound_low=r.estimate, bound_low_ci_low=r.ci_low, bound_low_ci_high=r.ci_high, bound_high=r.estimate,
                       bound_high_ci_low=r.ci_low, bound_high_ci_high=r.ci_high, bounds_ci_low=r.ci_low,
                       bounds_ci_high=r.ci_high, n_pairs_imputed=r.n_pairs, note="no trial lost to an infrastructure failure")
            rows.append(row)
            continue
        if m.kind != "binary" and support is None:
            row["note"] = (f"{UNBOUNDED}: no support declared for {r.metric} (beside_itt.support): a lost trial could "
                           "have had any value, so no bound holds")
            rows.append(row)
            continue
        one = _one_metric_plan(plan, spec)
        ends = None if m.kind == "binary" else _support_ends(metrics, r.metric, support, affected)
        if isinstance(ends, str):
            row["note"] = ends
            rows.append(row)
            continue
        for side, low in (("bound_low", True), ("bound_high", False)):
            if ends is None:
                va, vb = (True, False) if low else (False, True)
                got = compare(_imputed(metrics, r.metric, in_a, in_b, va, vb), one, [(a, b)]).iloc[0]
            else:
                lo_v, hi_v = ends
                got = _continuous_bound(metrics, one, r.metric, a, b, in_a, in_b, hi_v if low else lo_v,
                                        lo_v if low else hi_v)
                if isinstance(got, str):
                    row["note"] = got
                    break
            row.update({side: got["estimate"], f"{side}_ci_low": got["ci_low"], f"{side}_ci_high": got["ci_high"],
                        "n_pairs_imputed": int(got["n_pairs"])})
        if "note" not in row:
            row["bounds_ci_low"], row["bounds_ci_high"] = row["bound_low_ci_low"], row["bound_high_ci_high"]
            excludes = (r.ci_low > 0 or r.ci_high < 0) if pd.notna(r.ci_low) and pd.notna(r.ci_high) else False
            if excludes and row["bound_low"] <= 0 <= row["bound_high"]:
                row["note"] = ("the bounds include 0 while the planned interval excludes it: the conclusion depends on "
                               "the trials lost to infrastructure failures")
        else:  # no bound is given: neither number stands
            for c in ("bound_low", "bound_low_ci_low", "bound_low_ci_high", "bound_high", "bound_high_ci_low",
                      "bound_high_ci_high"):
                row.pop(c, None)
        rows.append(row)
    out = pd.DataFrame(rows, columns=COLUMNS)
    num = [c for c in COLUMNS if c.startswith(("estimate", "ci_", "bound"))]
    for c in num:
        out[c] = pd.to_numeric(out[c], errors="coerce").astype(float)
    return out


def is_unbounded(row) -> bool:
    """Whether a bounds row gives no bound (no support declared, or none that can be set)."""
    note = getattr(row, "note", None) if not isinstance(row, dict) else row.get("note")
    return isinstance(note, str) and note.startswith(UNBOUNDED)
