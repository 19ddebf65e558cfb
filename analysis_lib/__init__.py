"""analysis_lib: ingest agent runs, compute metrics, compare profiles, explain and publish.

The calls the notebooks and the README use are exported here; each is loaded on first use, so
``import analysis_lib`` stays cheap for the command line. An example on simulated runs (the
simulator's draws, not findings), from runs folder to the comparisons of the analysis plan::

    >>> import tempfile
    >>> import analysis_lib as al
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     runs = al.simulate_runs(f"{tmp}/runs", seed=7, n_tasks=4, repetitions=2)
    ...     trials, errors = al.load_trials(runs)          # typed trials, one-line errors
    ...     study = al.analyse(runs, f"{tmp}/out")         # the Study, and metrics_detail.csv and friends
    ...     analysis = al.write_comparisons(study, f"{tmp}/out")
    >>> len(trials), len(study.metrics), study.arms, study.baseline.line()
    (24, 24, ['codecanvas', 'codegraph', 'text'], "baseline: text (the runs folder's index.json)")
    >>> analysis.comparisons[["profile_a", "profile_b"]].drop_duplicates().values.tolist()
    [['text', 'codecanvas'], ['text', 'codegraph']]

The plan that fixes those comparisons before the data is read::

    >>> plan = al.load_plan()                              # params/analysis_plan.yaml
    >>> plan.pairing.repetitions, [(m.id, m.test) for m in plan.tiers.primary.metrics][:2]
    ('majority', [('success', 'mcnemar_exact'), ('total_tokens', 'wilcoxon_signed_rank')])
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .core.version import __version__ as __version__

# Public name -> the module that defines it.
_API = {
    # Runs in, trials and tables out.
    "simulate_runs": "analysis_lib.simulate.runs",
    "load_trials": "analysis_lib.ingest.load",
    "analyse": "analysis_lib.study.layer1",
    "write_outputs": "analysis_lib.study.layer1",
    # The study, resolved once: arms, success rule, plan, baseline, audit.
    "open_study": "analysis_lib.study.study",
    "Study": "analysis_lib.study.study",
    "trials_df": "analysis_lib.study.frames",
    "steps_df": "analysis_lib.study.frames",
    "tool_calls_df": "analysis_lib.study.frames",
    "tests_df": "analysis_lib.study.frames",
    "codecanvas_table": "analysis_lib.codecanvas.metrics",
    # The study design: which trials form each arm, and the baseline.
    "load_design": "analysis_lib.study.study_file",
    "resolve_baseline": "analysis_lib.study.baseline",
    # The plan and the analysis it fixes.
    "load_plan": "analysis_lib.study.plan",
    "check_plan": "analysis_lib.study.plan",
    "compare": "analysis_lib.inference.comparisons",
    "profile_pairs": "analysis_lib.study.baseline",
    "analyse_comparisons": "analysis_lib.inference.analysis",
    "write_comparisons": "analysis_lib.cli.comparisons",
    # The paper and the benchmark's RESULTS.md.
    "PaperInputs": "analysis_lib.report.paper",
    "write_paper_snippets": "analysis_lib.report.paper",
    "run_pipeline": "analysis_lib.cli.pipeline",
    "write_results": "analysis_lib.cli.results",
}

# The same names as _API (a test checks it), written out so that linters see what is exported.
__all__ = [
    "PaperInputs",
    "Study",
    "analyse",
    "analyse_comparisons",
    "check_plan",
    "codecanvas_table",
    "compare",
    "load_design",
    "load_plan",
    "load_trials",
    "open_study",
    "profile_pairs",
    "resolve_baseline",
    "run_pipeline",
    "simulate_runs",
    "steps_df",
    "tests_df",
    "tool_calls_df",
    "trials_df",
    "write_comparisons",
    "write_outputs",
    "write_paper_snippets",
    "write_results",
]

if TYPE_CHECKING:  # what editors and type checkers see; at run time __getattr__ loads on first use
    from .cli.comparisons import write_comparisons
    from .cli.pipeline import run_pipeline
    from .cli.results import write_results
    from .codecanvas.metrics import codecanvas_table
    from .inference.analysis import analyse_comparisons
    from .inference.comparisons import compare
    from .ingest.load import load_trials
    from .report.paper import PaperInputs, write_paper_snippets
    from .simulate.runs import simulate_runs
    from .study.baseline import profile_pairs, resolve_baseline
    from .study.frames import steps_df, tests_df, tool_calls_df, trials_df
    from .study.layer1 import analyse, write_outputs
    from .study.plan import check_plan, load_plan
    from .study.study import Study, open_study
    from .study.study_file import load_design


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'analysis_lib' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
