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
# Not part of the pipeline. In JupyterLab (`make lab`) pick two profiles: the outcome grid shows
# every task x repetition x arm coloured by outcome, sorted by the per-task difference; click a cell
# to open the paired view of that task and repetition: both trajectories in two aligned lanes (tool
# category by colour, MCP calls and errors marked), cumulative tokens and cost of both, the first
# step where they part, the files only one arm read or edited, and each arm's outcome and tests.
# Click a step to see its tool calls, arguments and a trimmed result. Before the notebook is run,
# the outputs below show the same view, static, for the first pair.

# %%
import os

# Offline litellm price map and quiet logs, before anything can import litellm (see NOTES in docs/notebooks.md).
for key, value in {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}.items():
    os.environ.setdefault(key, value)

# %% tags=["parameters"]
project_root: str = ""  # project folder; empty: found upward from the working directory (pyproject.toml)
output_dir: str = "results/sample"  # analysis files passed between notebooks, relative to the project root
runs_dir: str = "runs/sample"  # runs to analyse, relative to the project root

# %%
from pathlib import Path

import pandas as pd
from IPython.display import Markdown, display

from analysis_lib.report import notebook_params, outputs

notebook_params.check_parameters(globals())  # a wrong type fails here, naming the parameter
project_root = notebook_params.find_project_root(project_root)
paths = outputs.output_paths(project_root, output_dir)
import ipywidgets as widgets
import matplotlib.pyplot as plt

from analysis_lib import frames, load_trials
from analysis_lib.ingest import provenance
from analysis_lib.report import explore, pair_view

# %% [markdown]
# The trials are read from the runs folder itself (every ingested format), so this notebook does
# not depend on the pipeline's outputs.

# %%
runs = Path(project_root) / runs_dir
trials, errors = load_trials(runs)
metrics = explore.integer_counts(frames.trials_df(trials))
simulated = provenance.is_simulated(runs)
if simulated:
    display(Markdown("> **SIMULATED DATA**: these runs come from the seeded simulator; the numbers are not findings."))
profiles = sorted(metrics["profile"].unique())
tasks = sorted(metrics["task_id"].unique())
baseline = provenance.declared_baseline(runs) or profiles[0]
other = next((p for p in profiles if p != baseline), baseline)
print(f"{len(trials)} trials, {len(profiles)} profiles, {len(tasks)} tasks, {len(errors)} unreadable")

# %% [markdown]
# ## A versus B: outcome grid and paired trajectories
#
# The first pair of the default profiles is shown statically until the notebook runs.

# %%
# NBVAL_IGNORE_OUTPUT
first = pair_view.pair_options(trials, baseline, other).iloc[0]
trial_a, trial_b = pair_view.find_pair(trials, baseline, other, first["task_id"], int(first["repetition"]))
static = pair_view.pair_view(trial_a, trial_b)
fallback = (pair_view.render_grid_html(pair_view.outcome_grid(metrics, baseline, other))
            + pair_view.render_pair_html(static, results=False))
explorer = explore.pair_explorer(trials, metrics, simulated, baseline, other)
explore.show(explorer, fallback, f"A-vs-B explorer ({baseline} vs {other}); run the notebook in JupyterLab to use it")

# %% [markdown]
# The same pair in numbers (what the static view above shows).

# %%
print(f"{static.a.task_id} repetition {static.a.repetition}: A = {static.a.profile}, {len(static.lane_a)} steps; "
      f"B = {static.b.profile}, {len(static.lane_b)} steps; first divergence at step {static.divergence}")
for key, files in static.files.items():
    print(f"{key}: {len(files)}")
display(explore.metric_table(static.outcomes))

# %% [markdown]
# ## Filter trials
#
# Pick profiles and tasks (none selected = all) and an outcome.

# %%
show_cols = ["profile", "task_id", "repetition", "success", "total_tokens", "total_cost_usd", "agent_steps",
             "tool_calls_count", "tool_error_count", "mcp_tool_calls"]


def show_filtered(profiles_sel=(), tasks_sel=(), outcome="any"):
    df = explore.filter_trials(metrics, profiles_sel, tasks_sel, outcome)
    print(f"{len(df)} trials")
    display(explore.metric_table(df[show_cols]).head(30))


filter_controls = {"profiles_sel": widgets.SelectMultiple(options=profiles, description="profiles"),
                   "tasks_sel": widgets.SelectMultiple(options=tasks, description="tasks", rows=6),
                   "outcome": widgets.Dropdown(options=["any", "succeeded", "failed", "infra_error"], description="outcome")}

# %%
# NBVAL_IGNORE_OUTPUT
# interactive_output draws at once into its Output widget, which nbval cannot follow: created here.
filter_out = widgets.interactive_output(show_filtered, filter_controls)
explore.show(widgets.VBox([widgets.HBox(list(filter_controls.values())), filter_out]),
             "<p>Trial filter (profiles, tasks, outcome): run the notebook to use it.</p>", "Trial filter: run the notebook to use it")

# %% [markdown]
# Default selection (what the widgets show before any change): failed trials of the first task.

# %%
show_filtered((), (tasks[0],), "failed")


# %% [markdown]
# ## Step timeline of one trajectory
#
# Per step: tool calls (errored ones in red) and prompt and completion tokens. The repetition
# slider spans the repetitions present in the runs.

# %%
def show_timeline(profile, task_id, repetition):
    trial = explore.find_trial(trials, profile, task_id, repetition)
    if trial is None:
        print(f"no trial of {profile} on {task_id}, repetition {repetition}")
        return
    timeline = explore.step_timeline(trial)
    fig = explore.plot_step_timeline(timeline, f"{profile} / {task_id} / rep {repetition}", simulated)
    display(fig)
    plt.close(fig)
    display(timeline[timeline["tool_calls"] > 0].head(20))


reps = metrics["repetition"].dropna().astype(int)
timeline_controls = {"profile": widgets.Dropdown(options=profiles, description="profile"),
                     "task_id": widgets.Dropdown(options=tasks, description="task"),
                     "repetition": widgets.IntSlider(value=int(reps.min()), min=int(reps.min()), max=int(reps.max()),
                                                     description="repetition")}

# %%
# NBVAL_IGNORE_OUTPUT
timeline_out = widgets.interactive_output(show_timeline, timeline_controls)
explore.show(widgets.VBox([widgets.HBox(list(timeline_controls.values())), timeline_out]),
             "<p>Step timeline picker: run the notebook to use it.</p>", "Step timeline picker: run the notebook to use it")

# %%
trial = explore.find_trial(trials, profiles[-1], tasks[0], 1)
timeline = explore.step_timeline(trial)
print(f"{trial.profile} / {trial.task_id}: {len(timeline)} steps, {int(timeline['tool_calls'].sum())} tool calls, "
      f"{int(timeline['tool_errors'].sum())} errored")
display(timeline.head(12))


# %% [markdown]
# ## One task under two profiles
#
# Mean over repetitions of each metric; `difference` is B minus A.

# %%
def show_side_by_side(task_id, profile_a, profile_b):
    message = explore.same_profile_message(profile_a, profile_b)
    if message:
        print(message)
        return
    display(explore.metric_table(explore.side_by_side(metrics, task_id, profile_a, profile_b), means=True))


side_controls = {"task_id": widgets.Dropdown(options=tasks, description="task"),
                 "profile_a": widgets.Dropdown(options=profiles, value=baseline, description="A"),
                 "profile_b": widgets.Dropdown(options=profiles, value=other, description="B")}

# %%
# NBVAL_IGNORE_OUTPUT
side_out = widgets.interactive_output(show_side_by_side, side_controls)
explore.show(widgets.VBox([widgets.HBox(list(side_controls.values())), side_out]),
             "<p>Side-by-side means: run the notebook to use it.</p>", "Side-by-side means: run the notebook to use it")

# %%
show_side_by_side(tasks[0], baseline, other)
