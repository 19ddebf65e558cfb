"""What the loopback test servers share: a quiet HTTP/1.1 handler, start and stop on an ephemeral
127.0.0.1 port, and a response with a body (``tests/llm_server.py``, ``tests/anthropic_server.py``)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive, no request log."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: without this, Nagle's algorithm and the
    # client's delayed ACK add about 40 ms to every answer.
    disable_nagle_algorithm = True

    def log_message(self, *args):  # keep test output clean
        pass


class LoopbackServer:
    """A ThreadingHTTPServer on 127.0.0.1, port 0, serving :meth:`handler` until :meth:`stop` (or the ``with`` block ends)."""

    thread_name = "loopback-server"
    _httpd: ThreadingHTTPServer | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class (a :class:`QuietHandler` that calls back into this server)."""
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Self:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, name=self.thread_name, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def send(handler: BaseHTTPRequestHandler, status: int, data: bytes, content_type: str = "application/json", extra: dict | None = None) -> None:
    """One response with a Content-Length; a client that already gave up (timeout test, killed agent) is ignored."""
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            handler.send_header(k, v)
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        pass
