"""A real MCP server over stdio, made with the `mcp` package, with one tool: ``lookup``.

Started by Claude Code from an MCP config; every call is appended to the file named by
``MCP_CALL_LOG`` (when set), so a test knows how often the tool really ran.
"""

import json
import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("codemap", version="0.1.0", log_level="ERROR")


@server.tool(description="Look up where a symbol is defined in the repository.")
def lookup(symbol: str) -> str:
    if os.environ.get("MCP_CALL_LOG"):
        with open(os.environ["MCP_CALL_LOG"], "a") as fh:
            fh.write(json.dumps({"name": "lookup", "arguments": {"symbol": symbol}}) + "\n")
    return f"{symbol} is defined in src/app.py line 1"


if __name__ == "__main__":
    server.run("stdio")
