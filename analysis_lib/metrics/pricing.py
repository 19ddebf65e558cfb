"""Token prices: one lookup rule for Layer 1 cost estimates and the judge's budget.

Prices come from litellm's offline price map, the JSON file bundled inside the litellm package,
read without importing litellm: importing it costs seconds and, unless
``LITELLM_LOCAL_MODEL_COST_MAP`` is set, reaches the network. Lookup: the name as given (Bedrock
and Vertex ids may price differently), then the name without each leading ``provider/`` part (an
OpenRouter model the map lacks takes its vendor's list price, which OpenRouter passes through:
``openrouter/openai/gpt-5.2`` -> ``openai/gpt-5.2`` -> ``gpt-5.2``), then the model's one name
across providers (:func:`analysis_lib.ingest.identity.canonical_model`). A model needs an input and
an output price to be priced: unknown is kept apart from free (litellm itself prices an unmapped
OpenRouter model at 0 USD, which would make a budget cap silently useless).

The estimate follows the ATIF RFC, with cache writes at their own rate:
``(input - cached - cache_write) * p_in + cached * p_cache_read + cache_write * p_cache_write + output * p_out``
(ATIF ``prompt_tokens`` include both cache reads and cache writes).
"""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import NamedTuple

import orjson

from ..ingest.identity import canonical_model

_PRICE_FILE = "model_prices_and_context_window_backup.json"
# Prices added with register_price (local or private models), by exact name; they win over the map.
_REGISTERED: dict[str, dict] = {}


class Prices(NamedTuple):
    """USD per token of one model."""

    input: float
    output: float
    cache_read: float  # the input price when the map lists none
    cache_write: float  # Anthropic: 1.25 x input for the 5-minute cache; the input price when unlisted


@functools.lru_cache(maxsize=1)
def price_table() -> dict:
    """litellm's bundled price map ({} when litellm is not installed)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = os.path.join(list(spec.submodule_search_locations)[0], _PRICE_FILE)
    try:
        with open(path, "rb") as fh:
            table = orjson.loads(fh.read())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return table if isinstance(table, dict) else {}


def _names(model: str) -> list[str]:
    """The names a model is looked up by, in order (see the module docstring)."""
    parts = model.split("/")
    names = ["/".join(parts[i:]) for i in range(len(parts))]
    canonical = canonical_model(model)
    if canonical:
        names.append(canonical)
    return names


@functools.lru_cache(maxsize=512)
def model_prices(model: str | None) -> Prices | None:
    """The prices of a model by the lookup rule above; None when it has no input and output price."""
    if not model:
        return None
    table = price_table()
    for name in _names(model):
        entry = _REGISTERED.get(name) or table.get(name)
        if not isinstance(entry, dict):
            continue
        pin, pout = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
        if pin is None or pout is None:
            continue
        pin = float(pin)
        return Prices(pin, float(pout), float(entry.get("cache_read_input_token_cost") or pin),
                      float(entry.get("cache_creation_input_token_cost") or pin))
    return None


def register_price(model: str, input_per_token: float, output_per_token: float) -> None:
    """Add a price for a model the offline map lacks (a local or private model)."""
    _REGISTERED[model] = {"input_cost_per_token": input_per_token, "output_cost_per_token": output_per_token}
    model_prices.cache_clear()


def estimate_cost(
    model: str | None, input_tokens: float, output_tokens: float, cached_tokens: float = 0, cache_write_tokens: float = 0
) -> float | None:
    """Estimated USD cost of a call (or a run's totals), or None for an unpriced model.

    ``input_tokens`` in ATIF semantics (cache reads and writes included); ``cache_write_tokens`` are
    priced at the cache-write rate, not as plain input.
    """
    prices = model_prices(model)
    if prices is None:
        return None
    total_in = input_tokens or 0
    cached = min(cached_tokens or 0, total_in)
    written = min(cache_write_tokens or 0, total_in - cached)
    return (
        (total_in - cached - written) * prices.input
        + cached * prices.cache_read
        + written * prices.cache_write
        + (output_tokens or 0) * prices.output
    )


def cost_usd(model: str, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
    """Cost of one judge call from its reported usage; None when the price or the usage is unknown."""
    if prompt_tokens is None or completion_tokens is None:
        return None
    return estimate_cost(model, prompt_tokens, completion_tokens)
