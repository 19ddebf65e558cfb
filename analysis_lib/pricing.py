"""Token prices from litellm's offline price map, read without importing litellm.

Importing litellm costs seconds and, unless ``LITELLM_LOCAL_MODEL_COST_MAP`` is set, reaches the
network; Layer 1 only needs the price table that ships inside the package, so it reads the JSON.
The estimate follows the ATIF RFC, with cache writes at their own rate:
``(input - cached - cache_write) * p_in + cached * p_cache_read + cache_write * p_cache_write + output * p_out``
(ATIF ``prompt_tokens`` include both cache reads and cache writes).
"""

from __future__ import annotations

import functools
import importlib.util
import os

import orjson

_PRICE_FILE = "model_prices_and_context_window_backup.json"


@functools.lru_cache(maxsize=1)
def price_table() -> dict:
    """litellm's bundled price map ({} when litellm is not installed)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = os.path.join(list(spec.submodule_search_locations)[0], _PRICE_FILE)
    try:
        with open(path, "rb") as fh:
            return orjson.loads(fh.read())
    except (OSError, orjson.JSONDecodeError):
        return {}


def _entry(model: str) -> dict | None:
    """The price-map entry of a model: the provider's own id first (Bedrock and Vertex may price
    differently), then provider-less variants and the model's one name across providers
    (:func:`analysis_lib.ingest.identity.canonical_model`)."""
    from .ingest.identity import canonical_model

    table = price_table()
    for name in (model, model.split("/", 1)[-1], model.rsplit("/", 1)[-1], canonical_model(model)):
        entry = table.get(name)
        if isinstance(entry, dict) and entry.get("input_cost_per_token") is not None:
            return entry
    return None


@functools.lru_cache(maxsize=256)
def model_prices(model: str | None) -> tuple[float, float, float] | None:
    """(input, output, cache-read) USD per token for a model name, trying provider-less variants."""
    entry = _entry(model) if model else None
    if entry is None:
        return None
    pin = float(entry["input_cost_per_token"])
    pout = float(entry.get("output_cost_per_token") or 0.0)
    pcache = float(entry.get("cache_read_input_token_cost") or pin)
    return pin, pout, pcache


@functools.lru_cache(maxsize=256)
def cache_write_price(model: str | None) -> float | None:
    """USD per cache-write token (Anthropic: 1.25 x input for the 5-minute cache); the input price when unlisted."""
    entry = _entry(model) if model else None
    if entry is None:
        return None
    return float(entry.get("cache_creation_input_token_cost") or entry["input_cost_per_token"])


def estimate_cost(model: str | None, input_tokens: int, output_tokens: int, cached_tokens: int = 0, cache_write_tokens: int = 0) -> float | None:
    """Estimated USD cost of a call (or a run's totals), or None for an unpriced model.

    ``input_tokens`` in ATIF semantics (cache reads and writes included); ``cache_write_tokens`` are
    priced at the cache-write rate, not as plain input.
    """
    prices = model_prices(model)
    if prices is None:
        return None
    pin, pout, pcache = prices
    total_in = input_tokens or 0
    cached = min(cached_tokens or 0, total_in)
    written = min(cache_write_tokens or 0, total_in - cached)
    pwrite = cache_write_price(model) or pin
    return (total_in - cached - written) * pin + cached * pcache + written * pwrite + (output_tokens or 0) * pout
