"""Between-arm contrasts of judge labels, corrected for judge error by prediction-powered inference.

For one class c and one arm, with f = 1[judge says c] on every judged unit and Y = 1[a person
says c] on a random human-labelled subset of n units, the PPI estimate of the prevalence is

    theta = mean_unlabelled(f) + mean_labelled(Y - f)

(the judge's prevalence plus its average error measured where people labelled), with variance
var_unlabelled(f) / N + var_labelled(Y - f) / n (Angelopoulos et al. 2023, Science 382:669).
Arms are independent samples, so the difference of two arms has the sum of their variances.
Beside it the raw judge-only difference, whose interval ignores judge error: when the judge
errs more in one arm, or confuses classes, that interval is centred on the wrong value.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its standard error and interval."""

    value: float
    se: float
    lo: float
    hi: float


def _z(level: float) -> float:
    return NormalDist().inv_cdf(0.5 + level / 2)


def ppi_mean(y_labelled: Sequence[float], f_labelled: Sequence[float], f_unlabelled: Sequence[float], level: float = 0.95) -> Estimate:
    """PPI mean of Y from the judge's f on unlabelled units and (Y, f) pairs on labelled ones."""
    y, fl, fu = (np.asarray(v, dtype=float) for v in (y_labelled, f_labelled, f_unlabelled))
    n, big_n = len(y), len(fu)
    if n < 2:
        raise ValueError(f"PPI needs at least 2 human-labelled units, got {n}")
    if big_n == 0:  # everything was labelled: the human mean itself
        fu, big_n = fl, n
    rect = y - fl
    value = float(fu.mean() + rect.mean())
    var_u = fu.var(ddof=1) / big_n if big_n > 1 else 0.0
    se = math.sqrt(var_u + rect.var(ddof=1) / n)
    z = _z(level)
    return Estimate(value, se, value - z * se, value + z * se)


def wald_mean(f: Sequence[float], level: float = 0.95) -> Estimate:
    """Mean of the judge's indicator with the usual normal interval (no correction for judge error)."""
    x = np.asarray(f, dtype=float)
    value = float(x.mean())
    se = math.sqrt(x.var(ddof=1) / len(x)) if len(x) > 1 else float("nan")
    z = _z(level)
    return Estimate(value, se, value - z * se, value + z * se)


def difference(a: Estimate, b: Estimate, level: float = 0.95) -> Estimate:
    """a - b of two independent estimates."""
    value = a.value - b.value
    se = math.sqrt(a.se**2 + b.se**2)
    z = _z(level)
    return Estimate(value, se, value - z * se, value + z * se)


def arm_estimates(
    judge: Sequence[Hashable | None], human: Sequence[Hashable | None], cls: Hashable, level: float = 0.95
) -> tuple[Estimate, Estimate | None]:
    """(judge-only, PPI) prevalence of ``cls`` in one arm; units without a judge label are left out.

    The PPI estimate is None when fewer than 2 judged units have a human label.
    """
    units = [(j, h) for j, h in zip(judge, human, strict=True) if j is not None]
    f_all = [float(j == cls) for j, _ in units]
    lab = [(float(h == cls), float(j == cls)) for j, h in units if h is not None]
    unl = [float(j == cls) for j, h in units if h is None]
    ppi = ppi_mean([y for y, _ in lab], [f for _, f in lab], unl, level) if len(lab) >= 2 else None
    return wald_mean(f_all, level), ppi


def arm_contrasts(frame: pd.DataFrame, baseline: str, level: float = 0.95, classes: Sequence[Hashable] | None = None) -> pd.DataFrame:
    """Per other arm and class: judge-only and PPI-corrected prevalence difference (arm - baseline).

    ``frame`` has columns ``arm``, ``judge`` (label or None for a failed judgement) and ``human``
    (label or None when no person labelled the unit). Arms with fewer than 2 human labels get no
    PPI figure (NaN), only the raw one.
    """
    arms = sorted(set(frame["arm"]))
    if baseline not in arms:
        raise ValueError(f"baseline arm {baseline!r} not among {arms}")
    cats = (
        list(classes)
        if classes is not None
        else sorted({v for v in frame["judge"].tolist() + frame["human"].tolist() if v is not None and v == v}, key=str)
    )
    rows = []
    for arm in arms:
        if arm == baseline:
            continue
        parts = {}
        for name in (arm, baseline):
            sub = frame[frame["arm"] == name]
            parts[name] = (_clean(sub["judge"]), _clean(sub["human"]))
        for c in cats:
            row = {"arm": arm, "baseline": baseline, "class": c}
            est = {name: arm_estimates(j, h, c, level) for name, (j, h) in parts.items()}
            raw = difference(est[arm][0], est[baseline][0], level)
            row.update(
                n_arm=sum(v is not None for v in parts[arm][0]),
                n_baseline=sum(v is not None for v in parts[baseline][0]),
                labelled_arm=sum(1 for a, b in zip(*parts[arm], strict=True) if a is not None and b is not None),
                labelled_baseline=sum(1 for a, b in zip(*parts[baseline], strict=True) if a is not None and b is not None),
                failed=sum(v is None for v in parts[arm][0]) + sum(v is None for v in parts[baseline][0]),
                judge_diff=raw.value,
                judge_lo=raw.lo,
                judge_hi=raw.hi,
            )
            if est[arm][1] is not None and est[baseline][1] is not None:
                ppi = difference(est[arm][1], est[baseline][1], level)
                row.update(ppi_diff=ppi.value, ppi_lo=ppi.lo, ppi_hi=ppi.hi)
            else:
                row.update(ppi_diff=float("nan"), ppi_lo=float("nan"), ppi_hi=float("nan"))
            rows.append(row)
    return pd.DataFrame(rows)


def _clean(s: pd.Series) -> list:
    return [None if (v is None or (isinstance(v, float) and math.isnan(v))) else v for v in s.tolist()]


def format_contrasts_md(table: pd.DataFrame) -> str:
    """Markdown table: judge-only and PPI difference per arm and class, with 95 % intervals."""
    if table.empty:
        return "(no contrast: needs two arms)"

    def ci(v, lo, hi):
        return "-" if math.isnan(v) else f"{v:+.3f} [{lo:+.3f}, {hi:+.3f}]"

    lines = [
        "| arm - baseline | class | judged (arm / base) | human-labelled (arm / base) | judge-only difference | PPI-corrected difference |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in table.to_dict("records"):
        lines.append(
            f"| {r['arm']} - {r['baseline']} | {r['class']} | {r['n_arm']} / {r['n_baseline']} | {r['labelled_arm']} / {r['labelled_baseline']} | "
            f"{ci(r['judge_diff'], r['judge_lo'], r['judge_hi'])} | {ci(r['ppi_diff'], r['ppi_lo'], r['ppi_hi'])} |"
        )
    return "\n".join(lines)
