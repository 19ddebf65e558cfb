"""One metric's paired effect pooled across configurations (or studies), from their comparison rows.

A study with several agent-and-model configurations compares the arms within each configuration (the rows of
:func:`analysis_lib.inference.comparisons.compare`, one per configuration: estimate, interval, scale). This
module pools those rows with a random-effects model (:mod:`analysis_lib.stats.meta`):

* the rows must estimate one quantity: the same metric, the same ``estimand`` text and a comparison scale that
  maps to the declared pooling scale (``rate_difference`` for rate and pass-rate differences, stored as a
  proportion; ``log_ratio`` for ratio metrics and cost per success, stored as a % change; ``difference`` for
  differences in the metric's unit); anything else is refused with one line (:class:`PoolingError`);
* each row's standard error is recovered from its interval on the pooling scale, ``(high - low) / (2 q)``: ``q``
  is the t quantile on ``n_pairs - 1`` df for the t intervals (exact for the paired t of the all-repetitions plan),
  and the normal quantile for score, inverted-test and bootstrap intervals (an approximation: those intervals
  need not be symmetric); rows without an estimate, with an unbounded or zero-width interval are left out and
  named in ``excluded``;
* the pooled effect: REML tau^2 with the Hartung-Knapp-Sidik-Jonkman interval (primary), Paule-Mandel with HKSJ
  beside it, DerSimonian-Laird with the normal interval for comparison; one heterogeneity for all (Cochran's Q,
  I^2 with its test-based interval, the Q-profile interval of tau^2) and one 95 % prediction interval for a new
  configuration, Nagashima, Noma & Furukawa's parametric bootstrap
  (:func:`analysis_lib.stats.meta.prediction_interval`: seeded, its draws and seed recorded), with each method's
  plug-in Higgins-Thompson-Spiegelhalter interval beside it (``pi_hts_*``, too narrow with few configurations);
  :data:`PI_NOTE` says what holds wherever the interval is shown;
* an exploratory meta-regression on declared moderators, only with at least :data:`MIN_REGRESSION`
  configurations.

Estimates, intervals and prediction intervals are stored on the comparison rows' own scale (a proportion, a %
change, the metric's unit); ``mu`` and ``se`` are on the pooling scale.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pandas as pd
from scipy import stats as sps

from ..stats import meta
from ..study.plan import AnalysisPlan
from .comparisons import COLUMNS, INTERVALS, compare

__all__ = ["POOLING_SCALES", "SCALE_OF", "MIN_REGRESSION", "PI_NOTE", "METHOD_COLUMNS", "EFFECT_COLUMNS",
           "PoolingError", "Pooled", "pooling_scale", "effects_from_comparisons", "pool_effects", "pool_comparisons",
           "compare_configurations", "configuration_pairs"]

POOLING_SCALES = ("rate_difference", "log_ratio", "difference")
# A comparison row's scale -> the scale its estimate is pooled on.
SCALE_OF = {"rate": "rate_difference", "pass_rate": "rate_difference", "ratio": "log_ratio",
            "cost_per_success": "log_ratio", "difference": "difference"}
# Below this many configurations a meta-regression is not run: too few to say anything about moderators.
MIN_REGRESSION = 10
PI_NOTE = ("the 95 % prediction interval is Nagashima, Noma & Furukawa's parametric bootstrap, which carries the "
           "uncertainty of tau² (its confidence distribution from the exact distribution of Q): in simulation it covered "
           "a new configuration's effect 95 +/- 2 % with 6 to 30 configurations wherever I² is above about 0.2, and more "
           "than 95 % when heterogeneity is near zero; the plug-in Higgins-Thompson-Spiegelhalter interval (pi_hts_*, "
           "beside it) covered 85 to 92 % there (benchmarks/meta_calibration.py)")
# Intervals built on Student's t with n_pairs - 1 df (paired t, GEE's t, and the sign-flip interval that
# approximates it): their standard error is recovered with that quantile.
_T_INTERVALS = {INTERVALS["paired_t"], INTERVALS["gee"], INTERVALS["sign_flip"]}
# The three pooled estimates, in order: (tau^2 method, interval, name, role).
METHODS = (("reml", "hksj", "REML, Hartung-Knapp-Sidik-Jonkman t interval", "primary"),
           ("pm", "hksj", "Paule-Mandel, Hartung-Knapp-Sidik-Jonkman t interval", "sensitivity"),
           ("dl", "z", "DerSimonian-Laird, normal interval", "comparison"))
# pi_low/pi_high: the bootstrap prediction interval (one for all rows: it uses no point estimate of tau^2), drawn
# pi_draws times from pi_seed; pi_hts_low/pi_hts_high: the row's plug-in interval, shown beside it.
METHOD_COLUMNS = ["metric", "label", "scale", "estimand", "unit", "role", "method", "k", "estimate", "ci_low", "ci_high",
                  "pi_low", "pi_high", "pi_hts_low", "pi_hts_high", "pi_draws", "pi_seed", "mu", "se", "df", "statistic",
                  "p_value", "tau2", "tau2_low", "tau2_high", "I2", "I2_low", "I2_high", "Q", "Q_df", "Q_p", "confidence"]
EFFECT_COLUMNS = ["label", "metric", "scale", "n_pairs", "estimate", "ci_low", "ci_high", "y", "se", "se_from",
                  "weight"]


class PoolingError(ValueError):
    """Rows that cannot be pooled; the message is one line saying why."""


@dataclass(frozen=True)
class Pooled:
    """One metric pooled across configurations: the entries, the pooled estimates and what was left out."""

    metric: str
    label: str  # the metric as the comparison rows name it (e.g. "pass@1 (mean of per-task pass rates)")
    scale: str  # the pooling scale (POOLING_SCALES)
    comparison_scale: str  # the rows' scale (comparisons.csv ``scale``): rate, pass_rate, ratio, ...
    estimand: str
    unit: str
    confidence: float
    effects: pd.DataFrame  # EFFECT_COLUMNS, one row per configuration pooled (weight: % of the REML weights)
    methods: pd.DataFrame  # METHOD_COLUMNS, one row per method; the first is the primary estimate
    excluded: list[str] = field(default_factory=list)  # "<label>: why", rows left out
    regression: meta.MetaRegression | None = None
    regression_note: str | None = None

    @property
    def primary(self) -> pd.Series:
        """The REML + HKSJ row."""
        return self.methods.iloc[0]

    @property
    def k(self) -> int:
        return len(self.effects)


def pooling_scale(comparison_scale: str) -> str:
    """The pooling scale of a comparison row's ``scale`` (``rate`` -> ``rate_difference``, ``ratio`` -> ``log_ratio``)."""
    if comparison_scale not in SCALE_OF:
        raise PoolingError(f"comparisons on scale {comparison_scale!r} cannot be pooled; scales: {sorted(SCALE_OF)}")
    return SCALE_OF[comparison_scale]


def _to_pooling(values: np.ndarray, scale: str) -> np.ndarray:
    """From the rows' storage (a proportion, a % change, a unit) to the pooling scale."""
    if scale == "log_ratio":
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.log1p(values / 100.0)
    return values


def _from_pooling(values: Any, scale: str) -> Any:
    return 100.0 * np.expm1(values) if scale == "log_ratio" else values


def _one(values: pd.Series, what: str, metric: str) -> str:
    kinds = sorted({str(v) for v in values.dropna()})
    if len(kinds) > 1:
        raise PoolingError(f"cannot pool {metric}: the rows have different {what}s ({'; '.join(kinds)})")
    return kinds[0] if kinds else ""


def effects_from_comparisons(rows: pd.DataFrame, metric: str, *, scale: str | None = None, by: str = "configuration",
                             confidence: float = 0.95) -> tuple[pd.DataFrame, dict[str, str], list[str]]:
    """The entries to pool from comparison rows (module docstring): ``EFFECT_COLUMNS`` without ``weight``, the
    rows' shared ``metric, scale, comparison_scale, estimand, unit``, and the labels left out with why.

    ``by`` is the column naming each row's configuration (or study). The sensitivity tier's restatements are
    not pooled. Raises :class:`PoolingError` (one line) for no rows, two rows of one label, different estimands
    or scales, or a declared ``scale`` the rows are not on.
    """
    if by not in rows.columns:
        raise PoolingError(f"cannot pool {metric}: the comparison rows have no {by!r} column naming what is pooled")
    sub = rows[(rows["metric"] == metric) & (rows["tier"].astype(str) != "sensitivity")] if "tier" in rows else \
        rows[rows["metric"] == metric]
    if sub.empty:
        raise PoolingError(f"cannot pool {metric}: no comparison of it in the rows")
    labels = sub[by].astype(str)
    twice = sorted(labels[labels.duplicated()].unique())
    if twice:
        raise PoolingError(f"cannot pool {metric}: {twice[0]} has {int((labels == twice[0]).sum())} comparisons of it "
                           "(one per configuration or study)")
    estimand = _one(sub["estimand"], "estimand", metric)
    comparison_scale = _one(sub["scale"], "scale", metric)
    natural = pooling_scale(comparison_scale) if comparison_scale else ""
    if scale is not None and scale not in POOLING_SCALES:
        raise PoolingError(f"--scale {scale!r}: the pooling scales are {', '.join(POOLING_SCALES)}")
    if scale is not None and natural and scale != natural:
        raise PoolingError(f"cannot pool {metric} on the {scale} scale: its comparisons are on scale "
                           f"{comparison_scale!r}, pooled as {natural}")
    unit = _one(sub["unit"], "unit", metric) if "unit" in sub else ""
    metric_label = _one(sub["label"], "label", metric) if "label" in sub else metric
    excluded: list[str] = []
    out = []
    for r in sub.itertuples(index=False):
        label = str(getattr(r, by))
        est, lo, hi = (float(getattr(r, c)) if pd.notna(getattr(r, c)) else np.nan
                       for c in ("estimate", "ci_low", "ci_high"))
        n = int(r.n_pairs) if pd.notna(r.n_pairs) else 0
        y, y_lo, y_hi = _to_pooling(np.array([est, lo, hi]), natural)
        if not np.isfinite(y):
            excluded.append(f"{label}: no estimate" + (f" ({r.note})" if isinstance(getattr(r, "note", None), str) else ""))
            continue
        if not (np.isfinite(y_lo) and np.isfinite(y_hi)):
            excluded.append(f"{label}: its interval is unbounded (too few tasks to bound it)")
            continue
        t_based = str(getattr(r, "interval", "")) in _T_INTERVALS and n >= 2
        q = float(sps.t.ppf((1 + confidence) / 2, n - 1)) if t_based else float(sps.norm.ppf((1 + confidence) / 2))
        se = (y_hi - y_lo) / (2 * q)
        if not se > 0:
            excluded.append(f"{label}: its interval has zero width (every paired task differs by the same amount)")
            continue
        out.append({"label": label, "metric": metric, "scale": natural, "n_pairs": n, "estimate": est, "ci_low": lo,
                    "ci_high": hi, "y": float(y), "se": float(se),
                    "se_from": f"t interval, {n - 1} df" if t_based else "normal approximation of the interval"})
    info = {"metric": metric, "label": metric_label or metric, "scale": natural, "comparison_scale": comparison_scale,
            "estimand": estimand, "unit": unit}
    return pd.DataFrame(out, columns=EFFECT_COLUMNS[:-1]), info, excluded


def _moderator_matrix(effects: pd.DataFrame, moderators: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """Moderator columns for the entries (by label): numbers as they are, categories as indicators (first
    category in sort order as the reference)."""
    mods = moderators.reindex(effects["label"])
    if mods.isna().any().any():
        missing = sorted(effects.loc[mods.isna().any(axis=1).to_numpy(), "label"])
        raise PoolingError(f"moderators missing for {', '.join(missing)}")
    cols, names = [], []
    for c in mods.columns:
        s = mods[c]
        if pd.api.types.is_numeric_dtype(s):
            cols.append(s.to_numpy(float))
            names.append(str(c))
            continue
        levels = sorted(s.astype(str).unique())
        for level in levels[1:]:
            cols.append((s.astype(str) == level).to_numpy(float))
            names.append(f"{c}={level}")
    return np.column_stack(cols) if cols else np.empty((len(effects), 0)), names


def pool_effects(effects: pd.DataFrame, info: Mapping[str, str], *, confidence: float = 0.95,
                 excluded: list[str] | None = None, moderators: pd.DataFrame | None = None,
                 pi_draws: int = meta.PI_DRAWS, pi_seed: int = meta.PI_SEED) -> Pooled:
    """Pool entries (``label, y, se`` on the pooling scale, with the rows' storage columns) into a :class:`Pooled`.

    ``moderators``: one row per label (index), the declared moderators (e.g. harness, model family); the
    meta-regression runs only with at least :data:`MIN_REGRESSION` entries. ``pi_draws`` and ``pi_seed``: the
    bootstrap prediction interval's draws and seed (recorded in the rows).
    """
    metric, scale = info["metric"], info["scale"]
    if len(effects) < 2:
        kept = ", ".join(effects["label"]) or "none"
        raise PoolingError(f"cannot pool {metric}: pooling needs at least 2 configurations with an estimate "
                           f"and an interval, got {len(effects)} ({kept})")
    y, v = effects["y"].to_numpy(float), effects["se"].to_numpy(float) ** 2
    het = meta.cochran_q(y, v, confidence=confidence).iloc[0]
    tau_ci = meta.tau2_interval(y, v, confidence=confidence).iloc[0]
    pi = meta.prediction_interval(y, v, confidence=confidence, draws=pi_draws, seed=pi_seed).iloc[0]
    rows = []
    for method, interval, name, role in METHODS:
        r = meta.random_effects(y, v, method=method, interval=interval, confidence=confidence).iloc[0]
        rows.append({**{c: info.get(c, "") for c in ("metric", "label", "scale", "estimand", "unit")}, "role": role, "method": name, "k": len(effects),
                     "estimate": _from_pooling(r["estimate"], scale), "ci_low": _from_pooling(r["ci_low"], scale),
                     "ci_high": _from_pooling(r["ci_high"], scale), "pi_low": _from_pooling(pi["pi_low"], scale),
                     "pi_high": _from_pooling(pi["pi_high"], scale), "pi_hts_low": _from_pooling(r["pi_hts_low"], scale),
                     "pi_hts_high": _from_pooling(r["pi_hts_high"], scale), "pi_draws": pi["draws"], "pi_seed": pi["seed"],
                     "mu": r["estimate"], "se": r["se"], "df": r["df"],
                     "statistic": r["statistic"], "p_value": r["p_val"], "tau2": r["tau2"],
                     "tau2_low": tau_ci["tau2_low"], "tau2_high": tau_ci["tau2_high"], "I2": het["I2"],
                     "I2_low": het["I2_low"], "I2_high": het["I2_high"], "Q": het["Q"], "Q_df": het["df"],
                     "Q_p": het["p_val"], "confidence": confidence})
    methods = pd.DataFrame(rows, columns=METHOD_COLUMNS)
    w = 1.0 / (v + float(methods["tau2"].iloc[0]))
    effects = effects.assign(weight=100.0 * w / w.sum())[EFFECT_COLUMNS].reset_index(drop=True)
    regression, note = None, None
    if moderators is not None:
        if len(effects) < MIN_REGRESSION:
            note = (f"no meta-regression: it needs at least {MIN_REGRESSION} configurations, "
                    f"{len(effects)} have an estimate")
        else:
            x, names = _moderator_matrix(effects, moderators)
            try:
                regression = meta.meta_regression(y, v, x, names, confidence=confidence)
                note = "exploratory: moderators were not randomised, and few configurations describe, not establish"
            except ValueError as exc:
                note = f"no meta-regression: {exc}"
    return Pooled(metric, info.get("label") or metric, scale, info.get("comparison_scale", ""), info.get("estimand", ""), info.get("unit", ""),
                  confidence, effects, methods, list(excluded or []), regression, note)


def pool_comparisons(rows: pd.DataFrame, metric: str, *, scale: str | None = None, by: str = "configuration",
                     confidence: float = 0.95, moderators: pd.DataFrame | None = None, pi_draws: int = meta.PI_DRAWS,
                     pi_seed: int = meta.PI_SEED) -> Pooled:
    """Pool one metric's comparison rows across configurations (``by`` names each row's configuration): the
    entry point for per-configuration pooling (module docstring). Raises :class:`PoolingError` (one line)."""
    effects, info, excluded = effects_from_comparisons(rows, metric, scale=scale, by=by, confidence=confidence)
    return pool_effects(effects, info, confidence=confidence, excluded=excluded, moderators=moderators,
                        pi_draws=pi_draws, pi_seed=pi_seed)


def configuration_pairs(metrics: pd.DataFrame, control: str, treatment: str) -> dict[str, tuple[str, str]]:
    """``{configuration: (control profile, treatment profile)}`` from the trials' own records (``run_config``
    keys ``configuration`` and ``arm``, as results tables carry them); configurations missing an arm are left out."""
    seen: dict[tuple[str, str], set[str]] = {}
    for profile, record in zip(metrics["profile"].astype(str), metrics["run_config"], strict=True):
        rec = orjson.loads(record) if isinstance(record, str) and record else {}
        if "configuration" in rec and "arm" in rec:
            seen.setdefault((str(rec["configuration"]), str(rec["arm"])), set()).add(profile)
    out = {}
    for config in sorted({c for c, _ in seen}):
        a, b = seen.get((config, control), set()), seen.get((config, treatment), set())
        if len(a) == 1 and len(b) == 1:
            out[config] = (next(iter(a)), next(iter(b)))
    return out


def compare_configurations(metrics: pd.DataFrame, plan: AnalysisPlan, pairs: Mapping[str, tuple[str, str]], *,
                           refused: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The planned comparisons within each configuration (``pairs``: configuration -> (A, B) profiles), as one
    table of :data:`~analysis_lib.inference.comparisons.COLUMNS` with ``configuration`` first.

    One call of :func:`~analysis_lib.inference.comparisons.compare` over every pair: a tier's correction runs over
    all configurations' rows together, as it does over several profile pairs.
    """
    if not pairs:
        raise PoolingError("no configuration has both arms")
    table = compare(metrics, plan, list(pairs.values()), refused=dict(refused) if refused else None)
    label = {ab: config for config, ab in pairs.items()}
    config = [label[(a, b)] for a, b in zip(table["profile_a"], table["profile_b"], strict=True)]
    return table.assign(configuration=config)[["configuration", *COLUMNS]]
