"""Fixed-sequence claims: non-inferiority, superiority and equivalence, tested in the declared order.

A claim such as "MCP saves cost without hurting success" is two hypotheses in a fixed order
(gatekeeping): first success is non-inferior within a margin, then cost is superior. Each step is
tested at the full level of its sequence, and only if every step before it held; that keeps the
family-wise error of the sequence at its level without a correction (Maurer, Hothorn & Lehmacher
1995). With several profiles against one baseline, each pair runs its own sequence at alpha / (number
of pairs) (Bonferroni), so the intervals here are wider than the comparisons' 95 % intervals. A
non-significant superiority test is not evidence of no harm: non-inferiority is.

Every decision reads the interval of the comparison's own estimand (the engine's, at the plan's
confidence): superiority, the interval excludes 0 on the better side; non-inferiority, its worse
end lies within the margin (a one-sided test at alpha / 2); equivalence, the 1 - 2 alpha interval
lies inside the margins (two one-sided tests, TOST; Schuirmann 1987). A rate's margins are ±margin
points; a ratio metric's are symmetric on the log scale, B/A between 1 / (1 + margin) and 1 + margin
(−9.1 % and +10 % for a margin of 0.10), so that A against B and B against A are the same claim.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core import registry
from ..study.plan import AnalysisPlan, Hypothesis
from .comparisons import POINT_SCALES, estimate, scale_unit, usable_trials

__all__ = ["COLUMNS", "test_sequence"]

COLUMNS = [
    "profile_a",
    "profile_b",
    "step",
    "metric",
    "label",
    "claim",
    "margin",
    "margin_low",
    "margin_high",
    "unit",
    "confidence",
    "estimate",
    "ci_low",
    "ci_high",
    "ci_open",
    "result",
    "reason",
]


def _bounds(h: Hypothesis, scale: str) -> tuple[float, float]:
    """The margins on the comparison's own scale: ±margin for a rate difference; for a ratio metric the margin
    is symmetric on the log scale, so B/A within (1 / (1 + m), 1 + m), i.e. (−9.1 %, +10 %) for m = 0.10."""
    if h.margin is None:
        return np.nan, np.nan
    if scale in POINT_SCALES:
        return -h.margin, h.margin
    return 100.0 * (1.0 / (1.0 + h.margin) - 1.0), 100.0 * h.margin  # ratio rows are in %


def _decide(h: Hypothesis, row: dict, bounds: tuple[float, float]) -> tuple[bool, str]:
    lo, hi = row.get("ci_low", np.nan), row.get("ci_high", np.nan)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return False, row.get("note") or "no bounded interval (too few tasks)"
    better_up = registry.metric(h.id).direction == "higher"
    if h.claim == "superior":
        ok = lo > 0 if better_up else hi < 0
        return ok, "the interval excludes 0 on the better side" if ok else "the interval does not exclude 0 on the better side"
    lower, upper = bounds
    if h.claim == "noninferior":
        ok = lo > lower if better_up else hi < upper
        return ok, f"the worse end of the interval is {'within' if ok else 'beyond'} the margin"
    ok = lower < lo and hi < upper
    return ok, f"the interval is {'inside' if ok else 'not inside'} the margins"


def test_sequence(metrics: pd.DataFrame, plan: AnalysisPlan, pairs: list[tuple[str, str]]) -> pd.DataFrame:
    """The plan's hypotheses for every profile pair, in order, stopping at the first that does not hold."""
    trials = usable_trials(metrics)
    rows = []
    alpha = plan.alpha / max(len(pairs), 1)  # Bonferroni over the profile pairs: one sequence per pair
    for a, b in pairs:
        open_gate = True
        for step, h in enumerate(plan.hypotheses, start=1):
            conf = 1 - 2 * alpha if h.claim == "equivalent" else 1 - alpha
            base = {"profile_a": a, "profile_b": b, "step": step, "metric": h.id, "claim": h.claim, "confidence": conf}
            if h.id not in trials.columns:
                rows.append(
                    {
                        **base,
                        "label": registry.metric(h.id).label,
                        "result": "not tested",
                        "reason": f"column {h.id!r} is not in the metrics table",
                    }
                )
                open_gate = False
                continue
            row = estimate(metrics, h.id, a, b, plan, confidence=conf)
            bounds = _bounds(h, row["scale"])
            points = row["scale"] in POINT_SCALES
            base.update(
                label=row["label"],
                unit=scale_unit(row["scale"]),
                margin=np.nan if h.margin is None else 100.0 * h.margin,
                margin_low=100.0 * bounds[0] if points else bounds[0],
                margin_high=100.0 * bounds[1] if points else bounds[1],
                estimate=row.get("estimate"),
                ci_low=row.get("ci_low"),
                ci_high=row.get("ci_high"),
                # The ends the interval leaves out (a Hodges-Lehmann end in a gap of the Walsh averages), as the
                # comparison row names them.
                ci_open=row.get("ci_open") if isinstance(row.get("ci_open"), str) else None,
            )
            if row["scale"] in POINT_SCALES:  # shown in points, like the comparisons
                base.update({k: 100.0 * base[k] for k in ("estimate", "ci_low", "ci_high") if base[k] is not None})
            if not open_gate:
                rows.append({**base, "result": "not tested", "reason": "an earlier step did not hold"})
                continue
            held, why = _decide(h, row, bounds)
            rows.append({**base, "result": "holds" if held else "not shown", "reason": why})
            open_gate = held
    out = pd.DataFrame(rows, columns=COLUMNS)
    for c in ("margin", "margin_low", "margin_high", "estimate", "ci_low", "ci_high"):
        out[c] = pd.to_numeric(out[c], errors="coerce").astype(float)
    return out
