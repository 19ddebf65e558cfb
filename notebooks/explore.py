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
# # Explore the runs: A versus B, step by step (interactive)
#
# Not part of the pipeline. In JupyterLab (`make lab`) pick two profiles (in a study with configurations, a
# configuration first, then its two arms): the outcome grid shows
# every task x repetition x arm coloured by outcome, sorted by the per-task difference; click a cell
# to open the paired view of that task and repetition: both trajectories in two aligned lanes (tool
# category by colour, MCP calls and errors marked), cumulative tokens and cost of both, the first
# step where they part, the files only one arm read or edited, and each arm's outcome and tests.
# Click a step to see its tool calls, arguments and a trimmed result. Before the notebook is run,
# the outputs below show the same views, static, for the default selection.

# %%
import os

# Offline litellm price map and quiet logs, before anything can import litellm (see NOTES in docs/notebooks.md).
for key, value in {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}.items():
    os.environ.setdefault(key, value)

# %% tags=["parameters"]
project_root: str = ""  # project folder; empty: found upward from the working directory (pyproject.toml)
output_dir: str = "results/sample"  # analysis files passed between notebooks, relative to the project root
runs_dir: str = "runs/sample"  # runs to analyse, relative to the project root
study_file: str = ""  # study file (YAML) declaring the arms, how tasks pair and the success rule (docs/studies.md); empty: the readers' default profiles
plan_file: str = "params/analysis_plan.yaml"  # the analysis plan whose pairing.baseline is the default A
baseline: str = ""  # profile A (empty: the plan's, else the runs' index.json, else the first in sort order)

# %%
from pathlib import Path

from IPython.display import HTML, Markdown, display

from analysis_lib.report import notebook_params, outputs

notebook_params.check_parameters(globals())  # a wrong type fails here, naming the parameter
project_root = notebook_params.find_project_root(project_root)
paths = outputs.output_paths(project_root, output_dir)
import ipywidgets as widgets

from analysis_lib.study.study import study_of_trials
from analysis_lib.report import explore
from analysis_lib.report.live_output import live_output

# %% [markdown]
# The trials are read from the runs folder itself (every ingested format), once, so this notebook does
# not depend on the pipeline's outputs. The study is resolved as the command line and the paper resolve it:
# the study file's arms and success rule, and the one baseline rule (it is profile A).

# %%
runs = Path(project_root) / runs_dir
study, trials = study_of_trials(runs, Path(project_root) / study_file if study_file else None,
                                Path(project_root) / plan_file, baseline or None)
metrics = explore.integer_counts(study.metrics)
simulated = study.simulated
if simulated:
    display(Markdown("> **SIMULATED DATA**: these runs come from the seeded simulator; the numbers are not findings."))
profiles = study.arms
tasks = sorted(metrics["task_id"].unique())
baseline = study.require_baseline()
other = next((p for p in profiles if p != baseline), baseline)
# A study with configurations compares the arms within each: pick a configuration, then its control (A) and
# treatment (B).
configurations = study.configuration_pairs()
if configurations:
    baseline, other = next(iter(configurations.values()))
passed = int(metrics["success"].fillna(False).sum())
print(f"{len(trials)} trials, {passed} passed (success: {study.success_rule}), {len(profiles)} profiles, {len(tasks)} tasks, "
      f"{len(study.errors)} unreadable; A (baseline): {baseline} ({study.baseline.source})")

# %% [markdown]
# ## A versus B: outcome grid and paired trajectories
#
# Each section below shows one view. Run in JupyterLab, it is a live widget; in a notebook viewed
# without a kernel, the same view, static, for the default selection. The widgets are built in one
# cell and shown in the next: building draws the default selection into the widget, which nbval
# cannot follow, so only the shown view is compared.

# %%
# NBVAL_IGNORE_OUTPUT
explorer = explore.pair_explorer(trials, metrics, simulated, baseline, other, configurations=configurations or None)

# %%
explore.show(explorer, explore.pair_explorer_html(trials, metrics, baseline, other, simulated),
             f"A-vs-B explorer ({baseline} vs {other}); run the notebook in JupyterLab to use it")

# %% [markdown]
# ## Filter trials
#
# Pick profiles and tasks (none selected = all) and an outcome; the first task is selected to start.

# %%
show_cols = ["profile", "task_id", "repetition", "success", "total_tokens", "total_cost_usd", "agent_steps",
             "tool_calls_count", "tool_error_count", "mcp_tool_calls"]
filter_controls = {"profiles": widgets.SelectMultiple(options=profiles, description="profiles"),
                   "tasks": widgets.SelectMultiple(options=tasks, value=(tasks[0],), description="tasks", rows=6),
                   "outcome": widgets.Dropdown(options=["any", "succeeded", "failed", "infra_error"], description="outcome")}


def filtered_view(**selection):
    return HTML(explore.filter_html(metrics, show_cols, **selection))


# %%
# NBVAL_IGNORE_OUTPUT
filter_out = live_output(filtered_view, filter_controls)

# %%
explore.show(widgets.VBox([widgets.HBox(list(filter_controls.values())), filter_out]),
             explore.filter_html(metrics, show_cols, **{k: w.value for k, w in filter_controls.items()}),
             "Trial filter: run the notebook to use it")

# %% [markdown]
# ## Step timeline of one trajectory
#
# Per step: tool calls (errored ones in red) and prompt and completion tokens, then the steps that
# called tools. The repetition slider spans the repetitions present in the runs.

# %%
reps = metrics["repetition"].dropna().astype(int)
timeline_controls = {"profile": widgets.Dropdown(options=profiles, value=profiles[-1], description="profile"),
                     "task_id": widgets.Dropdown(options=tasks, description="task"),
                     "repetition": widgets.IntSlider(value=int(reps.min()), min=int(reps.min()), max=int(reps.max()),
                                                     description="repetition")}


def timeline_view(**selection):
    return HTML(explore.timeline_html(trials, simulated=simulated, **selection))


# %%
# NBVAL_IGNORE_OUTPUT
timeline_out = live_output(timeline_view, timeline_controls)

# %%
explore.show(widgets.VBox([widgets.HBox(list(timeline_controls.values())), timeline_out]),
             explore.timeline_html(trials, simulated=simulated, **{k: w.value for k, w in timeline_controls.items()}),
             "Step timeline picker: run the notebook to use it")

# %% [markdown]
# ## One task under two profiles
#
# Mean over repetitions of each metric (success as a pass rate), and B minus A.

# %%
side_controls = {"task_id": widgets.Dropdown(options=tasks, description="task"),
                 "profile_a": widgets.Dropdown(options=profiles, value=baseline, description="A"),
                 "profile_b": widgets.Dropdown(options=profiles, value=other, description="B")}


def side_by_side_view(**selection):
    return HTML(explore.side_by_side_html(metrics, **selection))


# %%
# NBVAL_IGNORE_OUTPUT
side_out = live_output(side_by_side_view, side_controls)

# %%
explore.show(widgets.VBox([widgets.HBox(list(side_controls.values())), side_out]),
             explore.side_by_side_html(metrics, **{k: w.value for k, w in side_controls.items()}),
             "Side-by-side means: run the notebook to use it")
