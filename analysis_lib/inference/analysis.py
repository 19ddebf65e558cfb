"""The analysis of one study: the plan run over its arm pairs, the profile rates, and the estimands beside ITT.

:func:`analyse_comparisons` is the only entry that computes what ``comparisons.csv`` and its companions hold; it
is handed the :class:`~analysis_lib.study.study.Study` (arms, baseline, plan, audit, each trial's actions) and
returns one :class:`~analysis_lib.inference.results.Analysis`, which the report, the paper and RESULTS.md render without computing anything.
"""

from __future__ import annotations

import pandas as pd

from ..study.plan import AnalysisPlan
from ..study.study import Study
from .beside_itt.estimands import beside_itt
from .comparisons import compare, endpoint_correlations
from .hypotheses import test_sequence
from .pooling import PoolingError, compare_configurations, pool_comparisons
from .rates import profile_rates
from .repetitions import pass_at_k_table, variance_components
from .results import Analysis, ConfigurationPooling
from .subgroups import subgroup_effects_by_pair

__all__ = ["analyse_comparisons", "pool_configurations"]


def analyse_comparisons(study: Study, plan: AnalysisPlan | None = None, *, compare_pair: tuple[str, str] | None = None,
                        refused: dict[str, str] | None = None, task_groups: pd.Series | None = None,
                        beside: bool = True) -> Analysis:
    """Run ``plan`` (default: the study's) over the study's arm pairs (every arm against its baseline, or
    ``compare_pair`` alone), with the profile rates, repetitions, hypotheses and (``beside``) the estimands beside
    intention to treat. Raises :class:`~analysis_lib.study.study.StudyError` when the study has no baseline."""
    plan = plan if plan is not None else study.plan
    if plan is None:
        raise ValueError("no analysis plan: the study was opened without one that could be read")
    metrics = study.trusted_metrics  # the one token policy: untrusted token counts are left out here too
    for col in ("profile", "task_id"):
        if col not in metrics.columns:
            raise ValueError(f"the metrics frame has no {col!r} column")
    pairs = study.pairs(compare_pair)
    boot = plan.bootstrap
    by_configuration = study.configuration_pairs() if compare_pair is None else {}
    if by_configuration:
        # Each configuration's treatment against its own control; one correction per tier over all of them.
        comparisons = compare_configurations(metrics, plan, by_configuration, refused=refused)
    else:
        comparisons = compare(metrics, plan, pairs, refused=refused)
    out = Analysis(comparisons,
                   profile_rates(metrics, confidence=boot.confidence, n_boot=boot.n_resamples, seed=boot.seed), plan, pairs,
                   test_sequence(metrics, plan, pairs) if plan.hypotheses else None,
                   variance_components(metrics),
                   pass_at_k_table(metrics, pairs, n_boot=boot.n_resamples, seed=boot.seed, confidence=boot.confidence),
                   subgroup_effects_by_pair(metrics, task_groups, pairs) if task_groups is not None and pairs else None,
                   correlations=endpoint_correlations(metrics, comparisons))
    if by_configuration:
        out.pooling = pool_configurations(study, comparisons, plan)
    if beside:
        out.beside = beside_itt(study, comparisons, plan, pairs, refused=(refused or {}).keys())
    return out


def pool_configurations(study: Study, comparisons: pd.DataFrame, plan: AnalysisPlan) -> ConfigurationPooling:
    """Each primary metric's per-configuration effect pooled with the random-effects model (REML with the HKSJ
    interval, Paule-Mandel and DerSimonian-Laird beside it, heterogeneity, the prediction interval), with the
    exploratory meta-regression on the study file's moderators; a metric that cannot be pooled is named with why."""
    out = ConfigurationPooling(sorted(comparisons["configuration"].astype(str).unique()))
    moderators = study.moderators()
    for spec in plan.tiers.primary.metrics:
        if spec.id not in set(comparisons["metric"]):
            continue
        if len(out.configurations) < 2:
            out.not_pooled[spec.id] = f"one configuration ({out.configurations[0]}): nothing to pool across configurations"
            continue
        try:
            out.pooled.append(pool_comparisons(comparisons, spec.id, confidence=plan.bootstrap.confidence,
                                               moderators=moderators))
        except PoolingError as exc:
            out.not_pooled[spec.id] = str(exc)
    return out
