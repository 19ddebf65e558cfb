"""analysis_lib: ingest agent runs, compute metrics, compare profiles, explain and publish.

Where to start from Python (the notebooks use the same calls)::

    from analysis_lib.layer1 import analyse                          # runs folder -> one row of metrics per trial
    from analysis_lib.report.comparison_report import write_comparisons  # the analysis plan over every pair
"""

__version__ = "0.1.0"  # the one version source: pyproject.toml reads it
