"""One metric's effect pooled across configurations from their comparison rows (``analysis_lib.inference.pooling``),
its refusals, and its forest plot; on SkillsBench's registry, the pooled numbers against expected.json's
DerSimonian-Laird figures (stdlib + scipy, no project code) and statsmodels' combine_effects."""

from __future__ import annotations

import hashlib
import io
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.meta_analysis import combine_effects

from analysis_lib.inference.comparisons import INTERVALS
from analysis_lib.inference.pooling import (
    METHOD_COLUMNS,
    MIN_REGRESSION,
    PoolingError,
    compare_configurations,
    configuration_pairs,
    pool_comparisons,
)
from analysis_lib.metrics.trial_metrics import MetricsConfig
from analysis_lib.metrics.trials_table import trials_table
from analysis_lib.report import figures
from analysis_lib.stats import meta
from analysis_lib.study.plan import load_plan

PLAN_ALL = "params/analysis_plan_all_repetitions.yaml"


def _rows(estimates, lows, highs, *, scale="pass_rate", interval=INTERVALS["paired_t"], n_pairs=40,
          estimand="mean over tasks of the per-task pass-rate difference (pass@1), B − A", metric="success"):
    k = len(estimates)
    return pd.DataFrame({"configuration": [f"c{i}" for i in range(k)], "tier": "primary", "metric": metric,
                         "label": "pass@1", "unit": "pp", "scale": scale, "estimand": estimand, "interval": interval,
                         "n_pairs": n_pairs, "estimate": estimates, "ci_low": lows, "ci_high": highs, "note": None})


def test_the_standard_error_of_a_t_interval_is_recovered_exactly():
    se = np.array([0.03, 0.05, 0.04])
    y = np.array([0.1, 0.2, 0.05])
    q = sps.t.ppf(0.975, 39)
    pooled = pool_comparisons(_rows(y, y - q * se, y + q * se), "success")
    assert pooled.effects["se"].tolist() == pytest.approx(se.tolist(), rel=1e-12)
    ref = meta.random_effects(y, se**2).iloc[0]
    assert pooled.primary["estimate"] == pytest.approx(ref["estimate"]) and pooled.primary["role"] == "primary"
    assert list(pooled.methods.columns) == METHOD_COLUMNS and len(pooled.methods) == 3
    assert pooled.effects["weight"].sum() == pytest.approx(100.0)


def test_ratio_rows_pool_as_log_ratios_and_come_back_as_percent_changes():
    """Ratio rows are % changes (−28.7); pooled on log(1 + x/100) with the normal quantile (inverted Wilcoxon
    intervals are not t intervals), and the pooled estimate returns as a % change."""
    logs = np.log([0.7, 0.8, 0.75, 0.9])
    se = np.array([0.05, 0.08, 0.06, 0.1])
    z = sps.norm.ppf(0.975)
    pct = lambda x: 100 * np.expm1(x)  # noqa: E731
    rows = _rows(pct(logs), pct(logs - z * se), pct(logs + z * se), scale="ratio", interval=INTERVALS["ratio"],
                 estimand="typical per-task change, 100 (exp(HL of log B/A) − 1) %", metric="total_tokens")
    pooled = pool_comparisons(rows, "total_tokens")
    assert pooled.scale == "log_ratio" and pooled.effects["se"].tolist() == pytest.approx(se.tolist(), rel=1e-12)
    assert (pooled.effects["se_from"] == "normal approximation of the interval").all()
    ref = meta.random_effects(logs, se**2).iloc[0]
    assert pooled.primary["mu"] == pytest.approx(ref["estimate"])
    assert pooled.primary["estimate"] == pytest.approx(pct(ref["estimate"]))
    assert pooled.primary["pi_hts_high"] == pytest.approx(pct(ref["pi_hts_high"]))
    assert pooled.primary["pi_high"] == pytest.approx(pct(meta.prediction_interval(logs, se**2).iloc[0]["pi_high"]))


@pytest.mark.parametrize("change, says", [
    (lambda r: r.assign(estimand=["a", "a", "b"]), "different estimands"),
    (lambda r: r.assign(scale=["pass_rate", "pass_rate", "rate"]), "different scales"),
    (lambda r: r.assign(configuration=["c0", "c0", "c1"]), "c0 has 2 comparisons"),
    (lambda r: r.assign(metric="total_tokens"), "no comparison of it"),
    (lambda r: r.drop(columns="configuration"), "no 'configuration' column"),
])
def test_rows_that_are_not_one_estimand_are_refused_in_one_line(change, says):
    rows = change(_rows([0.1, 0.2, 0.15], [0.0, 0.1, 0.05], [0.2, 0.3, 0.25]))
    with pytest.raises(PoolingError, match=says) as err:
        pool_comparisons(rows, "success")
    assert "\n" not in str(err.value)


def test_a_declared_scale_the_rows_are_not_on_is_refused():
    with pytest.raises(PoolingError, match="cannot pool success on the log_ratio scale: .* pooled as rate_difference"):
        pool_comparisons(_rows([0.1, 0.2], [0.0, 0.1], [0.2, 0.3]), "success", scale="log_ratio")


def test_rows_without_a_usable_interval_are_left_out_and_named():
    rows = _rows([0.1, 0.2, 0.15, np.nan, 0.3], [0.0, 0.1, 0.05, np.nan, 0.3], [0.2, 0.3, 0.25, np.nan, 0.3])
    rows.loc[3, "note"] = "no task with an outcome under both profiles"
    pooled = pool_comparisons(rows, "success")
    assert pooled.k == 3 and pooled.excluded == ["c3: no estimate (no task with an outcome under both profiles)",
                                                 "c4: its interval has zero width (every paired task differs by the "
                                                 "same amount)"]
    with pytest.raises(PoolingError, match="at least 2 configurations .* got 1"):
        pool_comparisons(rows.iloc[[0, 3]], "success")


def test_the_sensitivity_tier_is_not_pooled_beside_the_planned_row():
    rows = _rows([0.1, 0.2], [0.0, 0.1], [0.2, 0.3])
    again = rows.assign(tier="sensitivity", estimand="difference in resolve rate (task majority), B − A", scale="rate")
    assert pool_comparisons(pd.concat([rows, again]), "success").k == 2


def test_meta_regression_runs_from_ten_configurations_on_declared_moderators():
    rng = np.random.default_rng(3)
    k = MIN_REGRESSION
    harness = np.array(["codex", "openhands"] * (k // 2))
    y = 0.1 + 0.08 * (harness == "openhands") + 0.02 * rng.standard_normal(k)
    se = np.full(k, 0.03)
    q = sps.t.ppf(0.975, 39)
    rows = _rows(y, y - q * se, y + q * se)
    mods = pd.DataFrame({"harness": harness}, index=rows["configuration"])
    pooled = pool_comparisons(rows, "success", moderators=mods)
    ref = meta.meta_regression(y, se**2, (harness == "openhands").astype(float), ["harness=openhands"])
    assert pooled.regression is not None
    pd.testing.assert_frame_equal(pooled.regression.coefficients, ref.coefficients, rtol=1e-9)
    assert pooled.regression_note.startswith("exploratory")
    fewer = pool_comparisons(rows.iloc[:9], "success", moderators=mods)
    assert fewer.regression is None and fewer.regression_note == ("no meta-regression: it needs at least 10 "
                                                                   "configurations, 9 have an estimate")


# --------------------------------------------------------------------------- SkillsBench's results registry


@pytest.fixture(scope="module")
def registry_rows(skillsbench_registry):
    m = trials_table(skillsbench_registry, workers=1, config=MetricsConfig(success_rule="reward > 0")).frame
    return compare_configurations(m, load_plan(PLAN_ALL), configuration_pairs(m, "No Skills", "With Skills"))


@pytest.fixture(scope="module")
def expected(skillsbench_registry):
    return json.loads((skillsbench_registry / "expected.json").read_text())


@pytest.mark.real_fixtures
def test_registry_pooled_numbers_equal_expected_and_statsmodels(registry_rows, expected):
    pooled = pool_comparisons(registry_rows, "success")
    assert pooled.k == 6 and not pooled.excluded
    ref = expected["random_effects"]  # DerSimonian-Laird: pooled 0.1596, tau^2 0.00197, I^2 0.525
    dl = pooled.methods.set_index("role").loc["comparison"]
    assert dl["estimate"] == pytest.approx(ref["mu"], rel=1e-10)
    assert dl["se"] == pytest.approx(ref["se"], rel=1e-10)
    assert [dl["ci_low"], dl["ci_high"]] == pytest.approx(ref["ci95"], rel=1e-10)
    assert dl["tau2"] == pytest.approx(ref["tau2"], rel=1e-8)
    assert (dl["I2"], dl["Q"], dl["Q_df"], dl["Q_p"]) == (pytest.approx(ref["I2"], rel=1e-10), pytest.approx(ref["Q"], rel=1e-10),
                                                          ref["Q_df"], pytest.approx(ref["Q_p"], rel=1e-8))
    # expected.json's prediction interval is Higgins-Thompson-Spiegelhalter's (DL tau^2, t on k - 2 df), shown beside.
    assert [dl["pi_hts_low"], dl["pi_hts_high"]] == pytest.approx(ref["prediction_interval95"], rel=1e-9)
    # statsmodels on the per-configuration effects and variances of expected.json.
    y = np.array([c["mean_difference"] for c in expected["per_config"]])
    v = np.array([c["se_difference"] ** 2 for c in expected["per_config"]])
    pm_ref = combine_effects(y, v, method_re="pm", use_t=True)
    pm = pooled.methods.set_index("role").loc["sensitivity"]
    assert (pm["estimate"], pm["tau2"]) == (pytest.approx(pm_ref.mean_effect_re, rel=1e-10),
                                            pytest.approx(pm_ref.tau2, rel=1e-7))
    assert [pm["ci_low"], pm["ci_high"]] == pytest.approx(list(pm_ref.conf_int(use_t=True)[3]), rel=1e-8)
    dl_ref = combine_effects(y, v, method_re="dl")
    assert (dl["I2"], dl["tau2"]) == (pytest.approx(dl_ref.i2, rel=1e-10), pytest.approx(dl_ref.tau2, rel=1e-8))
    # REML with HKSJ: the same effects and variances through the procedure checked against metafor (test_meta.py).
    reml = meta.random_effects(y, v).iloc[0]
    p = pooled.primary
    assert (p["estimate"], p["ci_low"], p["ci_high"], p["pi_hts_low"], p["pi_hts_high"], p["tau2"]) == pytest.approx(
        (reml["estimate"], reml["ci_low"], reml["ci_high"], reml["pi_hts_low"], reml["pi_hts_high"], reml["tau2"]),
        rel=1e-9)
    # The reported prediction interval: the bootstrap on the same effects and variances, one for every row.
    boot = meta.prediction_interval(y, v).iloc[0]
    assert (pooled.methods["pi_low"].tolist(), pooled.methods["pi_high"].tolist()) == (
        pytest.approx([boot["pi_low"]] * 3, rel=1e-9), pytest.approx([boot["pi_high"]] * 3, rel=1e-9))
    assert (pooled.methods["pi_draws"] == meta.PI_DRAWS).all() and (pooled.methods["pi_seed"] == meta.PI_SEED).all()
    assert p["pi_low"] < p["pi_hts_low"] and p["pi_high"] > p["pi_hts_high"]  # wider: tau^2 is uncertain with 6
    tau_ci = meta.tau2_interval(y, v).iloc[0]
    assert (p["tau2_low"], p["tau2_high"]) == pytest.approx((tau_ci["tau2_low"], tau_ci["tau2_high"]), rel=1e-9)


@pytest.mark.real_fixtures
def test_registry_forest_plot_is_reproducible_and_says_what_it_shows(registry_rows, tmp_path):
    pooled = pool_comparisons(registry_rows, "success")
    rows = figures.pooled_forest_rows(pooled)
    assert list(rows["kind"]) == ["entry"] * 6 + ["pooled", "prediction"]
    assert rows.loc[rows["kind"] == "pooled", "estimate"].iloc[0] == pytest.approx(100 * pooled.primary["estimate"])
    digests = []
    for name in ("a", "b"):
        fig = figures.plot_pooled_forest(pooled, simulated=False)
        paths = figures.save_figure(fig, tmp_path, name)
        plt.close(fig)
        digests.append([hashlib.sha256(p.read_bytes()).hexdigest() for p in paths])
    assert digests[0] == digests[1]  # byte-identical PNG and PDF from the same numbers
    fig = figures.plot_pooled_forest(pooled, simulated=True)
    ax = fig.axes[0]
    assert ax.get_title().endswith("(simulated data)") and "(pp)" in ax.get_xlabel() and "I² = 52 %" in ax.get_xlabel()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[:6] == sorted(registry_rows["configuration"].unique()) and labels[-1] == "95% prediction interval"
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
