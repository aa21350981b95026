"""An MCP server whose tool list is odd, written with the ``mcp`` SDK's low-level
``Server`` (which lists tools as they are given): ``python -m
tests.support.mcp_odd_server`` serves it over stdio.

Its tools: ``bare``, whose input schema is ``{"type": "object"}`` alone (as the Go SDK
lists a tool without arguments, and as MCP allows); and ``a.b`` beside ``a_b``, two
names a model calls by one (``.`` is not a character a model calls by). A call
answers with the tool's name and its arguments. ``--refuse-list`` answers the
handshake, then refuses to list its tools; ``--broken-schema`` lists a tool
``broken`` too, whose input schema is no JSON schema (its ``required`` is ``true``),
which the SDK's client lets through as MCP has it since 2026, and ``own_draft``, whose
schema names a ``$schema`` no validator knows; ``--off-its-schema``
lists a tool ``count`` too, whose output schema says a number where its answer has a
text.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import mcp.types as types
from mcp import MCPError
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

READ_ONLY = types.ToolAnnotations(read_only_hint=True)
TOOLS = [
    types.Tool(name="bare", input_schema={"type": "object"}, annotations=READ_ONLY),
    types.Tool(name="a.b", input_schema={"type": "object"}, annotations=READ_ONLY),
    types.Tool(name="a_b", input_schema={"type": "object"}, annotations=READ_ONLY),
]


BROKEN = types.Tool(
    name="broken",
    input_schema={"type": "object", "properties": {"n": {"type": "number"}}, "required": True},
    annotations=READ_ONLY,
)


OWN_DRAFT = types.Tool(
    name="own_draft",
    input_schema={"$schema": "https://example.com/its-own-draft", "type": "object"},
    annotations=READ_ONLY,
)
COUNT = types.Tool(
    name="count",
    input_schema={"type": "object"},
    output_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
    annotations=READ_ONLY,
)


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    if "--refuse-list" in sys.argv:
        raise MCPError(code=-32000, message="the tool list is broken today")
    tools = [*TOOLS, *([BROKEN, OWN_DRAFT] if "--broken-schema" in sys.argv else [])]
    return types.ListToolsResult(tools=tools + ([COUNT] if "--off-its-schema" in sys.argv else []))


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    said = f"{params.name} got {json.dumps(params.arguments)}"
    counted = {"n": "many"} if params.name == "count" else None  # not the number it said
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=said)], structured_content=counted
    )


server = Server("honeycomb-odd", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
