"""How much of an arm's effect goes through a trajectory behaviour: a mediation-style decomposition (exploratory).

For one profile pair, one outcome Y (``success`` as a linear probability, or ``total_tokens`` on the log
scale) and one pre-declared mediator M (``files_read``, ``exploration_breadth``, ``steps_to_first_edit``
by default), three linear models with task fixed effects are fitted on the trials of A and B
(Baron & Kenny 1986; the product-of-coefficients decomposition, VanderWeele 2015, *Explanation in
Causal Inference*, ch. 2), Z being 1 for B::

    Y = task + c Z            total effect c
    M = task + a Z            the arm's effect on the mediator (a)
    Y = task + c' Z + b M     direct effect c', the mediator's association with the outcome (b)

indirect effect = a b, and c = c' + a b exactly (the same trials in all three). ``share_mediated`` =
a b / c. Intervals: percentile bootstrap over tasks (the plan's resamples and seed), the three models
refitted in every resample.

Assumptions, stated wherever the decomposition is shown: the arm is randomised but the mediator is not,
so reading a b as the effect *through* M needs sequential ignorability (given the arm and the task,
nothing unmeasured drives both M and Y), linearity and no arm-by-mediator interaction. Each mediator is
taken alone (they overlap: files read are part of the exploration breadth), and a mediator missing for
a trial (``steps_to_first_edit`` of a trial that never edits) drops that trial. Exploratory: no test,
never a confirmed effect.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ... import stats
from ...core import registry
from ..comparisons import scale_unit, usable_trials

__all__ = [
    "COLUMNS", "ESTIMANDS", "ASSUMPTIONS", "DEFAULT_MEDIATORS", "DEFAULT_OUTCOMES", "decompose", "mediation_table",
]

DEFAULT_MEDIATORS = ("files_read", "exploration_breadth", "steps_to_first_edit")
DEFAULT_OUTCOMES = ("success", "total_tokens")
COLUMNS = ["profile_a", "profile_b", "outcome", "mediator", "estimand", "definition", "scale", "unit", "estimate",
           "ci_low", "ci_high", "n_tasks", "n_trials", "note"]
ESTIMANDS = {
    "total_effect": "effect of the arm on the outcome, B − A (task fixed effects): c",
    "arm_on_mediator": "effect of the arm on the mediator, B − A, in the mediator's unit: a",
    "mediator_on_outcome": "change of the outcome per unit of the mediator, arm and task held fixed: b",
    "indirect_effect": "part of the total effect through the mediator: a b",
    "direct_effect": "part of the total effect not through the mediator: c' = c − a b",
    "share_mediated": "indirect / total effect (a b / c)",
}
ASSUMPTIONS = ("Exploratory decomposition, not a test: the arm is randomised but the mediator is not, so the indirect "
               "effect is the effect through the mediator only if, given the arm and the task, nothing unmeasured "
               "drives both the mediator and the outcome (sequential ignorability), with linear models and no "
               "arm-by-mediator interaction; each mediator is taken alone.")
MIN_TASKS = 3


def _within(values: np.ndarray, tasks: np.ndarray) -> np.ndarray:
    """Values minus their task's mean (the task fixed effects swept out)."""
    means = pd.Series(values).groupby(tasks).transform("mean").to_numpy()
    return values - means


def _fit(s: np.ndarray) -> np.ndarray:
    """From summed within-task cross-products (columns zz, zm, zy, mm, my), the estimates c, a, b, c', a b.

    ``s`` has one row per resample (or one row)."""
    zz, zm, zy, mm, my = (s[:, i] for i in range(5))
    with np.errstate(divide="ignore", invalid="ignore"):
        c = zy / zz
        a = zm / zz
        det = zz * mm - zm * zm
        b = (zz * my - zm * zy) / det
        c_direct = (mm * zy - zm * my) / det
    return np.column_stack([c, a, b, c_direct, a * b])


def decompose(y: np.ndarray, m: np.ndarray, z: np.ndarray, tasks: np.ndarray, *, n_boot: int = 10_000, seed: int = 0,
              confidence: float = 0.95) -> dict[str, tuple[float, float, float]]:
    """Estimand -> (estimate, ci_low, ci_high) of :data:`ESTIMANDS` on the raw scale (see the module docstring).

    ``z`` is 1 for B, 0 for A; ``tasks`` labels the clusters that the bootstrap resamples.
    """
    y, m, z = (np.asarray(v, dtype=float) for v in (y, m, z))
    tasks = np.asarray(tasks).astype(str)
    codes, uniq = pd.factorize(tasks)
    zw, mw, yw = _within(z, codes), _within(m, codes), _within(y, codes)
    per_task = np.zeros((len(uniq), 5))
    for j, prod in enumerate((zw * zw, zw * mw, zw * yw, mw * mw, mw * yw)):
        np.add.at(per_task[:, j], codes, prod)
    point = _fit(per_task.sum(axis=0, keepdims=True))[0]
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(len(uniq), np.full(len(uniq), 1.0 / len(uniq)), size=n_boot)
    boot = _fit(counts @ per_task)
    share_pt = point[4] / point[0] if point[0] != 0 else np.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        share_boot = boot[:, 4] / boot[:, 0]
    tail = 100 * (1 - confidence) / 2

    def ci(col: np.ndarray) -> tuple[float, float]:
        ok = col[np.isfinite(col)]
        if ok.size < 0.9 * n_boot:  # too many degenerate resamples (no variation in a task's arm or mediator)
            return math.nan, math.nan
        lo, hi = np.percentile(ok, [tail, 100 - tail])
        return float(lo), float(hi)

    names = ["total_effect", "arm_on_mediator", "mediator_on_outcome", "direct_effect", "indirect_effect"]
    out = {name: (float(point[i]), *ci(boot[:, i])) for i, name in enumerate(names)}
    out["share_mediated"] = (float(share_pt), *ci(share_boot))
    return out


def mediation_table(metrics: pd.DataFrame, pairs: list[tuple[str, str]], *, outcomes=DEFAULT_OUTCOMES,
                    mediators=DEFAULT_MEDIATORS, n_boot: int = 10_000, seed: int = 0, confidence: float = 0.95) -> pd.DataFrame:
    """Every pair, outcome and mediator: :func:`decompose` on the usable trials of tasks both arms ran."""
    trials = usable_trials(metrics)
    rows: list[dict] = []
    for a, b in pairs:
        sub = trials[trials["profile"].astype(str).isin([a, b])]
        for outcome in outcomes:
            if outcome not in sub:
                continue
            om = registry.metric(outcome)
            if om.kind == "binary":
                y = stats.as_outcome(sub[outcome].to_numpy()).to_numpy()
                scale, unit = "pass_rate", scale_unit("pass_rate")
            else:
                v = pd.to_numeric(sub[outcome], errors="coerce").to_numpy(float)
                y = np.log(np.where(v > 0, v, np.nan)) if om.scale == "ratio" else v
                scale = "ratio" if om.scale == "ratio" else "difference"
                unit = scale_unit(scale, om.unit)
            for mediator in mediators:
                base = {"profile_a": a, "profile_b": b, "outcome": outcome, "mediator": mediator}
                mv = pd.to_numeric(sub[mediator], errors="coerce").to_numpy(float) if mediator in sub else np.full(len(sub), np.nan)
                ok = np.isfinite(y) & np.isfinite(mv)
                t = sub["task_id"].astype(str).to_numpy()[ok]
                z = (sub["profile"].astype(str).to_numpy()[ok] == b).astype(float)
                both = pd.Series(z).groupby(t).agg(lambda s: s.nunique() == 2)
                keep = np.isin(t, both[both].index)
                n_tasks = int(both.sum())
                if n_tasks < MIN_TASKS:
                    rows.append({**base, "estimand": "indirect_effect", "definition": ESTIMANDS["indirect_effect"],
                                 "scale": scale, "unit": unit, "n_tasks": n_tasks, "n_trials": int(keep.sum()),
                                 "note": f"not estimable: {n_tasks} tasks with {mediator} and {outcome} under both "
                                         f"profiles (at least {MIN_TASKS} needed)"})
                    continue
                est = decompose(y[ok][keep], mv[ok][keep], z[keep], t[keep], n_boot=n_boot, seed=seed, confidence=confidence)
                for name, (e, lo, hi) in est.items():
                    if name in ("arm_on_mediator",):
                        sc, un, f = "difference", registry.metric(mediator).unit, (lambda x: x)
                    elif name == "mediator_on_outcome" and scale == "ratio":
                        sc, un, f = "per_unit", f"% per {registry.metric(mediator).unit}", \
                            (lambda x: 100.0 * math.expm1(x) if math.isfinite(x) else x)
                    elif name == "mediator_on_outcome":
                        sc, un, f = "per_unit", f"{unit} per {registry.metric(mediator).unit}", (lambda x: x)
                    elif name == "share_mediated":
                        sc, un, f = "share", "share", (lambda x: x)
                    elif scale == "ratio":
                        sc, un, f = scale, unit, (lambda x: 100.0 * math.expm1(x) if math.isfinite(x) else x)
                    else:
                        sc, un, f = scale, unit, (lambda x: x)
                    rows.append({**base, "estimand": name, "definition": ESTIMANDS[name], "scale": sc, "unit": un,
                                 "estimate": f(e), "ci_low": f(lo), "ci_high": f(hi), "n_tasks": n_tasks,
                                 "n_trials": int(keep.sum()), "note": None})
    out = pd.DataFrame(rows, columns=COLUMNS)
    for c in ("estimate", "ci_low", "ci_high"):
        out[c] = pd.to_numeric(out[c], errors="coerce").astype(float)
    return out
