"""The peers: the standard workload through other frameworks' own agent loops.

Each module runs the workload of :mod:`benchmarks.spec` through one framework's public
extension points (its model interface, its tool decorator, its agent runner), with the
same fake model, latencies and checks as Honeycomb and the floor, and exposes
``run(params)`` and ``VERSION``. They need the ``peers`` extra
(``pip install -e '.[peers]'``); ``python -m benchmarks.peers`` measures them.
"""

from __future__ import annotations

__all__ = ["NAMES", "PEERS"]

PEERS = {
    "openai-agents": "benchmarks.peers.openai_agents",
    "langgraph": "benchmarks.peers.langgraph_agent",
    "pydantic-ai": "benchmarks.peers.pydantic_ai_agent",
}
"""Each peer's name in results and on the command line, and its module."""

NAMES = {
    "openai-agents": "OpenAI Agents SDK",
    "langgraph": "LangGraph",
    "pydantic-ai": "pydantic-ai",
}
"""How the tables name them."""
