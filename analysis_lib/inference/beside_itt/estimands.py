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

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from ...core.tools import DEFAULT_MCP_TOOLS
from ...study.plan import AnalysisPlan, BesideItt
from .bounds import infra_bounds
from .compliance import compliance_table, mcp_arms
from .divergence import divergence_pairs, divergence_table
from .mediation import mediation_table

__all__ = ["FILES", "BesideResult", "beside_itt"]

# Companion files of comparisons.csv, one per estimand family.
FILES = {"compliance": "compliance.csv", "bounds": "infra_bounds.csv", "divergence": "divergence.csv",
         "mediation": "mediation.csv"}


@dataclass
class BesideResult:
    """What was computed beside intention to treat (None: not declared by the plan, or not computable)."""

    settings: BesideItt
    offered: dict[str, bool | None] = field(default_factory=dict)
    compliance: pd.DataFrame | None = None
    bounds: pd.DataFrame | None = None
    divergence: pd.DataFrame | None = None
    mediation: pd.DataFrame | None = None
    notes: dict[str, str] = field(default_factory=dict)

    def frames(self) -> dict[str, pd.DataFrame]:
        """The computed frames by their key in :data:`FILES`."""
        return {k: getattr(self, k) for k in FILES if getattr(self, k) is not None}

    def divergence_summary(self) -> pd.DataFrame | None:
        return None if self.divergence is None else divergence_table(self.divergence)


def beside_itt(metrics: pd.DataFrame, comparisons: pd.DataFrame, plan: AnalysisPlan, pairs: list[tuple[str, str]], *,
               audit_arms: pd.DataFrame | None = None, runs_dir: str | os.PathLike | None = None,
               mcp_tools: frozenset[str] = DEFAULT_MCP_TOOLS, refused: Iterable[str] = ()) -> BesideResult:
    """Everything ``plan.beside()`` declares, for the profile pairs of the planned comparisons.

    ``comparisons``: the engine's rows (:func:`analysis_lib.inference.comparisons.compare`); ``audit_arms``: the design
    audit's per-arm table (which arms were offered MCP); ``runs_dir``: where the trajectories are, for
    the divergence (without it the divergence is not computed, and a note says so); ``refused``: columns that
    must not be analysed (missing evaluations), left out everywhere.
    """
    s = plan.beside()
    refused = set(refused)
    conf = plan.bootstrap.confidence
    out = BesideResult(s, mcp_arms(audit_arms, metrics))
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
        elif runs_dir is None:
            out.notes["divergence"] = "not computed: the trajectories' runs folder was not given"
        elif "trial_path" not in metrics or "success" not in metrics:
            out.notes["divergence"] = "not computed: the metrics table has no trial paths or outcomes"
        else:
            out.divergence = divergence_pairs(metrics, pairs, runs_dir, out.offered, mcp_tools)
    if s.mediation:
        outcomes = [m for m in s.mediation_outcomes if m not in refused]
        out.mediation = mediation_table(metrics, pairs, outcomes=outcomes, mediators=s.mediators,
                                        n_boot=plan.bootstrap.n_resamples, seed=plan.bootstrap.seed, confidence=conf)
    return out
