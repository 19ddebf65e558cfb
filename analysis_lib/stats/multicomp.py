"""Multiple-comparison adjustments: Holm's step-down and Benjamini-Hochberg."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["holm", "adjust_p"]


def holm(p_values: ArrayLike) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error control); NaN entries stay NaN.

    With the m non-missing p-values sorted ``p_(1) <= ... <= p_(m)``, the adjusted value is
    ``max_{j <= i} min(1, (m - j + 1) p_(j))``. Reference: Holm (1979), Scandinavian Journal of
    Statistics 6:65-70; statsmodels ``multipletests(method="holm")``.

    Examples
    --------
    statsmodels' ``multipletests([0.01, 0.04, 0.03, 0.20, 0.002], method="holm")[1]`` gives
    [0.04, 0.09, 0.09, 0.2, 0.01]:

    >>> [round(float(p), 10) for p in holm([0.01, 0.04, 0.03, 0.20, 0.002])]
    [0.04, 0.09, 0.09, 0.2, 0.01]
    """
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    m = int(ok.sum())
    if m == 0:
        return out
    pv = p[ok]
    order = np.argsort(pv, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * pv[order]))
    res = np.empty(m)
    res[order] = adj
    out[ok] = res
    return out


def adjust_p(p_values, method: str) -> np.ndarray:
    """Multiplicity-adjusted p-values; NaN stays NaN.

    ``holm``: :func:`holm` (Holm 1979). ``fdr_bh``: Benjamini & Hochberg (1995),
    JRSS B 57:289-300, through statsmodels ``multipletests(method="fdr_bh")``. ``none``: unchanged.

    Examples
    --------
    statsmodels ``multipletests([0.01, 0.04, 0.03], method="fdr_bh")[1]`` gives ``[0.03, 0.04, 0.04]``:

    >>> adjust_p([0.01, 0.04, 0.03], "fdr_bh").round(6).tolist()
    [0.03, 0.04, 0.04]
    """
    p = np.asarray(p_values, dtype=float)
    if method == "none":
        return p.copy()
    if method == "holm":
        return holm(p)
    if method == "fdr_bh":
        from statsmodels.stats.multitest import multipletests  # 0.9 s to import, for this one correction

        out = np.full(p.shape, np.nan)
        ok = ~np.isnan(p)
        if ok.any():
            out[ok] = multipletests(p[ok], method="fdr_bh")[1]
        return out
    raise ValueError(f"correction must be 'holm', 'fdr_bh' or 'none', got {method!r}")
