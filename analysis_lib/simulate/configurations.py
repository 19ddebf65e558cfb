"""Seeded multi-configuration studies with known effects: the truth that the pooling across configurations is
calibrated against.

A study has k configurations (agent-and-model pairs); each runs the same n tasks under two arms (control,
treatment), ``trials`` times per task and arm. Configuration c has its own true effect on the pass probability,
``theta_c = mu + u_c`` with ``u_c ~ N(0, tau^2)`` (the between-configuration variance is known). On task t of
configuration c the control passes with probability ``p_ct`` and the treatment with ``p_ct + theta_c``; ``p_ct``
is drawn uniformly from ``[low, high]`` shrunk to where both probabilities lie in [0, 1], so the expected
per-task difference is exactly ``theta_c``. The per-task pass counts are what a results table records
(:mod:`analysis_lib.ingest.results_table`: ``config, arm, task_id, trials, passes``).

SIMULATED DATA: every table made here says so (its ``simulated`` column).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["ConfigurationStudy", "simulate_pass_counts", "configuration_estimates", "results_table"]

CONTROL, TREATMENT = "control", "treatment"


@dataclass(frozen=True)
class ConfigurationStudy:
    """The design and the truth of a simulated multi-configuration study."""

    n_configs: int = 6
    n_tasks: int = 87
    trials: int = 3
    mu: float = 0.15  # mean effect over configurations (difference in pass probability)
    tau: float = 0.05  # standard deviation of the configurations' effects
    low: float = 0.1  # control pass probabilities are drawn from [low, high]
    high: float = 0.6

    def __post_init__(self) -> None:
        if self.n_configs < 1 or self.n_tasks < 2 or self.trials < 1:
            raise ValueError("a study needs at least 1 configuration, 2 tasks and 1 trial per task and arm")
        if not 0 <= self.low < self.high <= 1 or self.tau < 0:
            raise ValueError("need 0 <= low < high <= 1 and tau >= 0")


def simulate_pass_counts(study: ConfigurationStudy, rng: np.random.Generator,
                         replications: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``replications`` independent studies: the true effects ``theta`` (replications x k) and the pass counts of
    control and treatment (replications x k x n tasks), each out of ``study.trials``."""
    shape = (replications, study.n_configs)
    theta = study.mu + study.tau * rng.standard_normal(shape)
    if np.any(np.abs(theta) >= 1):
        raise ValueError("an effect of 1 or more in pass probability cannot be simulated: lower mu or tau")
    # Where both p and p + theta lie in [0, 1]; the draw stays uniform on the part of [low, high] inside it.
    lo = np.clip(np.maximum(study.low, -theta), 0, 1)[..., None]
    hi = np.clip(np.minimum(study.high, 1 - theta), 0, 1)[..., None]
    p0 = lo + (hi - lo) * rng.random((*shape, study.n_tasks))
    p1 = np.clip(p0 + theta[..., None], 0.0, 1.0)  # clip only against rounding below 0 / above 1
    return theta, rng.binomial(study.trials, p0), rng.binomial(study.trials, p1)


def configuration_estimates(passes_a: np.ndarray, passes_b: np.ndarray, trials: int) -> tuple[np.ndarray, np.ndarray]:
    """Each configuration's effect and its variance as the all-repetitions plan estimates them: the mean over tasks
    of the per-task pass-rate difference B - A and its squared standard error ``var(d) / n`` (the paired t of
    :func:`analysis_lib.stats.paired_t`, over the last axis, for many studies at once)."""
    d = (passes_b - passes_a) / trials
    return d.mean(axis=-1), d.var(axis=-1, ddof=1) / d.shape[-1]


def results_table(study: ConfigurationStudy, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """One simulated study as a results table (``config, arm, task_id, trials, passes, simulated``) and its
    configurations' true effects."""
    theta, a, b = simulate_pass_counts(study, np.random.default_rng(seed))
    rows = []
    for c in range(study.n_configs):
        for arm, counts in ((CONTROL, a), (TREATMENT, b)):
            rows += [{"config": f"config-{c + 1:02d}", "arm": arm, "task_id": f"task-{t + 1:03d}",
                      "trials": study.trials, "passes": int(counts[0, c, t])} for t in range(study.n_tasks)]
    return pd.DataFrame(rows).assign(simulated=True), theta[0]
