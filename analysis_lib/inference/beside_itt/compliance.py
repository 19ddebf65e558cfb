"""The effect of using MCP beside the effect of offering it: the complier average causal effect (CACE).

The planned comparisons are by assignment (intention to treat, ITT): every trial of the MCP arm counts,
whether or not its agent called an MCP tool. Agents often do not (``mcp_used`` false). The baseline
cannot call the tools, so non-compliance is one-sided, and under the exclusion restriction (being
offered tools that are not called does not change the outcome) the effect among trials that use MCP
when offered is the Wald (instrumental-variable) ratio, assignment being the instrument
(Angrist, Imbens & Rubin 1996, JASA 91:444-455)::

    CACE = ITT / share_used

On the paired design, per task t: ``d_t`` = mean of the metric over B's trials − mean over A's trials
(log values for ratio-scale metrics), ``u_t`` = share of B's trials that used MCP. ``itt_mean`` =
mean(d), ``share_used`` = mean(u), ``cace`` = mean(d) / mean(u), tasks being the independent units.
Interval: the delta method, SE = sd(d − CACE u) / (sqrt(n) mean(u)), with Student's t on n − 1
degrees of freedom; Fieller's confidence set (the values θ where the paired t test of d − θ u = 0 does not
reject) when Fieller's g = t² var(mean u) / mean(u)² is 0.05 or more (Finney 1978, *Statistical Method
in Biological Assay*, 3rd ed.: below it the delta interval is adequate). Fieller's set is what it is: a
bounded interval when the share of users is significantly above 0; otherwise two rays (−∞, a] ∪ [b, +∞),
which still exclude 0 when a < 0 < b, or the whole line (``ci_set``; the rays' gap in ``ci_gap_low`` /
``ci_gap_high``; ``ci_low`` / ``ci_high`` hold the set's hull). On a ratio metric's % scale −∞ is −100 %
(a change below −100 % does not exist). An estimate outside the parameter space (a difference of pass rates
beyond ±100 pp, possible when the share of users is small) is flagged in the row's note.

Beside it, and named apart: ``naive_users``, the trials that used MCP against the baseline (a
per-protocol comparison). Users select themselves (an agent may reach for the tools on the tasks
it finds hard, or give up on them when it is lost), so it is biased for both the ITT and the CACE.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from ... import stats
from ...core import registry
from ...core.success import used_mcp
from ..comparisons import scale_unit, usable_trials

__all__ = ["COLUMNS", "SETS", "ESTIMANDS", "ASSUMPTIONS", "TOKEN_CAVEAT", "FINNEY_G", "mcp_use", "mcp_arms",
           "FiellerSet", "fieller_set", "fieller_interval", "ratio_of_means", "compliance_rows", "compliance_table"]

COLUMNS = ["profile_a", "profile_b", "metric", "label", "scale", "unit", "estimand", "definition", "estimate", "ci_low",
           "ci_high", "ci_set", "ci_gap_low", "ci_gap_high", "interval", "n_tasks", "n_trials_a", "n_trials_b", "n_used",
           "fieller_g", "outside_parameter_space", "note"]
# The shapes a confidence set takes: Fieller's can be unbounded in two ways.
SETS = ("interval", "two rays", "whole line")
ESTIMANDS = {
    "itt_mean": "effect of offering MCP (intention to treat): mean over paired tasks of the per-task difference of "
                "trial means, B − A",
    "share_used": "share of B's trials that called an MCP tool (mean over paired tasks of the per-task share)",
    "cace": "effect among trials that use MCP when offered (complier average causal effect): itt_mean / share_used",
    "naive_users": "B's trials that called an MCP tool against all of A's (per-protocol): biased, users select themselves",
}
ASSUMPTIONS = ("The CACE assumes that assignment is randomised within tasks, that the baseline cannot call MCP tools "
               "(one-sided non-compliance), and that being offered tools that are not called does not change the "
               "outcome (exclusion restriction).")
TOKEN_CAVEAT = ("For tokens and cost the exclusion restriction is doubtful: the tools' schemas are sent with every "
                "request whether or not a tool is called, so trials that never call one still pay for them, and the "
                "CACE attributes that cost to the users.")
# Fieller's g below which the delta-method interval is used (Finney 1978).
FINNEY_G = 0.05
# Metrics whose per-trial value carries the tools' schemas (the exclusion restriction is doubtful).
SCHEMA_COST_METRICS = frozenset({"total_tokens", "total_input_tokens", "total_cached_tokens", "total_cost_usd"})


def mcp_use(trials: pd.DataFrame) -> pd.Series:
    """Per trial: 1.0 when it used MCP (``mcp_used`` as recorded, else an MCP call ran), 0.0 when not, NaN
    when unknown. The same rule as :func:`analysis_lib.core.success.used_mcp`, which a study file applies."""
    recorded = trials["mcp_used"].astype(object).tolist() if "mcp_used" in trials else [None] * len(trials)
    calls = trials["mcp_tool_calls"].astype(object).tolist() if "mcp_tool_calls" in trials else [None] * len(trials)
    out = [used_mcp(None if r is pd.NA else r, None if c is pd.NA else c) for r, c in zip(recorded, calls, strict=True)]
    return pd.Series([np.nan if v is None else float(v) for v in out], index=trials.index, dtype=float)


def _truthy(v) -> bool | None:
    if v is True or v is False:
        return v
    if isinstance(v, str) and v in ("True", "False"):
        return v == "True"
    if isinstance(v, (int, float, np.bool_)) and not (isinstance(v, float) and math.isnan(v)):
        return bool(v)
    return None


def mcp_arms(audit_arms: pd.DataFrame | None, metrics: pd.DataFrame | None = None) -> dict[str, bool | None]:
    """Arm -> whether it was offered MCP tools: the design audit's ``mcp_offered`` (a study file's ``mcp``,
    or the runner's record); without an audit, arms whose trials recorded MCP exposure or use."""
    if audit_arms is not None and len(audit_arms) and "mcp_offered" in audit_arms:
        return {str(a): _truthy(v) for a, v in zip(audit_arms["arm"], audit_arms["mcp_offered"], strict=True)}
    out: dict[str, bool | None] = {}
    if metrics is None or not len(metrics):
        return out
    for arm, sub in metrics.groupby(metrics["profile"].astype(str)):
        seen = [c for c in ("mcp_exposed", "mcp_used") if c in sub and sub[c].notna().any()]
        out[str(arm)] = True if seen else None
    return out


# --------------------------------------------------------------------------- the ratio of two means


@dataclass(frozen=True)
class FiellerSet:
    """Fieller's confidence set: ``kind`` ``interval`` ([low, high], possibly a ray with one infinite end),
    ``two rays`` ((-inf, low] and [high, +inf), the open gap (low, high) left out) or ``whole line``."""

    kind: str
    low: float
    high: float

    def hull(self) -> tuple[float, float]:
        """The smallest interval holding the set."""
        return (self.low, self.high) if self.kind == "interval" else (-math.inf, math.inf)

    def contains(self, theta: float) -> bool:
        if self.kind == "whole line":
            return True
        if self.kind == "two rays":
            return theta <= self.low or theta >= self.high
        return self.low <= theta <= self.high


def fieller_set(a: float, b: float, var_a: float, var_b: float, cov_ab: float, q: float) -> FiellerSet:
    """Fieller's set for the ratio of the expectations of two estimates ``a / b`` (Fieller 1954, JRSS B
    16:175-185): the θ with (a − θ b)² ≤ q² (var_a − 2 θ cov_ab + θ² var_b), ``q`` the t (or normal) quantile.

    With ``qa = b² − q² var_b`` (> 0 exactly when ``b`` is significantly different from 0) the inequality is
    ``qa θ² − 2 qb θ + qc ≤ 0``: a bounded interval when qa > 0; when qa < 0, the two rays outside the roots
    if there are two, else every θ; when qa = 0, one ray (or every θ).
    """
    qa = b * b - q * q * var_b
    qb = a * b - q * q * cov_ab
    qc = a * a - q * q * var_a
    disc = qb * qb - qa * qc
    if qa > 0:
        root = math.sqrt(max(disc, 0.0))  # >= 0 when qa > 0: the quadratic is <= 0 at a / b
        return FiellerSet("interval", (qb - root) / qa, (qb + root) / qa)
    if qa == 0:
        if qb == 0:
            return FiellerSet("whole line", -math.inf, math.inf)
        edge = qc / (2 * qb)
        return FiellerSet("interval", edge, math.inf) if qb > 0 else FiellerSet("interval", -math.inf, edge)
    if disc <= 0:
        return FiellerSet("whole line", -math.inf, math.inf)
    root = math.sqrt(disc)
    return FiellerSet("two rays", (qb + root) / qa, (qb - root) / qa)


def fieller_interval(a: float, b: float, var_a: float, var_b: float, cov_ab: float, q: float) -> tuple[float, float]:
    """The hull of :func:`fieller_set`: its ends when it is an interval, ``(-inf, inf)`` when it is unbounded on
    both sides (two rays, or the whole line)."""
    return fieller_set(a, b, var_a, var_b, cov_ab, q).hull()


def ratio_of_means(num: Iterable[float], den: Iterable[float], *, confidence: float = 0.95) -> dict:
    """mean(num) / mean(den) over independent paired units (tasks), with its interval.

    Delta method: SE = sd(num − θ den) / (sqrt(n) |mean(den)|), Student's t on n − 1 df; Fieller's
    interval (:func:`fieller_interval` with the sample covariance of the two means) when Fieller's
    g = t² var(mean den) / mean(den)² >= :data:`FINNEY_G`. Returns ``estimate, se, ci_low, ci_high,
    ci_set, ci_gap_low, ci_gap_high, interval, g, n`` (``ci_low`` / ``ci_high``: the set's hull; the gap: what two
    rays leave out).
    """
    x, u = np.asarray(list(num), dtype=float), np.asarray(list(den), dtype=float)
    ok = np.isfinite(x) & np.isfinite(u)
    x, u = x[ok], u[ok]
    n = x.size
    out = {"estimate": np.nan, "se": np.nan, "ci_low": np.nan, "ci_high": np.nan, "ci_set": None, "ci_gap_low": np.nan,
           "ci_gap_high": np.nan, "interval": None, "g": np.nan, "n": n}
    if n == 0 or u.mean() == 0:
        return out
    theta = float(x.mean() / u.mean())
    out["estimate"] = theta
    if n < 2:
        return out
    q = float(sps.t.ppf((1 + confidence) / 2, n - 1))
    cov = np.cov(x, u, ddof=1) / n  # covariance matrix of the two means
    se = float(np.sqrt(max(cov[0, 0] - 2 * theta * cov[0, 1] + theta**2 * cov[1, 1], 0.0)) / abs(u.mean()))
    g = float(q * q * cov[1, 1] / u.mean() ** 2)
    out.update(se=se, g=g)
    if g < FINNEY_G:
        out.update(ci_low=theta - q * se, ci_high=theta + q * se, ci_set="interval", interval="delta method, t (tasks)")
    else:
        fs = fieller_set(float(x.mean()), float(u.mean()), float(cov[0, 0]), float(cov[1, 1]), float(cov[0, 1]), q)
        lo, hi = fs.hull()
        out.update(ci_low=lo, ci_high=hi, ci_set=fs.kind, interval="Fieller, t (tasks)")
        if fs.kind == "two rays":
            out.update(ci_gap_low=fs.low, ci_gap_high=fs.high)
    return out


# --------------------------------------------------------------------------- per metric and pair


def _values(trials: pd.DataFrame, metric: str) -> tuple[pd.Series, str]:
    """The per-trial values a mean-based effect is computed on, and the comparison scale they imply."""
    m = registry.metric(metric)
    if m.kind == "binary":
        return stats.as_outcome(trials[metric].to_numpy()).set_axis(trials.index), "pass_rate"
    v = pd.to_numeric(trials[metric], errors="coerce")
    if m.scale == "ratio":
        return np.log(v.where(v > 0)), "ratio"
    return v, "difference"


def _per_task(trials: pd.DataFrame, metric: str, a: str, b: str) -> tuple[pd.DataFrame, str]:
    """Per paired task: A's mean, B's mean, B's share of users and B's users' mean, with the trial counts."""
    y, scale = _values(trials, metric)
    yv = y.to_numpy(dtype=float)
    use = mcp_use(trials).to_numpy()
    prof = trials["profile"].astype(str).to_numpy()
    codes, tasks = pd.factorize(trials["task_id"].astype(str), sort=True)
    k = len(tasks)
    in_a = (prof == a) & np.isfinite(yv)
    in_b = (prof == b) & np.isfinite(yv) & np.isfinite(use)

    def total(mask: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
        return np.bincount(codes[mask], weights=None if w is None else w[mask], minlength=k)

    n_a, n_b = total(in_a), total(in_b)
    users = in_b & (use == 1.0)
    n_used = total(users)
    keep = (n_a > 0) & (n_b > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        per = pd.DataFrame({"task_id": np.asarray(tasks), "ya": total(in_a, yv) / n_a, "n_a": n_a.astype(int),
                            "yb": total(in_b, yv) / n_b, "u": n_used / n_b, "n_b": n_b.astype(int),
                            "n_used": n_used.astype(int),
                            "yb_users": np.where(n_used > 0, total(users, yv) / np.maximum(n_used, 1), np.nan)})
    return per[keep].reset_index(drop=True), scale


def _display(scale: str, x: float) -> float:
    """A log-scale effect as a % change (−∞ is −100 %: no change goes below it); the others as they are."""
    if scale == "ratio" and not math.isnan(x):
        return -100.0 if x == -math.inf else (100.0 * math.expm1(x) if math.isfinite(x) else x)
    return x


# Where each scale's effect can lie: a difference of two rates within ±1 (±100 pp); a % change above −100 %.
PARAMETER_SPACE = {"pass_rate": (-1.0, 1.0), "ratio": (-100.0, math.inf)}


def compliance_rows(trials: pd.DataFrame, metric: str, a: str, b: str, *, confidence: float = 0.95) -> list[dict]:
    """The four estimands of :data:`ESTIMANDS` for ``metric``, B (offered MCP) against baseline A.

    ``trials`` must already exclude infrastructure errors. Binary metrics: differences of pass rates
    (``pass_rate`` scale, a fraction); ratio-scale metrics: of mean log values, shown as
    100 (exp(x) − 1) %; others: in the metric's unit.
    """
    m = registry.metric(metric)
    per, scale = _per_task(trials, metric, a, b)
    unit = scale_unit(scale, m.unit)
    label = "pass rate per trial" if scale == "pass_rate" and metric == "success" else m.axis_label
    base = {"profile_a": a, "profile_b": b, "metric": metric, "label": label, "scale": scale, "unit": unit,
            "n_tasks": len(per), "n_trials_a": int(per["n_a"].sum()), "n_trials_b": int(per["n_b"].sum()),
            "n_used": int(per["n_used"].sum())}
    rows: list[dict] = []

    def add(estimand: str, est, lo, hi, interval, note=None, g=np.nan, **extra) -> None:
        to = (lambda x: x) if estimand == "share_used" else (lambda x: _display(scale, x))  # noqa: E731
        gap = {k: to(extra.pop(k)) for k in ("ci_gap_low", "ci_gap_high") if k in extra}
        row = {**base, "estimand": estimand, "definition": ESTIMANDS[estimand], "estimate": to(est), "ci_low": to(lo),
               "ci_high": to(hi), "ci_set": extra.pop("ci_set", "interval" if pd.notna(lo) else None), **gap,
               "interval": interval, "fieller_g": g, "note": note, **extra}
        space = PARAMETER_SPACE.get(row["scale"])
        v = row["estimate"]
        row["outside_parameter_space"] = bool(space is not None and pd.notna(v) and not space[0] <= v <= space[1])
        if row["outside_parameter_space"]:
            unit = "±100 pp (a difference of two pass rates)" if row["scale"] == "pass_rate" else "above −100 %"
            row["note"] = "; ".join(x for x in (f"outside the parameter space: the effect lies within {unit}; the "
                                                "share of users is small or imprecise", row["note"]) if x)
        if estimand == "share_used":
            row.update(scale="share", unit="share")
        rows.append(row)

    if len(per) == 0:
        why = "no task with a trial of known MCP use under B and a value under both profiles"
        for e in ESTIMANDS:
            add(e, np.nan, np.nan, np.nan, None, why)
        return rows
    d = (per["yb"] - per["ya"]).to_numpy(float)
    u = per["u"].to_numpy(float)
    itt = stats.paired_t(d, confidence=confidence).iloc[0]
    share = stats.paired_t(u, confidence=confidence).iloc[0]
    add("itt_mean", itt["estimate"], itt["ci_low"], itt["ci_high"], "paired t (tasks)")
    add("share_used", share["estimate"], max(0.0, share["ci_low"]) if pd.notna(share["ci_low"]) else np.nan,
        min(1.0, share["ci_high"]) if pd.notna(share["ci_high"]) else np.nan, "t (tasks), clipped to [0, 1]")
    caveat = TOKEN_CAVEAT if metric in SCHEMA_COST_METRICS else None
    if not (u > 0).any():
        add("cace", np.nan, np.nan, np.nan, None, f"undefined: no trial of {b} called an MCP tool on the paired tasks")
    else:
        r = ratio_of_means(d, u, confidence=confidence)
        why = {"two rays": "the share of users is not significantly above 0: Fieller's confidence set is two rays"
                           + (" (it excludes 0)" if r["ci_gap_low"] < 0 < r["ci_gap_high"] else ""),
               "whole line": "the share of users is not significantly above 0: Fieller's confidence set is the whole "
                             "line"}.get(r["ci_set"])
        note = "; ".join(x for x in (why, caveat) if x) or None
        add("cace", r["estimate"], r["ci_low"], r["ci_high"], r["interval"], note, g=r["g"], ci_set=r["ci_set"],
            ci_gap_low=r["ci_gap_low"], ci_gap_high=r["ci_gap_high"])
    users = per[per["yb_users"].notna()]
    if users.empty:
        add("naive_users", np.nan, np.nan, np.nan, None, f"no trial of {b} called an MCP tool on the paired tasks")
    else:
        nv = stats.paired_t((users["yb_users"] - users["ya"]).to_numpy(float), confidence=confidence).iloc[0]
        add("naive_users", nv["estimate"], nv["ci_low"], nv["ci_high"], "paired t (tasks with a user)",
            "biased: compares the trials whose agent chose to call MCP tools with all baseline trials",
            n_tasks=len(users))
    return rows


def compliance_table(metrics: pd.DataFrame, pairs: list[tuple[str, str]], metric_ids: list[str],
                     offered: dict[str, bool | None], *, confidence: float = 0.95) -> pd.DataFrame:
    """Every pair (A, B) where B was offered MCP tools and A was not, every metric: :func:`compliance_rows`.

    Infrastructure errors are left out as in the planned comparisons, and so are trials whose agent never reached a
    model: no agent attempted them, so their MCP use is unknown and they are neither users nor non-users (the
    infrastructure bounds count them). Pairs where both or neither arm were offered MCP have no one-sided
    non-compliance and get no rows.
    """
    trials = usable_trials(metrics)
    if "never_reached_model" in trials:
        trials = trials[trials["never_reached_model"].isna()]
    rows: list[dict] = []
    for a, b in pairs:
        if offered.get(b) is not True or offered.get(a) is True:
            continue
        for metric in metric_ids:
            if metric not in trials.columns:
                continue
            rows.extend(compliance_rows(trials, metric, a, b, confidence=confidence))
    out = pd.DataFrame(rows, columns=COLUMNS)
    for c in ("estimate", "ci_low", "ci_high", "ci_gap_low", "ci_gap_high", "fieller_g"):
        out[c] = pd.to_numeric(out[c], errors="coerce").astype(float)
    return out
