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
# # 00 Run the benchmark (plan by default)
#
# The A/B benchmark runs every task under every condition (the same agent with and without MCP
# tools) with repeated trials, in a **blocked, randomized, paired schedule**: each pair of trials of
# one task runs back to back in a seeded random order, so drift in the model service or the machine
# hits both conditions alike. A budget guardrail stops before a pair whose projected cost would pass
# 90 % of the phase budget.
#
# By default this notebook only **plans**: it shows the schedule and the projected spend and runs
# nothing (`dry_run = True`). Real runs use `python -m analysis_lib bench full ...`
# (docs/benchmark-runner.md); their run folders are what notebook 01 reads.

# %%
import os

# Offline litellm price map and quiet logs, before anything can import litellm (see NOTES in docs/notebooks.md).
for key, value in {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}.items():
    os.environ.setdefault(key, value)

# %% tags=["parameters"]
project_root: str = ""  # project folder; empty: found upward from the working directory (pyproject.toml)
output_dir: str = "results/sample"  # analysis files passed between notebooks, relative to the project root
manifest: str = "params/example_manifest.json"  # benchmark manifest (tasks, conditions, agent), relative to the project root; empty: runs made elsewhere, nothing to plan
runs_per_condition: int = 3  # repetitions of each task under each condition
phase_budget_usd: float = 1200.0  # spend limit of this phase; no pair starts past 90 % of it
schedule_seed: int = 20261121  # seed of the randomized schedule (recorded in the plan)
dry_run: bool = True  # True: plan only; False: run the benchmark (spends money)
bench_runs_dir: str = "runs/benchmark"  # where a real run writes its run folders, relative to the project root
plan_file: str = "params/analysis_plan.yaml"  # the pre-registered plan; params/analysis_plan_sequential.yaml adds interim looks
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
# ## Schedule and spend projection
#
# `analysis_lib.bench.runner.plan` validates the manifest, draws the blocked paired schedule from the
# seed and projects the spend from the manifest's per-trial cost estimates.

# %%
from analysis_lib.bench.runner import plan, run_full
from analysis_lib.core import outputs as files
from analysis_lib.core.fileio import atomic_write_csv, atomic_write_json
from analysis_lib.study.plan import load_plan

manifest_path = Path(project_root) / manifest
analysis_plan = load_plan(Path(project_root) / plan_file)
p = None
if not manifest:
    # A study re-analysed from runs made elsewhere has no benchmark of ours: its results get no plan of one.
    print("no benchmark to plan: the runs were made elsewhere (manifest is empty); nothing was written")
elif not manifest_path.exists():
    print(f"manifest not found: {manifest} (see docs/benchmark-runner.md)")
else:
    p = plan(manifest_path, runs_per_condition, schedule_seed, phase_budget_usd, analysis_plan)
    schedule = p.schedule
    print(f"{len(schedule)} trials: {schedule['task_id'].nunique()} tasks x {schedule['condition'].nunique()} conditions "
          f"x {runs_per_condition} runs, seed {schedule_seed}")
    display(schedule.head(12))
    display(pd.Series(p.projection, name="spend projection").to_frame())
    _ = atomic_write_csv(paths.benchmark / "schedule.csv", schedule)
    _ = atomic_write_json(paths.benchmark / files.BENCHMARK_PLAN, p.to_json())

# %% [markdown]
# ## Interim looks (a sequential plan only)
#
# When the analysis plan declares a `sequential` design (docs/sequential.md), the schedule runs each task's
# pairs back to back and the run is analysed at the declared looks. This step shows the looks, the boundaries
# of one primary hypothesis, and its maximum and expected tasks and spend under the null and under the
# planned effect beside the fixed design. With a fixed plan it shows nothing.

# %%
from analysis_lib.bench.looks import describe

if p is not None and p.sequential is not None:
    print("\n".join(describe(p.sequential)))

# %% [markdown]
# ## Running for real
#
# With `dry_run = False` the notebook hands the same manifest, seed and budget to the benchmark
# runner's command line; it journals every finished trial, so an interrupted run resumes where it
# stopped with the identical schedule.

# %%
if dry_run or not manifest:
    print("dry run: nothing was executed (set dry_run = False to run the benchmark)" if manifest else
          "nothing to run: no manifest")
else:
    report = run_full(manifest_path, runs_per_condition, schedule_seed, phase_budget_usd,
                      output=paths.benchmark / files.FULL_RUN, runs_dir=Path(project_root) / bench_runs_dir,
                      analysis_plan=Path(project_root) / plan_file)
    print(f"benchmark finished; run folders in {bench_runs_dir} (analyse them with runs_dir: {bench_runs_dir})")
