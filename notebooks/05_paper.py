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
# # 05 Paper snippets
#
# The paper quotes no hand-typed number. This notebook turns the files of notebooks 01-04 into
# `paper/snippets/*.tex` (booktabs tables, a generated results paragraph, figure environments and
# `macros.tex`, one `\newcommand` per quoted number with a comment naming its metric id and source
# file) and `paper/paper_snippets.md`. `paper/main.tex` inputs them; the pipeline compiles it.

# %%
import os

# Offline litellm price map and quiet logs, before anything can import litellm (see NOTES in docs/notebooks.md).
for key, value in {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}.items():
    os.environ.setdefault(key, value)

# %% tags=["parameters"]
project_root: str = ""  # project folder; empty: found upward from the working directory (pyproject.toml)
output_dir: str = "results/sample"  # analysis files passed between notebooks, relative to the project root
figures_dir: str = "figures"  # where figures are written (PNG and PDF), relative to the project root
paper_dir: str = "paper"  # where snippets/ and paper_snippets.md are written, relative to the project root
staging_dir: str = ""  # set by the paper pipeline: where this run writes until its outputs replace the previous set (empty: in place)

# %%
from pathlib import Path

import pandas as pd
from IPython.display import Markdown, display

from analysis_lib.report import notebook_params, outputs

notebook_params.check_parameters(globals())  # a wrong type fails here, naming the parameter
project_root = notebook_params.find_project_root(project_root)
paths = outputs.output_paths(project_root, output_dir, figures_dir=figures_dir, paper_dir=paper_dir,
                             staging_dir=staging_dir)
import os

from analysis_lib import Study
from analysis_lib.core import outputs as files
from analysis_lib.report import paper
from analysis_lib.report.audit import audit_frames, data_banner
from analysis_lib.report.beside_itt import read_beside

# %%
# The study notebook 01 resolved (arms, baseline, audit, where the runs came from); the analysis files of 02-04.
study = Study.load(paths.analytics)
simulated = study.simulated
data_source = study.source.model_dump() if study.source else None
banner = data_banner(simulated, data_source)
if banner:
    display(Markdown(f"> **{banner}**"))
import json

# The one token policy: trials whose token counts are not trusted count in no token or cost figure (study.token_exclusions).
metrics = study.trusted_metrics
comparisons = pd.read_csv(paths.comparisons_csv) if paths.comparisons_csv.exists() else None
rates_file = paths.comparisons_dir / files.PROFILE_RATES
rates = pd.read_csv(rates_file) if rates_file.exists() else None
hyp_file = paths.comparisons_dir / files.HYPOTHESES
hypotheses = pd.read_csv(hyp_file) if hyp_file.exists() else None  # only when the plan declares a sequence
corr_file = paths.comparisons_dir / files.ENDPOINT_CORRELATIONS  # r of the primary endpoints' per-task log ratios
correlations = pd.read_csv(corr_file) if corr_file.exists() else None
plan_file = paths.analytics / files.PLAN_SIDECAR
plan_record = paper.PlanRecord.from_sidecar(json.loads(plan_file.read_text(encoding="utf-8"))) if plan_file.exists() else None
cc_file = paths.codecanvas / files.CODECANVAS_TABLE
codecanvas = pd.read_csv(cc_file) if cc_file.exists() else None
llm_file = paths.llm / files.PAPER_SNIPPETS
llm_snippets = llm_file.read_text(encoding="utf-8") if llm_file.exists() else None
from analysis_lib.core.outputs import POOLED
from analysis_lib.report.configurations import configuration_inputs
from analysis_lib.report.sequential import SEQUENTIAL_JSON, read_outputs

# A sequential run (notebook 02): its design, the look it stopped at and the estimates adjusted for the stop.
sequential_record, sequential_estimates = read_outputs(paths.comparisons_dir)
for name, frame in (("comparisons", comparisons), ("profile rates", rates), ("plan record", plan_record),
                    ("CodeCanvas table", codecanvas), ("LLM snippets", llm_snippets)):
    if frame is None:
        print(f"not available: {name} (its notebook did not produce it); the paper omits it")

# %% [markdown]
# ## Write the snippets
#
# Sources named in the TeX comments are paths relative to the project root.

# %%
inputs = paper.PaperInputs(
    metrics=metrics, comparisons=comparisons, rates=rates, codecanvas=codecanvas, simulated=simulated, hypotheses=hypotheses,
    baseline=study.require_baseline(), plan=plan_record,
    sources={"metrics": paths.rel(paths.metrics_detail), "comparisons": paths.rel(paths.comparisons_csv),
             "rates": paths.rel(rates_file), "codecanvas": paths.rel(cc_file), "hypotheses": paths.rel(hyp_file),
             "audit": paths.rel(paths.analytics / files.DESIGN_AUDIT), "beside": paths.rel(paths.comparisons_dir),
             "sequential": paths.rel(paths.comparisons_dir / SEQUENTIAL_JSON), "correlations": paths.rel(corr_file),
             "pooled": paths.rel(paths.comparisons_dir / POOLED)},
    llm_snippets=llm_snippets, correlations=correlations,
    audit=audit_frames(study.audit) if study.audit is not None else None, data_source=data_source,
    beside=read_beside(paths.comparisons_dir) or None,
    sequential=sequential_record, sequential_estimates=sequential_estimates, study=study,
    configurations=configuration_inputs(study, paths.comparisons_dir))
paper_path = paths.paper
fig_path = paths.figures
written = paper.write_paper_snippets(inputs, paper_path, fig_path,
                                     figures_rel=os.path.relpath(fig_path, paper_path).replace(os.sep, "/"))
for name, path in written.items():
    print(f"{name}: {paths.rel(path)}")

# %% [markdown]
# ## The quoted numbers
#
# Every macro with its value and metric id (the same table is in `paper_snippets.md`).

# %%
macros = paper.quoted_macros(inputs)
display(pd.DataFrame([{"macro": m.name, "value": m.text, "metric_id": m.metric_id, "what": m.note} for m in macros]))

# %% [markdown]
# ## Figures in the paper
#
# Each figure file and what it shows.

# %%
from analysis_lib.report.configurations import forest_captions

for stem, caption in {**paper.FIGURE_CAPTIONS, **forest_captions(inputs.configurations.pooling if inputs.configurations else None)}.items():
    present = (fig_path / f"{stem}.pdf").exists()
    print(f"{stem}: {'present' if present else 'absent'} - {caption.replace(chr(92), '')}")
