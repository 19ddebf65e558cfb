"""Imperfect simulated studies (lost trials, non-compliance) and their full-data truth, for calibration.

SIMULATED DATA, not findings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .model import _expit, task_ids

__all__ = ["Imperfections", "simulate_imperfect", "imperfect_truth"]


@dataclass
class Imperfections:
    """A two-arm study (baseline ``A``, MCP arm ``B``) with known non-compliance and infrastructure failures.

    Every trial has a latent difficulty ``v ~ N(0, 1)``. Without MCP a trial succeeds with probability
    ``expit(logit(p_task) - difficulty_effect v)`` and uses ``exp(task level + trial_token_sd e + token_difficulty
    v)`` tokens. A trial of B calls an MCP tool with probability ``expit(logit(compliance) + compliance_selection
    v)`` (hard trials reach for the tools more often: the naive users-vs-baseline comparison is biased); only
    then does MCP act (the exclusion restriction holds): ``success_lift_users`` on the log-odds, success drawn
    with the same uniform as without MCP (coupled potential outcomes), tokens times ``token_ratio_users``.
    A trial is lost to an infrastructure failure with probability ``expit(logit(infra_rate_<arm>) +
    infra_selection (1 - its success))``: failures hit B more and hit failing trials more (not at random).
    ``token_cap``: the per-trial token budget at which the runner stops an agent (tokens never exceed it; a plan
    can then declare it as the support of ``total_tokens``); None for no cap.
    """

    baseline_success_mean: float = 0.55
    difficulty_concentration: float = 2.5
    difficulty_effect: float = 1.0
    compliance: float = 0.85
    compliance_selection: float = 1.0
    success_lift_users: float = 0.9
    base_tokens_median: float = 150_000.0
    task_token_sd: float = 0.45
    trial_token_sd: float = 0.25
    token_difficulty: float = 0.15
    token_ratio_users: float = 0.75
    infra_rate_a: float = 0.0
    infra_rate_b: float = 0.0
    infra_selection: float = 0.0
    token_cap: float | None = None


def _imperfect_draws(rng: np.random.Generator, n_tasks: int, repetitions: int, imp: Imperfections) -> dict[str, np.ndarray]:
    """Potential outcomes of every trial, shape (2 arms, tasks, repetitions): arm 0 is A, arm 1 is B."""
    shape = (2, n_tasks, repetitions)
    m, c = imp.baseline_success_mean, imp.difficulty_concentration
    p_task = rng.beta(m * c, (1 - m) * c, size=n_tasks).clip(1e-6, 1 - 1e-6)
    level = imp.task_token_sd * rng.standard_normal(n_tasks)
    v = rng.standard_normal(shape)
    u_success, u_use, u_infra = rng.random(shape), rng.random(shape), rng.random(shape)
    eps = rng.standard_normal(shape)
    logit0 = np.log(p_task / (1 - p_task)).reshape(1, n_tasks, 1) - imp.difficulty_effect * v
    y0 = u_success < _expit(logit0)
    y1 = u_success < _expit(logit0 + imp.success_lift_users)
    log_tok0 = np.log(imp.base_tokens_median) + level.reshape(1, n_tasks, 1) + imp.trial_token_sd * eps \
        + imp.token_difficulty * v
    complier = u_use < _expit(np.log(imp.compliance / (1 - imp.compliance)) + imp.compliance_selection * v) \
        if 0 < imp.compliance < 1 else np.full(shape, imp.compliance >= 1)
    return {"y0": y0, "y1": y1, "log_tok0": log_tok0, "complier": complier, "u_infra": u_infra}


def simulate_imperfect(seed: int, n_tasks: int = 24, repetitions: int = 3, imp: Imperfections | None = None,
                       profiles: tuple[str, str] = ("A", "B")) -> pd.DataFrame:
    """One simulated study with the mechanisms of :class:`Imperfections`, as a metrics table. SIMULATED DATA.

    Columns: ``profile, task_id, repetition, success, total_tokens, total_cost_usd, mcp_tool_calls, mcp_used,
    infra_error, exception`` and the trial's hidden ``complier`` and full-data ``success_full``,
    ``total_tokens_full`` (what it would have shown without an infrastructure failure).
    """
    imp = imp or Imperfections()
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 20_260_611]))
    d = _imperfect_draws(rng, n_tasks, repetitions, imp)
    arm_b = np.zeros((2, 1, 1), dtype=bool)
    arm_b[1] = True
    treated = arm_b & d["complier"]
    success = np.where(treated, d["y1"], d["y0"])
    tokens = np.rint(np.exp(d["log_tok0"] + np.where(treated, np.log(imp.token_ratio_users), 0.0)))
    if imp.token_cap is not None:
        tokens = np.minimum(tokens, imp.token_cap)
    rate = np.where(arm_b, imp.infra_rate_b, imp.infra_rate_a)
    with np.errstate(divide="ignore"):
        logit_rate = np.log(rate) - np.log1p(-rate)
    lost = d["u_infra"] < _expit(logit_rate + imp.infra_selection * (1.0 - success))
    idx = np.indices(success.shape).reshape(3, -1)
    n = idx.shape[1]
    lost_f, success_f, tokens_f = lost.ravel(), success.ravel(), tokens.ravel()
    in_b = idx[0] == 1
    return pd.DataFrame({
        "profile": np.array(profiles, dtype=object)[idx[0]],
        "task_id": np.array(task_ids(n_tasks), dtype=object)[idx[1]],
        "repetition": idx[2] + 1,
        "success": pd.array(np.where(lost_f, None, success_f), dtype="boolean"),
        "total_tokens": np.where(lost_f, np.nan, tokens_f),
        "total_cost_usd": np.where(lost_f, np.nan, tokens_f * 3e-6),
        "mcp_tool_calls": np.where(in_b & ~lost_f, treated.ravel().astype(float) * 3, np.where(in_b, np.nan, 0.0)),
        "mcp_used": pd.array(np.where(in_b & ~lost_f, treated.ravel(), None), dtype="boolean"),
        "infra_error": lost_f,
        "exception": np.where(lost_f, "EnvironmentStartTimeoutError: simulated", None),
        "complier": d["complier"].ravel(),  # for A: whether it would have used MCP if offered
        "success_full": success_f,
        "total_tokens_full": tokens_f,
    }, index=pd.RangeIndex(n))


def imperfect_truth(imp: Imperfections, *, n_trials: int = 4_000_000, seed: int = 7) -> dict[str, tuple[float, float]]:
    """The effects among compliers (CACE) of :class:`Imperfections`, by one very large draw: estimand ->
    (value, Monte-Carlo standard error). ``cace_success`` in points (a fraction), ``cace_log_tokens`` exact."""
    rng = np.random.default_rng(seed)
    d = _imperfect_draws(rng, n_trials // 4, 4, imp)
    comp = d["complier"][1].ravel()
    diff = (d["y1"][1].astype(float) - d["y0"][1].astype(float)).ravel()[comp]
    return {"cace_success": (float(diff.mean()), float(diff.std(ddof=1) / math.sqrt(diff.size))),
            "cace_log_tokens": (math.log(imp.token_ratio_users), 0.0)}
