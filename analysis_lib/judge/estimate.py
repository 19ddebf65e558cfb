"""``--estimate-cost``: projected spend per analysis before anything is sent (no network).

Input tokens are counted on the exact rendered prompts with ``litellm.token_counter``; output
tokens are the per-analysis guesses of :data:`.analyses.EXPECTED_OUTPUT_TOKENS`; prices come
from litellm's offline map (:mod:`analysis_lib.metrics.pricing`). An unknown price makes the cost unknown, not zero.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import litellm

from ..metrics.pricing import estimate_cost, model_prices
from . import DEFAULT_MODEL
from .analyses import EXPECTED_OUTPUT_TOKENS, Job
from .templates import load_template


@dataclass
class EstimateRow:
    analysis: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


def count_tokens(model: str, messages: list[dict]) -> int:
    """Tokens of a chat prompt for ``model`` (litellm's tokenizer choice; offline)."""
    return int(litellm.token_counter(model=model, messages=messages))


def estimate_jobs(jobs: list[Job], model: str = DEFAULT_MODEL, samples: int = 1) -> list[EstimateRow]:
    """One row per analysis (in first-seen order) plus nothing else; ``samples`` multiplies calls."""
    price = model_prices(model)
    rows: dict[str, EstimateRow] = {}
    for job in jobs:
        messages = load_template(job.template).render(job.variables)
        schema_tokens = count_tokens(model, [{"role": "system", "content": json.dumps(job.schema.model_json_schema())}])
        tin = (count_tokens(model, messages) + schema_tokens) * samples
        tout = EXPECTED_OUTPUT_TOKENS.get(job.analysis, 500) * samples
        row = rows.setdefault(job.analysis, EstimateRow(job.analysis, 0, 0, 0, 0.0 if price else None))
        row.calls += samples
        row.input_tokens += tin
        row.output_tokens += tout
        if price is not None:
            row.cost_usd = (row.cost_usd or 0.0) + (estimate_cost(model, tin, tout) or 0.0)
    return list(rows.values())


def total_row(rows: list[EstimateRow]) -> EstimateRow:
    costs = [r.cost_usd for r in rows]
    return EstimateRow(
        "total",
        sum(r.calls for r in rows),
        sum(r.input_tokens for r in rows),
        sum(r.output_tokens for r in rows),
        None if any(c is None for c in costs) else sum(c for c in costs if c is not None),
    )


def format_estimate(rows: list[EstimateRow], model: str) -> str:
    """Plain-text table for the terminal."""
    lines = [f"Projected LLM spend for model {model} (offline price map; output tokens are estimates):",
             f"{'analysis':<12} {'calls':>6} {'input tok':>11} {'output tok':>11} {'cost USD':>10}"]
    for r in [*rows, total_row(rows)]:
        cost = "unknown" if r.cost_usd is None else f"{r.cost_usd:.4f}"
        lines.append(f"{r.analysis:<12} {r.calls:>6} {r.input_tokens:>11} {r.output_tokens:>11} {cost:>10}")
    if model_prices(model) is None:
        lines.append(f"No price for {model} in litellm's offline map: cost unknown "
                     "(register one with analysis_lib.metrics.pricing.register_price).")
    return "\n".join(lines)
