"""Budget guardrail: do not start a pair whose projected cost would pass 90 % of the phase budget.

Spend is the sum of finished trials' measured costs (``total_cost_usd`` reported by the agent);
a trial that reports no cost is charged the current per-trial estimate, so that an agent without
cost reporting cannot run unbounded. The projected cost of a pair is ``n_conditions`` times the
mean measured cost per trial so far (the manifest's prior until a cost has been measured).
"""

from __future__ import annotations

from dataclasses import dataclass, field

STOP_FRACTION = 0.9


@dataclass
class BudgetGuard:
    phase_budget_usd: float
    prior_cost_per_trial_usd: float
    stop_fraction: float = STOP_FRACTION
    spent_usd: float = 0.0
    measured_costs: list[float] = field(default_factory=list)
    estimated_trials: int = 0  # trials charged the estimate because they reported no cost
    stopped: bool = False
    stop_reason: str | None = None
    stopped_before_pair: int | None = None

    def __post_init__(self) -> None:
        if not self.phase_budget_usd > 0:
            raise ValueError(f"phase_budget_usd: must be > 0, got {self.phase_budget_usd}")

    @property
    def limit_usd(self) -> float:
        return self.stop_fraction * self.phase_budget_usd

    def cost_per_trial(self) -> float:
        """Mean measured cost per trial, or the prior while nothing was measured."""
        if self.measured_costs:
            return sum(self.measured_costs) / len(self.measured_costs)
        return self.prior_cost_per_trial_usd

    def record(self, cost_usd: float | None) -> float:
        """Add one finished trial; returns what was charged (the estimate when cost is unknown)."""
        if cost_usd is None or cost_usd != cost_usd or cost_usd < 0:
            charged = self.cost_per_trial()
            self.estimated_trials += 1
        else:
            charged = float(cost_usd)
            self.measured_costs.append(charged)
        self.spent_usd += charged
        return charged

    def check_pair(self, pair: int, n_trials: int) -> bool:
        """True when the pair may start; otherwise record the stop and its reason and return False."""
        projected = n_trials * self.cost_per_trial()
        if self.spent_usd + projected > self.limit_usd:
            self.stopped = True
            self.stopped_before_pair = pair
            self.stop_reason = (
                f"pair {pair} not started: spent ${self.spent_usd:.2f} + projected ${projected:.2f} "
                f"({n_trials} trials x ${self.cost_per_trial():.2f}) would pass {self.stop_fraction:.0%} "
                f"of the ${self.phase_budget_usd:.2f} phase budget (${self.limit_usd:.2f})"
            )
            return False
        return True

    def state(self) -> dict:
        return {
            "phase_budget_usd": self.phase_budget_usd,
            "stop_fraction": self.stop_fraction,
            "limit_usd": round(self.limit_usd, 6),
            "spent_usd": round(self.spent_usd, 6),
            "measured_trials": len(self.measured_costs),
            "estimated_trials": self.estimated_trials,
            "cost_per_trial_usd": round(self.cost_per_trial(), 6),
            "stopped": self.stopped,
            "stop_reason": self.stop_reason,
            "stopped_before_pair": self.stopped_before_pair,
        }


def project_spend(
    n_trials: int, n_conditions: int, cost_per_trial_usd: float, phase_budget_usd: float, stop_fraction: float = STOP_FRACTION
) -> dict:
    """Spend projection for a plan: total, the guardrail limit and how many pairs fit under it."""
    pair_cost = n_conditions * cost_per_trial_usd
    limit = stop_fraction * phase_budget_usd
    n_pairs = n_trials // n_conditions
    fit = n_pairs if pair_cost == 0 else min(n_pairs, int(limit // pair_cost))
    return {
        "trials": n_trials,
        "pairs": n_pairs,
        "cost_per_trial_usd": cost_per_trial_usd,
        "projected_total_usd": round(n_trials * cost_per_trial_usd, 6),
        "phase_budget_usd": phase_budget_usd,
        "limit_usd": round(limit, 6),
        "pairs_within_limit": fit,
        "fits": fit == n_pairs,
    }
