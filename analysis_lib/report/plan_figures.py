"""Figures of the pre-registered report (RESULTS.md) beyond the forest plot: exploratory distributions.

Same style as :mod:`analysis_lib.report.figures` (seaborn colorblind palette, one column wide, no
random draw, PNG saved without version or date metadata); titles say "simulated data" when the
runs are simulated.
"""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..core import registry
from ..core.fileio import atomic_write_bytes
from .figures import PNG_METADATA, WIDTH_IN, profile_colors, set_style, title

__all__ = ["plot_exploratory", "save_png"]


def save_png(fig: plt.Figure, out_dir: str | Path, name: str) -> Path:
    """``out_dir/name.png``, atomically, without date/version metadata (byte-reproducible)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata=PNG_METADATA, bbox_inches="tight", dpi=200)
    return atomic_write_bytes(Path(out_dir) / f"{name}.png", buf.getvalue())


def plot_exploratory(metrics: pd.DataFrame, columns: list[str], simulated: bool, colors: dict | None = None) -> plt.Figure:
    """Exploratory metrics per profile: each trial a point, the median a bar (one panel per column)."""
    set_style()
    present = [c for c in columns if c in metrics and pd.to_numeric(metrics[c], errors="coerce").notna().any()]
    fig, axes = plt.subplots(max(len(present), 1), 1, figsize=(WIDTH_IN, 0.5 + 0.9 * max(len(present), 1)), squeeze=False)
    profiles = sorted(metrics["profile"].astype(str).unique())
    colors = colors or profile_colors(profiles)
    for ax, col in zip(axes[:, 0], present, strict=True):
        for i, p in enumerate(profiles):
            v = pd.to_numeric(metrics.loc[metrics["profile"].astype(str) == p, col], errors="coerce").dropna().to_numpy()
            if not len(v):
                continue
            # Evenly spaced jitter instead of a random one: the same data give the same figure.
            jitter = np.linspace(-0.15, 0.15, len(v)) if len(v) > 1 else np.zeros(1)
            ax.scatter(v, i + jitter, s=5, color=colors[p], alpha=0.6)
            ax.plot([np.median(v)] * 2, [i - 0.3, i + 0.3], color="0.1", linewidth=1.2)
        ax.set_yticks(range(len(profiles)), profiles, fontsize=6)
        ax.set_xlabel(registry.metric(col).axis_label if registry.is_known(col) else col, fontsize=7)
    axes[0, 0].set_title(title("Exploratory metrics per trial (bar = median)", simulated))
    fig.tight_layout()
    return fig
