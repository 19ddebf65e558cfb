"""The judge client: litellm calls that are cached, budgeted, bounded, retried and validated.

One :class:`JudgeClient` per judge model; several clients may share one :class:`Ledger` so that
a second judge model spends from the same budget. Every request carries the response model's
JSON schema as ``response_format``; the answer is validated with ``model_validate_json``; a
malformed answer gets one repair turn, then becomes a failed result with the reason.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import random
import threading
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import litellm
from pydantic import BaseModel, ValidationError

from ..metrics.pricing import cost_usd
from . import DEFAULT_MODEL
from .cache import ResponseCache, cache_key
from .templates import PromptTemplate, load_template

litellm.suppress_debug_info = True
# litellm logs a warning when a new event loop starts (each run) and pydantic warns about one of
# litellm's own TypedDicts on the first call: noise on stderr that breaks nbval's comparisons.
for _name in ("LiteLLM", "LiteLLM Proxy", "LiteLLM Router"):
    logging.getLogger(_name).setLevel(logging.ERROR)
warnings.filterwarnings("ignore", message=r".*is using the `ReadOnly` qualifier.*", category=UserWarning)

# Transient failures worth another try: rate limits, server errors (incl. unparsable bodies, which
# litellm reports as InternalServerError), timeouts and dropped connections.
RETRYABLE = (
    litellm.RateLimitError,
    litellm.InternalServerError,
    litellm.ServiceUnavailableError,
    litellm.Timeout,
    litellm.APIConnectionError,
)

T = TypeVar("T")


@dataclass
class Ledger:
    """Spend and traffic counters shared by the clients of one run (thread-safe)."""

    budget_usd: float | None = None
    spent_usd: float = 0.0
    spend_unknown: bool = False  # some call had no known price: the total is a lower bound
    requests: int = 0  # HTTP requests sent, retries and repairs included
    cache_hits: int = 0
    retries: int = 0
    repairs: int = 0
    failures: int = 0
    budget_stopped: int = 0  # judgements not asked because the budget cap was reached
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def cap_usd(self) -> float | None:
        """New calls stop once the spend reaches 90 % of the budget."""
        return None if self.budget_usd is None else 0.9 * self.budget_usd

    def over_cap(self) -> bool:
        cap = self.cap_usd
        return cap is not None and self.spent_usd >= cap

    def add(self, **counts: float) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def summary(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "cache_hits": self.cache_hits,
            "retries": self.retries,
            "repairs": self.repairs,
            "failed": self.failures,
            "budget_stopped": self.budget_stopped,
            "spent_usd": None if self.spend_unknown and self.spent_usd == 0 else round(self.spent_usd, 6),
            "spend_complete": not self.spend_unknown,
            "budget_usd": self.budget_usd,
        }


@dataclass
class JudgeResult:
    """One judgement: the validated answer or the reason it is missing."""

    ok: bool
    data: dict[str, Any] | None = None
    error: str | None = None
    cached: bool = False
    skipped: bool = False  # budget stop: nothing was sent
    repaired: bool = False
    cost_usd: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model: str = ""
    template: str = ""
    version: str = ""


class BudgetStop(Exception):
    """Raised before a request when the spend has reached 90 % of the budget."""


class JudgeClient:
    """Asks one litellm model for schema-validated judgements (see module docstring)."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        cache: ResponseCache | None = None,
        ledger: Ledger | None = None,
        concurrency: int = 4,
        refresh: bool = False,
        timeout: float = 120.0,
        max_retries: int = 4,
        backoff_sec: float = 0.5,
        temperature: float | None = 0.0,
        max_tokens: int | None = 2048,
        seed: int = 0,
        max_string_chars: int | None = None,
        max_list_items: int | None = None,
    ):
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.model = model
        self.api_base = api_base
        self._api_key = api_key  # kept private: never logged, cached or written
        self.cache = cache
        self.ledger = ledger or Ledger()
        self.concurrency = concurrency
        self.refresh = refresh
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_sec = backoff_sec
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        # Small local models under a grammar can loop inside a string; a maxLength stops them.
        self.max_string_chars = max_string_chars
        self.max_list_items = max_list_items
        self._rng = random.Random(seed)  # jitter of the backoff, seeded for reproducible runs
        self._sem: asyncio.Semaphore | None = None

    def __repr__(self) -> str:  # no key in reprs, tracebacks or notebooks
        return f"JudgeClient(model={self.model!r}, api_base={self.api_base!r}, concurrency={self.concurrency})"

    # -- one request -----------------------------------------------------------------------
    async def _request(self, messages: list[dict], schema: type[BaseModel], sample: int) -> tuple[str, int | None, int | None]:
        """Send one chat completion with retries; returns (content, prompt_tokens, completion_tokens)."""
        attempt = 0
        while True:
            if self.ledger.over_cap():
                raise BudgetStop()
            kwargs: dict[str, Any] = dict(
                model=self.model,
                messages=messages,
                response_format=self._response_format(schema),
                timeout=self.timeout,
                num_retries=0,
                max_retries=0,  # the openai SDK would retry silently otherwise
                drop_params=True,  # e.g. temperature on models that accept only the default
            )
            if self.api_base:
                kwargs["api_base"] = self.api_base
            if self._api_key:
                kwargs["api_key"] = self._api_key
            if self.temperature is not None:
                kwargs["temperature"] = self.temperature
            if self.max_tokens:
                kwargs["max_tokens"] = self.max_tokens
            kwargs["seed"] = self.seed + sample
            self.ledger.add(requests=1)
            try:
                resp = await litellm.acompletion(**kwargs)
            except RETRYABLE as exc:
                if attempt >= self.max_retries:
                    raise RuntimeError(f"gave up after {attempt + 1} attempts: {self._short(exc)}") from None
                attempt += 1
                self.ledger.add(retries=1)
                delay = self.backoff_sec * (2 ** (attempt - 1)) * (0.5 + self._rng.random())
                await asyncio.sleep(delay)
                continue
            except Exception as exc:  # 4xx and anything else is final for this judgement, not for the run
                raise RuntimeError(self._short(exc)) from None
            usage = getattr(resp, "usage", None)
            pt = getattr(usage, "prompt_tokens", None) if usage else None
            ct = getattr(usage, "completion_tokens", None) if usage else None
            cost = cost_usd(self.model, pt, ct)
            if cost is None:
                self.ledger.spend_unknown = True
            else:
                self.ledger.add(spent_usd=cost)
            content = resp.choices[0].message.content or ""
            return content, pt, ct

    def _short(self, exc: Exception) -> str:
        """One line of an exception with environment keys and this client's own key redacted."""
        text = _short(exc)
        return text.replace(self._api_key, "***") if self._api_key and len(self._api_key) >= 8 else text

    def _response_format(self, schema: type[BaseModel]) -> Any:
        """The pydantic model (litellm sends its JSON schema), or a bounded copy of that schema."""
        if not (self.max_string_chars or self.max_list_items):
            return schema
        bounded = bounded_schema(schema, self.max_string_chars, self.max_list_items)
        return {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": bounded, "strict": True}}

    # -- one judgement ---------------------------------------------------------------------
    async def judge(
        self,
        template: PromptTemplate | str,
        variables: dict[str, Any],
        schema: type[BaseModel],
        sample: int = 0,
    ) -> JudgeResult:
        """Render, look up the cache, ask (with one repair), validate, store. Never raises for the API."""
        tpl = load_template(template) if isinstance(template, str) else template
        messages = tpl.render(variables)
        json_schema = bounded_schema(schema, self.max_string_chars, self.max_list_items)
        key = cache_key(self.model, tpl.name, tpl.version, messages, json_schema, sample)
        base = dict(model=self.model, template=tpl.name, version=tpl.version)
        if self.cache is not None and not self.refresh:
            hit = self.cache.get(key)
            if hit is not None:
                self.ledger.add(cache_hits=1)
                return JudgeResult(
                    ok=bool(hit.get("ok")), data=hit.get("data"), error=hit.get("error"), cached=True,
                    repaired=bool(hit.get("repaired")), cost_usd=hit.get("cost_usd"),
                    prompt_tokens=hit.get("prompt_tokens"), completion_tokens=hit.get("completion_tokens"), **base,
                )
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.concurrency)
        async with self._sem:
            try:
                result = await self._ask(messages, schema, sample, base)
            except BudgetStop:
                self.ledger.add(budget_stopped=1)
                cap = self.ledger.cap_usd
                return JudgeResult(
                    ok=False,
                    skipped=True,
                    error=f"budget stop: spent {self.ledger.spent_usd:.4f} USD, cap 90% of {self.ledger.budget_usd} USD = {cap:.4f} USD",
                    **base,
                )
            except RuntimeError as exc:
                self.ledger.add(failures=1)
                return JudgeResult(ok=False, error=f"request failed: {exc}", **base)
        if not result.ok:
            self.ledger.add(failures=1)
        if self.cache is not None:
            # Failed validations are cached too: a re-run reproduces them at no cost (--refresh re-asks).
            self.cache.put(
                key,
                {
                    "model": self.model,
                    "template": tpl.name,
                    "version": tpl.version,
                    "sample": sample,
                    "ok": result.ok,
                    "data": result.data,
                    "error": result.error,
                    "repaired": result.repaired,
                    "cost_usd": result.cost_usd,
                    "prompt_tokens": result.prompt_tokens,
                    "completion_tokens": result.completion_tokens,
                },
            )
        return result

    async def _ask(self, messages: list[dict], schema: type[BaseModel], sample: int, base: dict) -> JudgeResult:
        content, pt, ct = await self._request(messages, schema, sample)
        total_cost = cost_usd(self.model, pt, ct)
        try:
            data = schema.model_validate_json(_strip_fences(content)).model_dump(mode="json")
            return JudgeResult(ok=True, data=data, cost_usd=total_cost, prompt_tokens=pt, completion_tokens=ct, **base)
        except ValidationError as exc:
            first_error = _validation_reason(exc)
        # One repair turn: show the model its answer and the reason, ask again.
        self.ledger.add(repairs=1)
        repair = load_template("repair").render({"error": first_error, "schema": json.dumps(schema.model_json_schema(), sort_keys=True)})
        convo = messages + [{"role": "assistant", "content": content[:4000]}] + repair
        content2, pt2, ct2 = await self._request(convo, schema, sample)
        pt_total = None if pt is None or pt2 is None else pt + pt2
        ct_total = None if ct is None or ct2 is None else ct + ct2
        cost2 = cost_usd(self.model, pt_total, ct_total)
        try:
            data = schema.model_validate_json(_strip_fences(content2)).model_dump(mode="json")
            return JudgeResult(
                ok=True, data=data, repaired=True, cost_usd=cost2, prompt_tokens=pt_total, completion_tokens=ct_total, **base
            )
        except ValidationError as exc:
            reason = f"schema validation failed after one repair attempt: {_validation_reason(exc)} (first answer: {first_error})"
            return JudgeResult(
                ok=False, error=reason, repaired=True, cost_usd=cost2, prompt_tokens=pt_total, completion_tokens=ct_total, **base
            )

    # -- many judgements -------------------------------------------------------------------
    def judge_many(self, jobs: list[Callable[[], Awaitable[T]]]) -> list[T]:
        """Run coroutine factories concurrently (bounded by the semaphore) and return results in order."""

        async def _all() -> list[T]:
            self._sem = asyncio.Semaphore(self.concurrency)  # bound to this event loop
            return list(await asyncio.gather(*(job() for job in jobs)))

        return run_sync(_all)


def bounded_schema(schema: type[BaseModel], max_chars: int | None = None, max_items: int | None = None) -> dict:
    """The model's JSON schema, with ``maxLength`` on free strings and a lower ``maxItems`` when asked.

    The answer is still validated against the unbounded model; only what is sent changes.
    """
    if not (max_chars or max_items):
        return schema.model_json_schema()

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: walk(v) for k, v in node.items()}
            if max_chars and out.get("type") == "string" and "enum" not in out and "const" not in out:
                out.setdefault("maxLength", max_chars)
            if max_items and out.get("type") == "array":
                out["maxItems"] = min(out.get("maxItems", max_items), max_items)
            if out.get("type") == "object":
                out.setdefault("additionalProperties", False)
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema.model_json_schema())


def run_sync(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion, also from inside a running loop (Jupyter) via a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()


def _strip_fences(text: str) -> str:
    """Accept an answer wrapped in a Markdown code fence (common without constrained decoding)."""
    s = text.strip()
    if s.startswith("```"):
        s = s.split("\n", 1)[1] if "\n" in s else ""
        if s.rstrip().endswith("```"):
            s = s.rstrip()[:-3]
    return s.strip()


def _validation_reason(exc: ValidationError) -> str:
    errs = exc.errors()
    if not errs:
        return "invalid"
    e = errs[0]
    loc = ".".join(str(p) for p in e.get("loc", ())) or "(root)"
    more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
    return f"{loc}: {e.get('msg', 'invalid')}{more}"


def redact(text: str) -> str:
    """Replace the value of every key-like environment variable found in ``text`` with ``***``."""
    for name, value in os.environ.items():
        if len(value) >= 8 and any(w in name.upper() for w in ("KEY", "TOKEN", "SECRET", "PASSWORD")):
            text = text.replace(value, "***")
    return text


def _short(exc: Exception) -> str:
    """One line of an exception, with credentials redacted."""
    lines = f"{type(exc).__name__}: {exc}".splitlines() or [type(exc).__name__]
    return redact(lines[0])[:300]
