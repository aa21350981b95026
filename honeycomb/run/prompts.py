"""What the planner and the aggregator are told, in one place.

The formats are plain text a model reads easily; :func:`parse_catalog` and
:func:`parse_results` read them back, for the offline model that plans and
aggregates by rules.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec

from honeycomb.run.conversation import CONVERSATION_HEADER
from runtime.value import Value

__all__ = [
    "AGGREGATOR_INSTRUCTIONS",
    "PLANNER_INSTRUCTIONS",
    "CatalogEntry",
    "ResultEntry",
    "aggregator_task",
    "conversation_of",
    "follow_up_task",
    "parse_catalog",
    "parse_results",
    "planner_task",
]

PLANNER_INSTRUCTIONS = """\
You split a task into subtasks for specialised workers that run in parallel.
Give each subtask an id (s1, s2 ... in order), one role from the list, and a short,
self-contained instruction. Make a subtask depend on another (depends_on) only when it needs that
subtask's result; independent subtasks run at the same time, so prefer them."""

AGGREGATOR_INSTRUCTIONS = """\
You merge the results of subtasks into one final answer to the task. Use only what the
results say; when a subtask failed, say what is missing."""

CATALOG_HEADER = "Available roles:"
RESULTS_HEADER = "Results of the subtasks:"


class CatalogEntry(Value, frozen=True, kw_only=True):
    """One role as the planner sees it."""

    role: str
    description: str
    tools: tuple[tuple[str, str], ...] = ()  # (name, description)


class ResultEntry(Value, frozen=True, kw_only=True):
    """One subtask's result as the aggregator (or a lead) sees it; ``asked``: its
    instruction, which a lead planning in rounds is shown too."""

    id: str
    role: str
    ok: bool
    text: str
    asked: str = ""


STANDS_ALONE = (
    "Write each instruction to stand alone: say in it what the task's words point to in "
    'the conversation ("the cheaper one", "and Madrid?").'
)
"""Under the conversation a planner is shown: its workers do not see it."""


def planner_task(
    task: str, catalog: Sequence[CatalogEntry], *, max_subtasks: int, conversation: str = ""
) -> str:
    """The planner's user message: the task, the conversation before it (in a
    session), the roles, and the limits."""
    shown = _conversation(conversation) + (["", STANDS_ALONE] if conversation else [])
    lines = [f"Task: {task}", *shown, "", CATALOG_HEADER]
    for entry in catalog:
        # One line each: a description's own lines ("- weather: ...") would read as
        # roles that are not there, to the model and to parse_catalog.
        lines.append(f"- {entry.role}: {_one_line(entry.description) or 'no description'}")
        lines.extend(f"    tool {name}: {_one_line(desc)}" for name, desc in entry.tools)
    lines += ["", f"Use at most {max_subtasks} subtasks. Answer with the plan as JSON."]
    return "\n".join(lines)


def _one_line(text: str) -> str:
    """``text`` on one line, its runs of whitespace (line breaks too) one space each."""
    return " ".join(text.split())


def aggregator_task(task: str, results: Sequence[ResultEntry], conversation: str = "") -> str:
    """The aggregator's user message: the task, the conversation before it (in a
    session), and every subtask's result with its role."""
    lines = [f"Task: {task}", *_conversation(conversation), "", RESULTS_HEADER]
    for entry in results:
        status = "" if entry.ok else " FAILED"
        lines += ["", f"### {entry.id} ({entry.role}){status}", entry.text.strip() or "(empty)"]
    return "\n".join(lines)


def _conversation(text: str) -> list[str]:
    """The lines that show a session's conversation under the task (none outside one)."""
    return ["", CONVERSATION_HEADER, text] if text else []


def conversation_of(text: str) -> str:
    """The conversation a planner's or aggregator's message shows ('' if none)."""
    if CONVERSATION_HEADER not in text:
        return ""
    shown = text.partition(CONVERSATION_HEADER)[2]
    for after in (STANDS_ALONE, CATALOG_HEADER, RESULTS_HEADER):
        shown = shown.partition(f"\n\n{after}")[0]
    return shown.strip()


ROUND_HEADER = "Planning round"
ASKED = "Asked:"


def follow_up_task(
    planned: str,
    results: Sequence[ResultEntry],
    *,
    round: int,
    rounds: int,
    room: int,
    ids: Sequence[str] = (),
) -> str:
    """The lead's user message for round ``round``: what it was told for the first
    plan (``planned``: the task, the roles), every result so far, and what it may add
    (``ids``: those its new subtasks take, in order)."""
    lines = [planned, "", RESULTS_HEADER]
    for entry in results:
        status = "" if entry.ok else " FAILED"
        lines += ["", f"### {entry.id} ({entry.role}){status}"]
        if entry.asked:
            lines.append(f"{ASKED} {' '.join(entry.asked.split())}")
        lines.append(entry.text.strip() or "(empty)")
    lines += [
        "",
        f"{ROUND_HEADER} {round} of at most {rounds}. If the results answer the task, "
        "answer with no subtasks: you are done. Otherwise add at most "
        f"{room} new subtasks, with "
        + (_ids_named(ids) if ids else "ids not used above")
        + "; they may depend on any subtask above not marked FAILED (one that depends on a "
        "failed subtask is skipped). Answer with the new subtasks as JSON.",
    ]
    return "\n".join(lines)


def _ids_named(ids: Sequence[str]) -> str:
    """``the ids s3, s4, s5 ... in order``: the first few of those a round may give."""
    more = " ..." if len(ids) > 3 else ""
    return f"the ids {', '.join(ids[:3])}{more} in order"


# Patterns as strings: re compiles each on first use and keeps it (not at import).
_ROLE_LINE = r"^- ([A-Za-z0-9_-]+): (.*)$"
_TOOL_LINE = r"^\s+tool ([A-Za-z0-9_-]+): (.*)$"
_RESULT_HEAD = r"^### (\S+) \(([^)]*)\)( FAILED)?$"


def parse_catalog(text: str) -> tuple[str, list[CatalogEntry]]:
    """The task and the role catalog from a :func:`planner_task` message: the task all
    of it, however many lines, and the catalog the last one (a task or a conversation
    may hold the catalog's header too), up to the blank line that ends it."""
    head, header, catalog = text.rpartition(f"\n{CATALOG_HEADER}\n")
    if header:
        task = head.partition(f"\n\n{CONVERSATION_HEADER}")[0].removesuffix("\n")
        task = task.removeprefix("Task: ")
        catalog = catalog.partition("\n\n")[0]
    else:  # no catalog: the text is the task, its first line read as such
        task, catalog = text.split("\n", 1)[0].removeprefix("Task: "), text
    entries: list[CatalogEntry] = []
    for line in catalog.splitlines():
        role = re.match(_ROLE_LINE, line)
        if role:
            entries.append(CatalogEntry(role=role.group(1), description=role.group(2)))
            continue
        found = re.match(_TOOL_LINE, line)
        if found and entries:
            last = entries[-1]
            tools = (*last.tools, (found.group(1), found.group(2)))
            entries[-1] = CatalogEntry(role=last.role, description=last.description, tools=tools)
    return task, entries


def parse_results(text: str) -> tuple[str, list[ResultEntry]]:
    """The task and the results from an :func:`aggregator_task` message."""
    head, _, body = text.partition(RESULTS_HEADER)
    task = head.partition(f"\n\n{CONVERSATION_HEADER}")[0].strip().removeprefix("Task: ")
    entries: list[ResultEntry] = []
    current: list[str] = []
    for line in body.splitlines():
        match = re.match(_RESULT_HEAD, line)
        if match:
            if entries:
                entries[-1] = _with_text(entries[-1], current)
            entries.append(
                ResultEntry(id=match.group(1), role=match.group(2), ok=not match.group(3), text="")
            )
            current = []
        elif entries:
            current.append(line)
    if entries:
        entries[-1] = _with_text(entries[-1], current)
    return task, entries


def _with_text(entry: ResultEntry, lines: list[str]) -> ResultEntry:
    asked = ""
    if lines and lines[0].startswith(ASKED):
        asked, lines = lines[0].removeprefix(ASKED).strip(), lines[1:]
    return msgspec.structs.replace(entry, text="\n".join(lines).strip(), asked=asked)
