"""The judge client: litellm calls that are cached, budgeted, bounded, retried and validated.

One :class:`JudgeClient` per judge model; several clients may share one :class:`Ledger` so that
a second judge model spends from the same budget. Every request carries the response model's
JSON schema as ``response_format``; the answer is validated with ``model_validate_json``; a
malformed answer gets one repair turn, then becomes a failed result with the reason.

The budget is a cap, at any concurrency: before a request is sent it reserves its worst-case
cost (a bound on its prompt tokens and the ``max_tokens`` answer, at the model's prices), and it
is sent only if what was spent, what is reserved by requests in flight and its own reserve stay
within the budget. An answer settles its reserve at its reported cost; a request that ended
without an answer (timeout, deadline, dropped connection) may still have been billed, so its
reserve is kept as spent-unknown. Every request also has an overall deadline (a response that
trickles in never ends otherwise), and a 429's ``Retry-After`` is waited for, up to a limit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import json
import logging
import os
import random
import threading
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import litellm
from pydantic import BaseModel, ValidationError

from ..metrics.pricing import cost_usd, model_prices
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


# Tokens an image may count for, whatever its size in bytes (OpenAI's gpt-4o-mini counts a high-detail
# image of 8 tiles as 2,833 + 8 x 5,667 = 48,169 tokens): the reserve of a prompt with images.
IMAGE_TOKENS_BOUND = 50_000
# Tokens of chat formatting per message and per request, above the bytes of the text.
MESSAGE_OVERHEAD_TOKENS = 8
REQUEST_OVERHEAD_TOKENS = 64


@dataclass
class Ledger:
    """Spend, reserves and traffic counters shared by the clients of one run (thread-safe).

    ``committed`` = spent (answers' reported cost) + unsettled (reserves of requests that ended without
    an answer, which may still be billed) + reserved (requests in flight); a request is sent only when
    its reserve fits under the budget beside it.
    """

    budget_usd: float | None = None
    spent_usd: float = 0.0
    spend_unknown: bool = False  # some call had no known price: the total is a lower bound
    reserved_usd: float = 0.0  # worst-case cost of the requests in flight
    in_flight: int = 0  # requests holding a reserve
    reserved_peak_usd: float = 0.0  # the most reserved at one time
    unsettled_usd: float = 0.0  # reserves of requests that ended without an answer (perhaps billed)
    overrun_usd: float = 0.0  # cost of answers beyond their reserve (a server that ignored max_tokens)
    requests: int = 0  # HTTP requests sent, retries and repairs included
    cache_hits: int = 0
    retries: int = 0
    repairs: int = 0
    failures: int = 0
    budget_stopped: int = 0  # judgements not asked because their reserve did not fit under the budget
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def committed_usd(self) -> float:
        return self.spent_usd + self.unsettled_usd + self.reserved_usd

    def try_reserve(self, usd: float) -> bool:
        """Reserve ``usd`` for a request about to be sent; False when it does not fit under the budget."""
        with self._lock:
            if self.budget_usd is not None and self.committed_usd + usd > self.budget_usd * (1 + 1e-12):
                return False
            self.reserved_usd += usd
            self.in_flight += 1
            self.reserved_peak_usd = max(self.reserved_peak_usd, self.reserved_usd)
            return True

    def settle(self, reserved: float, cost: float | None, maybe_billed: bool) -> None:
        """Release a request's reserve: at its reported ``cost``, or, when there is none, kept as
        spent-unknown if the request may have been billed (it reached the server and no error status came back)."""
        with self._lock:
            self.in_flight -= 1
            # Counted, not compared with zero: sums of floats leave residues.
            self.reserved_usd = max(0.0, self.reserved_usd - reserved) if self.in_flight else 0.0
            if cost is not None:
                self.spent_usd += cost
                self.overrun_usd += max(0.0, cost - reserved)
            elif maybe_billed:
                self.unsettled_usd += reserved
                self.spend_unknown = True

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
            "unsettled_usd": round(self.unsettled_usd, 6),
            "reserved_peak_usd": round(self.reserved_peak_usd, 6),
            "overrun_usd": round(self.overrun_usd, 6),
            "budget_usd": self.budget_usd,
        }

    def budget_line(self) -> str:
        """Spend against the budget, in one line (what the run log and the terminal say)."""
        line = f"spent {self.spent_usd:.4f} USD"
        if self.budget_usd is not None:
            line += f" of the {self.budget_usd:g} USD budget"
        if self.unsettled_usd:
            line += f", plus up to {self.unsettled_usd:.4f} USD for requests that ended without an answer"
        if self.reserved_peak_usd:
            line += f"; each request reserved its worst case before it was sent (at most {self.reserved_peak_usd:.4f} USD at once)"
        if self.overrun_usd:
            line += f"; answers cost {self.overrun_usd:.4f} USD more than reserved (a response limit was not honoured)"
        return line


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
    """Raised before a request whose reserve (worst-case cost) does not fit under the budget, nothing being in flight."""


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
        deadline: float = 300.0,
        max_retries: int = 4,
        backoff_sec: float = 0.5,
        max_retry_after_sec: float = 60.0,
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
        self.timeout = timeout  # socket: the longest silence between two bytes
        self.deadline = deadline  # overall: the longest one request may take, answered or not
        self.max_retries = max_retries
        self.backoff_sec = backoff_sec
        self.max_retry_after_sec = max_retry_after_sec  # a longer Retry-After ends the judgement
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        # Small local models under a grammar can loop inside a string; a maxLength stops them.
        self.max_string_chars = max_string_chars
        self.max_list_items = max_list_items
        self._rng = random.Random(seed)  # jitter of the backoff, seeded for reproducible runs
        self._sem: asyncio.Semaphore | None = None
        if self.ledger.budget_usd is not None:
            if model_prices(model) is None:
                raise ValueError(f"budget_usd: no price for {model}, so a budget cannot be kept; register one "
                                 "(analysis_lib.metrics.pricing.register_price) or run without a budget")
            if not max_tokens:
                raise ValueError("budget_usd: a budget needs a response limit (max_tokens) to bound each call's cost")

    def __repr__(self) -> str:  # no key in reprs, tracebacks or notebooks
        return f"JudgeClient(model={self.model!r}, api_base={self.api_base!r}, concurrency={self.concurrency})"

    # -- one request -----------------------------------------------------------------------
    def reserve_usd(self, messages: list[dict], schema: type[BaseModel]) -> float | None:
        """The worst-case cost of one request: a bound on its prompt tokens and a ``max_tokens`` answer, priced
        at the dearest input rate; None when the model has no price or there is no response limit."""
        prices = model_prices(self.model)
        if prices is None or not self.max_tokens:
            return None
        schema_json = json.dumps(bounded_schema(schema, self.max_string_chars, self.max_list_items))
        prompt = prompt_token_bound(messages) + len(schema_json.encode())
        return prompt * max(prices.input, prices.cache_read, prices.cache_write) + self.max_tokens * prices.output

    async def _hold(self, reserve: float | None) -> float:
        """Reserve ``reserve`` on the ledger before sending; wait while requests in flight may still free room,
        raise :class:`BudgetStop` when none is in flight and it still does not fit."""
        while not self.ledger.try_reserve(reserve or 0.0):
            if self.ledger.in_flight == 0:
                raise BudgetStop(reserve)
            await asyncio.sleep(0.05)
        return reserve or 0.0

    async def _request(self, messages: list[dict], schema: type[BaseModel], sample: int) -> tuple[str, int | None, int | None]:
        """Send one chat completion with retries; returns (content, prompt_tokens, completion_tokens)."""
        attempt = 0
        reserve = self.reserve_usd(messages, schema)
        while True:
            held = await self._hold(reserve)
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
                # The socket timeout only bounds silences: a response that sends a byte now and then never ends.
                resp = await asyncio.wait_for(litellm.acompletion(**kwargs), self.deadline)
            except asyncio.CancelledError:  # stopped in flight: it may have been billed
                self.ledger.settle(held, None, maybe_billed=True)
                raise
            except (TimeoutError, *RETRYABLE) as exc:
                # An error status was not billed; a request that ended without one (timeout, deadline, dropped
                # connection) may have been: its reserve stays counted.
                self.ledger.settle(held, None, maybe_billed=_status_of(exc) is None)
                why = (f"no complete answer within the {self.deadline:g} s deadline" if isinstance(exc, TimeoutError)
                       else self._short(exc))
                wait = retry_after_sec(exc)
                if wait is not None and wait > self.max_retry_after_sec:
                    raise RuntimeError(f"rate limited: the server asks to retry after {wait:g} s, more than the "
                                       f"{self.max_retry_after_sec:g} s this client waits ({why})") from None
                if attempt >= self.max_retries:
                    raise RuntimeError(f"gave up after {attempt + 1} attempts: {why}") from None
                attempt += 1
                self.ledger.add(retries=1)
                backoff = self.backoff_sec * (2 ** (attempt - 1)) * (0.5 + self._rng.random())
                await asyncio.sleep(backoff if wait is None else wait)
                continue
            except Exception as exc:  # 4xx and anything else is final for this judgement, not for the run
                self.ledger.settle(held, None, maybe_billed=_status_of(exc) is None)
                raise RuntimeError(self._short(exc)) from None
            usage = getattr(resp, "usage", None)
            pt = getattr(usage, "prompt_tokens", None) if usage else None
            ct = getattr(usage, "completion_tokens", None) if usage else None
            # No price or no usage: the spend is a lower bound (and the reserve, if any, stays counted).
            self.ledger.settle(held, cost_usd(self.model, pt, ct), maybe_billed=True)
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
            except BudgetStop as stop:
                self.ledger.add(budget_stopped=1)
                return JudgeResult(
                    ok=False,
                    skipped=True,
                    error=(f"budget stop: not sent, as its worst-case cost ({stop.args[0]:.4f} USD: the prompt and a "
                           f"{self.max_tokens}-token answer) would take the spend ({self.ledger.committed_usd:.4f} USD) past the "
                           f"{self.ledger.budget_usd:g} USD budget"),
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


def prompt_token_bound(messages: list[dict]) -> int:
    """An upper bound on a chat prompt's tokens for any byte-level tokenizer: every token covers at least one
    byte of text, so the UTF-8 bytes of the text, plus the formatting of each message, plus per image the
    larger of its data URL's length and :data:`IMAGE_TOKENS_BOUND`."""
    total = REQUEST_OVERHEAD_TOKENS
    for msg in messages:
        total += MESSAGE_OVERHEAD_TOKENS
        content = msg.get("content")
        parts = [content] if isinstance(content, str) else content if isinstance(content, list) else []
        for part in parts:
            if isinstance(part, str):
                total += len(part.encode())
            elif isinstance(part, dict) and part.get("type") == "image_url":
                url = (part.get("image_url") or {}).get("url", "") if isinstance(part.get("image_url"), dict) else str(part.get("image_url"))
                total += max(len(url), IMAGE_TOKENS_BOUND)
            elif isinstance(part, dict):
                total += len(json.dumps(part).encode())
    return total


def retry_after_sec(exc: BaseException) -> float | None:
    """The wait a response asked for (``retry-after-ms``, ``Retry-After`` in seconds or as an HTTP date), or None."""
    headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
    except (AttributeError, TypeError, ValueError):
        return None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _status_of(exc: BaseException) -> int | None:
    """The HTTP status of the error response behind ``exc``; None when no response came back."""
    status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) and status >= 400 else None


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
