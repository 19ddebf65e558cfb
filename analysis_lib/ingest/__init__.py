"""Ingest: find the sources under a runs folder (``discover``) and read each into
:class:`analysis_lib.core.trial.Trial` objects and :class:`~analysis_lib.core.trial.IngestError` rows (``read``),
one reader per source format. Metrics are computed above, in :mod:`analysis_lib.metrics.trials_table`."""
