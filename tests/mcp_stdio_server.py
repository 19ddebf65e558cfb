"""A real MCP server over stdio (JSON-RPC 2.0, one message per line) with one tool, ``lookup``.

Started by Claude Code from an MCP config; every ``tools/call`` is appended to the file named by
``MCP_CALL_LOG`` (when set), so a test knows how often the tool really ran.
"""

import json
import os
import sys

TOOL = {"name": "lookup", "description": "Look up where a symbol is defined in the repository.",
        "inputSchema": {"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]}}


def reply(mid, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    if not line.strip():
        continue
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if mid is None:
        continue  # a notification (notifications/initialized, cancelled)
    if method == "initialize":
        reply(mid, {"protocolVersion": msg.get("params", {}).get("protocolVersion", "2024-11-05"),
                    "capabilities": {"tools": {}}, "serverInfo": {"name": "codemap", "version": "0.1.0"}})
    elif method == "tools/list":
        reply(mid, {"tools": [TOOL]})
    elif method == "tools/call":
        if os.environ.get("MCP_CALL_LOG"):
            with open(os.environ["MCP_CALL_LOG"], "a") as fh:
                fh.write(json.dumps(msg.get("params")) + "\n")
        sym = (msg.get("params", {}).get("arguments") or {}).get("symbol", "?")
        reply(mid, {"content": [{"type": "text", "text": f"{sym} is defined in src/app.py line 1"}], "isError": False})
    elif method == "ping":
        reply(mid, {})
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"unknown method {method}"}}) + "\n")
        sys.stdout.flush()
