"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests: scripted answers, faults, latency.

Usage::

    with LLMServer() as srv:                 # or the ``llm_server`` pytest fixture
        srv.script(Reply('{"a": 1}'), Fail(429), Reply("not json"))   # answered in order
        srv.on("root cause", Reply('{"root_cause": "knowledge_gap"}'))  # by prompt content
        srv.default = Reply('{}', latency=0.1)                          # everything else
        litellm.completion(model="openai/x", api_base=srv.url, api_key="k", messages=...)
        srv.requests        # recorded request bodies (parsed JSON), in arrival order
        srv.max_in_flight   # most requests being answered at the same moment
        srv.script(Drip(interval=0.25))   # headers, then a byte now and then: a response that never ends
        srv.arrivals, srv.drips           # when each request arrived; what each Drip sent, and who hung up

An answer may also be a callable ``body -> answer`` so that a test can compute it from the
request (for example echo a schema-valid object). Serves ``POST /v1/chat/completions`` and
``GET /v1/models``; anything else is a 404.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from loopback_http import LoopbackServer, QuietHandler, send


@dataclass
class Reply:
    """A 200 chat completion whose message content is ``content`` (a str, or an object sent as JSON)."""

    content: Any
    prompt_tokens: int = 100
    completion_tokens: int = 20
    latency: float = 0.0
    model: str = "loopback-model"


@dataclass
class Fail:
    """An HTTP error status (429, 500, 503...) with an OpenAI-style error body."""

    status: int = 500
    message: str = "scripted failure"
    latency: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Raw:
    """Raw bytes with a status: broken JSON bodies, wrong content types."""

    body: bytes
    status: int = 200
    latency: float = 0.0
    content_type: str = "application/json"


@dataclass
class Drip:
    """A 200 whose body never completes: the headers (a long Content-Length), then one byte every ``interval``
    seconds for up to ``seconds``. What happened is appended to ``LLMServer.drips``: the bytes sent and
    whether the client hung up first."""

    interval: float = 1.0
    seconds: float = 60.0


Answer = Reply | Fail | Raw | Drip | Callable[[dict], Any]


def prompt_text(body: dict) -> str:
    """All message text of a chat request, concatenated (for matching rules)."""
    parts = []
    for msg in body.get("messages", []):
        content = msg.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "\n".join(parts)


class LLMServer(LoopbackServer):
    """ThreadingHTTPServer on an ephemeral loopback port speaking the chat-completions API."""

    thread_name = "llm-server"

    def __init__(self, default: Answer | None = None, latency: float = 0.0):
        self.default: Answer = default if default is not None else Reply("{}")
        self.latency = latency  # added to every answer
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self.arrivals: list[float] = []  # time.monotonic() of each request's arrival
        self.drips: list[dict] = []  # per Drip answer: {"bytes": n, "client_hung_up": bool}
        self.max_in_flight = 0
        self._in_flight = 0
        self._queue: deque[Answer] = deque()
        self._rules: list[tuple[str, Answer]] = []
        self._lock = threading.Lock()

    # -- scripting -------------------------------------------------------------------------
    def script(self, *answers: Answer) -> LLMServer:
        """Queue answers used by the next requests, in order (before rules and default)."""
        with self._lock:
            self._queue.extend(answers)
        return self

    def on(self, substring: str, answer: Answer) -> LLMServer:
        """Answer requests whose prompt text contains ``substring`` (first matching rule wins)."""
        with self._lock:
            self._rules.append((substring, answer))
        return self

    def reset(self) -> None:
        """Forget recorded requests, the in-flight maximum and queued answers (rules stay)."""
        with self._lock:
            self.requests.clear()
            self.headers.clear()
            self.arrivals.clear()
            self.drips.clear()
            self._queue.clear()
            self.max_in_flight = 0

    @property
    def request_count(self) -> int:
        return len(self.requests)

    @property
    def url(self) -> str:
        return f"{self.base_url}/v1"

    # -- lifecycle -------------------------------------------------------------------------
    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(QuietHandler):
            def do_GET(self):
                if self.path.rstrip("/").endswith("/_stats"):  # for a server run in another process
                    with server._lock:
                        stats = {"requests": len(server.requests), "max_in_flight": server.max_in_flight}
                    send(self, 200, json.dumps(stats).encode())
                elif self.path.rstrip("/").endswith("/models"):
                    send(self, 200, json.dumps({"object": "list", "data": [{"id": "loopback-model", "object": "model"}]}).encode())
                else:
                    send(self, 404, b'{"error": {"message": "not found"}}')

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.rstrip("/").endswith("/_reset"):
                    server.reset()
                    send(self, 200, b"{}")
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    send(self, 404, b'{"error": {"message": "not found"}}')
                    return
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    send(self, 400, b'{"error": {"message": "request body is not JSON"}}')
                    return
                server._handle(self, body)

        return Handler

    # -- answering -------------------------------------------------------------------------
    def _pick(self, body: dict) -> Answer:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            text = prompt_text(body)
            for substring, answer in self._rules:
                if substring in text:
                    return answer
            return self.default

    def _handle(self, handler: BaseHTTPRequestHandler, body: dict) -> None:
        with self._lock:
            self.requests.append(body)
            self.arrivals.append(time.monotonic())
            self.headers.append({k.lower(): v for k, v in handler.headers.items()})
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            answer = self._pick(body)
            while callable(answer) and not isinstance(answer, (Reply, Fail, Raw, Drip)):
                answer = answer(body)
            if not isinstance(answer, (Reply, Fail, Raw, Drip)):
                answer = Reply(answer)
            if isinstance(answer, Drip):
                self._drip(handler, answer)
                return
            delay = self.latency + answer.latency
            if delay > 0:
                time.sleep(delay)
            if isinstance(answer, Reply):
                content = answer.content if isinstance(answer.content, str) else json.dumps(answer.content)
                payload = {
                    "id": f"chatcmpl-{len(self.requests)}",
                    "object": "chat.completion",
                    "created": 1_700_000_000,
                    "model": answer.model,
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
                    "usage": {
                        "prompt_tokens": answer.prompt_tokens,
                        "completion_tokens": answer.completion_tokens,
                        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
                    },
                }
                send(handler, 200, json.dumps(payload).encode())
            elif isinstance(answer, Fail):
                err = {"error": {"message": answer.message, "type": "scripted", "code": answer.status}}
                send(handler, answer.status, json.dumps(err).encode(), extra=answer.headers)
            else:
                send(handler, answer.status, answer.body, content_type=answer.content_type)
        finally:
            with self._lock:
                self._in_flight -= 1


    def _drip(self, handler: BaseHTTPRequestHandler, answer: Drip) -> None:
        record = {"bytes": 0, "client_hung_up": False}
        with self._lock:
            self.drips.append(record)
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(10**6))
            handler.end_headers()
            handler.wfile.flush()
            end = time.monotonic() + answer.seconds
            while time.monotonic() < end:
                handler.wfile.write(b" ")
                handler.wfile.flush()
                record["bytes"] += 1
                time.sleep(answer.interval)
        except (BrokenPipeError, ConnectionResetError):
            record["client_hung_up"] = True
        handler.close_connection = True


@pytest.fixture
def llm_server():
    """A started :class:`LLMServer` on 127.0.0.1 (port 0), stopped after the test."""
    with LLMServer() as srv:
        yield srv


def main(argv: list[str] | None = None) -> int:
    """Serve one fixed answer from its own process (benchmarks): prints the base URL, runs until killed.

    ``GET /v1/_stats`` gives the request count and the in-flight maximum; ``POST /v1/_reset`` clears them.
    """
    import argparse

    ap = argparse.ArgumentParser(description="loopback OpenAI-compatible server with a fixed answer")
    ap.add_argument("--answer", default="{}", help="message content of every answer")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    args = ap.parse_args(argv)
    srv = LLMServer(default=Reply(args.answer), latency=args.latency).start()
    print(srv.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    srv.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
