"""How many tasks a study needs: exact power of the planned pass/fail tests, with a pilot's uncertainty.

A pilot (earlier runs) gives the baseline's behaviour; the planner answers "how many tasks for 80 %
power to detect +10 points" for the test the plan will run:

* majority verdicts, McNemar exact: power is exact, a sum over the number of discordant tasks
  (Lachin 1992, Stat Med 11:1239; the binomial form of Fagerland et al. 2013);
* every repetition, paired t on per-task pass-rate differences: power from the noncentral t
  distribution, exact for normal differences (Cohen 1988, ch. 2).

The rejection rate of a discrete test need not be monotone in the number of tasks (its size
saw-tooths), so the answer is the smallest n whose power reaches the target: doubling brackets it,
then every n below is checked (no grid steps); the t test's power rises with n, so there bisection
suffices. The pilot's nuisance parameter (the rate at which B loses a task A solves, or the spread
of per-task differences) is uncertain; :func:`sensitivity` answers again at the ends of its 95 % interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import stats as sps

from .. import stats
from ..study.plan import AnalysisPlan

__all__ = ["mcnemar_exact_power", "paired_t_power", "tasks_for_power", "Pilot", "pilot_of", "sensitivity", "Level",
           "claim_level"]

N_MAX = 5000


@lru_cache(maxsize=8)
def _critical(alpha: float, m_max: int = N_MAX) -> np.ndarray:
    """Per m = 0..m_max, the largest k with exact McNemar p = min(1, 2 P(X <= k)) < alpha, X ~ Binom(m, 1/2); -1 if none."""
    m = np.arange(m_max + 1)
    k = sps.binom.ppf(alpha / 2, m, 0.5).astype(int)  # smallest k with P(X <= k) >= alpha / 2
    k = np.where(2 * sps.binom.cdf(k, m, 0.5) < alpha, k, k - 1)
    return np.maximum(k, -1)


@lru_cache(maxsize=64)
def _rejection_chance(pi: float, alpha: float, m_max: int) -> np.ndarray:
    """Per m = 0..m_max discordant tasks, the chance that the exact test rejects, n01 ~ Binom(m, pi).

    It does not depend on the number of tasks, so a search over n computes it once per pilot scenario.
    """
    m = np.arange(m_max + 1)
    crit = _critical(alpha, m_max)
    # P(n01 <= c) + P(n01 >= m - c), the two tails never overlap because c < m / 2.
    return np.where(crit >= 0, sps.binom.cdf(crit, m, pi) + sps.binom.sf(m - crit - 1, m, pi), 0.0)


def mcnemar_exact_power(n: int, p10: float, p01: float, alpha: float = 0.05) -> float:
    """Exact power of the two-sided exact McNemar test on n tasks with discordance probabilities p10, p01.

    Sum over m discordant tasks (Binom(n, p10 + p01)) of the chance that min(n10, n01) falls in the
    rejection region given m, with n01 ~ Binom(m, p01 / (p10 + p01)).
    """
    pd_ = p10 + p01
    if n < 1 or pd_ <= 0:
        return 0.0
    tails = _rejection_chance(p01 / pd_, alpha, max(N_MAX, n))[: n + 1]
    return float(np.sum(sps.binom.pmf(np.arange(n + 1), n, pd_) * tails))


def paired_t_power(n: int, delta: float, sd: float, alpha: float = 0.05) -> float:
    """Power of the two-sided paired t test on n per-task differences with mean delta and spread sd."""
    if n < 2 or sd <= 0:
        return 0.0
    df = n - 1
    q = sps.t.ppf(1 - alpha / 2, df)
    ncp = delta * np.sqrt(n) / sd
    return float(sps.nct.sf(q, df, ncp) + sps.nct.cdf(-q, df, ncp))


def tasks_for_power(power_at, target: float = 0.8, n_max: int = N_MAX, *, rising: bool = False) -> int | None:
    """Smallest n in 2..n_max with ``power_at(n) >= target``; None when n_max does not reach it.

    Doubling finds an n that reaches the target (or shows n_max does not); then every n up to it is
    checked, because the rejection rate of a discrete test need not rise with n. With ``rising`` (a
    power that grows with n, as the t test's does) bisecting the last doubling step finds the same n.
    """
    lo, hi = 1, 2
    while not power_at(hi) >= target:  # NaN power never reaches the target
        if hi >= n_max:
            return None
        lo, hi = hi, min(2 * hi, n_max)
    if rising:
        while hi - lo > 1:  # power_at(lo) < target <= power_at(hi)
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if power_at(mid) >= target else (mid, hi)
        return hi
    return next(n for n in range(2, hi + 1) if power_at(n) >= target)


@dataclass(frozen=True)
class Level:
    """The significance level a claim will be tested at, and where it comes from."""

    alpha: float
    family: str  # "primary" or "hypotheses"
    why: str


def claim_level(plan: AnalysisPlan, n_pairs: int) -> Level:
    """The level the plan tests its claim at, for a planner that must plan at it.

    The primary tier is Holm-corrected over its m rows (metrics times profile pairs): a claim must pass
    Holm's first, smallest level alpha / m. A hypotheses sequence tests each pair's first step at
    alpha / (number of pairs). Planning at alpha instead promises power the corrected test does not have.
    """
    pairs = max(n_pairs, 1)
    if plan.claim == "hypotheses":
        return Level(plan.alpha / pairs, "hypotheses", f"the hypotheses sequence, alpha {plan.alpha:g} / "
                     f"{pairs} profile pair{'s' if pairs != 1 else ''}")
    m = len(plan.tiers.primary.metrics) * pairs
    return Level(plan.alpha / m, "primary", f"Holm's smallest level over the primary tier's {m} tests, alpha "
                 f"{plan.alpha:g} / {m}")


@dataclass(frozen=True)
class Pilot:
    """What the planner takes from a pilot for one pair: per-task outcomes of the baseline and the change."""

    n_tasks: int
    base_rate: float  # majority resolve rate of A
    n_a_pass: int
    n_lost: int  # tasks A solved (majority) and B did not
    diff_sd: float  # spread of per-task pass-rate differences B - A (every repetition)


def pilot_of(trials: pd.DataFrame, a: str, b: str) -> Pilot:
    """The pilot figures of profile pair (a, b) from trial rows (infrastructure errors already left out)."""
    maj = stats.pair_tasks(trials, "success", a, b, binary=True)
    rates = stats.pair_tasks(trials, "success", a, b, binary=True, how="mean")
    pa, pb = maj["a"].to_numpy() > 0.5, maj["b"].to_numpy() > 0.5
    d = rates["b"].to_numpy(float) - rates["a"].to_numpy(float)
    return Pilot(len(maj), float(pa.mean()) if len(maj) else np.nan, int(pa.sum()), int((pa & ~pb).sum()),
                 float(np.std(d, ddof=1)) if d.size > 1 else np.nan)


def _loss_interval(p: Pilot, confidence: float = 0.95) -> tuple[float, float, float]:
    if p.n_a_pass == 0:
        return (np.nan, np.nan, np.nan)
    ci = sps.binomtest(p.n_lost, p.n_a_pass).proportion_ci(confidence, method="exact")
    return (ci.low, p.n_lost / p.n_a_pass, ci.high)


def _sd_interval(p: Pilot, confidence: float = 0.95) -> tuple[float, float, float]:
    df = p.n_tasks - 1
    lo = p.diff_sd * np.sqrt(df / sps.chi2.ppf((1 + confidence) / 2, df))
    hi = p.diff_sd * np.sqrt(df / sps.chi2.ppf((1 - confidence) / 2, df))
    return (lo, p.diff_sd, hi)


def sensitivity(pilot: Pilot, lift: float, *, power: float = 0.8, alpha: float = 0.05) -> pd.DataFrame:
    """Tasks needed for ``lift`` (absolute, 0.10 = +10 points) under both ways of combining repetitions.

    One row per analysis and pilot scenario (the nuisance parameter at its 95 % interval's low end,
    its estimate, its high end): ``analysis, nuisance, value, n_tasks, power_at_n``. ``n_tasks`` is
    None where no n up to 5000 reaches the power, or the lift is impossible from the baseline.
    """
    rows = []
    for label, q in zip(("low", "pilot", "high"), _loss_interval(pilot), strict=True):
        p10 = pilot.base_rate * q
        p01 = p10 + lift
        # A task B gains must be one A failed: p01 <= 1 - (A's rate); a loss only one A solved.
        if not np.isfinite(p10) or p01 > 1 - pilot.base_rate or p01 < 0:
            rows.append(("majority: McNemar exact", f"loss rate ({label})", q, None, np.nan))
            continue
        n = tasks_for_power(lambda k, p10=p10, p01=p01: mcnemar_exact_power(k, p10, p01, alpha), power)
        rows.append(("majority: McNemar exact", f"loss rate ({label})", q, n,
                     mcnemar_exact_power(n, p10, p01, alpha) if n else np.nan))
    for label, sd in zip(("low", "pilot", "high"), _sd_interval(pilot), strict=True):
        n = tasks_for_power(lambda k, sd=sd: paired_t_power(k, lift, sd, alpha), power, rising=True) \
            if np.isfinite(sd) else None
        rows.append(("all repetitions: paired t", f"sd of per-task differences ({label})", sd, n,
                     paired_t_power(n, lift, sd, alpha) if n else np.nan))
    return pd.DataFrame(rows, columns=["analysis", "nuisance", "value", "n_tasks", "power_at_n"])
