"""A real Anthropic Messages API server on 127.0.0.1 for tests: scripted tool-use turns, known usage.

Claude Code (``ANTHROPIC_BASE_URL`` pointed here) talks to it as to the real API, JSON or SSE
streaming. Every answer carries a distinct, known usage and is logged, so a test can compare what
the agent and the converters report with the truth::

    with AnthropicServer(script) as srv:     # script(body) -> Turn
        ...run claude with env ANTHROPIC_BASE_URL=srv.url...
        srv.calls                            # [{"model", "usage", "kind", ...}] in arrival order

``count_tokens`` requests are answered and logged separately (they are not billed calls).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from loopback_http import LoopbackServer, QuietHandler, send


@dataclass
class Turn:
    """One assistant answer: content blocks (text / tool_use) and a label for the log; ``hang`` sleeps first."""

    blocks: list[dict[str, Any]]
    label: str = ""
    hang: float = 0.0


@dataclass
class Usage:
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def tool_use(name: str, args: dict, tid: str) -> dict:
    return {"type": "tool_use", "id": tid, "name": name, "input": args}


def usage_for(n: int) -> Usage:
    """The n-th call's usage (n from 1): distinct figures, so a dropped or doubled call shows."""
    return Usage(
        input_tokens=100 + 7 * n, output_tokens=20 + 3 * n, cache_creation_input_tokens=400 + 11 * n, cache_read_input_tokens=1000 + 13 * n
    )


def usage_totals(calls: list[dict]) -> dict[str, int]:
    """Summed usage of logged calls (ATIF semantics: prompt includes cache reads and writes) and their number."""
    tot = {
        k: sum(c["usage"][k] for c in calls)
        for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    }
    tot["prompt_tokens"] = tot["input_tokens"] + tot["cache_creation_input_tokens"] + tot["cache_read_input_tokens"]
    tot["calls"] = len(calls)
    return tot


@dataclass
class AnthropicServer(LoopbackServer):
    """ThreadingHTTPServer on an ephemeral loopback port speaking ``POST /v1/messages``."""

    script: Callable[[dict], Turn]
    calls: list[dict] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    thread_name = "anthropic-server"

    @property
    def url(self) -> str:
        return self.base_url

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(QuietHandler):
            def do_HEAD(self):
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):
                send(self, 404, b'{"type":"error","error":{"type":"not_found_error","message":"not found"}}')

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?", 1)[0].rstrip("/")
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    send(self, 400, b'{"type":"error","error":{"type":"invalid_request_error","message":"not JSON"}}')
                    return
                if path.endswith("/v1/messages/count_tokens"):
                    send(self, 200, b'{"input_tokens": 1000}')
                elif path.endswith("/v1/messages"):
                    server._answer(self, body)
                else:
                    send(self, 404, b'{"type":"error","error":{"type":"not_found_error","message":"not found"}}')

        return Handler

    def _answer(self, handler: BaseHTTPRequestHandler, body: dict) -> None:
        turn = self.script(body)
        with self._lock:
            n = len(self.calls) + 1
            usage = usage_for(n)
            model = str(body.get("model") or "unknown")
            rec = {
                "n": n,
                "model": model,
                "usage": usage.as_dict(),
                "label": turn.label,
                "stream": bool(body.get("stream")),
                "completed": False,
                "tools": [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)],
            }
            self.calls.append(rec)
        msg_id = f"msg_loop{n:04d}"
        stop = "tool_use" if any(b["type"] == "tool_use" for b in turn.blocks) else "end_turn"
        if not body.get("stream"):
            if turn.hang:
                time.sleep(turn.hang)
            payload = {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": turn.blocks,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": usage.as_dict(),
            }
            send(handler, 200, json.dumps(payload).encode())
            rec["completed"] = True
            return
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "text/event-stream")
            handler.send_header("Cache-Control", "no-cache")
            handler.send_header("Connection", "close")
            handler.end_headers()

            def event(kind: str, data: dict) -> None:
                handler.wfile.write(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode())
                handler.wfile.flush()

            start_usage = {**usage.as_dict(), "output_tokens": 1}
            event(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": msg_id,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": start_usage,
                    },
                },
            )
            if turn.hang:
                time.sleep(turn.hang)
            for i, b in enumerate(turn.blocks):
                if b["type"] == "text":
                    event("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
                    event(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": b["text"]}},
                    )
                else:
                    event("content_block_start", {"type": "content_block_start", "index": i, "content_block": {**b, "input": {}}})
                    event(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": json.dumps(b["input"])},
                        },
                    )
                event("content_block_stop", {"type": "content_block_stop", "index": i})
            event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": usage.output_tokens},
                },
            )
            event("message_stop", {"type": "message_stop"})
            handler.close_connection = True
            rec["completed"] = True
        except (BrokenPipeError, ConnectionResetError):  # the agent was killed mid-answer
            pass
