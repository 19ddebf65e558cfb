"""The simulator's latent model: per-trial metrics drawn with numpy for one seed, and the true effects they imply.

SIMULATED DATA, not findings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd
from scipy import special

__all__ = [
    "SIMULATOR", "DEFAULT_PROFILES", "BASELINE", "TASK_IDS", "METRIC_COLUMNS", "Effects", "task_ids", "cost_usd",
    "simulate_metrics", "FLOAT_DIGITS", "round_floats", "true_effects",
]


SIMULATOR = "analysis_lib.simulate"


DEFAULT_PROFILES = ("text", "codegraph", "codecanvas")


BASELINE = "text"


# Stable, realistic task ids (Terminal-Bench style); more are suffixed "-2", "-3"...
TASK_IDS = (
    "fix-async-retry-backoff", "fix-cache-invalidation", "fix-cli-exit-codes", "fix-config-merge-order",
    "fix-csv-quoting", "fix-date-parsing-tz", "fix-decimal-rounding", "fix-dependency-cycle",
    "fix-env-var-override", "fix-file-lock-race", "fix-http-redirect-loop", "fix-json-schema-defaults",
    "fix-logging-rotation", "fix-memory-leak-iterator", "fix-migration-ordering", "fix-off-by-one-pagination",
    "fix-path-traversal-check", "fix-plugin-registry", "fix-rate-limiter-window", "fix-regex-catastrophic",
    "fix-retry-idempotency", "fix-serializer-nested", "fix-sql-injection-escape", "fix-test-flaky-timeout",
    "fix-thread-pool-shutdown", "fix-unicode-normalize", "fix-url-join-slashes", "fix-yaml-anchor-merge",
    "fix-graph-topo-sort", "fix-event-loop-blocking", "fix-stale-lockfile", "fix-version-compare",
)


# Column order of the latent frame (the first nine are the documented contract).
METRIC_COLUMNS = (
    "profile", "task_id", "repetition", "success", "total_tokens", "total_cost_usd", "elapsed_sec",
    "tool_calls_count", "exploration_breadth",
    "total_input_tokens", "total_output_tokens", "total_cached_tokens", "mcp_tool_calls",
    "infra_error", "agent_timeout",
)


def _doc(default: Any, doc: str) -> Any:
    if callable(default):
        return field(default_factory=default, metadata={"doc": doc})
    return field(default=default, metadata={"doc": doc})


def _profiles(text: float, codegraph: float, codecanvas: float):
    return lambda: {"text": text, "codegraph": codegraph, "codecanvas": codecanvas}


@dataclass
class Effects:
    """Parameters of the latent model: task population, noise, and per-profile effects.

    Per-profile fields are dicts ``{profile: value}``; a profile missing from a dict gets the
    neutral value (0 for shifts, 1 for ratios). Defaults are moderate and realistic
    (codegraph about +8 points success and -20 % tokens, codecanvas about +12 points and -30 %;
    see :func:`true_effects` for the exact population values).
    """

    # --- task population (shared by all profiles: the pairing) ---
    baseline_success_mean: float = _doc(0.55, "mean of the Beta distribution of the per-task baseline success probability")
    difficulty_concentration: float = _doc(
        2.5, "Beta concentration a+b of the per-task success probability (smaller = wider difficulty spread)"
    )
    base_tokens_median: float = _doc(150_000.0, "median total tokens (input incl. cached + output) of a baseline trial on a median task")
    task_token_sd: float = _doc(0.45, "sd of the per-task log-token level (task size)")
    trial_token_sd: float = _doc(0.25, "sd of the per-trial log-token noise (repetition noise)")
    output_share: float = _doc(0.02, "share of output tokens in total tokens")
    cached_share: float = _doc(0.80, "median share of cached tokens in input tokens (ATIF: prompt tokens include cached)")
    trial_cache_sd: float = _doc(
        0.6, "sd of the per-trial logit noise of the cached share (cache hits vary, so cost is not a multiple of tokens)")
    price_input_per_mtok: float = _doc(3.0, "USD per 1M uncached input tokens")
    price_cached_per_mtok: float = _doc(0.30, "USD per 1M cached input tokens")
    price_output_per_mtok: float = _doc(15.0, "USD per 1M output tokens")
    base_tool_calls_median: float = _doc(20.0, "median tool calls of a baseline trial on a median task")
    task_calls_sd: float = _doc(0.35, "sd of the per-task log tool-call level (driven by the same task size as tokens)")
    trial_calls_sd: float = _doc(0.25, "sd of the per-trial log tool-call noise")
    min_tool_calls: int = _doc(4, "floor of tool calls per trial")
    sec_per_call_median: float = _doc(11.0, "median seconds of agent time per tool call")
    trial_time_sd: float = _doc(0.30, "sd of the per-trial log seconds-per-call noise")
    agent_timeout_sec: float = _doc(1800.0, "agent timeout: elapsed time is capped here")
    breadth_per_call: float = _doc(0.35, "median distinct files read or edited per tool call")
    trial_breadth_sd: float = _doc(0.20, "sd of the per-trial log exploration-breadth noise")
    n_agent_timeouts: int = _doc(1, "trials (among failures) that hit the agent timeout: exception kept, reward 0.0")
    n_infra_errors: int = _doc(1, "trials with an infrastructure error: no trajectory, no verifier result")
    # --- per-profile effects (relative to the baseline profile 'text') ---
    success_lift: dict[str, float] = _doc(_profiles(0.0, 0.46, 0.70), "log-odds shift of success vs text, same on every task")
    token_ratio: dict[str, float] = _doc(_profiles(1.0, 0.80, 0.70), "multiplicative factor on total tokens vs text")
    tool_call_ratio: dict[str, float] = _doc(_profiles(1.0, 0.90, 0.85), "multiplicative factor on tool calls vs text")
    time_ratio: dict[str, float] = _doc(_profiles(1.0, 1.00, 1.05), "multiplicative factor on seconds per tool call vs text")
    breadth_ratio: dict[str, float] = _doc(
        _profiles(1.0, 0.85, 0.80), "multiplicative factor on files read or edited per tool call vs text"
    )
    mcp_adoption: dict[str, float] = _doc(_profiles(0.0, 0.85, 0.90), "probability that a trial calls MCP tools at all")
    mcp_call_share: dict[str, float] = _doc(
        _profiles(0.0, 0.25, 0.30), "share of a trial's tool calls that are MCP calls, when it adopts MCP"
    )
    cache_shift: dict[str, float] = _doc(
        _profiles(0.0, 0.3, 0.5), "logit shift of the cached share vs text (MCP tool definitions join the cached prefix)"
    )

    @classmethod
    def null(cls, **overrides: Any) -> Effects:
        """No profile effect at all (and no MCP use): profiles are exchangeable, for type-I error tests."""
        zero = {p: 0.0 for p in DEFAULT_PROFILES}
        one = {p: 1.0 for p in DEFAULT_PROFILES}
        base = dict(
            success_lift=dict(zero),
            token_ratio=dict(one),
            tool_call_ratio=dict(one),
            time_ratio=dict(one),
            breadth_ratio=dict(one),
            mcp_adoption=dict(zero),
            mcp_call_share=dict(zero),
            cache_shift=dict(zero),
        )
        base.update(overrides)
        return cls(**base)

    def describe(self) -> dict[str, dict[str, Any]]:
        """Every field with its value and one-line description (written to index.json)."""
        return {f.name: {"value": getattr(self, f.name), "description": f.metadata["doc"]} for f in fields(self)}

    def get(self, name: str, profile: str) -> float:
        """Per-profile value with the neutral default for profiles the dict does not name."""
        neutral = 0.0 if name in ("success_lift", "mcp_adoption", "mcp_call_share", "cache_shift") else 1.0
        return float(getattr(self, name).get(profile, neutral))


def task_ids(n_tasks: int) -> list[str]:
    """The first ``n_tasks`` stable task ids."""
    if n_tasks < 1:
        raise ValueError(f"n_tasks must be >= 1, got {n_tasks}")
    out = []
    for i in range(n_tasks):
        base = TASK_IDS[i % len(TASK_IDS)]
        out.append(base if i < len(TASK_IDS) else f"{base}-{i // len(TASK_IDS) + 1}")
    return out


def _expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _draw(seed: int, n_tasks: int, repetitions: int, profiles: tuple[str, ...], eff: Effects) -> dict[str, np.ndarray]:
    """All latent arrays, shape (profiles, tasks, repetitions), drawn in one fixed order."""
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    if not profiles or len(set(profiles)) != len(profiles):
        raise ValueError(f"profiles must be non-empty and distinct, got {profiles!r}")
    rng = np.random.default_rng(np.random.SeedSequence(int(seed)))
    P, T, R = len(profiles), n_tasks, repetitions
    shape = (P, T, R)

    def prof(name: str) -> np.ndarray:
        return np.array([eff.get(name, p) for p in profiles]).reshape(P, 1, 1)

    m, c = eff.baseline_success_mean, eff.difficulty_concentration
    p_task = rng.beta(m * c, (1 - m) * c, size=T).clip(1e-6, 1 - 1e-6)
    z_task = rng.standard_normal(T)
    u_success = rng.random(shape)
    eps_tok = rng.standard_normal(shape)
    eps_calls = rng.standard_normal(shape)
    eps_time = rng.standard_normal(shape)
    eps_breadth = rng.standard_normal(shape)
    u_adopt = rng.random(shape)
    u_share = rng.random(shape)

    logit = np.log(p_task / (1 - p_task)).reshape(1, T, 1)
    success = u_success < _expit(logit + prof("success_lift"))

    z = z_task.reshape(1, T, 1)
    total = np.rint(eff.base_tokens_median * np.exp(eff.task_token_sd * z + eff.trial_token_sd * eps_tok) * prof("token_ratio"))
    total = np.maximum(total, 1000).astype(np.int64)
    output = np.rint(total * eff.output_share).astype(np.int64)
    inp = total - output

    calls = np.rint(eff.base_tool_calls_median * np.exp(eff.task_calls_sd * z + eff.trial_calls_sd * eps_calls) * prof("tool_call_ratio"))
    calls = np.maximum(calls, eff.min_tool_calls).astype(np.int64)
    elapsed = calls * eff.sec_per_call_median * np.exp(eff.trial_time_sd * eps_time) * prof("time_ratio")
    elapsed = np.round(np.minimum(elapsed, eff.agent_timeout_sec), 3)
    # Breadth needs at least one read/edit call per file, and MCP calls touch no file.
    adopt = u_adopt < prof("mcp_adoption")
    share = prof("mcp_call_share") * (0.5 + u_share)  # uniform in [0.5, 1.5) x the mean share
    mcp = np.where(adopt, np.maximum(1, np.rint(calls * share)), 0).astype(np.int64)
    mcp = np.minimum(mcp, calls - 3)
    native = calls - mcp
    breadth = np.rint(eff.breadth_per_call * calls * np.exp(eff.trial_breadth_sd * eps_breadth) * prof("breadth_ratio"))
    # A trial cannot touch more files than its task's repository holds (2 * REPO_MODULES).
    breadth = np.clip(breadth, 1, np.minimum(2 * REPO_MODULES, np.maximum(1, native // 2))).astype(np.int64)

    # Exceptions: timeouts among failures, infrastructure errors among the rest; uniform over trials.
    flat = np.arange(P * T * R)
    timeout = np.zeros(P * T * R, dtype=bool)
    infra = np.zeros(P * T * R, dtype=bool)
    failed = flat[~success.ravel()]
    n_to = min(eff.n_agent_timeouts, failed.size)
    if n_to:
        timeout[rng.choice(failed, size=n_to, replace=False)] = True
    rest = flat[~timeout]
    n_inf = min(eff.n_infra_errors, rest.size)
    if n_inf:
        infra[rng.choice(rest, size=n_inf, replace=False)] = True
    timeout, infra = timeout.reshape(shape), infra.reshape(shape)
    elapsed = np.where(timeout, eff.agent_timeout_sec, elapsed)
    success = success & ~infra
    # Drawn last, so that adding it left every earlier draw of a seed as it was.
    eps_cache = rng.standard_normal(shape)
    share = _expit(np.log(eff.cached_share / (1 - eff.cached_share)) + prof("cache_shift") + eff.trial_cache_sd * eps_cache)
    cached = np.rint(inp * share).astype(np.int64)
    cost = cost_usd(inp, cached, output, eff)
    return dict(
        success=success,
        total_tokens=total,
        total_input_tokens=inp,
        total_output_tokens=output,
        total_cached_tokens=cached,
        total_cost_usd=cost,
        tool_calls_count=calls,
        elapsed_sec=elapsed,
        exploration_breadth=breadth,
        mcp_tool_calls=mcp,
        infra_error=infra,
        agent_timeout=timeout,
        p_task=np.broadcast_to(p_task.reshape(1, T, 1), shape),
    )


def _price_per_token(eff: Effects, profile: str) -> float:
    """USD per token of a trial at the profile's median cached share."""
    share = float(_expit(np.log(eff.cached_share / (1 - eff.cached_share)) + eff.get("cache_shift", profile)))
    inp = 1.0 - eff.output_share
    return float(cost_usd(inp, inp * share, eff.output_share, eff))


def cost_usd(input_tokens: Any, cached_tokens: Any, output_tokens: Any, eff: Effects) -> Any:
    """USD cost of a token split: uncached input, cached input and output at their prices per 1M."""
    return (
        (input_tokens - cached_tokens) * eff.price_input_per_mtok
        + cached_tokens * eff.price_cached_per_mtok
        + output_tokens * eff.price_output_per_mtok
    ) / 1e6


def simulate_metrics(
    seed: int,
    n_tasks: int = 24,
    repetitions: int = 3,
    profiles: tuple[str, ...] | list[str] = DEFAULT_PROFILES,
    effects: Effects | None = None,
) -> pd.DataFrame:
    """One row per simulated trial with its latent metrics (no files). SIMULATED DATA.

    Generation (numpy ``default_rng(SeedSequence(seed))``, arrays over profile x task x repetition):

    - per task: baseline success probability ``p_t ~ Beta(m c, (1-m) c)`` (``m`` =
      ``baseline_success_mean``, ``c`` = ``difficulty_concentration``) and a task size
      ``z_t ~ N(0, 1)``; both are shared by all profiles (the pairing);
    - ``success ~ Bernoulli(expit(logit(p_t) + success_lift[profile]))``, independent across trials;
    - ``total_tokens = round(base_tokens_median * exp(task_token_sd z_t + trial_token_sd e) *
      token_ratio[profile])`` with ``e ~ N(0, 1)`` per trial (floor 1000); output tokens are
      ``round(output_share * total)``, input = total - output, cached = ``round(s * input)`` with the
      cached share ``s = expit(logit(cached_share) + cache_shift[profile] + trial_cache_sd e_c)``, drawn
      last; ``total_cost_usd`` prices them (:func:`cost_usd`), so cost and tokens differ by the
      trial's cache hits. Tokens do not depend on success;
    - ``tool_calls_count = max(min_tool_calls, round(base_tool_calls_median * exp(task_calls_sd z_t +
      trial_calls_sd e') * tool_call_ratio[profile]))``;
    - ``elapsed_sec = min(agent_timeout_sec, calls * sec_per_call_median * exp(trial_time_sd e'') *
      time_ratio[profile])``, rounded to ms;
    - ``mcp_tool_calls``: with probability ``mcp_adoption[profile]`` a trial uses MCP, then
      ``round(calls * mcp_call_share * U[0.5, 1.5))`` (at least 1, leaving >= 3 native calls);
    - ``exploration_breadth = clip(round(breadth_per_call * calls * exp(trial_breadth_sd e''') *
      breadth_ratio[profile]), 1, min(native_calls // 2, 2 * REPO_MODULES))``;
    - ``n_agent_timeouts`` failed trials (uniform) get ``agent_timeout`` and elapsed = timeout;
      ``n_infra_errors`` other trials (uniform) get ``infra_error`` (success False; the written
      files have no trajectory and no reward for them: drop them as ``metrics_detail`` does).

    With :meth:`Effects.null` every profile has the same distribution of every column.
    """
    eff = effects or Effects()
    profiles = tuple(profiles)
    arr = _draw(seed, n_tasks, repetitions, profiles, eff)
    P, T, R = len(profiles), n_tasks, repetitions
    idx = np.indices((P, T, R)).reshape(3, -1)
    tids = np.array(task_ids(n_tasks), dtype=object)
    data: dict[str, Any] = {
        "profile": np.array(profiles, dtype=object)[idx[0]],
        "task_id": tids[idx[1]],
        "repetition": idx[2] + 1,
    }
    for col in METRIC_COLUMNS[3:]:
        data[col] = arr[col].ravel()
    return pd.DataFrame(data, columns=list(METRIC_COLUMNS))


def _beta_expectation(fn, a: float, b: float, n: int = 400) -> float:
    """E[fn(p)] for p ~ Beta(a, b), by Gauss-Jacobi quadrature (scipy)."""
    # Beta(a, b) on [0, 1] <-> Jacobi weight (1-x)^(b-1) (1+x)^(a-1) on [-1, 1].
    x, w = special.roots_jacobi(n, b - 1, a - 1)
    p = (x + 1) / 2
    return float(np.sum(w * fn(p)) / np.sum(w))


# Significant digits of every float the simulator writes. Doubles carry ~16; libm, BLAS and scipy
# builds differ in the last two or three (quadrature, exp), so 12 keep the files the same everywhere.
REPO_MODULES = 20  # modules per fake repo: 40 source/test files, the cap on exploration breadth
FLOAT_DIGITS = 12


def round_floats(obj: Any, digits: int = FLOAT_DIGITS) -> Any:
    """``obj`` with every float of its nested dicts, lists and tuples rounded to ``digits`` significant digits.

    Applied where the simulator writes JSON, so that committed outputs do not change with library versions.
    """
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}") if math.isfinite(obj) else obj
    if isinstance(obj, dict):
        return {k: round_floats(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [round_floats(v, digits) for v in obj]
    return obj


def true_effects(
    effects: Effects | None = None, profiles: tuple[str, ...] | list[str] = DEFAULT_PROFILES, baseline: str = BASELINE
) -> dict[str, dict[str, float]]:
    """Population values the statistics should recover, per profile against ``baseline``.

    - ``pass_rate``: E over tasks of expit(logit(p_t) + lift), by quadrature over the Beta;
      ``pass_rate_diff_points``: 100 x difference to the baseline's rate (marginal, paired by task);
    - ``log_odds_shift`` / ``conditional_odds_ratio``: the per-task shift and its exp (what a
      conditional logistic model or the McNemar discordant-pair ratio estimates, before
      attenuation by repetition-level noise: there is none on the log-odds here);
    - ``token_ratio`` and ``token_reduction_pct`` = 100 (1 - ratio): the ratio of per-task medians
      (tokens are log-normal around a task level, independent of success, so every per-task
      median, and the median of per-task ratios, scale exactly by it);
    - ``cost_ratio``: the token ratio times the ratio of the price per token at each profile's
      median cached share (cache hits are a noise of their own, so the per-task medians of cost
      scale by it only up to the asymmetry of that noise: a fraction of a point);
    - ``tool_call_ratio`` (exact up to rounding and the ``min_tool_calls`` floor) and
      ``elapsed_ratio`` = tool_call_ratio x time_ratio (up to the timeout cap).
    """
    eff = effects or Effects()
    m, c = eff.baseline_success_mean, eff.difficulty_concentration
    a, b = m * c, (1 - m) * c

    def rate(lift: float) -> float:
        return _beta_expectation(lambda p: _expit(np.log(p / (1 - p)) + lift), a, b)

    base_rate = rate(eff.get("success_lift", baseline))
    out: dict[str, dict[str, float]] = {}
    for prof in profiles:
        lift = eff.get("success_lift", prof) - eff.get("success_lift", baseline)
        r = rate(eff.get("success_lift", prof))
        tok = eff.get("token_ratio", prof) / eff.get("token_ratio", baseline)
        calls = eff.get("tool_call_ratio", prof) / eff.get("tool_call_ratio", baseline)
        time = eff.get("time_ratio", prof) / eff.get("time_ratio", baseline)
        price = _price_per_token(eff, prof) / _price_per_token(eff, baseline)
        out[prof] = {
            "pass_rate": r,
            "pass_rate_diff_points": 100.0 * (r - base_rate),
            "log_odds_shift": lift,
            "conditional_odds_ratio": math.exp(lift),
            "token_ratio": tok,
            "token_reduction_pct": 100.0 * (1.0 - tok),
            "cost_ratio": tok * price,
            "tool_call_ratio": calls,
            "elapsed_ratio": calls * time,
            "mcp_adoption": eff.get("mcp_adoption", prof),
        }
    return out
