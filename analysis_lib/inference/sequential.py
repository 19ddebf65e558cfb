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
from dataclasses import dataclass, field

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
           "planning", "RunAnalysis", "analyse_run"]

EXACT_TESTS = ("mcnemar_exact", "sign_flip")
LOG_SCALES = ("ratio", "cost_per_success")


def look_sizes(seq: Sequential, n_tasks: int) -> list[int]:
    """Tasks complete at each look: ``ceil(fraction * n_tasks)``, duplicates dropped, the last all of them."""
    sizes: list[int] = []
    for f in seq.fractions():
        n = min(n_tasks, max(1, math.ceil(f * n_tasks - 1e-9)))
        if not sizes or n > sizes[-1]:
            sizes.append(n)
    if sizes[-1] != n_tasks:
        sizes.append(n_tasks)
    return sizes


def design_table(seq: Sequential, alpha: float, sizes: Sequence[int], n_tasks: int) -> pd.DataFrame:
    """The planned looks and their boundaries for one hypothesis at ``alpha`` (what a dry run prints).

    Columns: ``look, tasks, fraction, spent, z_bound, nominal_p, futility_z``; exact tests replace the
    bound by one computed from their own null distribution at the look, with the same spending.
    """
    t = np.asarray(sizes, dtype=float) / n_tasks
    d = gs.design(t, alpha, seq.efficacy, None if seq.futility == "none" else seq.futility, beta=1 - seq.power)
    spent = 2 * gs.spending(seq.efficacy, alpha / 2, t)
    return pd.DataFrame({"look": np.arange(1, len(t) + 1), "tasks": list(sizes), "fraction": t, "spent": spent,
                         "z_bound": d.efficacy, "nominal_p": 2 * sps.norm.sf(d.efficacy),
                         "futility_z": d.futility if d.futility is not None else np.nan})


# --------------------------------------------------------------------------- planning


def _two_sided_power(drift: float, alpha: float) -> float:
    """Power of the fixed two-sided normal test at level ``alpha`` when Z has mean ``drift``."""
    z = sps.norm.isf(alpha / 2)
    return float(sps.norm.sf(z - drift) + sps.norm.cdf(-z - drift))


def _fixed_drift(power: float, alpha: float) -> float:
    """The mean of Z at which the fixed two-sided test has ``power`` (normal theory)."""
    return float(brentq(lambda x: _two_sided_power(x, alpha) - power, 0.0, 40.0, xtol=1e-10))


def planning(seq: Sequential, alpha: float, *, n_fixed: int | None = None, fixed_power: float | None = None,
             n_max: int | None = None, cost_per_task: float = math.nan, cost_per_task_p90: float = math.nan
             ) -> pd.DataFrame:
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

    Returns two rows (``fixed``, ``sequential``): ``design, looks, n_max, expected_n_null, expected_n_effect,
    power, spend_max_median, spend_max_p90, expected_spend_null, expected_spend_effect``.
    """
    if (n_fixed is None) == (n_max is None):
        raise ValueError("planning: give either n_fixed (with fixed_power) or n_max")
    fut = None if seq.futility == "none" else seq.futility

    def realised(n: int) -> tuple[list[int], gs.Design]:
        sizes = look_sizes(seq, n)
        return sizes, gs.design(np.asarray(sizes, dtype=float) / n, alpha, seq.efficacy, fut, beta=1 - seq.power)

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
        sizes, d = realised(n)
        drift = d.drift
        fixed_n, f_power = n, _two_sided_power(drift, alpha)
    null, effect = gs.stopping(d, 0.0), gs.stopping(d, drift)
    e_null, e_eff = n * float(null["expected_fraction"]), n * float(effect["expected_fraction"])
    rows = [{"design": "fixed", "looks": [fixed_n], "n_max": fixed_n, "expected_n_null": float(fixed_n),
             "expected_n_effect": float(fixed_n), "power": f_power},
            {"design": "sequential", "looks": sizes, "n_max": n, "expected_n_null": e_null, "expected_n_effect": e_eff,
             "power": float(effect["power"])}]
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
    return 100.0 * math.expm1(x) if scale in LOG_SCALES and np.isfinite(x) else x


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


def _boundary(looks: list[_Look], idx: int, key, test: str, t: np.ndarray, alpha: float, seq: Sequential
              ) -> tuple[list[float], list[float]]:
    """Nominal p-value boundary of hypothesis ``key`` at looks 1..len(t) at level ``alpha``, and its p-values.

    The p-values are the rows' own, except the sign-flip test's: the exact one from the enumerated walk
    (the engine's is a Monte-Carlo estimate above 16 tasks), so that the decision is exact too.
    """
    k = len(t)
    p = [float(lk.rows.iloc[idx]["p_value"]) if pd.notna(lk.rows.iloc[idx]["p_value"]) else math.nan for lk in looks[:k]]
    if test == "mcnemar_exact":
        m = []
        for lk in looks[:k]:
            r = lk.rows.iloc[idx]
            m.append(int((r["n_a_only"] if pd.notna(r["n_a_only"]) else 0) + (r["n_b_only"] if pd.notna(r["n_b_only"]) else 0)))
        m = [int(x) for x in np.maximum.accumulate(m)]
        return [b["nominal_p"] for b in gs.mcnemar_bounds(m, t, alpha, seq.efficacy)], p
    if test == "sign_flip":
        seen: set[str] = set()
        incs, sums = [], []
        for lk in looks[:k]:
            d = lk.diffs.get(key[:3], pd.Series(dtype=float))
            new = d[~d.index.isin(list(seen))]
            seen |= set(new.index)
            incs.append(np.abs(new.to_numpy(float)))
            sums.append(float(d.sum()) if len(d) else math.nan)
        exact = gs.sign_flip_bounds(incs, t, alpha, seq.efficacy)
        if exact is not None:
            p = [b["p_of"](s_) if np.isfinite(s_) else math.nan for b, s_ in zip(exact, sums, strict=True)]
            return [b["nominal_p"] for b in exact], p
    c = gs.efficacy_bounds(t, alpha, seq.efficacy)
    return list(2 * sps.norm.sf(c)), p


def _z(row) -> float:
    """The row's two-sided p as a Z statistic, positive when B is better in the metric's direction."""
    p, est = row["p_value"], row["estimate"]
    if pd.isna(p) or pd.isna(est):
        return math.nan
    z = float(sps.norm.isf(max(float(p), 1e-300) / 2))
    return math.copysign(z, float(est)) * _benefit_sign(str(row["metric"])) if est != 0 else 0.0


# --------------------------------------------------------------------------- monitoring


@dataclass
class Monitoring:
    """The looks of a sequential study so far: per look and hypothesis, the statistic, boundary and status."""

    table: pd.DataFrame  # one row per look and primary hypothesis
    looks: list[dict]  # one record per look (what the run record keeps)
    stopped: bool
    decision: str  # continue | efficacy | futility | final | budget
    reason: str
    stop_look: int  # 1-based: the look the study stopped at (the last look when not stopped)


def _level_shares(keys: list, alpha: float) -> dict:
    return {k: alpha / len(keys) for k in keys} if keys else {}


def monitor(metrics: pd.DataFrame, plan: AnalysisPlan, pairs: list[tuple[str, str]], order: Sequence[str],
            sizes: Sequence[int], n_tasks: int, *, final: bool = False, ended_by: str | None = None,
            refused: dict[str, str] | None = None, times: Sequence[str | None] | None = None,
            spent: Sequence[float | None] | None = None) -> Monitoring:
    """Hold the primary family against the plan's design at looks after ``sizes`` tasks of ``order``.

    ``order`` is the tasks in the order they were run (each complete before the next: the sequential
    schedule). ``final``: the last look is the final analysis (the schedule is done, or ``ended_by``
    names what ended it, e.g. ``budget``), which spends all the remaining alpha. Everything is
    recomputed from the data, so a resumed run, the report and a replay reach the same decisions.
    """
    seq = plan.sequential
    if seq is None:
        raise ValueError("the analysis plan declares no sequential design (add a 'sequential' section)")
    looks = [_look(metrics, plan, pairs, [str(x) for x in order[: sizes[0]]], refused)]  # the later ones when reached
    t = np.minimum(np.asarray(sizes, dtype=float) / n_tasks, 1.0)
    if final:
        t[-1] = 1.0
    keys = [_key(r) for _, r in looks[0].rows.iterrows()]
    tests = {h: plan_test(plan, h[0]) for h in keys}
    fut_kind = None if seq.futility == "none" else seq.futility
    planned = np.asarray(seq.fractions(), dtype=float)
    records: list[dict] = []
    table_rows: list[dict] = []
    rejected_at: dict = {}
    futile_at: dict = {}
    decision, reason, stop_look = "continue", "", len(sizes)
    for k in range(1, len(sizes) + 1):
        if len(looks) < k:
            looks.append(_look(metrics, plan, pairs, [str(x) for x in order[: sizes[k - 1]]], refused))
        tk = t[:k]
        last = k == len(sizes) and final
        # Holm over the family, recycled: recomputed from the start at every look (the data decide it).
        levels = {h: plan.alpha / len(keys) for h in keys}
        bounds: dict = {}
        open_ = list(keys)
        changed = True
        while changed:
            changed = False
            for h in list(open_):
                bounds[h] = _boundary(looks, keys.index(h), h, tests[h], tk, levels[h], seq)
                nom, p = bounds[h]
                if any(np.isfinite(p[j]) and p[j] <= nom[j] * (1 + 1e-12) for j in range(k)):
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
            r = looks[k - 1].rows.iloc[keys.index(h)]
            nom, p = bounds[h]
            state = "rejected" if h in rejected_at else ("futile" if h in futile_at else "continue")
            hyp.append({"look": k, "tasks": int(sizes[k - 1]), "fraction": float(tk[-1]), "metric": h[0],
                        "profile_a": h[1], "profile_b": h[2], "test": h[3], "n_pairs": int(r["n_pairs"]),
                        "estimate": r["estimate"], "ci_low": r["ci_low"], "ci_high": r["ci_high"], "p_value": p[-1],
                        "level": levels[h], "nominal_p": nom[-1], "z": z_now[h],
                        "futility_z": fut_bound.get(h, math.nan), "status": state, "scale": r["scale"],
                        "unit": r["unit"], "label": r["label"]})
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
            reason = (f"the budget ended the study at look {k}" if ended_by == "budget"
                      else f"look {k} was the last: the whole schedule ran")
        records.append({"look": k, "tasks": int(sizes[k - 1]), "pairs": n_pairs, "fraction": float(tk[-1]),
                        "at": times[k - 1] if times is not None and k - 1 < len(times) else None,
                        "spent_usd": spent[k - 1] if spent is not None and k - 1 < len(spent) else None,
                        "decision": decision, "reason": reason or None,
                        "hypotheses": [{kk: _jsonable(v) for kk, v in row.items()} for row in hyp]})
        if decision != "continue":
            stop_look = k
            break
    return Monitoring(pd.DataFrame(table_rows), records, decision != "continue", decision, reason, stop_look)


def _names(d: dict) -> str:
    return ", ".join(f"{h[0]} ({h[2]} vs {h[1]}, look {j})" for h, j in d.items())


def _jsonable(v):
    if isinstance(v, (np.floating, float)):
        return None if not np.isfinite(v) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


def plan_test(plan: AnalysisPlan, metric: str) -> str:
    """The plan's test id of a primary metric (an ``mcp_calls__*`` column takes its family's)."""
    for spec in plan.tiers.primary.metrics:
        if spec.id == metric or (spec.id.endswith("*") and metric.startswith(spec.id[:-1])):
            return spec.test
    raise ValueError(f"{metric!r} is not a primary metric of the plan")


# --------------------------------------------------------------------------- adjusted estimates


def adjusted_estimates(metrics: pd.DataFrame, plan: AnalysisPlan, pairs: list[tuple[str, str]], order: Sequence[str],
                       sizes: Sequence[int], n_tasks: int, mon: Monitoring, *,
                       refused: dict[str, str] | None = None) -> pd.DataFrame:
    """Per primary row at the stopping look: the fixed-sample estimate and interval (not adjusted), the
    repeated confidence interval, and the median-unbiased estimate with its stage-wise interval.

    Both adjusted intervals use the boundaries of the row monitored alone at ``1 - confidence`` (the
    plan's interval level), as a fixed-sample interval is per comparison too.
    """
    seq = plan.sequential
    assert seq is not None
    conf = plan.bootstrap.confidence
    a_rci = 1 - conf
    k = mon.stop_look
    sizes = list(sizes)[:k]
    looks = [_look(metrics, plan, pairs, [str(x) for x in order[:n]], refused) for n in sizes]
    t = np.minimum(np.asarray(sizes, dtype=float) / n_tasks, 1.0)
    if mon.decision in ("final", "budget"):
        t[-1] = 1.0
    out = []
    last = looks[-1].rows
    for i, r in last.iterrows():
        key = _key(r)
        test = plan_test(plan, key[0])
        nom = _boundary(looks, i, key, test, t, a_rci, seq)[0]
        row = {"metric": key[0], "profile_a": key[1], "profile_b": key[2], "test": key[3], "scale": r["scale"],
               "unit": r["unit"], "label": r["label"], "look": k, "tasks": sizes[-1], "n_pairs": int(r["n_pairs"]),
               "naive_estimate": r["estimate"], "naive_ci_low": r["ci_low"], "naive_ci_high": r["ci_high"],
               "naive_p": r["p_value"], "rci_level": 1 - nom[-1], "rci_low": math.nan, "rci_high": math.nan,
               "mue": math.nan, "mue_ci_low": math.nan, "mue_ci_high": math.nan, "mue_look": k}
        if pd.notna(r["estimate"]):
            if nom[-1] <= 0:
                row["rci_low"], row["rci_high"] = -math.inf, math.inf
            else:
                spec = next(s for s in plan.tiers.primary.metrics if s.test == test and (s.id == key[0] or s.id.endswith("*")))
                sub = metrics[metrics["task_id"].astype(str).isin([str(x) for x in order[: sizes[-1]]])]
                rr = compare(sub, _primary_plan(plan, [spec], confidence=1 - nom[-1]), [(key[1], key[2])], refused=refused)
                rr = rr[rr["metric"] == key[0]]
                if len(rr):
                    row["rci_low"], row["rci_high"] = float(rr["ci_low"].iloc[0]), float(rr["ci_high"].iloc[0])
            # Stage-wise ordering, all in the normal approximation on the analysis scale: the information grows
            # with the tasks (the design's assumption) from the row's interval at the stop; the row, monitored
            # alone at the normal boundaries, stops at its first crossing (else at the study's stop).
            x = looks[-1].rows.iloc[i]
            lo, hi = (_scale_value(x["scale"], float(x[c])) if pd.notna(x[c]) else math.nan for c in ("ci_low", "ci_high"))
            se = (hi - lo) / (2 * sps.norm.isf((1 - conf) / 2)) if np.isfinite(hi - lo) else math.nan
            ests = [lk.rows.iloc[i]["estimate"] for lk in looks]
            if np.isfinite(se) and se > 0 and all(pd.notna(e) for e in ests):
                info = [(sizes[j] / sizes[-1]) / se**2 for j in range(k)]
                zs = [_scale_value(x["scale"], float(e)) * math.sqrt(inf_j) for e, inf_j in zip(ests, info, strict=True)]
                c = gs.efficacy_bounds(t, a_rci, seq.efficacy)
                own = next((j + 1 for j in range(k) if abs(zs[j]) >= c[j]), k)
                sign = -1.0 if zs[own - 1] < 0 else 1.0  # the ordering looks in the direction of the result
                sw = gs.stagewise([sign * z for z in zs[:own]], info[:own], list(c[: own - 1]), conf)
                ends = sorted(sign * v for v in (sw["ci_low"], sw["ci_high"]))
                row.update(mue=_from_scale(r["scale"], sign * sw["estimate"]), mue_ci_low=_from_scale(r["scale"], ends[0]),
                           mue_ci_high=_from_scale(r["scale"], ends[1]), mue_look=own)
        out.append(row)
    return pd.DataFrame(out)


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
