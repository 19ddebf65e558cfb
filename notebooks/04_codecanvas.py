# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 CodeCanvas
#
# For trials that used the CodeCanvas MCP server, its `state.json` (evidence, claims, decisions,
# impact analyses) is read beside the trajectory: did the agent edit inside the blast radius it
# analysed (blast radius edit rate), were its edits backed by evidence (informed editing score), how
# deep did it deliberate? Definitions are in `analysis_lib.codecanvas`. Trials without a canvas have
# empty CodeCanvas columns.

# %%
import os

# Offline litellm price map and quiet logs, before anything can import litellm (see NOTES in docs/notebooks.md).
for key, value in {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}.items():
    os.environ.setdefault(key, value)

# %% tags=["parameters"]
project_root: str = ""  # project folder; empty: found upward from the working directory (pyproject.toml)
output_dir: str = "results/sample"  # analysis files passed between notebooks, relative to the project root
figures_dir: str = "figures"  # where figures are written (PNG and PDF), relative to the project root
staging_dir: str = ""  # set by the paper pipeline: where this run writes until its outputs replace the previous set (empty: in place)

# %%
from pathlib import Path

import pandas as pd
from IPython.display import Markdown, display

from analysis_lib.report import notebook_params, outputs

notebook_params.check_parameters(globals())  # a wrong type fails here, naming the parameter
project_root = notebook_params.find_project_root(project_root)
paths = outputs.output_paths(project_root, output_dir, figures_dir=figures_dir, staging_dir=staging_dir)
import matplotlib.pyplot as plt

from analysis_lib.report import figures, tables

# %%
from analysis_lib import Study

# The study notebook 01 resolved; its trials table already holds every CodeCanvas column (nothing is read again).
study = Study.load(paths.analytics)
simulated = study.simulated
if simulated:
    display(Markdown("> **SIMULATED DATA**: these runs come from the seeded simulator; the numbers are not findings."))

# %% [markdown]
# ## CodeCanvas metrics per trial
#
# One row per trial (identity columns and every CodeCanvas metric), taken from the study's trials table,
# where notebook 01 measured them; it is written to `codecanvas/codecanvas_table.csv` for the paper notebook.

# %%
from analysis_lib.codecanvas import write_codecanvas_outputs
from analysis_lib.codecanvas.metrics import codecanvas_columns
from analysis_lib.core import outputs as files
from analysis_lib.core.fileio import atomic_write_csv

table = codecanvas_columns(study.metrics)
paths.codecanvas.mkdir(parents=True, exist_ok=True)
atomic_write_csv(paths.codecanvas / files.CODECANVAS_TABLE, table)
metric_cols = [c for c in table.columns if c not in ("profile", "task_id", "repetition", "run_id", "trial_path")]
with_canvas = table[table[metric_cols].notna().any(axis=1)]
print(f"{len(with_canvas)} of {len(table)} trials have CodeCanvas data")
if len(with_canvas):
    display(tables.profile_summary(with_canvas, metric_cols).dropna(subset=["mean"]).round(3))

# %% [markdown]
# ## Figures
#
# Per trial, the three headline CodeCanvas metrics of each profile that used it; the bar marks the
# median.

# %%
cc_metrics = ["informed_editing_score", "blast_radius_edit_rate", "deliberation_depth"]
if any(c in table and table[c].notna().any() for c in cc_metrics):
    fig = figures.plot_codecanvas(table, cc_metrics, simulated, figures.profile_colors(study.arms))
    figures.save_figure(fig, paths.figures, "codecanvas")
    display(fig)
    plt.close(fig)
else:
    figures.remove_figure(paths.figures, "codecanvas")
    print("no CodeCanvas data: no CodeCanvas figure")

# %% [markdown]
# ## Comparison report
#
# `write_codecanvas_outputs` writes `codecanvas_comparison.md` (per profile: mean and median of each
# metric) and `codecanvas_analysis.json` (per-trial metrics).

# %%
write_codecanvas_outputs([], study.metrics, paths.codecanvas, simulated=simulated)
report = paths.codecanvas / files.CODECANVAS_COMPARISON
if report.exists():
    display(Markdown(report.read_text(encoding="utf-8")))
