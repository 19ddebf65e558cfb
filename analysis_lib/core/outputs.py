"""Every file an analysis writes, named once: writers and readers (notebooks, the paper, RESULTS.md) use these.

An analysis output folder holds the study and its Layer 1 tables (``analytics/``), the comparisons and the
estimands beside them (``comparisons/``), the LLM judges' records (``llm/``) and the CodeCanvas tables
(``codecanvas/``); the command line writes the first two into one folder.
"""

from __future__ import annotations

# The study (analysis_lib.study.study.Study.save) and the Layer 1 tables.
STUDY = "study.json"
METRICS_DETAIL = "metrics_detail.csv"
ERRORS = "errors.csv"
RERUNS = "reruns.csv"
ACTIONS = "trial_actions.json"
DESIGN_AUDIT = "design_audit.csv"
DESIGN_FINDINGS = "design_findings.csv"
# A study with configurations: one audit row per configuration.
DESIGN_CONFIGURATIONS = "design_configurations.csv"
METRICS_SUMMARY = "metrics_summary.csv"
AGGREGATE_METRICS = "aggregate_metrics.json"
PLAN_SIDECAR = "analysis_plan.json"
PLAN_RECORD = "analysis_plan.lock.json"
TRIALS_CACHE = "trials_cache.json"

# The comparisons (analysis_lib.inference) and the reviewer's report.
COMPARISONS = "comparisons.csv"
PROFILE_RATES = "profile_rates.csv"
HYPOTHESES = "hypotheses.csv"
VARIANCE_COMPONENTS = "variance_components.csv"
PASS_AT_K = "pass_at_k.csv"
ENDPOINT_CORRELATIONS = "endpoint_correlations.csv"
SUBGROUPS = "subgroups.csv"
COMPARISON_REPORT = "comparison_report.md"
# A study with configurations: each primary metric's effect pooled across them (three methods per metric), the
# entries pooled (one per configuration and metric), and the exploratory meta-regression on declared moderators.
POOLED = "pooled.csv"
POOLED_CONFIGURATIONS = "pooled_configurations.csv"
META_REGRESSION = "meta_regression.csv"
# Beside intention to treat, one file per estimand family.
COMPLIANCE = "compliance.csv"
INFRA_BOUNDS = "infra_bounds.csv"
DIVERGENCE = "divergence.csv"
MEDIATION = "mediation.csv"
# A sequential run's design, its stop and the estimates adjusted for it.
SEQUENTIAL = "sequential.json"
SEQUENTIAL_ESTIMATES = "sequential_estimates.csv"

# CodeCanvas.
CODECANVAS_TABLE = "codecanvas_table.csv"
CODECANVAS_COMPARISON = "codecanvas_comparison.md"
CODECANVAS_ANALYSIS = "codecanvas_analysis.json"

# The paper.
PAPER_SNIPPETS = "paper_snippets.md"
MACROS = "macros.tex"

# An output folder holds one analysis (analysis_lib.core.output_set): the manifest naming the set it holds, and the
# staging folder a run writes into before its files replace that set.
OUTPUT_MANIFEST = "output_manifest.json"
STAGING_DIR = ".staging"
# The benchmark runner's record of a run and the runs folder's own index, beside the trials it ran (what the
# runner writes and the analysis, RESULTS.md and the notebooks read), and the plan notebook 00 writes.
FULL_RUN = "full_run.json"
RUN_INDEX = "index.json"
BENCHMARK_PLAN = "plan.json"

# The folders of a pipeline's output folder (analysis_lib.report.outputs.OutputPaths).
ANALYTICS_DIR = "analytics"
COMPARISONS_DIR = "comparisons"
LLM_DIR = "llm"
CODECANVAS_DIR = "codecanvas"
BENCHMARK_DIR = "benchmark"
