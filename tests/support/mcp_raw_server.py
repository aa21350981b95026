"""An MCP server written without the SDK, a JSON-RPC message a line over stdio, that
says what MCP does not allow (the SDK's own server would refuse to send it): ``python
-m tests.support.mcp_raw_server TOOLS``, with its tool list as JSON. It speaks MCP as
it was before 2026 (it knows no ``server/discover``). A call of ``garbled`` answers
with content that is not a list; any other call, with its tool's name.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def answer(message: dict[str, Any], tools: list[Any]) -> dict[str, Any]:
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        info = {"name": "honeycomb-raw", "version": "1"}
        version = params.get("protocolVersion")
        return {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
    if method == "tools/list":
        return {"tools": tools}
    if method == "tools/call":
        name = params.get("name")
        return {"content": "garbled" if name == "garbled" else [{"type": "text", "text": name}]}
    raise LookupError(method)


def main() -> None:
    tools = json.loads(sys.argv[1])
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:  # a notification
            continue
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        try:
            reply["result"] = answer(message, tools)
        except LookupError:
            reply["error"] = {"code": -32601, "message": "Method not found"}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
