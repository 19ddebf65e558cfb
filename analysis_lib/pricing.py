"""Token prices from litellm's offline price map, read without importing litellm.

Importing litellm costs seconds and, unless ``LITELLM_LOCAL_MODEL_COST_MAP`` is set, reaches the
network; Layer 1 only needs the price table that ships inside the package, so it reads the JSON.
The estimate follows the ATIF RFC: ``(input - cached) * p_in + cached * p_cache_read + output * p_out``.
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


@functools.lru_cache(maxsize=256)
def model_prices(model: str | None) -> tuple[float, float, float] | None:
    """(input, output, cache-read) USD per token for a model name, trying provider-less variants and
    the model's one name across providers (:func:`analysis_lib.ingest.identity.canonical_model`)."""
    if not model:
        return None
    from .ingest.identity import canonical_model

    table = price_table()
    # The provider's own id first (Bedrock and Vertex may price differently), then the model's one name.
    candidates = [model, model.split("/", 1)[-1], model.rsplit("/", 1)[-1], canonical_model(model)]
    for name in candidates:
        entry = table.get(name)
        if isinstance(entry, dict) and entry.get("input_cost_per_token") is not None:
            pin = float(entry["input_cost_per_token"])
            pout = float(entry.get("output_cost_per_token") or 0.0)
            pcache = float(entry.get("cache_read_input_token_cost") or pin)
            return pin, pout, pcache
    return None


def estimate_cost(model: str | None, input_tokens: int, output_tokens: int, cached_tokens: int = 0) -> float | None:
    """Estimated USD cost of a call (or a run's totals), or None for an unpriced model."""
    prices = model_prices(model)
    if prices is None:
        return None
    pin, pout, pcache = prices
    cached = min(cached_tokens or 0, input_tokens or 0)
    return ((input_tokens or 0) - cached) * pin + cached * pcache + (output_tokens or 0) * pout
