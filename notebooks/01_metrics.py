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
# # 01 Metrics (Layer 1) and the design audit
#
# Every trial is measured deterministically from its own files: the ATIF trajectory (steps, tool
# calls, token usage), the verifier's CTRF report and reward, and the harness result. The metrics
# are defined once in `analysis_lib.metrics.trial_metrics` (one metric id everywhere: function, column, test, TeX
# macro comment). Unreadable inputs become rows of `errors.csv` and the rest goes on. A study file
# (`study`) says which trials form each arm when the runs do not; the design audit then lists, arm by
# arm, what the comparisons will rest on.

# %%
import os

# Offline litellm price map and quiet logs, before anything can import litellm (see NOTES in docs/notebooks.md).
for key, value in {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}.items():
    os.environ.setdefault(key, value)

# %% tags=["parameters"]
project_root: str = ""  # project folder; empty: found upward from the working directory (pyproject.toml)
output_dir: str = "results/sample"  # analysis files passed between notebooks, relative to the project root
runs_dir: str = "runs/sample"  # runs to analyse, relative to the project root
seed: int = 0  # seed for any sampling (recorded in aggregate_metrics.json)
workers: int = 1  # processes for ingest (1 keeps the notebook light; the result does not depend on it)
use_cache: bool = False  # reuse per-trial metrics cached by an earlier run (faster on big folders; stale after a metric code change)
study_file: str = ""  # study file (YAML) declaring arms, task ids, reruns and the success rule (docs/studies.md); empty: the readers' default profiles
plan_file: str = "params/analysis_plan.yaml"  # the pre-registered plan; params/analysis_plan_all_repetitions.yaml uses every repetition
baseline: str = ""  # baseline profile (empty: the plan's, else the study file's, else index.json's, else the first in sort order)
staging_dir: str = ""  # set by the paper pipeline: where this run writes until its outputs replace the previous set (empty: in place)

# %%
from pathlib import Path

import pandas as pd
from IPython.display import Markdown, display

from analysis_lib.report import notebook_params, outputs

notebook_params.check_parameters(globals())  # a wrong type fails here, naming the parameter
project_root = notebook_params.find_project_root(project_root)
paths = outputs.output_paths(project_root, output_dir, staging_dir=staging_dir)

# %% [markdown]
# ## Ingest, measure and resolve the study
#
# `analysis_lib.analyse` discovers every trial, parses it leniently, places it in its arm (the study
# file's rules, else the reader's default profile), scores it by the study's success rule and computes
# one row of metrics per trial. The result is the study, resolved once: its arms, the baseline and where
# it was declared, the plan checked against its record, and the design audit. It is written to
# `study.json` beside the tables it names (`metrics_detail.csv`, `errors.csv`, `design_audit.csv`, ...),
# with the per-profile `metrics_summary.csv` and `aggregate_metrics.json`; notebooks 02-05 load it and
# decide none of it again.

# %%
from analysis_lib import analyse
from analysis_lib.report.audit import audit_frames, audit_markdown, data_banner

runs = Path(project_root) / runs_dir
if not runs.is_dir():
    raise FileNotFoundError(f"runs_dir {runs_dir!r} is not a folder (paths are relative to the project root)")
# The cache is keyed by the input files and the package version, not by the metric code: off by default,
# so that nbval sees every change of a metric's definition.
study = analyse(runs, paths.analytics, seed=seed, workers=workers, cache=use_cache, cache_dir=paths.cache, progress=False,
                design=Path(project_root) / study_file if study_file else None, plan=Path(project_root) / plan_file,
                baseline=baseline or None, runs_label=runs_dir)
study.require_baseline()  # a declared baseline that is not an arm stops here, naming where it was declared
metrics = study.metrics
banner = data_banner(study.simulated, study.source.model_dump() if study.source else None)
print(f"runs: {runs_dir} ({'SIMULATED sample runs' if study.simulated else 'real runs'})")
if banner:
    display(Markdown(f"> **{banner}**"))
print(f"{len(metrics)} trials, {metrics['profile'].nunique()} profiles, {metrics['task_id'].nunique()} tasks; "
      f"{len(study.errors)} input problems recorded in errors.csv; {study.baseline.line()}")

# %% [markdown]
# ## Design audit
#
# Per arm: trials, tasks and repetitions, reruns, infrastructure errors, tasks in one arm only, complete
# pairs, MCP tools offered and used, where the token counts come from and how far their sources
# disagree, dataset versions and when each arm ran. The comparisons (notebook 02) use complete pairs only.
# A study whose study file declares configurations is audited within each configuration.

# %%
from analysis_lib.report.configurations import study_audit_lines

# A study with configurations adds one row per configuration (pairs, errors, uptake, time limits within each).
display(Markdown("\n".join(audit_markdown(*audit_frames(study.audit)) + study_audit_lines(study))))

# %% [markdown]
# ## Per-profile summary
#
# Pass rates (per trial) exclude infrastructure errors; tokens and cost are per trial (mean and median over trials).

# %%
summary = study.summary
cols = ["profile", "n_trials", "n_tasks", "n_infra_errors", "pass_rate", "total_tokens_mean",
        "total_tokens_median", "total_cost_usd_mean", "tool_calls_count_mean", "mcp_tool_calls_mean", "elapsed_sec_median"]
display(summary[[c for c in cols if c in summary]].round(3))

# %% [markdown]
# ## Input problems
#
# Each unreadable or suspicious input is one row (path relative to the runs folder, stage, message).

# %%
display(study.errors.head(10)) if len(study.errors) else print("no input problems")
