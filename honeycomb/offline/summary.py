"""The offline model's summaries (compaction's summary calls), by rules: the facts
found so far, nothing else.

The facts of the summary so far are kept, in order; each folded tool result adds its
key lines, under the call that produced it: of its text (or of a JSON object's long
texts) the lines that hold a number or a ``key: value`` pair, three at most, each cut
to 200 characters, the object's short fields beside the first. Prose without either
is left out. A folded turn of a session's conversation adds its message and the key
lines of its answer; the memories recalled at a worker's start, each one's id, origin and
lead. A real model keeps what its prompt and its judgement keep.
"""

from __future__ import annotations

import json
import re
from typing import Any

from runtime import ModelRequest, UserMessage
from workers.compaction import END_HEADER, FOLDED_HEADER, PREVIOUS_HEADER
from workers.memory import RECALL_HEADER

__all__ = ["FACTS_HEADER", "recalled_facts", "summarize", "turn_facts"]

FACTS_HEADER = "Facts found so far:"
_RESULT = re.compile(r"^### result (?P<call>.+) \[(?P<status>\w+)\]$")
_KEY_LINE = re.compile(r"\d|^\s*[\w .-]{1,40}:\s+\S")
_PER_RESULT = 3
_MESSAGE = "## Message "  # how a session's turn starts (honeycomb.run.conversation)
_LINE_MAX = 200


def summarize(request: ModelRequest) -> str:
    """The summary a summary call asks for: the previous facts, then the new ones."""
    prompt = next((m.content for m in request.messages if isinstance(m, UserMessage)), "")
    previous, _, folded = prompt.partition(FOLDED_HEADER)
    facts = [
        line for line in previous.removeprefix(PREVIOUS_HEADER).splitlines() if line[:2] == "- "
    ]
    call, body = "", list[str]()
    for line in [*folded.splitlines(), END_HEADER]:
        if line.startswith("### "):
            if call:
                facts += [f"- {call}: {fact}" for fact in key_facts("\n".join(body))]
            elif body[:1] and body[0].startswith(_MESSAGE):  # a turn of a session
                facts += turn_facts(body)
            elif body[:1] and body[0] == RECALL_HEADER:  # what it recalled at its start
                facts += recalled_facts(body)
            found = _RESULT.match(line)
            call = found["call"] if found and found["status"] == "ok" else ""
            body = []
        else:
            body.append(line)
    kept = list(dict.fromkeys(facts))  # each fact once, in the order found
    return "\n".join([FACTS_HEADER, *kept]) if kept else f"{FACTS_HEADER}\n(none yet)"


def turn_facts(lines: list[str]) -> list[str]:
    """A session's earlier turn, folded: its message, and the key lines of its answer
    (as :func:`key_facts` finds them in a tool result)."""
    number = lines[0].removeprefix(_MESSAGE).strip()
    message = " ".join(lines[1].split()) if len(lines) > 1 else ""
    answer = "\n".join(lines[lines.index("Answer:") + 1 :]) if "Answer:" in lines else ""
    said = [f"- message {number}: {message[:_LINE_MAX]}"]
    return said + [f"- answer {number}: {fact}" for fact in _key_lines(answer)]


def recalled_facts(lines: list[str]) -> list[str]:
    """The memories a worker recalled at its start, folded: each one's id and origin,
    and the lead of its text (the recall tool's are folded as any tool's result)."""
    return [
        f"- {line[1:-1]}: {' '.join(lines[at + 1].split())[:_LINE_MAX]}"
        for at, line in enumerate(lines[:-1])
        if line.startswith("[memory ") and line.endswith("]")
    ]


def key_facts(content: str) -> list[str]:
    """The key lines of one tool result (see the module's docstring)."""
    try:
        value = json.loads(content)
    except ValueError:
        value = content
    if isinstance(value, dict):  # its short fields, then its texts' key lines
        short = [f"{k}: {v}" for k, v in value.items() if not isinstance(v, str) or len(v) <= 60]
        texts = [v for v in value.values() if isinstance(v, str) and len(v) > 60]
        lines = [line for text in texts for line in _key_lines(text)]
        first = "; ".join(short)
        if lines and first:
            return [f"{lines[0]} ({first})", *lines[1:]]
        return lines or [first[:_LINE_MAX]]
    return _key_lines(value if isinstance(value, str) else json.dumps(value))


def _key_lines(text: Any) -> list[str]:
    found = [line.strip() for line in str(text).splitlines() if _KEY_LINE.search(line)]
    return [line[:_LINE_MAX] for line in found[:_PER_RESULT]]
