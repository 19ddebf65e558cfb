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
# # 02 Statistics: paired comparisons
#
# Each profile is compared with the baseline on the tasks both ran (a paired design; the task is the
# unit, its repetitions combined first). What is tested, how, and with which correction is read from
# the analysis plan notebook 01 checked against its record (part of the study it saved); the comparison engine
# (`analysis_lib.inference.comparisons`) gives every estimate with the interval of the same estimand and its
# test. Inverted intervals (Hodges-Lehmann, sign-flip, the exact odds ratio) exclude 0 exactly when
# their test's unadjusted p < 0.05; Tango's score interval beside McNemar's exact test can disagree
# with it near 0, and the table's note says where it does. Every number below, and every number of
# the paper, comes from the two files it writes: `comparisons.csv` and `profile_rates.csv`.

# %%
import os

# Offline litellm price map and quiet logs, before anything can import litellm (see NOTES in docs/notebooks.md).
for key, value in {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}.items():
    os.environ.setdefault(key, value)

# %% tags=["parameters"]
project_root: str = ""  # project folder; empty: found upward from the working directory (pyproject.toml)
output_dir: str = "results/sample"  # analysis files passed between notebooks, relative to the project root
figures_dir: str = "figures"  # where figures are written (PNG and PDF), relative to the project root
task_groups: str = ""  # optional CSV task_id,group (repository, category): per-group effects with partial pooling
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

from analysis_lib import Study, write_comparisons
from analysis_lib.core import outputs as files
from analysis_lib.report import figures, tables
from analysis_lib.report.audit import data_banner
from analysis_lib.report.comparison_report import mcnemar_lines, rates_table, tier_table
from analysis_lib.inference.subgroups import read_task_groups

# %%
# The study notebook 01 resolved: arms, success rule, baseline, plan and its check, design audit.
study = Study.load(paths.analytics)
simulated = study.simulated
banner = data_banner(simulated, study.source.model_dump() if study.source else None)
if banner:
    display(Markdown(f"> **{banner}**"))
metrics = study.metrics
profiles = study.arms
plan = study.plan
base = study.require_baseline()
problems = study.audit.problems() if study.audit is not None else []
if len(problems) and len(problems) >= len(profiles) - 1:
    raise ValueError(f"the design cannot support the planned comparisons: {problems[0].message} (design_audit.csv)")
colors = figures.profile_colors(profiles)
fig_dir = paths.figures
print(f"baseline: {base}; profiles: {', '.join(profiles)}; plan: {plan.name} (sha256 {study.plan_check.short})")

# %% [markdown]
# ## The plan, run
#
# `write_comparisons` runs every planned metric for every profile pair and writes `comparisons.csv`
# (one row per metric and pair: estimand, estimate, interval, test, adjusted p, tasks paired and
# undefined), `profile_rates.csv` and the reviewer's `comparison_report.md`.

# %%
# The plan was compared with its record (the runner's pre-registration, else the analysis folder's) and dated
# against the first trial when the study was opened; the runs folder is only read.
print(study.plan_check.timing_line())
groups = read_task_groups(Path(project_root) / task_groups) if task_groups else None
analysis = write_comparisons(study, paths.comparisons_dir, task_groups=groups)
comparisons, rates = analysis.comparisons, analysis.rates
for tier in ("primary", "secondary", "exploratory", "sensitivity"):
    if (comparisons["tier"] == tier).any():
        display(Markdown(f"**{tier.capitalize()} metrics**\n\n" + tier_table(comparisons, tier)))
display(Markdown("\n".join(mcnemar_lines(comparisons))))

# %% [markdown]
# ## Per configuration, and pooled across configurations (a study with configurations only)
#
# When the study file declares configurations (agent and model, suites), each configuration's treatment is compared
# with its own control above, one correction per tier over all of them. Here each primary metric's effect is
# pooled across the configurations with a random-effects model: REML tau² with the Hartung-Knapp-Sidik-Jonkman
# interval, Paule-Mandel and DerSimonian-Laird beside it, the heterogeneity (tau², I², Q) and the prediction
# interval for a new configuration, with its note (`pooled.csv`, `pooled_configurations.csv`), and its forest
# plot. Any other study shows nothing here.

# %%
from analysis_lib.report.configurations import forest_stem, pooling_markdown, pooling_tables

if analysis.pooling is not None:
    display(Markdown("\n".join(pooling_markdown(comparisons, pooling_tables(analysis.pooling, simulated))[2:])))
for stale in fig_dir.glob("forest_pooled_*.p*"):  # a forest from an earlier study must not outlive it
    stale.unlink()
for pooled in analysis.pooling.pooled if analysis.pooling is not None else []:
    fig = figures.plot_pooled_forest(pooled, simulated)
    figures.save_figure(fig, fig_dir, forest_stem(pooled.metric))
    display(fig)
    plt.close(fig)

# %% [markdown]
# ## Sequential design (a sequential run only)
#
# When the plan declares interim looks and the runs carry the benchmark runner's record of them
# (`full_run.json` in the runs folder), the looks are recomputed from the trials with the plan's engine
# and checked against the record, and the primary estimates are adjusted for the stop (repeated
# confidence intervals, median-unbiased estimates by the stage-wise ordering). The numbers above are the
# fixed-sample ones; `sequential.json` and `sequential_estimates.csv` carry the design, the stop and the
# adjusted estimates to the paper. A fixed design shows nothing here.

# %%
from analysis_lib.core.fileio import read_json
from analysis_lib.report import sequential as seq_report
from analysis_lib.inference.sequential import analyse_run
from analysis_lib.core.trial import InputError

run_record_file = study.runs_path(project_root) / files.FULL_RUN
run_sequential = None
if run_record_file.exists():
    try:
        run_sequential = (read_json(run_record_file) or {}).get("sequential")
    except InputError as exc:
        print(f"run record not read: {exc}")
if run_sequential and plan.sequential is not None:
    seq_run = analyse_run(run_sequential, metrics, plan, analysis.pairs)
    _ = seq_report.write_outputs(paths.comparisons_dir, seq_run.record, seq_run.adjusted, plan.bootstrap.confidence)
    display(Markdown("\n".join(seq_report.design_lines(seq_run.record, seq_run.adjusted, plan.bootstrap.confidence,
                                                         seq_run.mismatch))))
else:
    _ = seq_report.write_outputs(paths.comparisons_dir, None, None)
    if run_sequential:
        print("the runs were stopped by a sequential design, but this plan declares none: the estimates above are "
              "not adjusted for the stopping (use the plan the run used)")

# %% [markdown]
# ## Pass rate and resolve rate per profile
#
# Two rates, named apart. The **pass rate** counts trials; repetitions of one task share its
# difficulty, so its Wilson interval uses the design-effective sample size (the design effect is in
# the table). The **resolve rate** counts tasks passed by the majority of their repetitions (a tie
# fails); it is the rate the paired test compares, with a Wilson interval over tasks.

# %%
display(Markdown(rates_table(rates)))
fig = figures.plot_rates(rates, simulated, colors)
figures.save_figure(fig, fig_dir, "rates")
display(fig)
plt.close(fig)
outcomes = figures.task_outcomes(metrics)
fig = figures.plot_task_outcomes(outcomes, simulated)
figures.save_figure(fig, fig_dir, "task_outcomes")
display(fig)
plt.close(fig)

# %% [markdown]
# ## Forest plot of the comparisons
#
# The estimates and intervals of `comparisons.csv`, unchanged: resolve-rate differences in points,
# and the typical per-task change in % for the ratio metrics. Filled markers are significant after
# the plan's correction; the adjusted p-value is printed beside each row.

# %%
if len(figures.forest_rows(comparisons)):
    fig = figures.plot_forest(comparisons, simulated, colors)
    figures.save_figure(fig, fig_dir, "forest")
    display(fig)
    plt.close(fig)
else:
    figures.remove_figure(fig_dir, "forest")
    print("no comparisons: the forest plot is not drawn")

# %% [markdown]
# ## Per-task changes in tokens and cost
#
# For each task, each profile's per-task value against the baseline's, tasks sorted by effect: where
# the savings come from, and whether a few tasks drive them. The per-task values are those the estimate
# pairs (the median of the repetitions under `repetitions: majority`, their mean under `all`; the axis
# names it). The dashed line is the estimate of the forest plot.

# %%
for metric in ("total_tokens", "total_cost_usd"):
    changes = figures.per_task_changes(comparisons, metrics, metric)
    if changes.empty:
        figures.remove_figure(fig_dir, f"per_task_{metric}")
        print(f"{metric}: no task with values under the baseline and another profile; no figure")
        continue
    fig = figures.plot_per_task_changes(changes, comparisons, metric, simulated, colors)
    figures.save_figure(fig, fig_dir, f"per_task_{metric}")
    display(fig)
    plt.close(fig)

# %% [markdown]
# ## Tool-usage mix
#
# Each tool call is categorised once by the project's taxonomy (`analysis_lib.core.tools.categorize`:
# read, search, edit, execute, MCP, other); shares are within each profile.

# %%
mix = tables.tool_mix(tables.tool_calls_from_metrics(metrics)).dropna(subset=["share"])
display(mix.pivot(index="profile", columns="category", values="share").round(3))
if mix.empty:
    figures.remove_figure(fig_dir, "tool_mix")
    print("no tool calls recorded: no tool-mix figure")
else:
    fig = figures.plot_tool_mix(mix, simulated)
    figures.save_figure(fig, fig_dir, "tool_mix")
    display(fig)
    plt.close(fig)

# %% [markdown]
# ## Beside intention to treat
#
# Everything above compares the arms as assigned (intention to treat): every trial counts in its arm,
# whatever its agent did, and no trial is dropped for not calling the tools. The plan's `beside_itt`
# section declares what is reported beside it (by default: the effect among trials that used MCP, the
# bounds for infrastructure failures and the divergence of discordant trajectories; the mediation
# decomposition when declared). Each estimand has its own name and its own file beside
# `comparisons.csv`: `compliance.csv`, `infra_bounds.csv`, `divergence.csv`, `mediation.csv`.

# %%
from analysis_lib.report.beside_itt import bounds_markdown, compliance_markdown, divergence_markdown, mediation_markdown

beside = analysis.beside
declared = beside.settings
print("reported beside ITT: " + ", ".join(k for k in ("compliance", "infrastructure_bounds", "divergence", "mediation")
                                          if getattr(declared, k)))
print("arms offered MCP tools: " + ", ".join(a for a, v in beside.offered.items() if v is True))

# %% [markdown]
# ### The effect among trials that used MCP (CACE)
#
# Agents offered MCP tools do not always call them. Dividing the effect of offering them (a mean over
# task pairs, so that it can be divided) by the share of the MCP arm's trials that called an MCP tool
# gives the effect among the trials that use MCP when offered (the complier average causal effect),
# with a delta-method interval, or Fieller's when the share is imprecise. It rests on the exclusion
# restriction, doubtful for tokens (tool schemas cost tokens even when unused). The naive comparison
# of users with the baseline is shown apart: agents choose when to call the tools, so it is biased.

# %%
if beside.compliance is not None:
    display(Markdown("\n".join(compliance_markdown(beside.compliance, plan.bootstrap.confidence)[2:])))
else:
    print("not declared by the plan")

# %% [markdown]
# ### Infrastructure failures as bounds
#
# The planned estimate leaves infrastructure errors out (and counts trials that never reached the
# model as the source scored them). Imputing those trials' outcomes both ways and rerunning the planned
# test bounds how far they could move each primary comparison.

# %%
if beside.bounds is not None:
    display(Markdown("\n".join(bounds_markdown(beside.bounds, plan.bootstrap.confidence)[2:])))
else:
    print("not declared by the plan")

# %% [markdown]
# ### Where discordant trajectories diverge (exploratory)
#
# For the task repetitions that passed under one arm and failed under the other: the first tool call
# where the two trajectories differ, and whether the MCP arm's call there was an MCP call.

# %%
if declared.divergence:
    display(Markdown("\n".join(divergence_markdown(beside.divergence, beside.notes.get("divergence"))[2:])))
else:
    print("not declared by the plan")

# %% [markdown]
# ### Mediation through trajectory behaviour (exploratory)
#
# How much of the success or token effect goes through files read, exploration breadth or the steps
# before the first edit, under assumptions stated with the table; reported only when the plan declares it.

# %%
display(Markdown("\n".join(mediation_markdown(beside.mediation, plan.bootstrap.confidence)[2:])))
