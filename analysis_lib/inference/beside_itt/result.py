"""What the estimands beside intention to treat produced (:func:`analysis_lib.inference.beside_itt.estimands.beside_itt`),
as the type the report renders, and the file each one is written to."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ...core import outputs as files
from ...study.plan import BesideItt
from .divergence import divergence_table

__all__ = ["FILES", "BesideResult"]

# Companion files of comparisons.csv, one per estimand family.
FILES = {"compliance": files.COMPLIANCE, "bounds": files.INFRA_BOUNDS, "divergence": files.DIVERGENCE,
         "mediation": files.MEDIATION}


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



