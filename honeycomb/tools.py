"""Tools: ``@tool`` and what it makes, the registry roles look tool names up in, the
context a tool may ask for, tools from MCP servers, the dispatcher that runs a model
turn's calls (parallel-safe ones together, side-effecting ones in order), and the
layers each call goes through (docs/layers.md).

    from honeycomb.tools import Dispatcher, McpToolSettings

``tool``, ``Tool``, ``ToolContext``, ``ToolRegistry``, ``McpServer`` and
``check_cancelled`` are in ``honeycomb`` too.
"""

from honeycomb.run.mcp import McpTools
from runtime.events import Caller
from runtime.tools import Tool, ToolContext, ToolRegistry, tool
from runtime.tools.dispatch import Dispatcher, DispatchPolicy, LockTable, check_cancelled
from runtime.tools.layers import Outcome, Prepared, ToolHandler, ToolLayer
from runtime.tools.mcp import McpServer, McpToolSettings

__all__ = [
    "Caller",
    "DispatchPolicy",
    "Dispatcher",
    "LockTable",
    "McpServer",
    "McpToolSettings",
    "McpTools",
    "Outcome",
    "Prepared",
    "Tool",
    "ToolContext",
    "ToolHandler",
    "ToolLayer",
    "ToolRegistry",
    "check_cancelled",
    "tool",
]
