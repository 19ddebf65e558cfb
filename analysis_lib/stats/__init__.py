"""Statistical procedures, one plain function each, by family (as pingouin): :mod:`.pairing`, :mod:`.contingency`,
:mod:`.nonparametric`, :mod:`.parametric`, :mod:`.bootstrap`, :mod:`.proportions`, :mod:`.multicomp`,
:mod:`.sample_size`, :mod:`.group_sequential` and :mod:`.meta` (pooling across configurations and studies).

Conventions throughout: every difference is **B - A** (B the treatment, A the baseline) and
``relative_change_pct = 100 * (b - a) / a``; repetitions of a task are aggregated first and tasks are the unit
that tests and bootstraps resample. ``stats.NAME`` loads the family that defines ``NAME`` on first use, so that
a path needing one procedure does not import them all.
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the family module that defines it.
_FAMILY = {
    "AGGREGATES": "pairing",
    "BOOT_STATISTICS": "bootstrap",
    "DEFAULT_PLAN_GRID": "sample_size",
    "EXACT_BELOW": "nonparametric",
    "EXACT_SIGN_FLIPS": "nonparametric",
    "HL_FULL_SCAN": "nonparametric",
    "adjust_p": "multicomp",
    "aggregate_repetitions": "pairing",
    "as_outcome": "pairing",
    "bootstrap_paired": "bootstrap",
    "clustered_mean_difference": "parametric",
    "clustered_proportion": "proportions",
    "cochran_q": "meta",
    "cohens_h": "proportions",
    "conditional_odds_ratio": "contingency",
    "gee_difference": "parametric",
    "hodges_lehmann": "nonparametric",
    "holm": "multicomp",
    "mcnemar": "contingency",
    "meta_regression": "meta",
    "mcnemar_from_table": "contingency",
    "mcnemar_midp": "contingency",
    "mcnemar_table": "contingency",
    "pair_tasks": "pairing",
    "pair_trials": "pairing",
    "paired_t": "parametric",
    "pass_at_k": "proportions",
    "pass_at_k_per_task": "proportions",
    "plan_sample_size": "sample_size",
    "prediction_interval": "meta",
    "project_spend": "sample_size",
    "random_effects": "meta",
    "rank_biserial": "nonparametric",
    "ratio_of_totals": "bootstrap",
    "sign_flip": "nonparametric",
    "tango_interval": "contingency",
    "tau2_confidence_distribution": "meta",
    "tau2_estimate": "meta",
    "tau2_interval": "meta",
    "weighted_chisq_cdf": "meta",
    "wilcoxon": "nonparametric",
    "wilson_ci": "proportions",
}

# The procedures (a family's constants load through the same map but are not listed).
__all__ = sorted(n for n in _FAMILY if not n.isupper())


def __getattr__(name: str) -> Any:
    family = _FAMILY.get(name)
    if family is None:
        raise AttributeError(f"module 'analysis_lib.stats' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{family}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_FAMILY})
