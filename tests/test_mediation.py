"""The mediation-style decomposition: task fixed-effects regressions (statsmodels as the reference) and its bootstrap."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf

from analysis_lib.inference.beside_itt import mediation as MD


def _data(seed: int = 3, n_tasks: int = 20, reps: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        level = rng.normal()
        for z in (0, 1):
            for _ in range(reps):
                m = 6 + level - 2.0 * z + rng.normal()
                y = 0.3 * level + 0.1 * z - 0.05 * m + rng.normal(scale=0.3)
                rows.append({"task": f"t{t:02d}", "z": z, "m": m, "y": y})
    return pd.DataFrame(rows)


def test_the_decomposition_is_three_fixed_effects_regressions():
    d = _data()
    est = MD.decompose(d["y"], d["m"], d["z"], d["task"], n_boot=200)
    total = smf.ols("y ~ z + C(task)", d).fit().params["z"]  # statsmodels 0.15 OLS with task dummies
    a = smf.ols("m ~ z + C(task)", d).fit().params["z"]
    out = smf.ols("y ~ z + m + C(task)", d).fit().params
    assert est["total_effect"][0] == pytest.approx(total, abs=1e-10)
    assert est["arm_on_mediator"][0] == pytest.approx(a, abs=1e-10)
    assert est["mediator_on_outcome"][0] == pytest.approx(out["m"], abs=1e-10)
    assert est["direct_effect"][0] == pytest.approx(out["z"], abs=1e-10)
    assert est["indirect_effect"][0] == pytest.approx(a * out["m"], abs=1e-10)
    assert est["total_effect"][0] == pytest.approx(est["direct_effect"][0] + est["indirect_effect"][0], abs=1e-10)
    assert est["share_mediated"][0] == pytest.approx(a * out["m"] / total)


def test_the_bootstrap_refits_on_resampled_tasks():
    d = _data(seed=5, n_tasks=8)
    n_boot, seed = 50, 11
    est = MD.decompose(d["y"], d["m"], d["z"], d["task"], n_boot=n_boot, seed=seed)
    # The same resamples drawn explicitly: each task copied as often as the multinomial says, each copy its own
    # cluster, and the three models refitted with statsmodels.
    tasks = pd.factorize(d["task"].astype(str))[1]
    counts = np.random.default_rng(seed).multinomial(len(tasks), np.full(len(tasks), 1 / len(tasks)), size=n_boot)
    indirect = []
    for row in counts:
        parts = [d[d["task"] == t].assign(task=f"{t}#{k}") for t, c in zip(tasks, row, strict=True) for k in range(c)]
        r = pd.concat(parts)
        a = smf.ols("m ~ z + C(task)", r).fit().params["z"]
        b = smf.ols("y ~ z + m + C(task)", r).fit().params["m"]
        indirect.append(a * b)
    assert est["indirect_effect"][1:] == pytest.approx(tuple(np.percentile(indirect, [2.5, 97.5])), abs=1e-9)


def test_the_table_on_a_pair_names_each_estimand_and_refuses_too_few_tasks():
    d = _data(n_tasks=6)
    metrics = pd.DataFrame({"profile": np.where(d["z"] == 1, "mcp", "base"), "task_id": d["task"],
                            "success": d["y"] > d["y"].median(), "total_tokens": np.exp(10 + d["y"]),
                            "files_read": d["m"].round(), "exploration_breadth": d["m"].round() + 1,
                            "steps_to_first_edit": np.nan})
    t = MD.mediation_table(metrics, [("base", "mcp")], n_boot=200)
    assert list(t.columns) == MD.COLUMNS
    est = t[(t["outcome"] == "total_tokens") & (t["mediator"] == "files_read")].set_index("estimand")
    assert set(est.index) == set(MD.ESTIMANDS) and est.loc["total_effect", "unit"] == "%"
    raw = MD.decompose(np.log(metrics["total_tokens"]), metrics["files_read"], (metrics["profile"] == "mcp").astype(float),
                       metrics["task_id"], n_boot=200)
    assert est.loc["total_effect", "estimate"] == pytest.approx(100 * np.expm1(raw["total_effect"][0]))
    none = t[t["mediator"] == "steps_to_first_edit"]
    assert none["note"].str.startswith("not estimable: 0 tasks").all()
