"""The estimands reported beside intention to treat, as the analysis plan declares them (``beside_itt``).

The planned comparisons are by assignment: every trial counts in the arm it was assigned to, whatever
its agent did, and no trial is dropped for not calling the tools. Beside them, each under its own name
and in its own file (``compliance.csv``, ``infra_bounds.csv``, ``divergence.csv``, ``mediation.csv``):

* the effect among trials that used MCP (:mod:`analysis_lib.inference.beside_itt.compliance`), a secondary estimand;
* bounds for the trials lost to infrastructure failures (:mod:`analysis_lib.inference.beside_itt.bounds`);
* where discordant trajectories diverge (:mod:`analysis_lib.inference.beside_itt.divergence`, exploratory);
* a mediation-style decomposition through trajectory behaviours (:mod:`analysis_lib.inference.beside_itt.mediation`, exploratory).
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from ...study.plan import AnalysisPlan
from ...study.study import Study
from .bounds import infra_bounds
from .compliance import compliance_table, mcp_arms
from .divergence import divergence_pairs
from .mediation import mediation_table
from .result import BesideResult

__all__ = ["beside_itt"]

def beside_itt(study: Study, comparisons: pd.DataFrame, plan: AnalysisPlan, pairs: list[tuple[str, str]], *,
               refused: Iterable[str] = ()) -> BesideResult:
    """Everything ``plan.beside()`` declares, for the profile pairs of the planned comparisons of ``study``.

    ``comparisons``: the engine's rows (:func:`analysis_lib.inference.comparisons.compare`); the study gives the
    trials, which arms were offered MCP (its design audit) and each trial's actions (for the divergence: a study
    with none, loaded from an older folder, gets a note instead); ``refused``: columns that must not be analysed
    (missing evaluations), left out everywhere.
    """
    metrics = study.metrics
    s = plan.beside()
    refused = set(refused)
    conf = plan.bootstrap.confidence
    out = BesideResult(s, mcp_arms(study.audit.arms if study.audit is not None else None, metrics))
    if s.compliance:
        wanted = [m for m in s.metrics_for_compliance(plan) if m not in refused]
        out.compliance = compliance_table(metrics, pairs, wanted, out.offered, confidence=conf)
        if out.compliance.empty:
            out.notes["compliance"] = "no profile pair compares an arm offered MCP tools with one that was not"
    if s.infrastructure_bounds:
        out.bounds = infra_bounds(metrics, comparisons, plan)
    if s.divergence:
        if "success" in refused:
            out.notes["divergence"] = "not computed: the pass/fail verdicts are incomplete"
        elif not study.actions:
            out.notes["divergence"] = "not computed: the study keeps no trial's actions"
        elif "trial_path" not in metrics or "success" not in metrics:
            out.notes["divergence"] = "not computed: the metrics table has no trial paths or outcomes"
        else:
            out.divergence = divergence_pairs(metrics, pairs, study.actions, out.offered)
    if s.mediation:
        outcomes = [m for m in s.mediation_outcomes if m not in refused]
        out.mediation = mediation_table(metrics, pairs, outcomes=outcomes, mediators=s.mediators,
                                        n_boot=plan.bootstrap.n_resamples, seed=plan.bootstrap.seed, confidence=conf)
    return out
