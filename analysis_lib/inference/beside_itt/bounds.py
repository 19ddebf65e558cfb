"""Infrastructure failures as bounds: how far the trials lost to the harness could move each primary comparison.

The planned comparisons leave infrastructure errors out (no agent attempt, no reward) and count trials
whose agent never reached a model as the source scored them. Neither is neutral when failures hit
one arm more than the other, or hit the trials that would have failed. Beside each primary row of
``comparisons.csv`` this module reports worst- and best-case bounds (Manski 1990, AER 80:319-323):
the affected trials' outcomes are imputed both ways and the comparison is recomputed by the
comparison engine itself (:func:`analysis_lib.inference.comparisons.compare`, the plan's own test and interval):

* pass/fail: every affected trial of B fails and every affected trial of A passes (the lower bound),
  and the reverse (the upper bound);
* continuous metrics: the arm's observed extremes (B at its smallest and A at its largest observed
  value for the lower bound, the reverse for the upper; positive values only on a ratio scale).

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
from ...study.plan import AnalysisPlan, MetricSpec, Tier
from ..comparisons import compare

__all__ = ["COLUMNS", "affected_reasons", "infra_bounds"]

COLUMNS = [
    "tier", "metric", "label", "scale", "unit", "profile_a", "profile_b", "estimand", "definition", "estimate", "ci_low",
    "ci_high",
    "n_pairs", "bound_low", "bound_low_ci_low", "bound_low_ci_high", "bound_high", "bound_high_ci_low",
    "bound_high_ci_high", "bounds_ci_low", "bounds_ci_high", "n_pairs_imputed", "worst_case", "n_affected_a",
    "n_affected_b", "n_tasks_affected", "reasons_a", "reasons_b", "imputation", "note",
]
ESTIMAND = "infra_bounds"
DEFINITION = ("worst- and best-case bounds of the planned estimate (its own test and interval) with the trials lost to "
              "infrastructure failures imputed both ways; estimate, ci_low, ci_high: the planned row itself")
NEVER_REACHED = "never reached the model"


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


def _imputed(metrics: pd.DataFrame, metric: str, a: str, b: str, affected: np.ndarray, low: bool) -> pd.DataFrame | str:
    """``metrics`` with the affected trials of A and B given the bound's values (or why that cannot be done)."""
    m = registry.metric(metric)
    prof = metrics["profile"].astype(str).to_numpy()
    out = metrics.copy()
    in_a, in_b = affected & (prof == a), affected & (prof == b)
    if m.kind == "binary":
        va, vb = (True, False) if low else (False, True)
    else:
        values = pd.to_numeric(metrics[metric], errors="coerce")
        usable = ~affected & ~(_is_true(metrics["infra_error"]) if "infra_error" in metrics else np.zeros(len(metrics), bool))
        ok = values.notna().to_numpy() & usable & ((values > 0).to_numpy() if m.scale == "ratio" else True)
        obs_a, obs_b = values[ok & (prof == a)], values[ok & (prof == b)]
        if obs_a.empty or obs_b.empty:
            return f"no observed value of {metric} under {a if obs_a.empty else b} to impute from"
        va = float(obs_a.max() if low else obs_a.min())
        vb = float(obs_b.min() if low else obs_b.max())
    col = out[metric].astype(object) if m.kind == "binary" else pd.to_numeric(out[metric], errors="coerce").astype(float)
    col[in_a], col[in_b] = va, vb
    out[metric] = col
    if "infra_error" in out:
        flags = out["infra_error"].astype(object)
        flags[in_a | in_b] = False
        out["infra_error"] = flags
    return out


def infra_bounds(metrics: pd.DataFrame, comparisons: pd.DataFrame, plan: AnalysisPlan) -> pd.DataFrame:
    """Per primary row of ``comparisons`` (:func:`analysis_lib.inference.comparisons.compare`): the bounds (module docstring)."""
    reasons = affected_reasons(metrics)
    affected = reasons.notna().to_numpy()
    prof = metrics["profile"].astype(str).to_numpy()
    specs = {(tier, s.id): s for tier, s, _ in plan.tier_metrics()}
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
        row = {"tier": r.tier, "metric": r.metric, "label": r.label, "scale": r.scale, "unit": r.unit, "profile_a": a,
               "profile_b": b, "estimand": ESTIMAND, "definition": DEFINITION, "estimate": r.estimate, "ci_low": r.ci_low, "ci_high": r.ci_high,
               "n_pairs": r.n_pairs, "worst_case": worst, "n_affected_a": int(in_a.sum()), "n_affected_b": int(in_b.sum()),
               "n_tasks_affected": len(tasks), "reasons_a": _reasons(reasons[in_a]), "reasons_b": _reasons(reasons[in_b]),
               "imputation": ("affected trials fail in B and pass in A (lower), the reverse (upper)" if m.kind == "binary"
                              else "affected trials at B's smallest and A's largest observed value (lower), the reverse "
                                   "(upper)")}
        if not (in_a | in_b).any():
            row.update(bound_low=r.estimate, bound_low_ci_low=r.ci_low, bound_low_ci_high=r.ci_high, bound_high=r.estimate,
                       bound_high_ci_low=r.ci_low, bound_high_ci_high=r.ci_high, bounds_ci_low=r.ci_low,
                       bounds_ci_high=r.ci_high, n_pairs_imputed=r.n_pairs, note="no trial lost to an infrastructure failure")
            rows.append(row)
            continue
        one = _one_metric_plan(plan, spec)
        for side, low in (("bound_low", True), ("bound_high", False)):
            data = _imputed(metrics, r.metric, a, b, affected, low)
            if isinstance(data, str):
                row["note"] = data
                break
            got = compare(data, one, [(a, b)]).iloc[0]
            row.update({side: got["estimate"], f"{side}_ci_low": got["ci_low"], f"{side}_ci_high": got["ci_high"],
                        "n_pairs_imputed": int(got["n_pairs"])})
        if "note" not in row:
            row["bounds_ci_low"], row["bounds_ci_high"] = row["bound_low_ci_low"], row["bound_high_ci_high"]
            excludes = (r.ci_low > 0 or r.ci_high < 0) if pd.notna(r.ci_low) and pd.notna(r.ci_high) else False
            if excludes and row["bound_low"] <= 0 <= row["bound_high"]:
                row["note"] = ("the bounds include 0 while the planned interval excludes it: the conclusion depends on "
                               "the trials lost to infrastructure failures")
        rows.append(row)
    out = pd.DataFrame(rows, columns=COLUMNS)
    num = [c for c in COLUMNS if c.startswith(("estimate", "ci_", "bound"))]
    for c in num:
        out[c] = pd.to_numeric(out[c], errors="coerce").astype(float)
    return out
