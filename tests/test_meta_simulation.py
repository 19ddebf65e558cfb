"""Coverage of the pooling across configurations, in simulated multi-configuration studies with known effects.

Each study (``analysis_lib.simulate.configurations``) has k configurations x 87 tasks x 3 trials per arm; each
configuration's true effect on the pass probability is drawn around mu = 0.15 with a known standard deviation
tau. Its estimate is the all-repetitions plan's (the mean per-task pass-rate difference with the paired t
standard error, checked below to be what the engine computes), pooled by REML with the HKSJ interval; a new
configuration's effect, drawn from the same distribution, is what the prediction intervals must hold: the
bootstrap one that is reported and the plug-in Higgins-Thompson-Spiegelhalter one shown beside it.
The benchmark ``benchmarks/meta_calibration.py`` prints the full table (k from 3 to 30, four values of tau, four
methods, three prediction intervals); this keeps 2,000 studies per claim, so a coverage's Monte-Carlo standard
error is 0.5 points and the +/- 2 point band is four of them. Seeds are fixed: each test is deterministic.
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
from analysis_lib.stats.meta import prediction_interval, random_effects
from analysis_lib.study.plan import load_plan

STUDIES = 2000
# SkillsBench's level of heterogeneity: the within-configuration standard error is about 0.04, so I^2 ~ 0.5.
SKILLSBENCH_TAU = 0.045


def _coverage(k: int, tau: float, seed: int, method: str = "reml", interval: str = "hksj",
              bootstrap: bool = False) -> tuple[float, float, float]:
    """Shares of studies whose interval holds mu, whose plug-in (HTS) prediction interval holds a new
    configuration's effect, and whose bootstrap prediction interval does (NaN unless ``bootstrap``)."""
    study = ConfigurationStudy(n_configs=k, tau=tau)
    rng = np.random.default_rng(seed)
    _, a, b = simulate_pass_counts(study, rng, STUDIES)
    y, v = configuration_estimates(a, b, study.trials)
    new = study.mu + tau * rng.standard_normal(STUDIES)
    hit = hts_hit = boot_hit = 0
    for r in range(STUDIES):
        row = random_effects(y[r], v[r], method=method, interval=interval).iloc[0]
        hit += row["ci_low"] <= study.mu <= row["ci_high"]
        hts_hit += row["pi_hts_low"] <= new[r] <= row["pi_hts_high"]
        if bootstrap:
            # Fewer draws than the analysis' 5,000: each interval is noisier, the coverage over 2,000 studies is not.
            p = prediction_interval(y[r], v[r], draws=2000, seed=seed + r).iloc[0]
            boot_hit += p["pi_low"] <= new[r] <= p["pi_high"]
    return hit / STUDIES, hts_hit / STUDIES, boot_hit / STUDIES if bootstrap else math.nan


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
    cover, _, _ = _coverage(k, SKILLSBENCH_TAU, seed)
    assert abs(cover - 0.95) <= 0.02 and _mc_se(cover) < 0.006, (k, cover)


@pytest.mark.slow  # 2,000 random-effects fits
def test_the_normal_interval_would_fail_the_same_check_with_six_configurations():
    """DerSimonian-Laird's normal interval, the procedure HKSJ replaces, covers too little here: the coverage
    check above can fail."""
    cover, _, _ = _coverage(6, SKILLSBENCH_TAU, 101, method="dl", interval="z")
    assert cover < 0.93, cover


@pytest.mark.slow  # 2,000 random-effects fits of 18 configurations
def test_plug_in_prediction_interval_covers_at_its_level_when_heterogeneity_dominates():
    """tau = 0.1, two and a half times the within-configuration standard error, 18 configurations."""
    _, hts_cover, _ = _coverage(18, 0.1, 103)
    assert abs(hts_cover - 0.95) <= 0.02, hts_cover


@pytest.mark.slow  # 2,000 bootstrap intervals: 25 s with 6 configurations, 45 s with 18 on 2 cores
@pytest.mark.parametrize("k, tau, seed", [(6, SKILLSBENCH_TAU, 101), (18, 0.02, 104)])
def test_bootstrap_prediction_interval_covers_a_new_configuration_where_the_plug_in_one_does_not(k, tau, seed):
    """Where Higgins et al.'s interval puts the estimated tau^2 in place of the true one and falls short (6
    configurations at SkillsBench's I^2 about 0.5; 18 at I^2 about 0.2), Nagashima et al.'s bootstrap, drawing
    tau^2 from its confidence distribution, covers 95 +/- 2 % of new configurations: the interval reported, as
    PI_NOTE tells every reader of a pooled result."""
    _, hts_cover, boot_cover = _coverage(k, tau, seed, bootstrap=True)
    assert abs(boot_cover - 0.95) <= 0.02 and _mc_se(boot_cover) < 0.006, (k, tau, boot_cover)
    assert hts_cover < 0.93, (k, tau, hts_cover)
    assert "bootstrap" in PI_NOTE and "95 +/- 2 %" in PI_NOTE


def test_simulated_study_design_is_validated():
    with pytest.raises(ValueError, match="low < high"):
        ConfigurationStudy(low=0.6, high=0.5)
    table, _ = results_table(ConfigurationStudy(n_configs=2, n_tasks=3), seed=0)
    assert list(table.columns) == ["config", "arm", "task_id", "trials", "passes", "simulated"]
    assert len(table) == 2 * 2 * 3 and table["simulated"].all() and isinstance(table, pd.DataFrame)
