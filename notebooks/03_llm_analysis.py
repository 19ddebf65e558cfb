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
# # 03 LLM analyses (Layer 2)
#
# LLM judges read condensed trajectories and the metrics to explain the differences: each trial's
# strategy, the root cause of failures, how the MCP tools were used, comparative narratives per task
# and a synthesis. Calls go through litellm with a content-addressed cache, a budget stop and
# schema-validated answers (`analysis_lib.judge`). The judges explain; the numbers of the paper come
# from Layers 1 and 2 statistics only.
#
# By default the notebook does **not** call a model (`run_llm = False`); it shows the Layer 2 outputs
# already present in the output folder. API keys come from the environment or `.env` and never
# appear here.

# %%
import os

# Offline litellm price map and quiet logs, before anything can import litellm (see NOTES in docs/notebooks.md).
for key, value in {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}.items():
    os.environ.setdefault(key, value)

# %% tags=["parameters"]
project_root: str = ""  # project folder; empty: found upward from the working directory (pyproject.toml)
output_dir: str = "results/sample"  # analysis files passed between notebooks, relative to the project root
run_llm: bool = False  # True: call the judge model (needs a key in the environment or api_base)
model: str = ""  # litellm model name (empty: the judge's default)
api_base: str = ""  # OpenAI-compatible server, e.g. Ollama, vLLM, llama.cpp (empty: the provider's)
budget_usd: float = 0.0  # cap on LLM spend: no call is sent whose worst-case cost would pass it (0: no budget)
llm_limit: int = 0  # judge at most this many trials, a seeded sample (0: every trial of metrics_detail.csv)
seed: int = 0  # seed for sampling trials to judge
judge_samples: int = 1  # K answers per judgement; the reported label is their majority
judge_temperature: float = 0.0  # temperature of every one of the K samples
blind: bool = True  # hide profile, MCP server and MCP tool names from the judge
unblind_mcp: bool = False  # let the MCP-utilisation analysis see the real tool names
human_labels: str = ""  # CSV of human labels (python -m analysis_lib label), relative to the project root
staging_dir: str = ""  # set by the paper pipeline: where this run writes until its outputs replace the previous set (empty: in place)

# %%
from pathlib import Path

import pandas as pd
from IPython.display import Markdown, display

from analysis_lib.report import notebook_params, outputs

notebook_params.check_parameters(globals())  # a wrong type fails here, naming the parameter
project_root = notebook_params.find_project_root(project_root)
paths = outputs.output_paths(project_root, output_dir, staging_dir=staging_dir)

# %%
from analysis_lib import Study

# The study notebook 01 resolved: its arms, its baseline (the judge is told the same one) and its trials table.
study = Study.load(paths.analytics)
simulated = study.simulated
if simulated:
    display(Markdown("> **SIMULATED DATA**: these runs come from the seeded simulator; the numbers are not findings."))

# %% [markdown]
# ## Run the judges (optional)
#
# `run_layer2` is given the trials and the metrics table and writes its records into the `llm/`
# folder; a second run is served from the cache.

# %%
if not run_llm:
    print("LLM analyses not run in this execution (run_llm = False)")
else:
    import argparse
    import random

    from analysis_lib.judge.run import run_layer2

    metrics = study.metrics
    # Judge the trials notebook 01 measured (same selection, named as its table names them), at most llm_limit.
    paths_judged = list(metrics["trial_path"])
    if llm_limit and len(paths_judged) > llm_limit:
        paths_judged = [paths_judged[i] for i in sorted(random.Random(seed).sample(range(len(paths_judged)), llm_limit))]
        metrics = metrics[metrics["trial_path"].isin(paths_judged)]
    trials, _ = study.load_trials(paths_judged, root=project_root)
    print(f"judging {len(trials)} trials")
    options = argparse.Namespace(model=model or None, api_base=api_base or None, budget_usd=budget_usd or None,
                                 concurrency=4, refresh=False, judge_samples=judge_samples,
                                 judge_temperature=judge_temperature, blind=blind, unblind_mcp=unblind_mcp,
                                 judge_model_b=None, estimate_cost=False, quiet=True, seed=seed, simulated=simulated,
                                 baseline=study.require_baseline(), pairs=study.pairs(),
                                 human_labels=str(Path(project_root) / human_labels) if human_labels else None)
    summary = run_layer2(trials, metrics, paths.llm, options)
    print({k: summary.get(k) for k in ("requests", "cache_hits", "skipped", "failed_analyses")})

# %% [markdown]
# ## How far the labels can be trusted
#
# With human labels (`human_labels`, recorded with `python -m analysis_lib label` or `label.ipynb`)
# or `judge_samples > 1`, `judge_agreement` is the agreement table: Cohen's kappa, Krippendorff's
# alpha and Gwet's AC1, each with a 95 % bootstrap interval, the number of failed judgements per side
# (never dropped silently) and a human-by-judge confusion matrix. `judge_contrasts` gives, for each
# label class, the difference in prevalence between each arm and the baseline twice: counted from the
# judge's labels alone, and corrected for the judge's errors with the human-labelled trials
# (prediction-powered inference). Quote the corrected interval; the judge-only one is centred on the
# wrong value whenever the judge errs. The judge is blind to arm names by default (`blind`).
# A figure from the 135M local model is a pipeline check, not a validity figure.

# %% [markdown]
# ## Layer 2 outputs
#
# What the judges wrote, if anything: the synthesis and the comparative narratives are shown as
# text; structured records are counted.

# %%
from analysis_lib.judge.run import load_layer2_outputs

found = load_layer2_outputs(paths.llm) if paths.llm.exists() else {}
found = {k: v for k, v in found.items() if v is not None}  # absent outputs come back as None
if not found:
    print("no Layer 2 outputs in " + paths.rel(paths.llm) + " (run with run_llm = True, or `python -m analysis_lib RUNS` with a model)")
for name, value in sorted(found.items()):
    if isinstance(value, str):
        display(Markdown(f"### {name}\n\n" + value[:4000]))
    elif isinstance(value, dict) and isinstance(value.get("records"), list):
        print(f"{name}: {len(value['records'])} records")
    elif isinstance(value, (list, dict)):
        print(f"{name}: {len(value)} entries")
