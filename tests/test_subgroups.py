"""Subgroup effects: DerSimonian-Laird tau^2 and pooled effect as statsmodels computes them; shrinkage pulls noise in."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis_lib.inference import subgroups


def _trials(effects: dict[str, float], tasks_per_group: int = 6, seed: int = 0) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.default_rng(seed)
    rows, groups = [], {}
    for gname, lift in effects.items():
        for t in range(tasks_per_group):
            tid = f"{gname}-{t}"
            groups[tid] = gname
            base = rng.uniform(0.2, 0.7)
            for prof, p in (("a", base), ("b", min(base + lift, 1.0))):
                for _rep in range(3):
                    rows.append({"profile": prof, "task_id": tid, "infra_error": False, "success": bool(rng.random() < p)})
    return pd.DataFrame(rows), pd.Series(groups)


def test_tau2_and_overall_effect_match_statsmodels_dersimonian_laird():
    from statsmodels.stats.meta_analysis import combine_effects

    trials, groups = _trials({"r1": 0.0, "r2": 0.3, "r3": 0.1, "r4": -0.1, "r5": 0.25})
    out = subgroups.subgroup_effects(trials, groups, "a", "b")
    ref = combine_effects(out["raw"].to_numpy(), out["se"].to_numpy() ** 2, method_re="dl")
    assert out["tau2"].iloc[0] == pytest.approx(ref.tau2, rel=1e-9, abs=1e-12)
    assert out["overall"].iloc[0] == pytest.approx(ref.mean_effect_re, rel=1e-9)


def test_shrinkage_pulls_every_group_towards_the_overall_effect_and_reads_groups_from_csv(tmp_path):
    trials, groups = _trials({f"r{i}": 0.1 for i in range(6)}, tasks_per_group=3, seed=3)
    out = subgroups.subgroup_effects(trials, groups, "a", "b")
    spread_raw, spread_shrunk = out["raw"].std(), out["shrunk"].std()
    assert spread_shrunk <= spread_raw and ((out["shrinkage"] >= 0) & (out["shrinkage"] <= 1)).all()
    assert (np.abs(out["shrunk"] - out["overall"]) <= np.abs(out["raw"] - out["overall"]) + 1e-12).all()
    path = tmp_path / "groups.csv"
    groups.rename_axis("task_id").rename("group").reset_index().to_csv(path, index=False)
    assert subgroups.read_task_groups(path).to_dict() == groups.to_dict()
    (tmp_path / "bad.csv").write_text("task,repo\nx,y\n")
    with pytest.raises(ValueError, match="bad.csv: task groups need the columns task_id and group"):
        subgroups.read_task_groups(tmp_path / "bad.csv")
