"""Planning the next study: sample size by simulation at the claim's level, and the spend it projects."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from .nonparametric import EXACT_BELOW, _exact_p, _normal_p, _signrank_rows

__all__ = ["DEFAULT_PLAN_GRID", "plan_sample_size", "project_spend"]


DEFAULT_PLAN_GRID = (10, 15, 20, 30, 40, 50, 75, 100, 150, 200)


def _wilcoxon_p_rows(d: np.ndarray) -> np.ndarray:
    """Two-sided p-values of :func:`wilcoxon` (defaults) for every row of ``d``, vectorised.

    Rows with ties or zeros (nearly all rows of a resampled pilot) get the tie-corrected,
    continuity-corrected normal approximation computed for all rows at once
    (:func:`_signrank_rows`); rows that qualify for the exact distribution (< 50 non-zero
    differences, no ties, no zeros) get it, so each row's p equals ``wilcoxon(row)``.
    """
    d = np.atleast_2d(np.asarray(d, dtype=float))
    t_plus, n, n_zero, mean, var = _signrank_rows(d, "wilcox")
    p = _normal_p(t_plus, mean, var, True)
    p[n == 0] = 1.0
    untied = var == n * (n + 1) * (2 * n + 1) / 24.0
    exact = (n < EXACT_BELOW) & (n_zero == 0) & untied & (n > 0)
    if exact.any():
        p[exact] = _exact_p(t_plus[exact], d.shape[1])
    return p


def plan_sample_size(
    pairs: pd.DataFrame,
    *,
    effect: float,
    kind: str = "continuous",
    n_tasks: Sequence[int] = DEFAULT_PLAN_GRID,
    power: float = 0.8,
    alpha: float = 0.05,
    n_sim: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Number of tasks needed to detect an effect with the given power, by resampling a pilot.

    ``pairs`` are pilot per-task pairs (``a``, ``b`` from :func:`pair_tasks`). For each n in
    ``n_tasks``, ``n_sim`` studies of n tasks are simulated by drawing pilot tasks with
    replacement and imposing the effect; power is the share of studies whose two-sided test
    (the one the comparison uses) has p < alpha.

    * ``kind="continuous"``: ``effect`` is the relative reduction to detect (0.2 = B uses 20 %
      less). B is rescaled so that the median per-task log-ratio ``log(b/a)`` is 0 (removing
      the pilot's own effect, keeping its task-to-task noise: ``b0 = b / exp(median log(b/a))``);
      each resampled pair is swapped with probability 1/2 (A and B exchangeable under H0, so
      the null differences are symmetric), then B is scaled by ``1 - effect``; test: Wilcoxon
      signed-rank (:func:`wilcoxon`). Pairs with a or b <= 0 are dropped.
    * ``kind="binary"``: ``effect`` is the absolute lift in resolve rate (0.15 = +15 points).
      A's outcomes are resampled from the pilot; a task A solved is lost by B with the pilot's
      rate q- = P(B fail | A pass), and a task A failed is gained with the rate
      q+ = (effect + p_A q-) / (1 - p_A) that gives the lift; test: McNemar exact.

    The power estimate has Monte-Carlo standard error ``sqrt(power (1 - power) / n_sim)``
    (``power_se``). ``n_required`` is the smallest n whose estimated power reaches ``power``
    (NaN if none in the grid). Reference: the simulation approach to power of Arnold et al.
    (2011), BMC Med Res Methodol 11:94.

    Returns ``kind, effect, n_tasks, power, power_se, n_sim, alpha, target_power, n_required,
    n_pilot, seed``.

    Examples
    --------
    For pass/fail the simulation reproduces the exact power of McNemar's exact test
    (:func:`analysis_lib.inference.power.mcnemar_exact_power`, an exact sum) within its Monte-Carlo error:

    >>> from analysis_lib.inference.power import mcnemar_exact_power
    >>> pilot = pd.DataFrame({"a": [1.0] * 10 + [0.0] * 10, "b": [1.0] * 8 + [0.0] * 12})
    >>> sim = plan_sample_size(pilot, effect=0.2, kind="binary", n_tasks=(60,), n_sim=4000, seed=3).iloc[0]
    >>> exact = mcnemar_exact_power(60, 0.5 * 0.2, 0.5 * 0.6)  # p10 = P(A pass) q-, p01 = P(A fail) q+
    >>> bool(abs(sim["power"] - exact) < 4 * sim["power_se"])
    True
    """
    if kind not in ("continuous", "binary"):
        raise ValueError(f"kind must be 'continuous' or 'binary', got {kind!r}")
    if not 0 < power < 1 or not 0 < alpha < 1:
        raise ValueError("power and alpha must lie in (0, 1)")
    a = pairs["a"].to_numpy(float)
    b = pairs["b"].to_numpy(float)
    ok = ~(np.isnan(a) | np.isnan(b))
    a, b = a[ok], b[ok]
    rng = np.random.default_rng(seed)
    grid = sorted(int(n) for n in n_tasks)
    power_list: list[float] = []
    if kind == "continuous":
        if not 0 <= effect < 1:
            raise ValueError(f"effect (relative reduction) must lie in [0, 1), got {effect}")
        pos = (a > 0) & (b > 0)
        a, b = a[pos], b[pos]
        if a.size < 2:
            raise ValueError("the pilot needs at least 2 pairs with positive values of a and b")
        # Remove the pilot's own effect: scale B so that the median log-ratio is 0.
        b_null = b * np.exp(-np.median(np.log(b / a)))
        for n in grid:
            idx = rng.integers(0, a.size, size=(n_sim, n))
            # Under H0, A and B are exchangeable within a task: swapping each resampled pair
            # with probability 1/2 makes the null differences symmetric, as the test assumes.
            swap = rng.random((n_sim, n)) < 0.5
            sim_a = np.where(swap, b_null[idx], a[idx])
            sim_b = np.where(swap, a[idx], b_null[idx]) * (1 - effect)
            # Resampled pairs repeat differences (ties), hence mostly the tie-corrected normal
            # approximation, exactly as the real analysis would run it.
            power_list.append(float(np.mean(_wilcoxon_p_rows(sim_b - sim_a) < alpha)))
    else:
        if not -1 < effect < 1:
            raise ValueError(f"effect (lift in resolve rate) must lie in (-1, 1), got {effect}")
        a_pass = a > 0.5
        b_pass = b > 0.5
        if a.size < 2:
            raise ValueError("the pilot needs at least 2 pairs")
        p_a = float(a_pass.mean())
        q_minus = float((~b_pass[a_pass]).mean()) if a_pass.any() else 0.0
        if p_a >= 1:
            raise ValueError("the pilot baseline solves every task: no room for a lift")
        q_plus = (effect + p_a * q_minus) / (1 - p_a)
        if not 0 <= q_plus <= 1:
            raise ValueError(f"a lift of {effect} is impossible from a baseline resolve rate of {p_a:.3f}")
        for n in grid:
            ap = a_pass[rng.integers(0, a.size, size=(n_sim, n))]
            u = rng.random((n_sim, n))
            lost = ap & (u < q_minus)  # A pass, B fail
            gained = ~ap & (u < q_plus)  # A fail, B pass
            n10, n01 = lost.sum(1), gained.sum(1)
            m = n10 + n01
            p = np.where(m == 0, 1.0, np.minimum(1.0, 2 * sps.binom.cdf(np.minimum(n10, n01), np.maximum(m, 1), 0.5)))
            power_list.append(float(np.mean(p < alpha)))
    powers = np.asarray(power_list)
    reached = [n for n, pw in zip(grid, powers, strict=True) if pw >= power]
    return pd.DataFrame(
        {
            "kind": kind,
            "effect": effect,
            "n_tasks": grid,
            "power": powers,
            "power_se": np.sqrt(powers * (1 - powers) / n_sim),
            "n_sim": n_sim,
            "alpha": alpha,
            "target_power": power,
            "n_required": float(reached[0]) if reached else np.nan,
            "n_pilot": int(a.size),
            "seed": seed,
        }
    )


def project_spend(
    trials: pd.DataFrame,
    *,
    n_tasks: int,
    repetitions: int,
    profiles: Sequence[str] | None = None,
    metrics: Sequence[str] = ("total_cost_usd", "total_tokens", "elapsed_sec"),
) -> pd.DataFrame:
    """Projected spend of a full run from pilot trials: per-run median and p90, times the runs.

    For each profile and metric: ``n_runs = n_tasks * repetitions``;
    ``projected_median = n_runs * median`` (the typical total) and
    ``projected_p90 = n_runs * p90`` (a budget line: a sum of per-run p90s over-states the p90 of
    the total, which is the intended margin against heavy-tailed runs). A final ``(all)`` row per
    metric sums the profiles. Quantiles are numpy's linear interpolation.

    Returns ``profile, metric, n_pilot_runs, per_run_median, per_run_p90, n_runs,
    projected_median, projected_p90``.

    Examples
    --------
    >>> pilot = pd.DataFrame({"profile": ["A"] * 5, "total_cost_usd": [1, 2, 3, 4, 10]})
    >>> r = project_spend(pilot, n_tasks=50, repetitions=3, metrics=("total_cost_usd",)).iloc[0]
    >>> print(r["per_run_median"], r["n_runs"], r["projected_median"], round(r["per_run_p90"], 2))  # numpy quantile
    3.0 150 450.0 7.6
    """
    if n_tasks < 1 or repetitions < 1:
        raise ValueError("n_tasks and repetitions must be >= 1")
    names = sorted(trials["profile"].astype(str).unique()) if profiles is None else list(profiles)
    rows: list[dict[str, Any]] = []  # frame records: text, counts and floats
    n_runs = n_tasks * repetitions
    for metric in metrics:
        if metric not in trials.columns:
            raise ValueError(f"metric {metric!r} is not a column of the pilot frame")
        for profile in names:
            v = pd.to_numeric(trials.loc[trials["profile"].astype(str) == profile, metric], errors="coerce").dropna().to_numpy(float)
            med = float(np.median(v)) if v.size else np.nan
            p90 = float(np.quantile(v, 0.9)) if v.size else np.nan
            rows.append({"profile": profile, "metric": metric, "n_pilot_runs": int(v.size), "per_run_median": med,
                         "per_run_p90": p90, "n_runs": n_runs, "projected_median": n_runs * med, "projected_p90": n_runs * p90})
        part = [r for r in rows if r["metric"] == metric]
        rows.append({"profile": "(all)", "metric": metric, "n_pilot_runs": sum(r["n_pilot_runs"] for r in part),
                     "per_run_median": np.nan, "per_run_p90": np.nan, "n_runs": n_runs * len(part),
                     "projected_median": float(np.sum([r["projected_median"] for r in part])),
                     "projected_p90": float(np.sum([r["projected_p90"] for r in part]))})
    return pd.DataFrame(rows)
