"""Group-sequential boundaries: Lan-DeMets alpha spending, the recursion for normal statistics, and exact
boundaries for McNemar's test and the sign-flip test by enumeration.

A study analysed at K looks, at information fractions ``t_1 < ... < t_K = 1``, rejects at the first look
whose statistic crosses that look's boundary. The boundaries spend the type-I error alpha over the looks by
a spending function (Lan & DeMets 1983, Biometrika 70:659): the chance of crossing by look k under the null
is the function's value at ``t_k``, whatever the timing of the looks. Two functions are offered, per side
of a two-sided test at level alpha (each side spends alpha / 2, the convention of gsDesign's ``sfLDOF`` and
``sfLDPocock`` and of rpact's ``asOF`` and ``asP``):

* O'Brien-Fleming type: ``2 - 2 Phi(Phi^-1(1 - a/2) / sqrt(t))`` (spends almost nothing early);
* Pocock type: ``a ln(1 + (e - 1) t)`` (spends evenly).

For a normal statistic with independent increments (``Z_k`` with ``corr(Z_j, Z_k) = sqrt(t_j / t_k)``), the
boundaries come from the recursive numerical integration of Armitage, McPherson & Rowe (1969), as in
Jennison & Turnbull (2000), *Group Sequential Methods*, ch. 19: the density of ``Z_k`` on the continuation
region is carried from look to look on a grid with Simpson's weights. Discrete tests get boundaries from
their own exact null distribution, conditional on what the null leaves random: McNemar's test given the
number of discordant tasks at each look (a binomial random walk), the sign-flip test given the absolute
per-task differences (each sign is a fair coin); both enumerate the walk on its lattice, so the error
spent never exceeds the function's value.

Futility bounds are non-binding: the efficacy boundaries ignore them, so stopping or not stopping for
futility never inflates the type-I error. They spend the type-II error beta under the drift at which the
design has power ``1 - beta`` (rpact's beta spending with non-binding futility).

A final look that comes before the planned end (the budget ran out) keeps the information fraction it
reached and spends all the error left (``final=True``): the boundaries of the earlier looks are unchanged, and
the last one is computed with the correlation of the looks that actually happened (Lan & DeMets 1983: the
spending function is evaluated at the observed information; the final analysis spends what remains).

Repeated confidence intervals of the exact tests (:func:`sign_flip_repeated_interval`,
:func:`binomial_repeated_interval`) are the effects the look's own rule does not reject (p above the look's
nominal level), so a look that rejects 0 has an interval without 0, and one that does not has 0 inside.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps
from scipy.optimize import brentq
from scipy.special import ndtr

__all__ = ["SPENDING", "spending", "crossing_probabilities", "efficacy_bounds", "classical_bounds", "Design",
           "design", "futility_bounds", "stopping", "mcnemar_bounds", "sign_flip_bounds", "stagewise",
           "cumulative_spent", "smallest_p", "sign_flip_repeated_interval", "binomial_repeated_interval", "TIE"]

SPENDING = ("obrien_fleming", "pocock")
GRID = 201  # Simpson points per look: boundaries agree with published tables to 1e-7 (tests)
SPAN = 9.0  # the grid covers the drift's mean +/- SPAN standard deviations
# A p-value within this relative distance of a nominal boundary counts as on it (and rejects): two exact
# computations of one tail probability (the walk's, an inversion's) differ only by rounding.
TIE = 1e-12


def spending(kind: str, alpha: float, t) -> np.ndarray:
    """Cumulative error spent by information fraction ``t`` (Lan-DeMets; gsDesign ``sfLDOF`` / ``sfLDPocock``)."""
    t = np.clip(np.asarray(t, dtype=float), 0.0, 1.0)
    if kind == "obrien_fleming":
        with np.errstate(divide="ignore"):
            return np.where(t > 0, 2.0 - 2.0 * sps.norm.cdf(sps.norm.ppf(1 - alpha / 2) / np.sqrt(t)), 0.0)
    if kind == "pocock":
        return alpha * np.log1p((math.e - 1.0) * t)
    raise ValueError(f"spending must be one of {', '.join(SPENDING)}, got {kind!r}")


def _pdf(x):
    return np.exp(-0.5 * np.square(x)) / math.sqrt(2 * math.pi)


def _simpson(lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    n = GRID
    z = np.linspace(lo, hi, n)
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return z, w * (hi - lo) / (3.0 * (n - 1))


class _Walk:
    """The density of ``Z_k`` on the continuation region, carried look by look (drift ``eta`` at t = 1)."""

    def __init__(self, t: Sequence[float], drift: float = 0.0):
        self.t = np.asarray(t, dtype=float)
        if self.t.size == 0 or np.any(np.diff(self.t) <= 0) or self.t[0] <= 0:
            raise ValueError(f"information fractions must increase from above 0, got {list(self.t)}")
        self.eta = float(drift)
        self.k = -1
        self.z = self.w = self.f = None

    def _moments(self, k: int) -> tuple[np.ndarray | float, float]:
        """Mean and sd of Z_k given each grid point of look k - 1 (or unconditionally at the first look)."""
        tk = self.t[k]
        if k == 0:
            return self.eta * math.sqrt(tk), 1.0
        tp, d = self.t[k - 1], tk - self.t[k - 1]
        return (self.z * math.sqrt(tp) + self.eta * d) / math.sqrt(tk), math.sqrt(d / tk)

    def tail(self, k: int, upper: float, lower: float) -> tuple[float, float]:
        """P(continue to look k and Z_k >= upper), P(continue to look k and Z_k <= lower)."""
        mean, sd = self._moments(k)
        up = ndtr((mean - upper) / sd) if np.isfinite(upper) else np.zeros_like(mean)
        lo = ndtr((lower - mean) / sd) if np.isfinite(lower) else np.zeros_like(mean)
        if k == 0:
            return float(up), float(lo)
        return float(np.sum(self.w * self.f * up)), float(np.sum(self.w * self.f * lo))

    def advance(self, k: int, upper: float, lower: float) -> None:
        """Carry the density to look k, keeping only the paths that continue there (lower < Z_k < upper)."""
        mean_k = self.eta * math.sqrt(self.t[k])
        lo, hi = max(lower, mean_k - SPAN), min(upper, mean_k + SPAN)
        if hi <= lo:  # nothing continues
            z, w = np.array([0.0, 0.0, 0.0]), np.zeros(3)
            self.z, self.w, self.f, self.k = z, w, np.zeros(3), k
            return
        z, w = _simpson(lo, hi)
        mean, sd = self._moments(k)
        if k == 0:
            f = _pdf((z - mean) / sd) / sd
        else:
            f = (self.w * self.f) @ (_pdf((z[None, :] - np.asarray(mean)[:, None]) / sd) / sd)
        self.z, self.w, self.f, self.k = z, w, f, k


def crossing_probabilities(upper: Sequence[float], lower: Sequence[float], t: Sequence[float],
                           drift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Per look, the chance of first crossing the upper and the lower boundary (``Z_k`` with mean ``drift sqrt(t_k)``).

    ``upper`` and ``lower`` may hold infinities (no boundary on that side at that look).
    """
    walk = _Walk(t, drift)
    p_up, p_lo = np.zeros(len(walk.t)), np.zeros(len(walk.t))
    for k in range(len(walk.t)):
        p_up[k], p_lo[k] = walk.tail(k, float(upper[k]), float(lower[k]))
        walk.advance(k, float(upper[k]), float(lower[k]))
    return p_up, p_lo


def _solve_upper(walk: _Walk, k: int, target: float, symmetric: bool) -> float:
    """The upper boundary at look k whose crossing chance (one side) is ``target``."""
    if target <= 1e-15:
        return math.inf

    def excess(c: float) -> float:
        return walk.tail(k, c, -c if symmetric else -math.inf)[0] - target

    lo = 0.0 if symmetric else -12.0
    if excess(lo) < 0:  # even the widest region spends less than the target (possible only one-sided)
        return lo
    return float(brentq(excess, lo, 40.0, xtol=1e-10))


def cumulative_spent(t: Sequence[float], alpha: float, kind: str, *, final: bool = False) -> np.ndarray:
    """Error to have spent by each look (``alpha`` in all, over both sides); with ``final`` the last look spends
    all that is left whatever its fraction (a final analysis before the planned end)."""
    cum = np.asarray(spending(kind, alpha, t), dtype=float).copy()
    if final and cum.size:
        cum[-1] = alpha
    return cum


def efficacy_bounds(t: Sequence[float], alpha: float, kind: str = "obrien_fleming", *, sided: int = 2,
                    cumulative: Sequence[float] | None = None, final: bool = False) -> np.ndarray:
    """Critical values ``c_k`` on the Z scale: reject at look k when ``|Z_k| >= c_k`` (``Z_k >= c_k`` one-sided).

    Each side spends ``spending(kind, alpha / sided, t)``; ``cumulative`` replaces that by the error to have
    spent per side by each look (rpact's ``asUser``); ``final``: the last look spends all that is left, at the
    fraction ``t`` gives it. An infinite value means the look cannot reject.
    """
    if sided not in (1, 2):
        raise ValueError(f"sided must be 1 or 2, got {sided}")
    t = np.asarray(t, dtype=float)
    cum = np.asarray(cumulative, dtype=float) if cumulative is not None else \
        cumulative_spent(t, alpha / sided, kind, final=final)
    walk = _Walk(t)
    c = np.zeros(len(t))
    for k in range(len(t)):
        c[k] = _solve_upper(walk, k, float(cum[k] - (cum[k - 1] if k else 0.0)), sided == 2)
        walk.advance(k, c[k], -c[k] if sided == 2 else -math.inf)
    return c


def classical_bounds(n_looks: int, alpha: float, kind: str, *, sided: int = 2) -> np.ndarray:
    """Pocock (constant) or O'Brien-Fleming (``C sqrt(K / k)``) boundaries for equally spaced looks.

    The boundaries of the two classical designs (Pocock 1977; O'Brien & Fleming 1979), tabled by Jennison &
    Turnbull (2000), Tables 2.1 and 2.3: a check of the recursion against published constants.
    """
    t = np.arange(1, n_looks + 1) / n_looks
    shape = np.ones(n_looks) if kind == "pocock" else np.sqrt(n_looks / np.arange(1, n_looks + 1))

    def error(const: float) -> float:
        up = const * shape
        p_up, p_lo = crossing_probabilities(up, -up if sided == 2 else np.full(n_looks, -np.inf), t)
        return float(p_up.sum() + p_lo.sum()) - alpha

    return brentq(error, 1.0, 6.0, xtol=1e-10) * shape


@dataclass(frozen=True)
class Design:
    """Boundaries of a design on the Z scale at fractions ``t``; ``futility`` is ``None`` without futility bounds.

    ``drift`` is the mean of ``Z`` at t = 1 under which the design has power ``1 - beta`` (with futility
    stopping, when there is a futility bound); ``inflation`` is the maximum sample size relative to the
    fixed design of the same power, ``(drift / (z_{1-alpha/sided} + z_{1-beta}))^2``.
    """

    t: np.ndarray
    alpha: float
    sided: int
    efficacy: np.ndarray
    futility: np.ndarray | None
    beta: float
    drift: float
    inflation: float

    def lower(self) -> np.ndarray:
        """The lower edge of the continuation region: the futility bound, else the lower efficacy bound."""
        base = -self.efficacy if self.sided == 2 else np.full(len(self.t), -np.inf)
        return base if self.futility is None else np.maximum(base, self.futility)


def futility_bounds(t: Sequence[float], upper: Sequence[float], beta: float, kind: str, drift: float, sided: int = 2,
                    *, final: bool = True) -> np.ndarray:
    """Non-binding futility bounds spending beta under ``drift``; the last one meets the efficacy bound when it is
    the ``final`` look (at an interim look, the looks so far, the last bound is the spending function's own)."""
    t, upper = np.asarray(t, dtype=float), np.asarray(upper, dtype=float)
    cum = spending(kind, beta, t)
    walk = _Walk(t, drift)
    b = np.zeros(len(t))
    for k in range(len(t)):
        floor = -upper[k] if sided == 2 else -math.inf
        target = float(cum[k] - (cum[k - 1] if k else 0.0))
        if k == len(t) - 1 and final:
            b[k] = upper[k]
        else:
            def excess(x: float, k: int = k, target: float = target) -> float:
                return walk.tail(k, upper[k], x)[1] - target
            b[k] = upper[k] if excess(upper[k]) <= 0 else float(brentq(excess, -20.0, upper[k], xtol=1e-10))
            b[k] = max(b[k], floor)
        walk.advance(k, upper[k], b[k])
    return b


def design(t: Sequence[float], alpha: float, efficacy: str = "obrien_fleming", futility: str | None = None, *,
           beta: float = 0.2, sided: int = 2) -> Design:
    """Efficacy boundaries, the drift of power ``1 - beta``, and (optionally) non-binding futility bounds.

    With futility, the drift is the one at which the beta-spending futility bound of the last look meets
    the efficacy bound (rpact ``getDesignGroupSequential(typeBetaSpending = ...)``): the power is then
    exactly ``1 - beta`` counting futility stops. The efficacy boundaries never depend on the futility bounds.
    """
    tt = np.asarray(t, dtype=float)
    c = efficacy_bounds(tt, alpha, efficacy, sided=sided)
    fixed = sps.norm.ppf(1 - alpha / sided) + sps.norm.ppf(1 - beta)
    if futility is None:
        def short(eta: float) -> float:
            return float(crossing_probabilities(c, -c if sided == 2 else np.full(len(tt), -np.inf), tt, eta)[0].sum()) \
                - (1 - beta)
        eta = float(brentq(short, 0.0, 15.0, xtol=1e-9))
        b = None
    else:
        def gap(eta: float) -> float:
            bb = futility_bounds(tt, c, beta, futility, eta, sided)
            p_up, _ = crossing_probabilities(c, bb, tt, eta)
            return float(p_up.sum()) - (1 - beta)
        eta = float(brentq(gap, 0.0, 15.0, xtol=1e-9))
        b = futility_bounds(tt, c, beta, futility, eta, sided)
    return Design(tt, alpha, sided, c, b, beta, eta, (eta / fixed) ** 2)


def stopping(d: Design, drift: float) -> dict[str, np.ndarray | float]:
    """Per look, the chance of stopping for efficacy (either side) and for futility under ``drift``; the expected
    information at the stop (a fraction of the maximum); and the power (chance of an upper crossing)."""
    upper, lower = d.efficacy, d.lower()
    p_up, p_lo = crossing_probabilities(upper, lower, d.t, drift)
    # A low crossing is harm (the other side's efficacy) below -c_k, futility between -c_k and b_k.
    harm = _harm(d, drift) if d.sided == 2 else np.zeros(len(d.t))
    futile = p_lo - harm
    stop = p_up + p_lo
    stop[-1] = 1.0 - stop[:-1].sum()
    return {"efficacy": p_up + harm, "futility": futile, "power": float(p_up.sum()),
            "expected_fraction": float(np.sum(stop * d.t))}


def _harm(d: Design, drift: float) -> np.ndarray:
    """Chance of first leaving the continuation region below ``-c_k`` (the other side's efficacy bound)."""
    walk = _Walk(d.t, drift)
    lower = d.lower()
    out = np.zeros(len(d.t))
    for k in range(len(d.t)):
        out[k] = walk.tail(k, d.efficacy[k], -d.efficacy[k])[1]
        walk.advance(k, d.efficacy[k], lower[k])
    return out


# --------------------------------------------------------------------------- exact, discrete tests


def _cumulative_two_sided(t: Sequence[float], alpha: float, kind: str, final: bool = False) -> np.ndarray:
    return 2.0 * cumulative_spent(t, alpha / 2, kind, final=final)


def smallest_p(test: str, n: int) -> float:
    """The smallest two-sided p-value ``test`` can give with ``n`` paired tasks (every task as extreme as can be,
    in one direction): ``2 / 2^n`` for the exact sign-based tests (McNemar's exact, the sign-flip, the exact
    Wilcoxon signed-rank), 0 for the t test from 2 tasks on, 1 below that. A look whose boundary is below it
    cannot reject, whatever the data."""
    if n < 1:
        return 1.0
    if test in ("mcnemar_exact", "sign_flip", "wilcoxon_signed_rank", "mcnemar_midp"):
        # mid-p halves the most extreme outcome's probability; the others count it whole.
        return min(1.0, (1.0 if test == "mcnemar_midp" else 2.0) * 0.5 ** n)
    return 0.0 if n >= 2 else 1.0


def _choose(dist: np.ndarray, dev: np.ndarray, budget: float) -> float:
    """The smallest deviation d whose region ``dev >= d`` keeps the null mass within ``budget`` (inf if none)."""
    order = np.unique(dev[dist > 0])[::-1]  # candidate thresholds, largest first
    best, mass = math.inf, 0.0
    for d_ in order:
        mass = float(dist[dev >= d_ - 1e-9].sum())
        if mass > budget * (1 + 1e-9) + 1e-15:
            break
        best = float(d_)
    return best


def mcnemar_bounds(discordant: Sequence[int], t: Sequence[float], alpha: float, kind: str, *,
                   final: bool = False) -> list[dict]:
    """Exact two-sided boundaries of McNemar's test at each look, given the discordant tasks at each look.

    Under the null, each discordant task favours B with chance 1/2 whatever the others do, so given the
    counts ``m_1 <= ... <= m_K`` the number favouring B is a binomial random walk. At look k the test
    rejects when ``|n01 - m_k / 2| >= d_k``; ``d_k`` is the smallest distance whose rejection region keeps
    the chance of rejecting by look k within the spent error (exact enumeration of the walk: the error
    spent is never more than the spending function's value). ``nominal_p`` is the chance of that region
    alone, the exact McNemar p-value at or below which look k rejects.

    Returns per look ``{"distance", "nominal_p", "spent"}`` (spent: exact cumulative error by that look);
    ``final``: the last look spends all the error left.
    """
    cum = _cumulative_two_sided(t, alpha, kind, final)
    dist = np.array([1.0])
    m_prev, spent, out = 0, 0.0, []
    for k, m in enumerate(int(x) for x in discordant):
        if m < m_prev:
            raise ValueError(f"discordant counts must not decrease, got {list(discordant)}")
        if m > m_prev:
            dist = np.convolve(dist, sps.binom.pmf(np.arange(m - m_prev + 1), m - m_prev, 0.5))
        m_prev = m
        dev = np.abs(np.arange(m + 1) - m / 2.0)
        d = _choose(dist, dev, float(cum[k]) - spent) if m else math.inf
        region = dev >= d - 1e-9
        spent += float(dist[region].sum())
        dist = np.where(region, 0.0, dist)
        nominal = float(sps.binom.pmf(np.arange(m + 1), m, 0.5)[region].sum()) if m else 0.0
        out.append({"distance": d, "nominal_p": min(nominal, 1.0), "spent": spent})
    return out


LATTICE_MAX = 2_000_000  # states of the sign-flip walk beyond which enumeration is refused


def lattice(values: np.ndarray, max_denominator: int = 60) -> int | None:
    """The smallest L such that every value times L is an integer (per-task pass-rate differences: the
    least common multiple of the repetition counts); None when there is none up to ``max_denominator``."""
    scale = 1
    for v in np.unique(np.abs(values[np.isfinite(values)])):
        for q in range(1, max_denominator + 1):
            if abs(v * q - round(v * q)) < 1e-9:
                scale = math.lcm(scale, q)
                break
        else:
            return None
    return scale


def sign_flip_bounds(abs_diffs: Sequence[np.ndarray], t: Sequence[float], alpha: float, kind: str, *,
                     final: bool = False) -> list[dict] | None:
    """Exact two-sided boundaries of the sign-flip test on the sum of per-task differences, at each look.

    ``abs_diffs[k]`` are the absolute differences of the tasks added at look k. Under the null each sign is
    a fair coin given the absolute values (the blocked, randomised schedule), so the sum is a random walk on
    a lattice; enumerating it gives at each look the threshold ``e_k`` on ``|S_k|`` and its nominal p (the
    exact sign-flip p-value at or below which look k rejects). Returns None when the values lie on no
    small lattice (then the normal boundaries serve). Per look: ``{"threshold", "nominal_p", "spent",
    "scale"}``; ``threshold`` is on the scale of the sum of differences. ``final``: the last look spends all
    the error left.
    """
    allv = np.concatenate([np.asarray(a, dtype=float) for a in abs_diffs]) if abs_diffs else np.array([])
    scale = lattice(allv) if allv.size else 1
    if scale is None:
        return None
    ints = [np.rint(np.abs(np.asarray(a, dtype=float)) * scale).astype(int) for a in abs_diffs]
    total = int(sum(int(a.sum()) for a in ints))
    if 2 * total + 1 > LATTICE_MAX:
        return None
    cum = _cumulative_two_sided(t, alpha, kind, final)
    size = 2 * total + 1
    alive = np.zeros(size)
    alive[total] = 1.0
    marginal = alive.copy()
    dev = np.abs(np.arange(size) - total).astype(float)
    spent, out = 0.0, []

    def step(p: np.ndarray, v: int) -> np.ndarray:
        if v == 0:
            return p
        q = np.zeros_like(p)
        q[v:] += 0.5 * p[:-v]
        q[:-v] += 0.5 * p[v:]
        return q

    for k, new in enumerate(ints):
        for v in new:
            alive, marginal = step(alive, int(v)), step(marginal, int(v))
        e = _choose(alive, dev, float(cum[k]) - spent)
        region = dev >= e - 1e-9
        spent += float(alive[region].sum())
        alive = np.where(region, 0.0, alive)
        out.append({"threshold": e / scale, "nominal_p": min(float(marginal[region].sum()), 1.0), "spent": spent,
                    "scale": scale, "p_of": _p_function(marginal, dev, scale)})
    return out


def _p_function(marginal: np.ndarray, dev: np.ndarray, scale: int):
    """The exact two-sided sign-flip p-value of an observed sum at this look: P(|S| >= |s|)."""
    order = np.argsort(dev)
    sdev, smass = dev[order], marginal[order]
    tail = np.cumsum(smass[::-1])[::-1]

    def p_of(total_diff: float) -> float:
        i = int(np.searchsorted(sdev, abs(total_diff) * scale - 1e-9))
        return float(min(tail[i], 1.0)) if i < len(tail) else 0.0

    return p_of


def _flip_states(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The null distribution of a sign pattern as (tasks flipped ``k``, sum of the flipped values ``s``), for
    integer values: each task flips with chance 1/2. Returns the states with mass: ``k, s, mass``."""
    v = np.asarray(values, dtype=np.int64)
    n = v.size
    off = int(-v[v < 0].sum())
    width = off + int(v[v > 0].sum()) + 1
    dist = np.zeros((n + 1, width))
    dist[0, off] = 1.0
    for i, x in enumerate(v):
        new = 0.5 * dist
        x = int(x)
        rows = slice(1, i + 2)  # at most i + 1 tasks are flipped after task i
        if x >= 0:
            new[rows, x:] += 0.5 * dist[: i + 1, : width - x]
        else:
            new[rows, : width + x] += 0.5 * dist[: i + 1, -x:]
        dist = new
    k, s = np.nonzero(dist > 0)
    return k, s - off, dist[k, s]


def sign_flip_repeated_interval(d: Sequence[float], nominal: float) -> dict[str, float] | None:
    """The shifts delta the exact sign-flip test of ``d - delta`` does not reject at ``nominal``: p(delta) > nominal.

    The rule that rejects at a look (p <= the look's nominal p) inverted exactly, whatever the number of tasks,
    when the differences lie on a small lattice (pass-rate differences of repetitions always do): the sign
    patterns are counted by their number of flipped tasks and the sum of what they flip (a walk on the
    lattice), and each pattern is as extreme as the data on the closed interval of shifts between the mean of
    the flipped differences and the mean of the others (as :func:`analysis_lib.stats.nonparametric.sign_flip`
    uses). p(delta) falls monotonically on either side of the mean, so the set is a closed interval; it excludes
    0 exactly when p(0) <= nominal. Returns ``ci_low, ci_high, p_value`` (p at 0), or None without a lattice.
    """
    x = np.asarray(d, dtype=float)
    x = x[np.isfinite(x)]
    n = x.size
    if n == 0:
        return None
    scale = lattice(x)
    if scale is None or 2 * int(np.sum(np.rint(np.abs(x) * scale))) + 1 > LATTICE_MAX:
        return None
    v = np.rint(x * scale).astype(np.int64)
    total = int(v.sum())
    k, s, mass = _flip_states(v)
    trivial = (k == 0) | (k == n)
    # Hit at 0 (the test's own p): |total - 2 s| >= |total|, i.e. s (s - total) >= 0, in integers.
    p0 = float(min(mass[trivial | (s * (s - total) >= 0)].sum(), 1.0))
    threshold = nominal * (1 + TIE)
    always = float(mass[trivial].sum())
    if always > threshold:
        return {"ci_low": -math.inf, "ci_high": math.inf, "p_value": p0}
    kk, ss, mm = k[~trivial].astype(float), s[~trivial].astype(float), mass[~trivial]
    mean_f, mean_rest = ss / kk, (total - ss) / (n - kk)
    lo, hi = np.minimum(mean_f, mean_rest), np.maximum(mean_f, mean_rest)

    def end(edges: np.ndarray, ascending: bool) -> float:
        # p at a shift below the mean counts the patterns whose set starts at or below it (and above: ends at
        # or above it); the end is the first edge at which that count passes the threshold.
        order = np.argsort(edges if ascending else -edges, kind="stable")
        e, cum = edges[order], always + np.cumsum(mm[order])
        last_of_tie = np.r_[e[1:] != e[:-1], True]
        ok = np.nonzero(last_of_tie & (cum > threshold))[0]
        return float(e[ok[0]]) / scale if ok.size else float(x.mean())

    return {"ci_low": end(lo, True), "ci_high": end(hi, False), "p_value": p0}


def binomial_repeated_interval(n10: int, n01: int, nominal: float) -> dict[str, float]:
    """The discordant-pair odds ratios ``n01 / n10`` McNemar's exact test does not reject at ``nominal``.

    Given the ``m`` discordant tasks, ``n01 ~ Bin(m, pi)`` with odds ratio ``pi / (1 - pi)``; the exact test of
    ``pi`` rejects when twice its smaller tail is at most ``nominal``, so the set is the Clopper-Pearson interval
    at level ``1 - nominal`` with its ends left out (open), mapped to the odds scale; it excludes 1 exactly when
    McNemar's exact p is at most ``nominal``. Returns ``odds_ratio, ci_low, ci_high, low_open, high_open``.
    """
    n10, n01 = int(n10), int(n01)
    m = n10 + n01
    est = math.nan if m == 0 else (math.inf if n10 == 0 else n01 / n10)
    if m == 0 or nominal <= 0:
        return {"odds_ratio": est, "ci_low": 0.0, "ci_high": math.inf, "low_open": False, "high_open": False}
    a = nominal / 2
    p_lo = 0.0 if n01 == 0 else float(sps.beta.ppf(a, n01, m - n01 + 1))
    p_hi = 1.0 if n01 == m else float(sps.beta.ppf(1 - a, n01 + 1, m - n01))
    lo, hi = p_lo / (1 - p_lo), (math.inf if p_hi >= 1 else p_hi / (1 - p_hi))
    # McNemar's p equal to the nominal level (a tie the test rejects) puts an end at 1 up to the rounding of the
    # beta quantile: that end is 1 itself, left out.
    p1 = float(min(1.0, 2 * sps.binom.cdf(min(n10, n01), m, 0.5)))
    if p1 <= nominal * (1 + TIE):
        lo = 1.0 if abs(lo - 1) < 1e-6 else lo
        hi = 1.0 if abs(hi - 1) < 1e-6 else hi
    return {"odds_ratio": est, "ci_low": lo, "ci_high": hi, "low_open": n01 > 0, "high_open": n01 < m}


# --------------------------------------------------------------------------- estimation after stopping


def stagewise(z: Sequence[float], info: Sequence[float], upper: Sequence[float], confidence: float = 0.95
              ) -> dict[str, float]:
    """Median-unbiased estimate and interval by the stage-wise ordering, for a study stopped at the last look given.

    ``z`` are the Z statistics at looks 1..k* (k* the stopping look), ``info`` their information (1 / se^2),
    ``upper`` the two-sided boundaries of looks 1..k*-1 on the Z scale. The stage-wise (Armitage; Tsiatis,
    Rosner & Mehta 1984, Biometrics 40:797) p-value of theta is the chance, were theta true, of a result at
    least as favourable to a large theta: an upper crossing at an earlier look, or reaching look k* with
    ``Z >= z*``. The median-unbiased estimate sets it to 1/2, the interval ends to ``(1 -/+ confidence) / 2``
    (Jennison & Turnbull 2000, sec. 8.4). Returns ``estimate, ci_low, ci_high`` on the scale of theta.
    """
    z = np.asarray(z, dtype=float)
    info = np.asarray(info, dtype=float)
    k = len(z)
    t = info / info[-1]
    up = np.append(np.asarray(upper, dtype=float)[: k - 1], z[-1])
    lo = np.append(-np.asarray(upper, dtype=float)[: k - 1], -np.inf)
    scale = math.sqrt(info[-1])

    def p(theta: float) -> float:
        return float(crossing_probabilities(up, lo, t, theta * scale)[0].sum())

    est_fixed = z[-1] / scale
    span = 12.0 / scale

    def solve(q: float) -> float:
        a, b = est_fixed - span, est_fixed + span
        if (p(a) - q) * (p(b) - q) > 0:
            return math.nan
        return float(brentq(lambda th: p(th) - q, a, b, xtol=1e-10 / max(scale, 1e-9)))

    a = 1 - confidence
    return {"estimate": solve(0.5), "ci_low": solve(a / 2), "ci_high": solve(1 - a / 2)}
