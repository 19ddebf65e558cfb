"""Coverage of the pooling across configurations, in simulated multi-configuration studies with known effects.

Each study (``analysis_lib.simulate.configurations``) has k configurations x 87 tasks x 3 trials per arm; each
configuration's true effect on the pass probability is drawn around mu = 0.15 with a known standard deviation
tau. Its estimate is the all-repetitions plan's (the mean per-task pass-rate difference with the paired t
standard error, checked below to be what the engine computes), pooled by REML with the HKSJ interval.
The benchmark ``benchmarks/meta_calibration.py`` prints the full table (k from 3 to 30, four values of tau, four
methods); this keeps 2,000 studies per claim, so a coverage's Monte-Carlo standard error is 0.5 points and the
+/- 2 point band is four of them. Seeds are fixed: each test is deterministic.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from analysis_lib.inference.pooling import PI_NOTE, compare_configurations, configuration_pairs, pool_comparisons
from analysis_lib.metrics.trials_table import trials_table
from analysis_lib.simulate.configurations import (
    CONTROL,
    TREATMENT,
    ConfigurationStudy,
    configuration_estimates,
    results_table,
    simulate_pass_counts,
)
from analysis_lib.stats.meta import random_effects
from analysis_lib.study.plan import load_plan

STUDIES = 2000
# SkillsBench's level of heterogeneity: the within-configuration standard error is about 0.04, so I^2 ~ 0.5.
SKILLSBENCH_TAU = 0.045


def _coverage(k: int, tau: float, seed: int, method: str = "reml", interval: str = "hksj") -> tuple[float, float]:
    """Shares of studies whose interval holds mu and whose prediction interval holds a new configuration's effect."""
    study = ConfigurationStudy(n_configs=k, tau=tau)
    rng = np.random.default_rng(seed)
    _, a, b = simulate_pass_counts(study, rng, STUDIES)
    y, v = configuration_estimates(a, b, study.trials)
    new = study.mu + tau * rng.standard_normal(STUDIES)
    hit = pi_hit = 0
    for r in range(STUDIES):
        row = random_effects(y[r], v[r], method=method, interval=interval).iloc[0]
        hit += row["ci_low"] <= study.mu <= row["ci_high"]
        pi_hit += row["pi_low"] <= new[r] <= row["pi_high"]
    return hit / STUDIES, pi_hit / STUDIES


def _mc_se(p: float) -> float:
    return math.sqrt(p * (1 - p) / STUDIES)


def test_one_simulated_study_through_the_whole_path(tmp_path):
    """A study written as a results table, read, compared within each configuration and pooled, equals the
    vectorised estimates the coverage tests use; and everything made from it says SIMULATED."""
    study = ConfigurationStudy(n_configs=6, tau=SKILLSBENCH_TAU)
    table, theta = results_table(study, seed=11)
    table.to_csv(tmp_path / "results.csv", index=False)
    (tmp_path / "index.json").write_text(json.dumps({"simulated": True}))
    res = trials_table(tmp_path, workers=1)
    assert res.simulated and res.frame["simulated"].all() and not res.errors
    rows = compare_configurations(res.frame, load_plan("params/analysis_plan_all_repetitions.yaml"),
                                  configuration_pairs(res.frame, CONTROL, TREATMENT))
    pooled = pool_comparisons(rows, "success")
    _, a, b = simulate_pass_counts(study, np.random.default_rng(11))
    y, v = configuration_estimates(a[0], b[0], study.trials)
    assert pooled.effects["y"].tolist() == pytest.approx(y.tolist(), rel=1e-12)
    assert (pooled.effects["se"] ** 2).tolist() == pytest.approx(v.tolist(), rel=1e-9)
    ref = random_effects(y, v).iloc[0]
    assert pooled.primary["estimate"] == pytest.approx(ref["estimate"], rel=1e-10)
    assert len(theta) == 6 and pooled.k == 6


@pytest.mark.slow  # 2,000 random-effects fits each: 4 to 5 s
@pytest.mark.parametrize("k, seed", [(6, 101), (18, 102)])
def test_hksj_interval_covers_the_pooled_mean_95_percent(k, seed):
    cover, _ = _coverage(k, SKILLSBENCH_TAU, seed)
    assert abs(cover - 0.95) <= 0.02 and _mc_se(cover) < 0.006, (k, cover)


@pytest.mark.slow  # 2,000 random-effects fits
def test_the_normal_interval_would_fail_the_same_check_with_six_configurations():
    """DerSimonian-Laird's normal interval, the procedure HKSJ replaces, covers too little here: the coverage
    check above can fail."""
    cover, _ = _coverage(6, SKILLSBENCH_TAU, 101, method="dl", interval="z")
    assert cover < 0.93, cover


@pytest.mark.slow  # 2,000 random-effects fits of 18 configurations
def test_prediction_interval_covers_a_new_configuration_at_its_level_when_heterogeneity_dominates():
    """tau = 0.1, two and a half times the within-configuration standard error, 18 configurations."""
    _, pi_cover = _coverage(18, 0.1, 103)
    assert abs(pi_cover - 0.95) <= 0.02, pi_cover


@pytest.mark.slow  # 2,000 random-effects fits
def test_prediction_interval_falls_short_with_six_configurations_at_skillsbench_heterogeneity():
    """Higgins et al.'s interval puts the estimated tau^2 in place of the true one: with 6 configurations and
    I^2 about 0.5 it covers about 89 % (benchmarks/meta_calibration.py; 89 to 92 % over seeds here), below the
    95 +/- 2 band, as PI_NOTE tells every reader of a pooled result."""
    _, pi_cover = _coverage(6, SKILLSBENCH_TAU, 101)
    assert 0.85 <= pi_cover < 0.93, pi_cover
    assert "89 %" in PI_NOTE


def test_simulated_study_design_is_validated():
    with pytest.raises(ValueError, match="low < high"):
        ConfigurationStudy(low=0.6, high=0.5)
    table, _ = results_table(ConfigurationStudy(n_configs=2, n_tasks=3), seed=0)
    assert list(table.columns) == ["config", "arm", "task_id", "trials", "passes", "simulated"]
    assert len(table) == 2 * 2 * 3 and table["simulated"].all() and isinstance(table, pd.DataFrame)
