"""Write the project's notebooks from the cell sources below (nbformat), without outputs.

Run ``python tools/build_notebooks.py`` after changing a notebook here, then ``make nbval-record``
to execute them on the sample runs and store the outputs (review the diff before committing).
Keeping the sources in one script keeps the notebooks thin and consistent: every notebook has a
``parameters`` cell written ``name: type = default  # help`` and a markdown cell before each step.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

ENV = '''import os

# Offline litellm price map and quiet logs, before anything can import litellm (see NOTES in docs/notebooks.md).
for key, value in {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}.items():
    os.environ.setdefault(key, value)'''

COMMON = '''project_root: str = ""  # project folder; empty: found upward from the working directory (pyproject.toml)
output_dir: str = "results/sample"  # analysis files passed between notebooks, relative to the project root'''
RUNS = '''runs_dir: str = "runs/sample"  # runs to analyse, relative to the project root'''
FIGS = '''figures_dir: str = "figures"  # where figures are written (PNG and PDF), relative to the project root'''

SETUP = '''from pathlib import Path

import pandas as pd
from IPython.display import Markdown, display

from analysis_lib.report import notebook_params, outputs

notebook_params.check_parameters(globals())  # a wrong type fails here, naming the parameter
project_root = notebook_params.find_project_root(project_root)
paths = outputs.output_paths(project_root, output_dir)'''

RUN_INFO = '''info = outputs.read_run_info(paths)
simulated = bool(info["simulated"])
if simulated:
    display(Markdown("> **SIMULATED DATA**: these runs come from the seeded simulator; the numbers are not findings."))'''


def md(text: str):
    return new_markdown_cell(text.strip("\n"))


def code(text: str, tags: tuple[str, ...] = ()):
    cell = new_code_cell(text.strip("\n"))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def params(text: str):
    return code(text, ("parameters",))


def nb_00():
    return [
        md("""
# 00 Run the benchmark (plan by default)

The A/B benchmark runs every task under every condition (the same agent with and without MCP
tools) with repeated trials, in a **blocked, randomized, paired schedule**: each pair of trials of
one task runs back to back in a seeded random order, so drift in the model service or the machine
hits both conditions alike. A budget guardrail stops before a pair whose projected cost would pass
90 % of the phase budget.

By default this notebook only **plans**: it shows the schedule and the projected spend and runs
nothing (`dry_run = True`). Real runs use `python -m analysis_lib bench full ...`
(docs/benchmark-runner.md); their run folders are what notebook 01 reads.
"""),
        code(ENV),
        params(COMMON + '''
manifest: str = "params/example_manifest.json"  # benchmark manifest (tasks, conditions, agent), relative to the project root
runs_per_condition: int = 3  # repetitions of each task under each condition
phase_budget_usd: float = 1200.0  # spend limit of this phase; no pair starts past 90 % of it
schedule_seed: int = 20261121  # seed of the randomized schedule (recorded in the plan)
dry_run: bool = True  # True: plan only; False: run the benchmark (spends money)
bench_runs_dir: str = "runs/benchmark"  # where a real run writes its run folders, relative to the project root'''),
        code(SETUP),
        md("""
## Schedule and spend projection

`analysis_lib.bench.runner.plan` validates the manifest, draws the blocked paired schedule from the
seed and projects the spend from the manifest's per-trial cost estimates.
"""),
        code('''from analysis_lib.bench.runner import plan, run_full
from analysis_lib.fileio import atomic_write_csv, atomic_write_json

manifest_path = Path(project_root) / manifest
if not manifest_path.exists():
    print(f"manifest not found: {manifest} (see docs/benchmark-runner.md)")
else:
    p = plan(manifest_path, runs_per_condition, schedule_seed, phase_budget_usd)
    schedule = p.schedule
    print(f"{len(schedule)} trials: {schedule['task_id'].nunique()} tasks x {schedule['condition'].nunique()} conditions "
          f"x {runs_per_condition} runs, seed {schedule_seed}")
    display(schedule.head(12))
    display(pd.Series(p.projection, name="spend projection").to_frame())
    _ = atomic_write_csv(paths.benchmark / "schedule.csv", schedule)
    _ = atomic_write_json(paths.benchmark / "plan.json", p.to_json())'''),
        md("""
## Running for real

With `dry_run = False` the notebook hands the same manifest, seed and budget to the benchmark
runner's command line; it journals every finished trial, so an interrupted run resumes where it
stopped with the identical schedule.
"""),
        code('''if dry_run:
    print("dry run: nothing was executed (set dry_run = False to run the benchmark)")
else:
    report = run_full(manifest_path, runs_per_condition, schedule_seed, phase_budget_usd,
                      output=paths.benchmark / "full_run.json", runs_dir=Path(project_root) / bench_runs_dir)
    print(f"benchmark finished; run folders in {bench_runs_dir} (analyse them with runs_dir: {bench_runs_dir})")'''),
    ]


def nb_01():
    return [
        md("""
# 01 Metrics (Layer 1)

Every trial is measured deterministically from its own files: the ATIF trajectory (steps, tool
calls, token usage), the verifier's CTRF report and reward, and the harness result. The metrics
are defined once in `analysis_lib.metrics` (one metric id everywhere: function, column, test, TeX
macro comment). Unreadable inputs become rows of `errors.csv` and the rest goes on.
"""),
        code(ENV),
        params(COMMON + "\n" + RUNS + '''
seed: int = 0  # seed for any sampling (recorded in aggregate_metrics.json)
workers: int = 1  # processes for ingest (1 keeps the notebook light; the result does not depend on it)
use_cache: bool = False  # reuse per-trial metrics cached by an earlier run (faster on big folders; stale after a metric code change)'''),
        code(SETUP + '''
from analysis_lib.report import provenance'''),
        md("""
## Provenance

The runs folder's `index.json` says whether the runs are simulated; everything made from
simulated runs says so.
"""),
        code('''runs = Path(project_root) / runs_dir
if not runs.is_dir():
    raise FileNotFoundError(f"runs_dir {runs_dir!r} is not a folder (paths are relative to the project root)")
simulated = provenance.is_simulated(runs)
print(f"runs: {runs_dir} ({'SIMULATED sample runs' if simulated else 'real runs'})")
if simulated:
    display(Markdown("> **SIMULATED DATA**: these runs come from the seeded simulator; the numbers are not findings."))'''),
        md("""
## Ingest and measure

`analysis_lib.layer1.analyse` discovers every trial, parses it leniently and computes one row of
metrics per trial, written to `metrics_detail.csv` with the per-profile `metrics_summary.csv`,
`aggregate_metrics.json` and `errors.csv`.
"""),
        code('''from analysis_lib.layer1 import analyse

# The cache is keyed by the input files and the package version, not by the metric code: off by default,
# so that nbval sees every change of a metric's definition.
result = analyse(runs, paths.analytics, seed=seed, workers=workers, cache=use_cache, progress=False)
metrics = result.metrics
print(f"{len(metrics)} trials, {metrics['profile'].nunique()} profiles, {metrics['task_id'].nunique()} tasks; "
      f"{len(result.errors)} input problems recorded in errors.csv")
_ = outputs.write_run_info(paths, {"runs_dir": runs_dir, "simulated": simulated, "seed": seed,
                               "n_trials": int(len(metrics)), "n_errors": int(len(result.errors)),
                               "profiles": sorted(metrics["profile"].unique()),
                               "baseline": provenance.declared_baseline(runs)})'''),
        md("""
## Per-profile summary

Success rates exclude infrastructure errors; tokens and cost are per trial (mean and median).
"""),
        code('''cols = ["profile", "n_trials", "n_tasks", "n_infra_errors", "success_rate", "total_tokens_mean",
        "total_tokens_median", "total_cost_usd_mean", "tool_calls_count_mean", "mcp_tool_calls_mean", "elapsed_sec_median"]
display(result.summary[[c for c in cols if c in result.summary]].round(3))'''),
        md("""
## Input problems

Each unreadable or suspicious input is one row (path relative to the runs folder, stage, message).
"""),
        code('''display(result.errors.head(10)) if len(result.errors) else print("no input problems")'''),
    ]


def nb_02():
    return [
        md("""
# 02 Statistics: paired comparisons

Each profile is compared with the baseline on the tasks both ran (a paired design; the task is the
unit, its repetitions combined first). What is tested, how, and with which correction is read from
the pre-registered analysis plan `params/analysis_plan.yaml`; the comparison engine
(`analysis_lib.comparisons`) gives every estimate with the interval of the same estimand and a
test that agrees with it. Every number below, and every number of the paper, comes from the two
files it writes: `comparisons.csv` and `profile_rates.csv`.
"""),
        code(ENV),
        params(COMMON + "\n" + FIGS + '''
baseline: str = ""  # baseline profile (empty: the plan's, else the one index.json declares, else the first in sort order)
plan_file: str = "params/analysis_plan.yaml"  # the pre-registered plan; params/analysis_plan_all_repetitions.yaml uses every repetition
task_groups: str = ""  # optional CSV task_id,group (repository, category): per-group effects with partial pooling'''),
        code(SETUP + '''
import matplotlib.pyplot as plt

from analysis_lib.plan import check_plan, load_plan, plan_hash
from analysis_lib.report import figures, tables
from analysis_lib.report.comparison_report import mcnemar_lines, rates_table, tier_table, write_comparisons
from analysis_lib.subgroups import read_task_groups'''),
        code(RUN_INFO + '''
metrics = pd.read_csv(paths.metrics_detail)
profiles = sorted(metrics["profile"].unique())
plan = load_plan(Path(project_root) / plan_file)
# The baseline: this parameter, else the plan's, else the one index.json declares, else the first in sort order.
base = baseline or plan.pairing.baseline or info.get("baseline") or profiles[0]
if base not in profiles:
    raise ValueError(f"baseline={base!r} is not a profile of these runs; allowed: {', '.join(profiles)}")
colors = figures.profile_colors(profiles)
fig_dir = Path(project_root) / figures_dir
print(f"baseline: {base}; profiles: {', '.join(profiles)}; plan: {plan.name} (sha256 {plan_hash(plan)[:12]})")'''),
        md("""
## The plan, run

`write_comparisons` runs every planned metric for every profile pair and writes `comparisons.csv`
(one row per metric and pair: estimand, estimate, interval, test, adjusted p, tasks paired and
undefined), `profile_rates.csv` and the reviewer's `comparison_report.md`.
"""),
        code('''# The plan is compared with its record (the runner's pre-registration, else the analysis folder's) and dated
# against the first trial; the runs folder is only read.
check = check_plan(Path(project_root) / info["runs_dir"], plan, plan_file, out_dir=paths.analytics)
check.note_first_trial(metrics["started_at"].dropna().tolist() if "started_at" in metrics else [])
print(check.timing_line())
groups = read_task_groups(Path(project_root) / task_groups) if task_groups else None
study = write_comparisons(metrics, paths.comparisons_dir, plan_check=check, baseline=base, simulated=simulated,
                          task_groups=groups)
comparisons, rates = study.comparisons, study.rates
for tier in ("primary", "secondary", "exploratory", "sensitivity"):
    if (comparisons["tier"] == tier).any():
        display(Markdown(f"**{tier.capitalize()} metrics**\\n\\n" + tier_table(comparisons, tier)))
display(Markdown("\\n".join(mcnemar_lines(comparisons))))'''),
        md("""
## Pass rate and resolve rate per profile

Two rates, named apart. The **pass rate** counts trials; repetitions of one task share its
difficulty, so its Wilson interval uses the design-effective sample size (the design effect is in
the table). The **resolve rate** counts tasks passed by the majority of their repetitions (a tie
fails); it is the rate the paired test compares, with a Wilson interval over tasks.
"""),
        code('''display(Markdown(rates_table(rates)))
fig = figures.plot_rates(rates, simulated, colors)
figures.save_figure(fig, fig_dir, "rates")
display(fig)
plt.close(fig)
outcomes = figures.task_outcomes(metrics)
fig = figures.plot_task_outcomes(outcomes, simulated)
figures.save_figure(fig, fig_dir, "task_outcomes")
display(fig)
plt.close(fig)'''),
        md("""
## Forest plot of the comparisons

The estimates and intervals of `comparisons.csv`, unchanged: resolve-rate differences in points,
and the typical per-task change in % for the ratio metrics. Filled markers are significant after
the plan's correction; the adjusted p-value is printed beside each row.
"""),
        code('''if len(figures.forest_rows(comparisons)):
    fig = figures.plot_forest(comparisons, simulated, colors)
    figures.save_figure(fig, fig_dir, "forest")
    display(fig)
    plt.close(fig)
else:
    figures.remove_figure(fig_dir, "forest")
    print("no comparisons: the forest plot is not drawn")'''),
        md("""
## Per-task changes in tokens and cost

For each task, each profile's per-task median against the baseline's, tasks sorted by effect: where
the savings come from, and whether a few tasks drive them. The dashed line is the estimate of the
forest plot.
"""),
        code('''for metric in ("total_tokens", "total_cost_usd"):
    changes = figures.per_task_changes(comparisons, metrics, metric)
    if changes.empty:
        figures.remove_figure(fig_dir, f"per_task_{metric}")
        print(f"{metric}: no task with values under the baseline and another profile; no figure")
        continue
    fig = figures.plot_per_task_changes(changes, comparisons, metric, simulated, colors)
    figures.save_figure(fig, fig_dir, f"per_task_{metric}")
    display(fig)
    plt.close(fig)'''),
        md("""
## Tool-usage mix

Each tool call is categorised once by the project's taxonomy (`analysis_lib.tools.categorize`:
read, search, edit, execute, MCP, other); shares are within each profile.
"""),
        code('''mix = tables.tool_mix(tables.tool_calls_from_metrics(metrics)).dropna(subset=["share"])
display(mix.pivot(index="profile", columns="category", values="share").round(3))
if mix.empty:
    figures.remove_figure(fig_dir, "tool_mix")
    print("no tool calls recorded: no tool-mix figure")
else:
    fig = figures.plot_tool_mix(mix, simulated)
    figures.save_figure(fig, fig_dir, "tool_mix")
    display(fig)
    plt.close(fig)'''),
    ]


def nb_03():
    return [
        md("""
# 03 LLM analyses (Layer 2)

LLM judges read condensed trajectories and the metrics to explain the differences: each trial's
strategy, the root cause of failures, how the MCP tools were used, comparative narratives per task
and a synthesis. Calls go through litellm with a content-addressed cache, a budget stop and
schema-validated answers (`analysis_lib.judge`). The judges explain; the numbers of the paper come
from Layers 1 and 2 statistics only.

By default the notebook does **not** call a model (`run_llm = False`); it shows the Layer 2 outputs
already present in the output folder. API keys come from the environment or `.env` and never
appear here.
"""),
        code(ENV),
        params(COMMON + "\n" + RUNS + '''
run_llm: bool = False  # True: call the judge model (needs a key in the environment or api_base)
model: str = ""  # litellm model name (empty: the judge's default)
api_base: str = ""  # OpenAI-compatible server, e.g. Ollama, vLLM, llama.cpp (empty: the provider's)
budget_usd: float = 0.0  # stop new LLM calls at 90 % of this spend (0: no budget)
llm_limit: int = 0  # judge at most this many trials, a seeded sample (0: every trial of metrics_detail.csv)
seed: int = 0  # seed for sampling trials to judge
judge_samples: int = 1  # K answers per judgement; the reported label is their majority
judge_temperature: float = 0.0  # temperature of every one of the K samples
blind: bool = True  # hide profile, MCP server and MCP tool names from the judge
unblind_mcp: bool = False  # let the MCP-utilisation analysis see the real tool names
human_labels: str = ""  # CSV of human labels (python -m analysis_lib label), relative to the project root'''),
        code(SETUP),
        code(RUN_INFO),
        md("""
## Run the judges (optional)

`run_layer2` is given the trials and the metrics table and writes its records into the `llm/`
folder; a second run is served from the cache.
"""),
        code('''if not run_llm:
    print("LLM analyses not run in this execution (run_llm = False)")
else:
    import argparse
    import random

    from analysis_lib.ingest.load import load_trials
    from analysis_lib.judge.run import run_layer2

    metrics = pd.read_csv(paths.metrics_detail)
    trials, _ = load_trials(Path(project_root) / runs_dir)
    # Judge the trials notebook 01 measured (same selection), at most llm_limit of them.
    keys = set(zip(metrics["profile"], metrics["task_id"], metrics["repetition"]))
    trials = [t for t in trials if (t.profile, t.task_id, t.repetition) in keys]
    if llm_limit and len(trials) > llm_limit:
        picked = sorted(random.Random(seed).sample(range(len(trials)), llm_limit))
        trials = [trials[i] for i in picked]
        chosen = {(t.profile, t.task_id, t.repetition) for t in trials}
        rows = [k in chosen for k in zip(metrics["profile"], metrics["task_id"], metrics["repetition"])]
        metrics = metrics[rows]
    print(f"judging {len(trials)} trials")
    options = argparse.Namespace(model=model or None, api_base=api_base or None, budget_usd=budget_usd or None,
                                 concurrency=4, refresh=False, judge_samples=judge_samples,
                                 judge_temperature=judge_temperature, blind=blind, unblind_mcp=unblind_mcp,
                                 judge_model_b=None, estimate_cost=False, quiet=True, seed=seed, simulated=simulated,
                                 human_labels=str(Path(project_root) / human_labels) if human_labels else None)
    summary = run_layer2(trials, metrics, paths.llm, options)
    print({k: summary.get(k) for k in ("requests", "cache_hits", "skipped", "failed_analyses")})'''),
        md("""
## How far the labels can be trusted

With human labels (`human_labels`, recorded with `python -m analysis_lib label` or `label.ipynb`)
or `judge_samples > 1`, `judge_agreement` is the agreement table: Cohen's kappa, Krippendorff's
alpha and Gwet's AC1, each with a 95 % bootstrap interval, the number of failed judgements per side
(never dropped silently) and a human-by-judge confusion matrix. `judge_contrasts` gives, for each
label class, the difference in prevalence between each arm and the baseline twice: counted from the
judge's labels alone, and corrected for the judge's errors with the human-labelled trials
(prediction-powered inference). Quote the corrected interval; the judge-only one is centred on the
wrong value whenever the judge errs. The judge is blind to arm names by default (`blind`).
A figure from the 135M local model is a pipeline check, not a validity figure.
"""),
        md("""
## Layer 2 outputs

What the judges wrote, if anything: the synthesis and the comparative narratives are shown as
text; structured records are counted.
"""),
        code('''from analysis_lib.judge.run import load_layer2_outputs

found = load_layer2_outputs(paths.llm) if paths.llm.exists() else {}
found = {k: v for k, v in found.items() if v is not None}  # absent outputs come back as None
if not found:
    print("no Layer 2 outputs in " + paths.rel(paths.llm) + " (run with run_llm = True, or `python -m analysis_lib RUNS` with a model)")
for name, value in sorted(found.items()):
    if isinstance(value, str):
        display(Markdown(f"### {name}\\n\\n" + value[:4000]))
    elif isinstance(value, dict) and isinstance(value.get("records"), list):
        print(f"{name}: {len(value['records'])} records")
    elif isinstance(value, (list, dict)):
        print(f"{name}: {len(value)} entries")'''),
    ]


def nb_04():
    return [
        md("""
# 04 CodeCanvas

For trials that used the CodeCanvas MCP server, its `state.json` (evidence, claims, decisions,
impact analyses) is read beside the trajectory: did the agent edit inside the blast radius it
analysed (blast radius edit rate), were its edits backed by evidence (informed editing score), how
deep did it deliberate? Definitions are in `analysis_lib.codecanvas`. Trials without a canvas have
empty CodeCanvas columns.
"""),
        code(ENV),
        params(COMMON + "\n" + RUNS + "\n" + FIGS),
        code(SETUP + '''
import matplotlib.pyplot as plt

from analysis_lib.report import figures, tables'''),
        code(RUN_INFO),
        md("""
## CodeCanvas metrics per trial

`codecanvas_table` gives one row per trial (identity columns and every CodeCanvas metric); it is
written to `codecanvas/codecanvas_table.csv` for the paper notebook.
"""),
        code('''from analysis_lib.codecanvas import codecanvas_table, write_codecanvas_outputs
from analysis_lib.fileio import atomic_write_csv
from analysis_lib.ingest.load import load_trials

trials, _ = load_trials(Path(project_root) / runs_dir)
table = codecanvas_table(trials)
paths.codecanvas.mkdir(parents=True, exist_ok=True)
atomic_write_csv(paths.codecanvas / "codecanvas_table.csv", table)
metric_cols = [c for c in table.columns if c not in ("profile", "task_id", "repetition", "run_id", "trial_path")]
with_canvas = table[table[metric_cols].notna().any(axis=1)]
print(f"{len(with_canvas)} of {len(table)} trials have CodeCanvas data")
if len(with_canvas):
    display(tables.profile_summary(with_canvas, metric_cols).dropna(subset=["mean"]).round(3))'''),
        md("""
## Figures

Per trial, the three headline CodeCanvas metrics of each profile that used it; the bar marks the
median.
"""),
        code('''cc_metrics = ["informed_editing_score", "blast_radius_edit_rate", "deliberation_depth"]
if any(c in table and table[c].notna().any() for c in cc_metrics):
    profiles = outputs.read_run_info(paths)["profiles"]
    fig = figures.plot_codecanvas(table, cc_metrics, simulated, figures.profile_colors(profiles))
    figures.save_figure(fig, Path(project_root) / figures_dir, "codecanvas")
    display(fig)
    plt.close(fig)
else:
    figures.remove_figure(Path(project_root) / figures_dir, "codecanvas")
    print("no CodeCanvas data: no CodeCanvas figure")'''),
        md("""
## Comparison report

`write_codecanvas_outputs` writes `codecanvas_comparison.md` (per profile: mean and median of each
metric) and `codecanvas_analysis.json` (per-trial metrics).
"""),
        code('''metrics = pd.read_csv(paths.metrics_detail)
write_codecanvas_outputs(trials, metrics, paths.codecanvas, simulated=simulated)
report = paths.codecanvas / "codecanvas_comparison.md"
if report.exists():
    display(Markdown(report.read_text(encoding="utf-8")))'''),
    ]


def nb_05():
    return [
        md("""
# 05 Paper snippets

The paper quotes no hand-typed number. This notebook turns the files of notebooks 01-04 into
`paper/snippets/*.tex` (booktabs tables, a generated results paragraph, figure environments and
`macros.tex`, one `\\newcommand` per quoted number with a comment naming its metric id and source
file) and `paper/paper_snippets.md`. `paper/main.tex` inputs them; the pipeline compiles it.
"""),
        code(ENV),
        params(COMMON + "\n" + FIGS + '''
paper_dir: str = "paper"  # where snippets/ and paper_snippets.md are written, relative to the project root
baseline: str = ""  # baseline profile (empty: the one index.json declares, else the first in sort order)'''),
        code(SETUP + '''
import os

from analysis_lib.report import paper'''),
        code(RUN_INFO + '''
import json

metrics = pd.read_csv(paths.metrics_detail)
comparisons = pd.read_csv(paths.comparisons_csv) if paths.comparisons_csv.exists() else None
rates_file = paths.comparisons_dir / "profile_rates.csv"
rates = pd.read_csv(rates_file) if rates_file.exists() else None
plan_file = paths.analytics / "analysis_plan.json"
plan_record = paper.PlanRecord.from_sidecar(json.loads(plan_file.read_text(encoding="utf-8"))) if plan_file.exists() else None
cc_file = paths.codecanvas / "codecanvas_table.csv"
codecanvas = pd.read_csv(cc_file) if cc_file.exists() else None
llm_file = paths.llm / "paper_snippets.md"
llm_snippets = llm_file.read_text(encoding="utf-8") if llm_file.exists() else None
for name, frame in (("comparisons", comparisons), ("profile rates", rates), ("plan record", plan_record),
                    ("CodeCanvas table", codecanvas), ("LLM snippets", llm_snippets)):
    if frame is None:
        print(f"not available: {name} (its notebook did not produce it); the paper omits it")'''),
        md("""
## Write the snippets

Sources named in the TeX comments are paths relative to the project root.
"""),
        code('''inputs = paper.PaperInputs(
    metrics=metrics, comparisons=comparisons, rates=rates, codecanvas=codecanvas, simulated=simulated,
    baseline=baseline or info.get("baseline") or sorted(metrics["profile"].unique())[0], plan=plan_record,
    sources={"metrics": paths.rel(paths.metrics_detail), "comparisons": paths.rel(paths.comparisons_csv),
             "rates": paths.rel(rates_file), "codecanvas": paths.rel(cc_file)}, llm_snippets=llm_snippets)
paper_path = Path(project_root) / paper_dir
fig_path = Path(project_root) / figures_dir
written = paper.write_paper_snippets(inputs, paper_path, fig_path,
                                     figures_rel=os.path.relpath(fig_path, paper_path).replace(os.sep, "/"))
for name, path in written.items():
    print(f"{name}: {paths.rel(path)}")'''),
        md("""
## The quoted numbers

Every macro with its value and metric id (the same table is in `paper_snippets.md`).
"""),
        code('''macros = paper.quoted_macros(inputs)
display(pd.DataFrame([{"macro": m.name, "value": m.text, "metric_id": m.metric_id, "what": m.note} for m in macros]))'''),
        md("""
## Figures in the paper

Each figure file and what it shows.
"""),
        code('''for stem, caption in paper.FIGURE_CAPTIONS.items():
    present = (fig_path / f"{stem}.pdf").exists()
    print(f"{stem}: {'present' if present else 'absent'} - {caption.replace(chr(92), '')}")'''),
    ]


def nb_explore():
    return [
        md("""
# Explore the runs: A versus B, step by step (interactive)

Not part of the pipeline. In JupyterLab (`make lab`) pick two profiles: the outcome grid shows
every task x repetition x arm coloured by outcome, sorted by the per-task difference; click a cell
to open the paired view of that task and repetition: both trajectories in two aligned lanes (tool
category by colour, MCP calls and errors marked), cumulative tokens and cost of both, the first
step where they part, the files only one arm read or edited, and each arm's outcome and tests.
Click a step to see its tool calls, arguments and a trimmed result. Before the notebook is run,
the outputs below show the same view, static, for the first pair.
"""),
        code(ENV),
        params(COMMON + "\n" + RUNS),
        code(SETUP + '''
import ipywidgets as widgets
import matplotlib.pyplot as plt

from analysis_lib import frames
from analysis_lib.ingest.load import load_trials
from analysis_lib.report import explore, pair_view, provenance'''),
        md("""
The trials are read from the runs folder itself (every ingested format), so this notebook does
not depend on the pipeline's outputs.
"""),
        code('''runs = Path(project_root) / runs_dir
trials, errors = load_trials(runs)
metrics = explore.integer_counts(frames.trials_df(trials))
simulated = provenance.is_simulated(runs)
if simulated:
    display(Markdown("> **SIMULATED DATA**: these runs come from the seeded simulator; the numbers are not findings."))
profiles = sorted(metrics["profile"].unique())
tasks = sorted(metrics["task_id"].unique())
baseline = provenance.declared_baseline(runs) or profiles[0]
other = next((p for p in profiles if p != baseline), baseline)
print(f"{len(trials)} trials, {len(profiles)} profiles, {len(tasks)} tasks, {len(errors)} unreadable")'''),
        md("""
## A versus B: outcome grid and paired trajectories

The first pair of the default profiles is shown statically until the notebook runs.
"""),
        code('''# NBVAL_IGNORE_OUTPUT
first = pair_view.pair_options(trials, baseline, other).iloc[0]
trial_a, trial_b = pair_view.find_pair(trials, baseline, other, first["task_id"], int(first["repetition"]))
static = pair_view.pair_view(trial_a, trial_b)
fallback = (pair_view.render_grid_html(pair_view.outcome_grid(metrics, baseline, other))
            + pair_view.render_pair_html(static, results=False))
explorer = explore.pair_explorer(trials, metrics, simulated, baseline, other)
explore.show(explorer, fallback, f"A-vs-B explorer ({baseline} vs {other}); run the notebook in JupyterLab to use it")'''),
        md("The same pair in numbers (what the static view above shows)."),
        code('''print(f"{static.a.task_id} repetition {static.a.repetition}: A = {static.a.profile}, {len(static.lane_a)} steps; "
      f"B = {static.b.profile}, {len(static.lane_b)} steps; first divergence at step {static.divergence}")
for key, files in static.files.items():
    print(f"{key}: {len(files)}")
display(static.outcomes.map(lambda v: round(v, 3) if isinstance(v, float) else v))'''),
        md("""
## Filter trials

Pick profiles and tasks (none selected = all) and an outcome.
"""),
        code('''show_cols = ["profile", "task_id", "repetition", "success", "total_tokens", "total_cost_usd", "agent_steps",
             "tool_calls_count", "tool_error_count", "mcp_tool_calls"]


def show_filtered(profiles_sel=(), tasks_sel=(), outcome="any"):
    df = explore.filter_trials(metrics, profiles_sel, tasks_sel, outcome)
    print(f"{len(df)} trials")
    display(df[show_cols].round(3).head(30))


filter_controls = {"profiles_sel": widgets.SelectMultiple(options=profiles, description="profiles"),
                   "tasks_sel": widgets.SelectMultiple(options=tasks, description="tasks", rows=6),
                   "outcome": widgets.Dropdown(options=["any", "succeeded", "failed", "infra_error"], description="outcome")}
'''),
        code('''# NBVAL_IGNORE_OUTPUT
# interactive_output draws at once into its Output widget, which nbval cannot follow: created here.
filter_out = widgets.interactive_output(show_filtered, filter_controls)
explore.show(widgets.VBox([widgets.HBox(list(filter_controls.values())), filter_out]),
             "<p>Trial filter (profiles, tasks, outcome): run the notebook to use it.</p>", "Trial filter: run the notebook to use it")'''),
        md("Default selection (what the widgets show before any change): failed trials of the first task."),
        code('''show_filtered((), (tasks[0],), "failed")'''),
        md("""
## Step timeline of one trajectory

Per step: tool calls (errored ones in red) and prompt and completion tokens. The repetition
slider spans the repetitions present in the runs.
"""),
        code('''def show_timeline(profile, task_id, repetition):
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
'''),
        code('''# NBVAL_IGNORE_OUTPUT
timeline_out = widgets.interactive_output(show_timeline, timeline_controls)
explore.show(widgets.VBox([widgets.HBox(list(timeline_controls.values())), timeline_out]),
             "<p>Step timeline picker: run the notebook to use it.</p>", "Step timeline picker: run the notebook to use it")'''),
        code('''trial = explore.find_trial(trials, profiles[-1], tasks[0], 1)
timeline = explore.step_timeline(trial)
print(f"{trial.profile} / {trial.task_id}: {len(timeline)} steps, {int(timeline['tool_calls'].sum())} tool calls, "
      f"{int(timeline['tool_errors'].sum())} errored")
display(timeline.head(12))'''),
        md("""
## One task under two profiles

Mean over repetitions of each metric; `difference` is B minus A.
"""),
        code('''def show_side_by_side(task_id, profile_a, profile_b):
    message = explore.same_profile_message(profile_a, profile_b)
    if message:
        print(message)
        return
    display(explore.side_by_side(metrics, task_id, profile_a, profile_b).round(3))


side_controls = {"task_id": widgets.Dropdown(options=tasks, description="task"),
                 "profile_a": widgets.Dropdown(options=profiles, value=baseline, description="A"),
                 "profile_b": widgets.Dropdown(options=profiles, value=other, description="B")}
'''),
        code('''# NBVAL_IGNORE_OUTPUT
side_out = widgets.interactive_output(show_side_by_side, side_controls)
explore.show(widgets.VBox([widgets.HBox(list(side_controls.values())), side_out]),
             "<p>Side-by-side means: run the notebook to use it.</p>", "Side-by-side means: run the notebook to use it")'''),
        code('''show_side_by_side(tasks[0], baseline, other)'''),
    ]


def nb_label():
    return [
        md("""
# Label trials (interactive)

Not part of the pipeline. Draws a stratified (profile x outcome), seeded sample of the runs, hides
the arm (profile, MCP server and tool names become neutral tokens) and shows each condensed
trajectory with one choice per analysis. Labels go to `labels_csv` with your `rater` name; two
raters using the same seed label the same trials. The last cells report inter-human agreement (the
ceiling for any judge) before judge-vs-human agreement. The terminal version is
`python -m analysis_lib label RUNS_DIR --rater NAME`. Executed headlessly, the notebook shows the
first trial and the report of the CSV as it is.
"""),
        code(ENV),
        params(COMMON + "\n" + RUNS + '''
labels_csv: str = "results/human_labels.csv"  # where labels are appended, relative to the project root
rater: str = ""  # your name or initials (required to record labels)
per_stratum: int = 2  # trials per profile x outcome
seed: int = 0  # seed of the sample: raters of one study use the same
max_chars: int = 4000  # condensed trajectory size shown'''),
        code('''from pathlib import Path

import ipywidgets as widgets
from IPython.display import Markdown, display

from analysis_lib.ingest.load import load_trials
from analysis_lib.judge.labelling import LABEL_CLASSES, append_label, choices, draw_sample, labelling_report, make_items, read_label_csv
from analysis_lib.report import notebook_params

notebook_params.check_parameters(globals())  # a wrong type fails here, naming the parameter
root = Path(notebook_params.find_project_root(project_root))
if not (root / runs_dir).is_dir():
    raise FileNotFoundError(f"runs_dir {runs_dir!r} is not a folder (paths are relative to the project root)")
csv_path = root / labels_csv
trials, _ = load_trials(root / runs_dir)
items = make_items(draw_sample(trials, per_stratum, seed), trials, max_chars)
print(f"{len(items)} trials drawn ({per_stratum} per profile x outcome, seed {seed})")'''),
        md("""
## Label

One trial at a time: pick a class per analysis and press *save and next* (needs `rater`).
"""),
        code('''# NBVAL_IGNORE_OUTPUT
done = set(zip(*(read_label_csv(csv_path)[["trial_id", "analysis"]].to_numpy().T))) if rater and csv_path.exists() else set()
state = {"i": 0}
view = widgets.Output()

def show(i):
    view.clear_output()
    with view:
        if i >= len(items):
            print("all trials labelled")
            return
        item = items[i]
        pickers = {a: widgets.RadioButtons(options=choices(a, item.trial_id, seed), description=a, value=None) for a in item.analyses}
        button = widgets.Button(description="save and next", disabled=not rater)

        def save(_):
            for a, w in pickers.items():
                if w.value:
                    append_label(csv_path, item.trial_id, a, rater, w.value)
            state["i"] += 1
            show(state["i"])

        button.on_click(save)
        display(Markdown(f"**Trial {i + 1} of {len(items)}**"), widgets.HTML("<pre style='white-space: pre-wrap'>" + item.text.replace("<", "&lt;") + "</pre>"),
                *pickers.values(), button)

show(0)
view'''),
        md("What the first trial looks like (also shown when the notebook runs headlessly):"),
        code('''print(items[0].text[:1500] if items else "no trial to label")
for a in (items[0].analyses if items else []):
    print(f"[{a}]", ", ".join(choices(a, items[0].trial_id, seed)))'''),
        md("""
## Agreement

Inter-human agreement first, then the judge against each rater when `llm/` holds judge labels.
"""),
        code('''llm_dir = root / output_dir / "llm"
display(Markdown(labelling_report(csv_path, llm_dir if llm_dir.exists() else None) if csv_path.exists() else f"no labels yet in {labels_csv}"))'''),
    ]


BUILDERS = {"00_run_benchmark": nb_00, "01_metrics": nb_01, "02_stats": nb_02, "03_llm_analysis": nb_03,
            "04_codecanvas": nb_04, "05_paper": nb_05, "explore": nb_explore,
            "label": nb_label}


def build(name: str) -> nbformat.NotebookNode:
    nb = new_notebook(cells=BUILDERS[name]())
    for i, cell in enumerate(nb.cells):
        cell.id = f"{name.replace('_', '-')}-{i:02d}"  # stable ids: rebuilding does not churn the diff
    # As ipykernel names its kernel: JupyterLab rewrites any other display name when a notebook is saved.
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def main(argv: list[str]) -> int:
    names = argv or list(BUILDERS)
    NOTEBOOKS.mkdir(exist_ok=True)
    for name in names:
        nbformat.write(build(name), NOTEBOOKS / f"{name}.ipynb")
        print(f"wrote notebooks/{name}.ipynb")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
