"""The plan's group-sequential design: looks, boundaries, decisions, adjusted estimates and replay.

A plan with a ``sequential`` section (:class:`analysis_lib.study.plan.Sequential`) is analysed at interim looks,
each after a share of the scheduled tasks has every pair done. At each look the primary tier (the
confirmatory family) is computed by the one comparison engine (:func:`analysis_lib.inference.comparisons.compare`)
on the complete tasks so far, and every primary row is held against its boundary
(:mod:`analysis_lib.stats.group_sequential`):

* McNemar's exact test and the sign-flip test: exact boundaries, by enumeration of the test's own null
  walk given what the null leaves random (the discordant tasks; the absolute per-task differences);
* the paired t, Wilcoxon signed-rank and other tests: the normal recursion's boundary, used as a nominal
  p-value for the test's own p (its t or exact signed-rank distribution); the type-I error this keeps is
  measured by simulation (``benchmarks/sequential_calibration.py``).

Multiplicity: the family shares alpha as Holm's procedure does, and a rejected hypothesis passes its level
on to the others, whose boundaries are then recomputed at the new level over every look so far (the
graphical approach for group-sequential designs: Maurer & Bretz 2013, Stat Biopharm Res 5:311). Futility
bounds are non-binding. The study stops when every primary hypothesis is decided (``stop: all``) or at the
first rejection (``stop: any``), at the last look, or when the budget ends it.

Estimates after a stop: each primary row gets the repeated confidence interval at the stopping look
(Jennison & Turnbull 1989, JRSS B 51:305: the test's own interval at the boundary's nominal level, which
covers with probability at least the plan's confidence whatever the stopping rule) and the median-unbiased
estimate with its interval by the stage-wise ordering (normal approximation on the estimand's scale); the
fixed-sample numbers stay beside them, labelled as not adjusted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy import stats as sps
from scipy.optimize import brentq

from .. import stats
from ..core import registry
from ..stats import group_sequential as gs
from ..study.plan import AnalysisPlan, Sequential, Tier, Tiers
from .comparisons import compare, usable_trials

__all__ = ["look_sizes", "Monitoring", "monitor", "adjusted_estimates", "replay", "EXACT_TESTS", "design_table",
           "planning", "RunAnalysis", "analyse_run", "repeated_interval", "rci_excludes_null", "interval_excludes",
           "ADJUSTED_COLUMNS", "rejectable_looks", "spend_look_sizes"]

EXACT_TESTS = ("mcnemar_exact", "sign_flip")
LOG_SCALES = ("ratio", "cost_per_success")


def look_sizes(seq: Sequential, n_tasks: int) -> list[int]:
    """Tasks complete at each look: ``ceil(fraction * n_tasks)``, duplicates dropped, the last all of them."""
    return _distinct([min(n_tasks, max(1, math.ceil(f * n_tasks - 1e-9))) for f in seq.fractions()], n_tasks)


def _distinct(sizes: Sequence[int], n_tasks: int) -> list[int]:
    """Look sizes increasing strictly (a look on the same tasks as the one before is the same look), the last
    at every task: two looks cannot share one information fraction."""
    out: list[int] = []
    for n in sizes:
        if not out or n > out[-1]:
            out.append(int(n))
    if not out or out[-1] != n_tasks:
        out.append(n_tasks)
    return out


def spend_look_sizes(seq: Sequential, n_tasks: int, limit_usd: float = math.nan, cost_per_task: float = math.nan
                     ) -> tuple[list[int], list[float | None]]:
    """With ``timing: spend``, the tasks expected done at each look: ``share x limit_usd / cost_per_task`` whole
    tasks (every task costing alike; without a cost, the share of the tasks), duplicates dropped as the runner drops
    a look that finds no new task done, the last at every task; beside each, the share of the guardrail that
    triggers it (None for the final look at the end of the schedule)."""
    sizes: list[int] = []
    shares: list[float | None] = []
    by_cost = np.isfinite(limit_usd) and np.isfinite(cost_per_task) and cost_per_task > 0
    for f in seq.fractions():
        n = math.floor(f * limit_usd / cost_per_task + 1e-9) if by_cost else round(f * n_tasks)
        if n >= n_tasks:  # the schedule ends before this share is spent: the final look comes first
            break
        if n >= 1 and (not sizes or n > sizes[-1]):
            sizes.append(n)
            shares.append(f)
    if not sizes or sizes[-1] != n_tasks:
        sizes.append(n_tasks)
        shares.append(None)
    return sizes, shares


def design_table(seq: Sequential, alpha: float, sizes: Sequence[int], n_tasks: int,
                 tests: Sequence[str] = ()) -> pd.DataFrame:
    """The planned looks and their boundaries for one hypothesis at ``alpha`` (what a dry run prints).

    Columns: ``look, tasks, fraction, spent, z_bound, nominal_p, futility_z`` and, per test of ``tests``,
    ``can_reject_<test>`` (:func:`rejectable_looks`); exact tests replace the bound by one computed from their
    own null distribution at the look, with the same spending.
    """
    t = np.asarray(sizes, dtype=float) / n_tasks
    d = gs.design(t, alpha, seq.efficacy, None if seq.futility == "none" else seq.futility, beta=1 - seq.power)
    spent = 2 * gs.spending(seq.efficacy, alpha / 2, t)
    out = pd.DataFrame({"look": np.arange(1, len(t) + 1), "tasks": list(sizes), "fraction": t, "spent": spent,
                        "z_bound": d.efficacy, "nominal_p": 2 * sps.norm.sf(d.efficacy),
                        "futility_z": d.futility if d.futility is not None else np.nan})
    for test in dict.fromkeys(tests):
        out[f"can_reject_{test}"] = rejectable_looks(test, sizes, out["nominal_p"].to_numpy(float), spent)
    return out


def rejectable_looks(test: str, sizes: Sequence[int], nominal: Sequence[float], spent: Sequence[float]) -> list[bool]:
    """Per look, whether ``test`` could reject there at all: its smallest attainable p with that many tasks
    (:func:`analysis_lib.stats.group_sequential.smallest_p`) is at most the look's boundary.

    The normal boundary's nominal p for the tests held against it; for the exact tests (their boundary comes
    from their own null walk given the data) the alpha spent by the look, which their nominal p never exceeds:
    when even that is below the smallest p, no data can make the look reject.
    """
    limit = spent if test in EXACT_TESTS else nominal
    return [gs.smallest_p(test, int(n)) <= float(b) * (1 + gs.TIE) for n, b in zip(sizes, limit, strict=True)]


# --------------------------------------------------------------------------- planning


def _two_sided_power(drift: float, alpha: float) -> float:
    """Power of the fixed two-sided normal test at level ``alpha`` when Z has mean ``drift``."""
    z = sps.norm.isf(alpha / 2)
    return float(sps.norm.sf(z - drift) + sps.norm.cdf(-z - drift))


def _fixed_drift(power: float, alpha: float) -> float:
    """The mean of Z at which the fixed two-sided test has ``power`` (normal theory)."""
    return float(brentq(lambda x: _two_sided_power(x, alpha) - power, 0.0, 40.0, xtol=1e-10))


def planning(seq: Sequential, alpha: float, *, n_fixed: int | None = None, fixed_power: float | None = None,
             n_max: int | None = None, cost_per_task: float = math.nan, cost_per_task_p90: float = math.nan,
             test: str | None = None, sizes: Sequence[int] | None = None) -> pd.DataFrame:
    """Maximum and expected tasks and spend of the sequential design, beside the fixed design (normal theory).

    Two ways in. From a planner's fixed design (``n_fixed`` tasks, power ``fixed_power`` at the planned
    effect): the sequential design gets the fewest tasks at most that give it the same power at that effect
    (the maximum is the fixed size times the design's inflation). From a schedule of ``n_max`` tasks (a
    dry run, no pilot): the planned effect is the one at which the sequential design has the plan's
    ``power``, and the fixed design runs every task. Expected tasks come from the recursion's chance of
    stopping at each look (:func:`analysis_lib.stats.group_sequential.stopping`, futility stops included when the
    plan has a futility bound) under the null and under the planned effect; spend is tasks times the cost
    per task (both conditions, every repetition: a pilot's median, and its p90 for the maximum). The looks
    fall at the plan's shares of the tasks (with ``timing: spend``, of the spend, the same when every task
    costs alike). One hypothesis at level ``alpha``.

    ``test``: the planned test, whose smallest attainable p can keep a look (or the fixed analysis) from ever
    rejecting (:func:`rejectable_looks`); such a look gets no efficacy boundary, so power and expected size are
    those of the design that really runs (power 0 when no look can reject). ``nominal_power`` is the power
    normal theory gives when every look can reject. ``sizes``: the looks of the ``n_max`` schedule when they are not
    the plan's shares of the tasks (``timing: spend``).

    Returns two rows (``fixed``, ``sequential``): ``design, looks, n_max, expected_n_null, expected_n_effect,
    power, nominal_power, cannot_reject, spend_max_median, spend_max_p90, expected_spend_null,
    expected_spend_effect`` (``cannot_reject``: the looks, 1-based, at which the test cannot reject).
    """
    if (n_fixed is None) == (n_max is None):
        raise ValueError("planning: give either n_fixed (with fixed_power) or n_max")
    fut = None if seq.futility == "none" else seq.futility

    def realised(n: int) -> tuple[list[int], gs.Design]:
        at = look_sizes(seq, n)
        return at, gs.design(np.asarray(at, dtype=float) / n, alpha, seq.efficacy, fut, beta=1 - seq.power)

    if n_fixed is not None:
        if fixed_power is None or not 0 < fixed_power < 1:
            raise ValueError(f"planning: fixed_power must lie in (0, 1) with n_fixed, got {fixed_power}")
        drift_fixed = _fixed_drift(fixed_power, alpha)
        planned = gs.design(seq.fractions(), alpha, seq.efficacy, fut, beta=1 - seq.power)
        need = brentq(lambda x: float(gs.stopping(planned, x)["power"]) - fixed_power, 0.0, 40.0, xtol=1e-9)
        n = max(int(math.ceil(n_fixed * (need / drift_fixed) ** 2 - 1e-9)), len(seq.fractions()) if isinstance(seq.looks, int) else 2)
        sizes, d = realised(n)
        while float(gs.stopping(d, drift_fixed * math.sqrt(n / n_fixed))["power"]) < fixed_power - 1e-9:
            n += 1  # the looks' rounding to whole tasks can cost a little power
            sizes, d = realised(n)
        drift = drift_fixed * math.sqrt(n / n_fixed)
        fixed_n, f_power = n_fixed, fixed_power
    else:
        assert n_max is not None
        n = int(n_max)
        if sizes is None:
            sizes, d = realised(n)
        else:
            sizes = list(sizes)
            d = gs.design(np.asarray(sizes, dtype=float) / n, alpha, seq.efficacy, fut, beta=1 - seq.power)
        drift = d.drift
        fixed_n, f_power = n, _two_sided_power(drift, alpha)
    nominal_power, fixed_nominal = float(gs.stopping(d, drift)["power"]), f_power
    never: list[int] = []
    fixed_never: list[int] = []
    if test is not None:
        can = rejectable_looks(test, sizes, 2 * sps.norm.sf(d.efficacy), 2 * gs.spending(seq.efficacy, alpha / 2, d.t))
        never = [j + 1 for j, ok in enumerate(can) if not ok]
        d = replace(d, efficacy=np.where(can, d.efficacy, np.inf))
        if gs.smallest_p(test, fixed_n) > alpha * (1 + gs.TIE):
            f_power, fixed_never = 0.0, [1]
    null, effect = gs.stopping(d, 0.0), gs.stopping(d, drift)
    e_null, e_eff = n * float(null["expected_fraction"]), n * float(effect["expected_fraction"])
    rows = [{"design": "fixed", "looks": [fixed_n], "n_max": fixed_n, "expected_n_null": float(fixed_n),
             "expected_n_effect": float(fixed_n), "power": f_power, "nominal_power": fixed_nominal,
             "cannot_reject": fixed_never},
            {"design": "sequential", "looks": sizes, "n_max": n, "expected_n_null": e_null, "expected_n_effect": e_eff,
             "power": float(effect["power"]), "nominal_power": nominal_power, "cannot_reject": never}]
    for r in rows:
        r.update(spend_max_median=r["n_max"] * cost_per_task, spend_max_p90=r["n_max"] * cost_per_task_p90,
                 expected_spend_null=r["expected_n_null"] * cost_per_task,
                 expected_spend_effect=r["expected_n_effect"] * cost_per_task)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- one look's statistics


def _primary_plan(plan: AnalysisPlan, specs=None, confidence: float | None = None) -> AnalysisPlan:
    """The plan with its primary tier only (or ``specs``), for the looks: the other tiers wait for the stop."""
    empty = Tier.model_construct(correction="none", metrics=[])
    primary = plan.tiers.primary if specs is None else Tier.model_construct(correction="none", metrics=list(specs))
    tiers = Tiers.model_construct(primary=primary, secondary=empty, exploratory=empty, sensitivity=None)
    boot = plan.bootstrap if confidence is None else plan.bootstrap.model_copy(update={"confidence": confidence})
    return plan.model_copy(update={"tiers": tiers, "bootstrap": boot, "hypotheses": []})


def _scale_value(scale: str, x: float) -> float:
    """An estimate on the analysis scale: log ratio for % changes, else as it is."""
    if scale in LOG_SCALES:
        return math.log1p(x / 100.0) if x > -100 else -math.inf
    return x


def _from_scale(scale: str, x: float) -> float:
    """Back from the analysis scale: a log ratio as a % change (an unbounded low end is -100 %, no less)."""
    if scale in LOG_SCALES and not np.isnan(x):
        return -100.0 if x == -math.inf else (100.0 * math.expm1(x) if np.isfinite(x) else x)
    return x


def _benefit_sign(metric: str) -> float:
    direction = registry.metric(metric).direction
    return -1.0 if direction == "lower" else 1.0


@dataclass
class _Look:
    tasks: list[str]
    rows: pd.DataFrame  # the primary tier at this look (COLUMNS of comparisons)
    diffs: dict[tuple[str, str, str], pd.Series] = field(default_factory=dict)  # sign-flip rows: per-task differences


def _look(trials: pd.DataFrame, plan: AnalysisPlan, pairs: list[tuple[str, str]], tasks: list[str],
          refused: dict[str, str] | None) -> _Look:
    sub = trials[trials["task_id"].astype(str).isin(tasks)]
    rows = compare(sub, _primary_plan(plan), pairs, refused=refused).reset_index(drop=True)
    look = _Look(tasks, rows)
    for spec in plan.tiers.primary.metrics:
        if spec.test != "sign_flip" or spec.id in (refused or {}):
            continue
        for a, b in pairs:
            p = stats.pair_tasks(usable_trials(sub), spec.id, a, b, binary=True, how="mean")
            look.diffs[(spec.id, a, b)] = pd.Series(p["b"].to_numpy(float) - p["a"].to_numpy(float),
                                                    index=p["task_id"].astype(str))
    return look


def _key(row) -> tuple[str, str, str, str]:
    return (str(row["metric"]), str(row["profile_a"]), str(row["profile_b"]), str(row["test"]))


# --------------------------------------------------------------------------- boundaries of one hypothesis


def _boundary(looks: list[_Look], idx: int, key, test: str, t: np.ndarray, alpha: float, seq: Sequential, *,
              final: bool = False) -> tuple[list[float], list[float]]:
    """Nominal p-value boundary of hypothesis ``key`` at looks 1..len(t) at level ``alpha``, and its p-values.

    The p-values are the rows' own, except the sign-flip test's: the exact one from the enumerated walk
    (the engine's is a Monte-Carlo estimate above 16 tasks), so that the decision is exact too. ``final``: the
    last look is a final analysis and spends all the error left at the fraction it reached.
    """
    k = len(t)
    p = [float(lk.rows.iloc[idx]["p_value"]) if pd.notna(lk.rows.iloc[idx]["p_value"]) else math.nan for lk in looks[:k]]
    if test == "mcnemar_exact":
        m = []
        for lk in looks[:k]:
            r = lk.rows.iloc[idx]
            m.append(int((r["n_a_only"] if pd.notna(r["n_a_only"]) else 0) + (r["n_b_only"] if pd.notna(r["n_b_only"]) else 0)))
        m = [int(x) for x in np.maximum.accumulate(m)]
        return [b["nominal_p"] for b in gs.mcnemar_bounds(m, t, alpha, seq.efficacy, final=final)], p
    if test == "sign_flip":
        exact = _sign_flip_walk(looks, key, t, alpha, seq, final)
        if exact is not None:
            return exact
    c = gs.efficacy_bounds(t, alpha, seq.efficacy, final=final)
    return list(2 * sps.norm.sf(c)), p


def _sign_flip_walk(looks: list[_Look], key, t: np.ndarray, alpha: float, seq: Sequential, final: bool
                    ) -> tuple[list[float], list[float]] | None:
    """The sign-flip test's exact boundaries and p-values at looks 1..len(t), or None off a lattice."""
    seen: set[str] = set()
    incs, sums = [], []
    for lk in looks[: len(t)]:
        d = lk.diffs.get(key[:3], pd.Series(dtype=float))
        new = d[~d.index.isin(list(seen))]
        seen |= set(new.index)
        incs.append(np.abs(new.to_numpy(float)))
        sums.append(float(d.sum()) if len(d) else math.nan)
    exact = gs.sign_flip_bounds(incs, t, alpha, seq.efficacy, final=final)
    if exact is None:
        return None
    return [b["nominal_p"] for b in exact], [b["p_of"](s_) if np.isfinite(s_) else math.nan
                                             for b, s_ in zip(exact, sums, strict=True)]


def _crossed(p: float, nominal: float) -> bool:
    """The rule every look applies: reject when the p-value is at or below the nominal boundary."""
    return bool(np.isfinite(p) and p <= nominal * (1 + gs.TIE))


def _z(row) -> float:
    """The row's two-sided p as a Z statistic, positive when B is better in the metric's direction."""
    p, est = row["p_value"], row["estimate"]
    if pd.isna(p) or pd.isna(est):
        return math.nan
    z = float(sps.norm.isf(max(float(p), 1e-300) / 2))
    return math.copysign(z, float(est)) * _benefit_sign(str(row["metric"])) if est != 0 else 0.0


# --------------------------------------------------------------------------- repeated confidence intervals


def _spec_of(plan: AnalysisPlan, metric: str, test: str):
    return next(s for s in plan.tiers.primary.metrics if s.test == test and (s.id == metric or s.id.endswith("*")))


def repeated_interval(metrics: pd.DataFrame, plan: AnalysisPlan, look: _Look, idx: int, key, nominal: float, *,
                      refused: dict[str, str] | None = None) -> dict:
    """The repeated confidence interval of hypothesis ``key`` at one look: the effects the look's own rule does
    not reject at its nominal level (Jennison & Turnbull 1989), so that it excludes 0 exactly when the look rejects.

    McNemar's exact test: the discordant-pair odds ratios its exact test does not reject (``rci_scale``
    ``odds_ratio``, the estimand that test is exact for); the sign-flip test: the shifts its exact test does not
    reject (:func:`analysis_lib.stats.group_sequential.sign_flip_repeated_interval`); the other tests: their own
    interval at confidence ``1 - nominal``. Returns ``rci_low, rci_high, rci_open, rci_scale, rci_estimate``.
    """
    row = look.rows.iloc[idx]
    test = plan_test(plan, key[0])
    out = {"rci_low": math.nan, "rci_high": math.nan, "rci_open": None, "rci_scale": row["scale"],
           "rci_estimate": row["estimate"]}
    if pd.isna(row["estimate"]):
        return out
    if test == "mcnemar_exact":  # (a look that spends nothing gives every odds ratio, 0 to +inf)
        n10 = int(row["n_a_only"]) if pd.notna(row["n_a_only"]) else 0
        n01 = int(row["n_b_only"]) if pd.notna(row["n_b_only"]) else 0
        b = gs.binomial_repeated_interval(n10, n01, nominal)
        ends = [side for side, is_open in (("low", b["low_open"]), ("high", b["high_open"])) if is_open]
        return {**out, "rci_low": b["ci_low"], "rci_high": b["ci_high"], "rci_open": " and ".join(ends) or None,
                "rci_scale": "odds_ratio", "rci_estimate": b["odds_ratio"]}
    if nominal <= 0:  # a look that spends nothing rejects nothing
        return {**out, "rci_low": -math.inf, "rci_high": math.inf}
    if test == "sign_flip":
        d = look.diffs.get(key[:3])
        exact = gs.sign_flip_repeated_interval(d.to_numpy(float), nominal) if d is not None and len(d) else None
        if exact is not None:
            return {**out, "rci_low": exact["ci_low"], "rci_high": exact["ci_high"]}
    spec = _spec_of(plan, key[0], test)
    sub = metrics[metrics["task_id"].astype(str).isin(look.tasks)]
    rr = compare(sub, _primary_plan(plan, [spec], confidence=1 - nominal), [(key[1], key[2])], refused=refused)
    rr = rr[rr["metric"] == key[0]]
    if len(rr):
        x = rr.iloc[0]
        out.update(rci_low=float(x["ci_low"]), rci_high=float(x["ci_high"]),
                   rci_open=x["ci_open"] if isinstance(x["ci_open"], str) else None)
    return out


def interval_excludes(low: float, high: float, opened: str | None, value: float) -> bool:
    """Whether an interval (with its open ends, ``rci_open``) leaves ``value`` out."""
    if math.isnan(low) or math.isnan(high):
        return False
    if low == value and isinstance(opened, str) and "low" in opened:
        return True
    if high == value and isinstance(opened, str) and "high" in opened:
        return True
    return not low <= value <= high


def rci_excludes_null(row) -> bool:
    """Whether a repeated interval leaves the null out: 0 for a difference, 1 for McNemar's odds ratio."""
    get = row.get if isinstance(row, dict) else lambda k, d=None: getattr(row, k, d)
    null = 1.0 if get("rci_scale") == "odds_ratio" else 0.0
    lo, hi = get("rci_low"), get("rci_high")
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return False
    return interval_excludes(float(lo), float(hi), get("rci_open"), null)


# --------------------------------------------------------------------------- monitoring


@dataclass
class Monitoring:
    """The looks of a sequential study so far: per look and hypothesis, the statistic, boundary and status.

    Beside the table and the run record, what made each decision, for the estimates adjusted for the stop:
    the information fractions of the looks taken (a final look forced early at the fraction it reached), and
    per hypothesis the level it was tested at by the last look (after Holm's procedure and recycling) with its
    nominal boundaries and p-values at every look at that level.
    """

    table: pd.DataFrame  # one row per look and primary hypothesis
    looks: list[dict]  # one record per look (what the run record keeps)
    stopped: bool
    decision: str  # continue | efficacy | futility | decided | final | budget
    reason: str
    stop_look: int  # 1-based: the look the study stopped at (the last look when not stopped)
    fractions: np.ndarray = field(default_factory=lambda: np.zeros(0))
    final: bool = False  # the last look taken was a final analysis (it spent all the alpha left)
    levels: dict = field(default_factory=dict)  # hypothesis key -> level at the last look
    boundaries: dict = field(default_factory=dict)  # hypothesis key -> (nominal p per look, p per look) at that level
    rejected: dict = field(default_factory=dict)  # hypothesis key -> look at which its rejection was found
    futile: dict = field(default_factory=dict)  # hypothesis key -> look at which it crossed its futility bound
    data: list = field(default_factory=list, repr=False)  # the looks' comparison rows
    keys: list = field(default_factory=list)  # the hypotheses, in the order of each look's rows


def _level_shares(keys: list, alpha: float) -> dict:
    return {k: alpha / len(keys) for k in keys} if keys else {}


def monitor(metrics: pd.DataFrame, plan: AnalysisPlan, pairs: list[tuple[str, str]], order: Sequence[str],
            sizes: Sequence[int], n_tasks: int, *, final: bool = False, ended_by: str | None = None,
            refused: dict[str, str] | None = None, times: Sequence[str | None] | None = None,
            spent: Sequence[float | None] | None = None, intervals: bool = False) -> Monitoring:
    """Hold the primary family against the plan's design at looks after ``sizes`` tasks of ``order``.

    ``order`` is the tasks in the order they were run (each complete before the next: the sequential
    schedule). ``final``: the last look is the final analysis (the schedule is done, or ``ended_by``
    names what ended it, e.g. ``budget``), which spends all the remaining alpha at the information fraction
    it reached (its tasks over the scheduled ones). Everything is recomputed from the data, so a resumed run,
    the report and a replay reach the same decisions. ``intervals``: add each look's repeated confidence
    interval (:func:`repeated_interval` at the look's boundary) to the table.
    """
    seq = plan.sequential
    if seq is None:
        raise ValueError("the analysis plan declares no sequential design (add a 'sequential' section)")
    looks = [_look(metrics, plan, pairs, [str(x) for x in order[: sizes[0]]], refused)]  # the later ones when reached
    # The looks' information fractions as reached: a final look forced early (the budget) keeps its own.
    t = np.minimum(np.asarray(sizes, dtype=float) / n_tasks, 1.0)
    keys = [_key(r) for _, r in looks[0].rows.iterrows()]
    tests = {h: plan_test(plan, h[0]) for h in keys}
    fut_kind = None if seq.futility == "none" else seq.futility
    planned = np.asarray(seq.fractions(), dtype=float)
    records: list[dict] = []
    table_rows: list[dict] = []
    rejected_at: dict = {}
    futile_at: dict = {}
    levels: dict = {}
    bounds: dict = {}
    decision, reason, stop_look = "continue", "", len(sizes)
    for k in range(1, len(sizes) + 1):
        if len(looks) < k:
            looks.append(_look(metrics, plan, pairs, [str(x) for x in order[: sizes[k - 1]]], refused))
        tk = t[:k]
        last = k == len(sizes) and final
        # Holm over the family, recycled: recomputed from the start at every look (the data decide it).
        levels = {h: plan.alpha / len(keys) for h in keys}
        bounds = {}
        open_ = list(keys)
        changed = True
        while changed:
            changed = False
            for h in list(open_):
                bounds[h] = _boundary(looks, keys.index(h), h, tests[h], tk, levels[h], seq, final=last)
                nom, p = bounds[h]
                if any(_crossed(p[j], nom[j]) for j in range(k)):
                    open_.remove(h)
                    rejected_at.setdefault(h, k)
                    for x in open_:  # the rejected hypothesis' level goes to the others in equal shares
                        levels[x] += levels[h] / len(open_)
                    changed = True
        fut_bound: dict = {}
        z_now = {h: _z(looks[k - 1].rows.iloc[keys.index(h)]) for h in keys}
        if fut_kind is not None and not last:
            for h in open_:
                drift = gs.design(planned, levels[h], seq.efficacy, fut_kind, beta=1 - seq.power).drift
                c = gs.efficacy_bounds(tk, levels[h], seq.efficacy)
                # The bound of this look from the looks so far; it meets the efficacy bound only at the final look.
                fut_bound[h] = float(gs.futility_bounds(tk, c, 1 - seq.power, fut_kind, drift, final=tk[-1] >= 1.0)[-1])
                if np.isfinite(z_now[h]) and z_now[h] < fut_bound[h]:
                    futile_at.setdefault(h, k)
        sub = metrics[metrics["task_id"].astype(str).isin([str(x) for x in order[: sizes[k - 1]]])]
        n_pairs = int(sub[["task_id", "repetition"]].drop_duplicates().shape[0]) if "repetition" in sub else int(sizes[k - 1])
        hyp = []
        for h in keys:
            i = keys.index(h)
            r = looks[k - 1].rows.iloc[i]
            nom, p = bounds[h]
            state = "rejected" if h in rejected_at else ("futile" if h in futile_at else "continue")
            one = {"look": k, "tasks": int(sizes[k - 1]), "fraction": float(tk[-1]), "metric": h[0],
                   "profile_a": h[1], "profile_b": h[2], "test": h[3], "n_pairs": int(r["n_pairs"]),
                   "estimate": r["estimate"], "ci_low": r["ci_low"], "ci_high": r["ci_high"], "p_value": p[-1],
                   "level": levels[h], "nominal_p": nom[-1], "crossed": _crossed(p[-1], nom[-1]), "z": z_now[h],
                   "futility_z": fut_bound.get(h, math.nan), "status": state, "scale": r["scale"],
                   "unit": r["unit"], "label": r["label"]}
            if intervals:
                one.update(repeated_interval(metrics, plan, looks[k - 1], i, h, nom[-1], refused=refused))
            hyp.append(one)
        table_rows += hyp
        decided = [h for h in keys if h in rejected_at or h in futile_at]
        if seq.stop == "any" and rejected_at:
            decision, reason = "efficacy", f"look {k}: {_names(rejected_at)} crossed the efficacy boundary"
        elif keys and len(decided) == len(keys) and not last:
            eff = dict(rejected_at)
            fut = {h: j for h, j in futile_at.items() if h not in eff}
            decision = "efficacy" if not fut else ("futility" if not eff else "decided")
            bits = ([f"{_names(eff)} crossed the efficacy boundary"] if eff else []) + \
                ([f"{_names(fut)} crossed the futility bound"] if fut else [])
            reason = f"look {k}: every primary hypothesis is decided (" + "; ".join(bits) + ")"
        elif last:
            decision = ended_by or "final"
            reason = (f"the budget ended the study at look {k}, {sizes[k - 1]} of {n_tasks} tasks (information "
                      f"fraction {tk[-1]:.3f}): the final analysis spent the alpha left" if ended_by == "budget"
                      else f"look {k} was the last: the whole schedule ran")
        records.append({"look": k, "tasks": int(sizes[k - 1]), "pairs": n_pairs, "fraction": float(tk[-1]),
                        "at": times[k - 1] if times is not None and k - 1 < len(times) else None,
                        "spent_usd": spent[k - 1] if spent is not None and k - 1 < len(spent) else None,
                        "decision": decision, "reason": reason or None,
                        "hypotheses": [{kk: _jsonable(v) for kk, v in row.items()} for row in hyp]})
        if decision != "continue":
            stop_look = k
            break
    taken = len(records)
    return Monitoring(pd.DataFrame(table_rows), records, decision != "continue", decision, reason, stop_look,
                      fractions=t[:taken], final=bool(final and taken == len(sizes)), levels=dict(levels),
                      boundaries=dict(bounds), rejected=dict(rejected_at), futile=dict(futile_at), data=looks[:taken],
                      keys=list(keys))


def _names(d: dict) -> str:
    return ", ".join(f"{h[0]} ({h[2]} vs {h[1]}, look {j})" for h, j in d.items())


def _jsonable(v):
    if isinstance(v, (np.floating, float)):
        return None if not np.isfinite(v) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def plan_test(plan: AnalysisPlan, metric: str) -> str:
    """The plan's test id of a primary metric (an ``mcp_calls__*`` column takes its family's)."""
    for spec in plan.tiers.primary.metrics:
        if spec.id == metric or (spec.id.endswith("*") and metric.startswith(spec.id[:-1])):
            return spec.test
    raise ValueError(f"{metric!r} is not a primary metric of the plan")


# --------------------------------------------------------------------------- adjusted estimates

ADJUSTED_COLUMNS = [
    "metric", "profile_a", "profile_b", "test", "scale", "unit", "label", "look", "tasks", "n_pairs",
    "naive_estimate", "naive_ci_low", "naive_ci_high", "naive_ci_open", "naive_p", "decision", "level", "mue_look",
    "mue_tasks", "rci_level", "rci_confidence", "rci_scale", "rci_estimate", "rci_low", "rci_high", "rci_open", "mue",
    "mue_ci_low", "mue_ci_high", "mue_confidence", "note",
]


def _decision(mon: Monitoring, h, crossing: int | None) -> str:
    """Why hypothesis ``h``'s inference ends where it does: its own crossing, else the study's stop."""
    if crossing is not None:
        return f"rejected at look {crossing}"
    k = mon.stop_look
    if h in mon.futile:
        return f"futility at look {mon.futile[h]}"
    if mon.decision == "budget":
        return f"not rejected; the budget ended the study at look {k}"
    if mon.decision in ("efficacy", "decided") and mon.rejected:
        return f"not rejected; the study stopped at look {k} for another hypothesis"
    if mon.decision == "final":
        return f"not rejected at the last look ({k})"
    return f"not rejected by look {k} (the study goes on)"


def _analysis_scale(scale: str, x) -> float:
    return _scale_value(scale, float(x)) if x is not None and pd.notna(x) else math.nan


def adjusted_estimates(metrics: pd.DataFrame, plan: AnalysisPlan, pairs: list[tuple[str, str]], order: Sequence[str],
                       sizes: Sequence[int], n_tasks: int, mon: Monitoring, *,
                       refused: dict[str, str] | None = None) -> pd.DataFrame:
    """Per primary row: the fixed-sample numbers at the stop (not adjusted), and, on the design that ran, the
    repeated confidence interval and the median-unbiased estimate with its stage-wise interval.

    Both adjusted quantities use what made the row's decisions (``mon``): its p-values at every look and its
    nominal boundaries at the level it was tested at (the plan's alpha shared by Holm's procedure and passed on
    by rejections), the final look at the information fraction it reached. A rejected row's inference ends at
    the look where its p first fell to its boundary; a row never rejected ends at the study's stop, labelled
    with why the study stopped there (efficacy of another row, futility, the budget, the last look).

    * repeated interval (:func:`repeated_interval`) at that look, at its nominal level: its simultaneous
      confidence is ``1 - level`` (``rci_confidence``), and it excludes the null exactly when the row rejected;
    * median-unbiased estimate by the stage-wise ordering (:func:`analysis_lib.stats.group_sequential.stagewise`)
      of the row's own test statistics (its two-sided p-values as normal deviates, signed by its estimates),
      against the same boundaries (the nominal p-values as normal deviates; none where the test cannot reject at
      all) over the looks before that look, information growing as the tasks do; the drift is carried to the
      estimand's scale by the row's estimate per unit of its statistic at that look (a rank test's statistic
      saturates, so the magnitude comes from the estimate), which makes a first-look estimate the fixed-sample
      one; the interval at ``1 - level``, so that a rejected row's interval excludes 0 too.
    """
    seq = plan.sequential
    assert seq is not None
    conf = plan.bootstrap.confidence
    k = mon.stop_look
    sizes = list(sizes)[:k]
    if mon.data and len(mon.data) >= k and mon.boundaries:
        looks = mon.data[:k]
    else:  # a Monitoring without its data (built elsewhere): recompute the looks
        mon = monitor(metrics, plan, pairs, order, sizes, n_tasks, final=mon.final or mon.decision in ("final", "budget"),
                      ended_by="budget" if mon.decision == "budget" else None, refused=refused)
        looks = mon.data[:k]
    t = np.asarray(mon.fractions[:k], dtype=float)
    out = []
    last = looks[-1].rows
    z_conf = sps.norm.isf((1 - conf) / 2)
    for i, r in last.iterrows():
        # The monitor's key: a test's label can change between looks (Wilcoxon's exact, then normal approximation).
        key = mon.keys[i] if i < len(mon.keys) else _key(r)
        key_test = plan_test(plan, key[0])
        nom, p = mon.boundaries.get(key, ([math.nan] * k, [math.nan] * k))
        level = float(mon.levels.get(key, plan.alpha))
        crossing = next((j + 1 for j in range(k) if _crossed(p[j], nom[j])), None)
        own = crossing or k
        at = looks[own - 1].rows.iloc[i]
        row = {"metric": key[0], "profile_a": key[1], "profile_b": key[2], "test": str(r["test"]), "scale": r["scale"],
               "unit": r["unit"], "label": r["label"], "look": k, "tasks": sizes[-1], "n_pairs": int(r["n_pairs"]),
               "naive_estimate": r["estimate"], "naive_ci_low": r["ci_low"], "naive_ci_high": r["ci_high"],
               "naive_ci_open": r["ci_open"] if isinstance(r["ci_open"], str) else None, "naive_p": r["p_value"],
               "decision": _decision(mon, key, crossing), "level": level, "mue_look": own, "mue_tasks": sizes[own - 1],
               "rci_level": 1 - nom[own - 1] if np.isfinite(nom[own - 1]) else math.nan, "rci_confidence": 1 - level,
               "mue": math.nan, "mue_ci_low": math.nan, "mue_ci_high": math.nan, "mue_confidence": 1 - level,
               "note": None}
        row.update(repeated_interval(metrics, plan, looks[own - 1], i, key, nom[own - 1], refused=refused)
                   if np.isfinite(nom[own - 1]) else {"rci_low": math.nan, "rci_high": math.nan, "rci_open": None,
                                                      "rci_scale": r["scale"], "rci_estimate": r["estimate"]})
        # The stage-wise ordering of the row's own test: Z_j is its p at look j as a normal deviate (signed by the
        # estimate), so a look crosses here exactly when it crossed in the monitoring, against the boundaries it was
        # held to (the nominal p-values as normal deviates; none at a look where the test cannot reject at all).
        # Z_j ~ N(eta sqrt(t_j / t_stop), 1); eta is carried to the estimand's scale by the row's estimate per unit
        # of its Z at the stop (a rank test's Z saturates, so the magnitude must come from the estimate itself).
        ests = [_analysis_scale(r["scale"], lk.rows.iloc[i]["estimate"]) for lk in looks[:own]]
        zs = [math.copysign(float(sps.norm.isf(max(pj, 1e-300) / 2)), e) if np.isfinite(pj) and pj < 1 and e != 0
              else (0.0 if np.isfinite(pj) and np.isfinite(e) else math.nan) for e, pj in zip(ests, p[:own], strict=True)]
        lo, hi = _analysis_scale(r["scale"], at["ci_low"]), _analysis_scale(r["scale"], at["ci_high"])
        se = (hi - lo) / (2 * z_conf) if np.isfinite(hi - lo) and hi > lo else math.nan
        if zs and zs[-1] == 0 and np.isfinite(se) and se > 0:
            # p = 1 (the most central result an exact test can give) carries no sign: only the stop's statistic
            # enters the ordering, and there the estimate over its standard error keeps it.
            zs[-1] = ests[-1] / se
        per_z = ests[-1] / zs[-1] if zs and np.isfinite(zs[-1]) and abs(zs[-1]) > 1e-12 else se
        if np.isfinite(per_z) and per_z > 0 and all(np.isfinite(zs)):
            info = [t[j] / t[own - 1] for j in range(own)]
            n_at = [int(lk.rows.iloc[i]["n_pairs"]) for lk in looks[: own - 1]]
            c = [float(sps.norm.isf(x / 2)) if x > 0 and gs.smallest_p(key_test, n) <= x * (1 + gs.TIE) else math.inf
                 for x, n in zip(nom[: own - 1], n_at, strict=True)]
            sw = gs.stagewise(zs, info, c, 1 - level)
            row.update(mue=_from_scale(r["scale"], per_z * sw["estimate"]),
                       mue_ci_low=_from_scale(r["scale"], per_z * sw["ci_low"]),
                       mue_ci_high=_from_scale(r["scale"], per_z * sw["ci_high"]))
            holds0 = np.isfinite(sw["ci_low"]) and sw["ci_low"] <= 0 <= sw["ci_high"]
            if crossing is None and not holds0 and np.isfinite(sw["ci_low"]):
                row["note"] = (f"the stage-wise interval excludes 0 but the row was not rejected: the study stopped at "
                               f"look {k} before its boundary was crossed")
        else:
            row["note"] = "no median-unbiased estimate: the row has no p-value or estimate at a look, or no spread"
        out.append(row)
    return pd.DataFrame(out, columns=ADJUSTED_COLUMNS)


# --------------------------------------------------------------------------- a finished sequential run


@dataclass
class RunAnalysis:
    """A sequential run analysed from its trials: the run record's design with the looks recomputed from the data,
    the primary estimates adjusted for the stop, and the looks whose recorded decision the data no longer give."""

    record: dict  # the run record's ``sequential`` section, ``looks`` recomputed
    adjusted: pd.DataFrame | None
    mismatch: list[str]
    monitoring: Monitoring | None = None


def analyse_run(record: dict, metrics: pd.DataFrame, plan: AnalysisPlan, pairs: list[tuple[str, str]], *,
                refused: dict[str, str] | None = None) -> RunAnalysis:
    """Recompute the looks of a sequential run (``full_run.json["sequential"]``) from its trials with the plan's
    engine, check them against the record, and adjust the primary estimates for the stop.

    What RESULTS.md and the paper state of a sequential run comes from here, so both say the same.
    """
    looks = record.get("looks") or []
    if plan.sequential is None or not looks or not pairs:
        return RunAnalysis(record, None, [])
    order = [str(x) for x in record.get("task_order") or []]
    sizes = [int(lk["tasks"]) for lk in looks]
    n_tasks = int(record.get("n_tasks") or len(order))
    last = looks[-1]["decision"]
    mon = monitor(metrics, plan, pairs, order, sizes, n_tasks, final=last in ("final", "budget"),
                  ended_by="budget" if last == "budget" else None, refused=refused,
                  times=[lk.get("at") for lk in looks], spent=[lk.get("spent_usd") for lk in looks])
    mismatch = []
    for rec, now in zip(looks, mon.looks, strict=False):
        if rec["decision"] != now["decision"] or [h["status"] for h in rec["hypotheses"]] != \
                [h["status"] for h in now["hypotheses"]]:
            mismatch.append(f"look {rec['look']}: recorded {rec['decision']}, recomputed {now['decision']} "
                            "(the trial folders changed since the run, or another plan)")
    adj = adjusted_estimates(metrics, plan, pairs, order, sizes, n_tasks, mon, refused=refused)
    return RunAnalysis({**record, "looks": mon.looks}, adj, mismatch, mon)


# --------------------------------------------------------------------------- replay


def replay(metrics: pd.DataFrame, plan: AnalysisPlan, pairs: list[tuple[str, str]], order: Sequence[str],
           cost_by_task: pd.Series, *, refused: dict[str, str] | None = None) -> dict:
    """Apply the plan's design to a finished run: where it would have stopped, the spend saved, the decisions.

    ``order`` is the tasks in the order they would have run (the sequential schedule's, or the order of
    their first trial); ``cost_by_task`` their total cost (every trial, both conditions). Looks fall after
    the plan's fractions of the tasks (``timing: tasks``) or of the run's total spend (``timing: spend``).
    The full run's decisions are the fixed-sample analysis of every task with the plan's correction.
    """
    seq = plan.sequential
    if seq is None:
        raise ValueError("the analysis plan declares no sequential design (add a 'sequential' section)")
    order = [str(x) for x in order]
    n = len(order)
    cost = np.array([float(cost_by_task.get(x, 0.0)) for x in order])
    cum = np.cumsum(cost)
    total = float(cum[-1]) if n else 0.0
    if seq.timing == "tasks":
        sizes = look_sizes(seq, n)
    else:
        sizes = []
        for f in seq.fractions():
            i = int(np.searchsorted(cum, f * total - 1e-9)) + 1
            i = min(max(i, 1), n)
            if not sizes or i > sizes[-1]:
                sizes.append(i)
        if sizes[-1] != n:
            sizes.append(n)
    mon = monitor(metrics, plan, pairs, order, sizes, n, final=True, refused=refused,
                  spent=[float(cum[s - 1]) for s in sizes])
    k = mon.stop_look
    used = float(cum[sizes[k - 1] - 1]) if n else 0.0
    full = compare(metrics[metrics["task_id"].astype(str).isin(order)], _primary_plan(plan), pairs, refused=refused)
    rows = []
    at_stop = mon.table[mon.table["look"] == k]
    for _, r in at_stop.iterrows():
        f = full[(full["metric"] == r["metric"]) & (full["profile_b"] == r["profile_b"]) & (full["profile_a"] == r["profile_a"])]
        fixed_sig = bool(f["significant"].iloc[0]) if len(f) and pd.notna(f["significant"].iloc[0]) else False
        fixed_dir = float(np.sign(f["estimate"].iloc[0])) if len(f) and pd.notna(f["estimate"].iloc[0]) else 0.0
        seq_rej = r["status"] == "rejected"
        seq_dir = float(np.sign(r["estimate"])) if pd.notna(r["estimate"]) else 0.0
        rows.append({"metric": r["metric"], "profile_a": r["profile_a"], "profile_b": r["profile_b"],
                     "sequential": r["status"], "fixed_significant": fixed_sig,
                     "matches": (seq_rej == fixed_sig) and (not seq_rej or seq_dir == fixed_dir)})
    decisions = pd.DataFrame(rows)
    return {"monitoring": mon, "sizes": sizes, "stop_look": k, "tasks_used": sizes[k - 1], "tasks_total": n,
            "spend_used": used, "spend_total": total, "spend_saved": total - used,
            "saved_share": (total - used) / total if total > 0 else 0.0, "decisions": decisions,
            "matches": bool(decisions["matches"].all()) if len(decisions) else True}
