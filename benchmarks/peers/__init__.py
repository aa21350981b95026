"""The peers: the standard workload through other frameworks' own agent loops.

Each module runs the workload of :mod:`benchmarks.spec` through one framework's public
extension points (its model interface, its tool decorator, its agent runner), with the
same fake model, latencies and checks as Honeycomb and the floor, and exposes
``run(params)`` and ``VERSION``. They need the ``peers`` extra
(``pip install -e '.[peers]'``); ``python -m benchmarks.peers`` measures them.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["PEERS", "Peer"]


class Peer(NamedTuple):
    module: str  # the module that runs the workload through it
    title: str  # how the tables name it
    package: str  # what it imports as, to tell whether it is installed


PEERS = {
    "openai-agents": Peer("benchmarks.peers.openai_agents", "OpenAI Agents SDK", "agents"),
    "langgraph": Peer("benchmarks.peers.langgraph_agent", "LangGraph", "langgraph"),
    "pydantic-ai": Peer("benchmarks.peers.pydantic_ai_agent", "pydantic-ai", "pydantic_ai"),
}
"""Each peer by its name in results and on the command line."""
