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
# # Label trials (interactive)
#
# Not part of the pipeline. Draws a stratified (profile x outcome), seeded sample of the runs, hides
# the arm (profile, MCP server and tool names become neutral tokens) and shows each condensed
# trajectory with one choice per analysis. Labels go to `labels_csv` with your `rater` name; two
# raters using the same seed label the same trials. The last cells report inter-human agreement (the
# ceiling for any judge) before judge-vs-human agreement. The terminal version is
# `python -m analysis_lib label RUNS_DIR --rater NAME`. Executed headlessly, the notebook shows the
# first trial and the report of the CSV as it is.

# %%
import os

# Offline litellm price map and quiet logs, before anything can import litellm (see NOTES in docs/notebooks.md).
for key, value in {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}.items():
    os.environ.setdefault(key, value)

# %% tags=["parameters"]
project_root: str = ""  # project folder; empty: found upward from the working directory (pyproject.toml)
output_dir: str = "results/sample"  # analysis files passed between notebooks, relative to the project root
runs_dir: str = "runs/sample"  # runs to analyse, relative to the project root
study_file: str = ""  # study file (YAML) declaring the arms and the success rule (docs/studies.md); empty: the readers' default profiles
labels_csv: str = "results/human_labels.csv"  # where labels are appended, relative to the project root
rater: str = ""  # your name or initials (required to record labels)
per_stratum: int = 2  # trials per profile x outcome
seed: int = 0  # seed of the sample: raters of one study use the same
max_chars: int = 4000  # condensed trajectory size shown

# %%
from pathlib import Path

import ipywidgets as widgets
from IPython.display import Markdown, display

from analysis_lib.judge.labelling import (LABEL_CLASSES, append_label, choices, draw_sample, labelling_report, make_items,
                                         read_label_csv, study_rows)
from analysis_lib.study.study import study_of_trials
from analysis_lib.report import notebook_params
from analysis_lib.report.live_output import set_outputs

notebook_params.check_parameters(globals())  # a wrong type fails here, naming the parameter
root = Path(notebook_params.find_project_root(project_root))
if not (root / runs_dir).is_dir():
    raise FileNotFoundError(f"runs_dir {runs_dir!r} is not a folder (paths are relative to the project root)")
csv_path = root / labels_csv
# The study's arms and success rule stratify the sample (profile x outcome as the study scores it).
study, trials = study_of_trials(root / runs_dir, root / study_file if study_file else None)
rows = study_rows(study.metrics)
items = make_items(draw_sample(trials, rows, per_stratum, seed), rows, trials, max_chars)
print(f"{len(items)} trials drawn ({per_stratum} per profile x outcome, seed {seed})")

# %% [markdown]
# ## Label
#
# One trial at a time: pick a class per analysis and press *save and next* (needs `rater`).

# %%
# NBVAL_IGNORE_OUTPUT
done = set(zip(*(read_label_csv(csv_path)[["trial_id", "analysis"]].to_numpy().T))) if rater and csv_path.exists() else set()
state = {"i": 0}
view = widgets.Output()

def show(i):
    if i >= len(items):
        set_outputs(view, Markdown("all trials labelled"))
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
    set_outputs(view, Markdown(f"**Trial {i + 1} of {len(items)}**"),
                widgets.HTML("<pre style='white-space: pre-wrap'>" + item.text.replace("<", "&lt;") + "</pre>"),
                *pickers.values(), button)

show(0)
view

# %% [markdown]
# What the first trial looks like (also shown when the notebook runs headlessly):

# %%
print(items[0].text[:1500] if items else "no trial to label")
for a in (items[0].analyses if items else []):
    print(f"[{a}]", ", ".join(choices(a, items[0].trial_id, seed)))

# %% [markdown]
# ## Agreement
#
# Inter-human agreement first, then the judge against each rater when `llm/` holds judge labels.

# %%
llm_dir = root / output_dir / "llm"
display(Markdown(labelling_report(csv_path, llm_dir if llm_dir.exists() else None) if csv_path.exists() else f"no labels yet in {labels_csv}"))
