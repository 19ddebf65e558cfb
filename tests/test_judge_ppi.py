"""Between-arm contrasts of judge labels: the PPI interval covers the truth where the raw one does not."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from side_envs import locked_env, run_json

from analysis_lib.judge.ppi import arm_contrasts, format_contrasts_md, ppi_mean


def simulate(rng, n_units=400, n_labelled=80, p=(0.5, 0.2), sens=0.6, fpr=0.2):
    """Two arms; the judge says 'c' for 60 % of true c and 20 % of the rest (so it shrinks differences)."""
    rows = []
    for arm, prev in zip(("mcp", "base"), p, strict=True):
        truth = rng.random(n_units) < prev
        says = np.where(truth, rng.random(n_units) < sens, rng.random(n_units) < fpr)
        labelled = set(rng.choice(n_units, n_labelled, replace=False).tolist())
        for i in range(n_units):
            rows.append(
                {"arm": arm, "judge": "c" if says[i] else "other", "human": ("c" if truth[i] else "other") if i in labelled else None}
            )
    return pd.DataFrame(rows)


def test_ppi_covers_the_true_difference_where_the_judge_only_interval_does_not():
    rng = np.random.default_rng(2024)
    truth = 0.5 - 0.2
    hits_ppi = hits_raw = 0
    reps = 300
    for _ in range(reps):
        row = arm_contrasts(simulate(rng), baseline="base", classes=["c"]).iloc[0]
        hits_ppi += row["ppi_lo"] <= truth <= row["ppi_hi"]
        hits_raw += row["judge_lo"] <= truth <= row["judge_hi"]
    # Binomial sd of a 95 % coverage over 300 reps is 1.3 points: 0.91..0.99 is a generous band.
    assert 0.91 <= hits_ppi / reps <= 0.99
    # The judge shrinks the difference to 0.4 * 0.3 = 0.12: its own interval almost never holds 0.3.
    assert hits_raw / reps < 0.05


def test_ppi_with_a_perfect_judge_equals_the_judge_and_the_table_reads():
    rng = np.random.default_rng(0)
    df = simulate(rng, n_units=100, n_labelled=20, sens=1.0, fpr=0.0)
    t = arm_contrasts(df, baseline="base")
    row = t[t["class"] == "c"].iloc[0]
    # No error to correct: PPI is the judge's prevalence on the units no person labelled.
    unl = df[df["human"].isna()]
    expected = (unl[unl["arm"] == "mcp"]["judge"] == "c").mean() - (unl[unl["arm"] == "base"]["judge"] == "c").mean()
    assert row["ppi_diff"] == pytest.approx(expected)
    assert row["labelled_arm"] == row["labelled_baseline"] == 20 and row["n_arm"] == 100
    md = format_contrasts_md(t)
    assert md.count("| mcp - base |") == 2 and "PPI-corrected difference" in md


def test_ppi_mean_by_hand_and_failed_judgements_are_counted():
    # theta = mean(f_unlabelled) + mean(y - f) = 0.5 + (1/3) = 0.8333
    est = ppi_mean([1, 1, 0], [1, 0, 0], [1, 0, 1, 0])
    assert est.value == pytest.approx(0.5 + 1 / 3)
    assert est.se == pytest.approx(math.sqrt(np.var([1, 0, 1, 0], ddof=1) / 4 + np.var([0, 1, 0], ddof=1) / 3))
    df = pd.DataFrame(
        {
            "arm": ["a"] * 4 + ["b"] * 4,
            "judge": ["c", None, "c", "d", "c", "d", "d", None],
            "human": ["c", "c", None, "d", "c", "c", None, None],
        }
    )
    row = arm_contrasts(df, baseline="a", classes=["c"]).iloc[0]
    assert row["failed"] == 2 and row["n_arm"] == 3 and row["labelled_arm"] == 2
    with pytest.raises(ValueError, match="baseline arm 'zz'"):
        arm_contrasts(df, baseline="zz")


PPI_PY = """
import json, sys
import numpy as np
import ppi_py
d = json.load(sys.stdin)
y, f, fu = (np.asarray(d[k], dtype=float) for k in ("y", "f", "fu"))
lo, hi = ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05, lam=1)  # lam=1: plain PPI, no power tuning
point = ppi_py.ppi_mean_pointestimate(y, f, fu, lam=1)
print(json.dumps([float(np.ravel(v)[0]) for v in (point, lo, hi)]))
"""


@pytest.mark.slow  # ppi_python's side environment (tests/side_envs.py): built once, 1-3 min and 660 MB (numba, scikit-learn)
def test_ppi_matches_the_ppi_python_package():
    """ppi_python, the method's authors' package, in a side environment of its own (it brings numba and scikit-learn)."""
    rng = np.random.default_rng(5)
    y = (rng.random(60) < 0.4).astype(float)
    f = np.where(y == 1, rng.random(60) < 0.7, rng.random(60) < 0.2).astype(float)
    fu = (rng.random(500) < 0.35).astype(float)
    point, lo, hi = run_json(locked_env("ppi_python"), PPI_PY, {"y": y.tolist(), "f": f.tolist(), "fu": fu.tolist()})
    # ppi_python 0.2.3 on these 60 labelled and 500 unlabelled units: 0.394667, 95 % interval [0.269525, 0.519809].
    assert (point, lo, hi) == pytest.approx((0.394667, 0.269525, 0.519809), abs=1e-6)
    est = ppi_mean(y, f, fu)
    assert est.value == pytest.approx(point, abs=1e-12)
    # ppi_python divides both variances by n (ddof=0), ppi_mean by n - 1: the same centre, ours 0.95e-3 wider at each end.
    assert est.lo == pytest.approx(lo, abs=1.5e-3) and est.hi == pytest.approx(hi, abs=1.5e-3) and est.lo < lo and est.hi > hi
