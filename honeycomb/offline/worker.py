"""The offline model's worker turns and final answers (see
:mod:`honeycomb.offline.model`): calls to the tools whose words match the instruction,
follow-up calls once results are in, a "send" call and ``remember`` when the task asks,
then the answer in sentences from what the tools found."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from difflib import SequenceMatcher
from typing import Any

from honeycomb.offline import answer as answer
from honeycomb.offline import follow as follow
from honeycomb.offline import rules as rules
from honeycomb.offline import schema as schema_rules
from honeycomb.offline.plan import task_text
from runtime import (
    AssistantMessage,
    ModelRequest,
    ToolCall,
    ToolMessage,
    ToolSchema,
    UserMessage,
)
from runtime.value import Value
from workers.context import SUMMARY_HEADER
from workers.memory import RECALL_HEADER
from workers.worker import DEPENDENCY_HEADER

__all__ = ["final_text", "worker_turn"]

PREFIX = rules.PREFIX
_SUBJECT_PARAM = re.compile(r"subject|title|headline", re.I)
_BODY_PARAM = re.compile(r"body|content|text|message|markdown|note", re.I)
_RECIPIENT_PARAM = re.compile(r"^to$|recipient|address|email", re.I)
_MEMORY_TOOLS = ("recall", "remember")
"""The tools a role's ``memory:`` gives, used by their names, not by their words."""
_NOTE_CHARS = 600
_RECALLED_CHARS = 240


# --- worker -----------------------------------------------------------------------------


class _Task(Value, frozen=True, kw_only=True):
    instruction: str
    inputs: tuple[tuple[str, str], ...]  # (name, result) of the subtasks depended on


def worker_turn(request: ModelRequest) -> AssistantMessage | str:
    """Tool calls for this turn, or the final text once there is nothing left to call."""
    task = _task(request)
    observed = _observations(request)
    turn = 1 + sum(1 for m in request.messages if isinstance(m, AssistantMessage))
    tools = [t for t in request.tools if t.name not in _MEMORY_TOOLS]
    offered = {t.name for t in request.tools}
    # Side effects are not in the schema; judge by the tool's name and description.
    senders = [t for t in tools if rules.mentions(_tool_words(t, params=False), rules.SEND_WORDS)]
    if not observed:
        gather = [t for t in tools if t not in senders]
        calls = _gather_calls(_still_open(task), gather, turn)
        if "recall" in offered and not _recalled(request):
            query = rules.key_phrase(task.instruction)
            calls = (*calls, _call("recall", {"query": query, "k": 3}, turn, len(calls)))
        if calls:
            return AssistantMessage(tool_calls=calls)
    following = _next_page(request, observed)
    if following is not None:
        return AssistantMessage(tool_calls=(following,))
    messages = [m for _, _, m in observed]
    each_item = follow.follow_ups([t for t in tools if t not in senders], messages)
    if each_item:  # "list the files, then review each": one call per item the results name
        return AssistantMessage(
            tool_calls=tuple(_call(n, a, turn, i) for i, (n, a) in enumerate(each_item))
        )
    called = {name for name, _, _ in observed}
    later: list[ToolCall] = []
    sent = called & {t.name for t in senders}
    if senders and not sent and rules.mentions(task.instruction, rules.SEND_WORDS):
        wanted = rules.stems(task.instruction)
        sender = max(senders, key=lambda t: len(wanted & rules.stems(_tool_words(t), widen=False)))
        subject = re.split(r"\s+(?:to|into|for)\s+", rules.key_phrase(task.instruction))[0]
        each = follow.per_item(sender, messages, subject.capitalize() or "Item")
        if each:  # side effects per item: the dispatcher runs them one at a time, in order
            return AssistantMessage(
                tool_calls=tuple(_call(sender.name, a, turn, i) for i, a in enumerate(each))
            )
        call = _send_call(sender, task, observed, turn)
        if call is not None:
            later.append(call)
    note = _note(task, request)
    if "remember" in offered and "remember" not in called and note:
        later.append(_call("remember", {"text": note}, turn, len(later)))
    if later:
        return AssistantMessage(tool_calls=tuple(later))
    return final_text(request)


def _note(task: _Task, request: ModelRequest) -> str:
    """What to remember of a subtask: its topic, and the lead of the answer that what
    its tools (not the memory's) found makes."""
    found = [s for s in _seen(request) if s.ok]
    if not found:
        return ""
    topic = task.instruction.splitlines()[0].rstrip(" .:") if task.instruction else "the task"
    found_text = answer.lead(answer.worker_answer(task.instruction, (), found))
    return rules.shorten(f"{topic}: {found_text}", _NOTE_CHARS)


def _seen(request: ModelRequest) -> list[answer.Seen]:
    """What the tools of the conversation found, but the memory's: a recall and a
    remember are how a worker works, not what it found."""
    return [s for s in answer.seen(request) if s.tool not in _MEMORY_TOOLS]


class _Recalled(Value, frozen=True, kw_only=True):
    memory: str  # its id, and where it came from: ``3f2a... (guide, run 9c1e...)``
    text: str  # the lead of what it holds, on one line


def _recalled(request: ModelRequest) -> list[_Recalled]:
    """The memories recalled, at the worker's start or by its recall tool."""
    texts = [
        m.content
        for m in request.messages
        if (isinstance(m, UserMessage) and m.content.startswith(RECALL_HEADER))
        or (isinstance(m, ToolMessage) and m.name == "recall" and m.status == "ok")
    ]
    found = []
    for text in texts:
        for block in text.split("\n\n[memory ")[1:]:
            source, _, kept = block.partition("]\n")
            memory_id, _, origin = source.partition(" · ")
            where = f" ({origin})" if origin else ""
            lead = " ".join(answer.lead(kept).split())
            found.append(_Recalled(memory=f"{memory_id}{where}", text=lead))
    return found


def _recall_sentences(recalled: list[_Recalled], found_now: str) -> list[str]:
    """What an answer says of the memories recalled: each one's finding (shortened at a
    word), or, for those that hold what the tools found now, that they agree."""
    same = [r.memory.split(" ")[0] for r in recalled if found_now and found_now in r.text]
    sentences = [
        f"Recalled from memory {r.memory}: {rules.shorten(r.text, _RECALLED_CHARS)}"
        for r in recalled
        if not (found_now and found_now in r.text)
    ]
    sentences = [t if t.endswith(("…", ".", "!", "?")) else f"{t}." for t in sentences]
    if same:
        memories = ", ".join(dict.fromkeys(same))
        sentences.append(f"What earlier work kept says the same (memory {memories}).")
    return sentences


def _task(request: ModelRequest) -> _Task:
    instruction, _, inputs = task_text(request).partition(DEPENDENCY_HEADER)
    sections: list[tuple[str, str]] = []
    for block in re.split(r"^### ", inputs, flags=re.M)[1:]:
        name, _, text = block.partition("\n")
        sections.append((name.strip(), _unprefixed(text)))
    return _Task(instruction=instruction.strip(), inputs=tuple(sections))


def _tool_words(schema: ToolSchema, *, params: bool = True) -> str:
    props: dict[str, Any] = schema.parameters.get("properties", {}) if params else {}
    described = " ".join(f"{n} {p.get('description', '')}" for n, p in props.items())
    return f"{schema.name} {schema.description} {described}".replace("_", " ")


def _gather_calls(text: str, tools: Sequence[ToolSchema], turn: int) -> tuple[ToolCall, ...]:
    """Calls to the tools that match the text well: a third of the best score or more, so
    that one stray shared word does not pull a tool in."""
    wanted = rules.stems(text, skip=rules.places(text))
    vocabularies = [rules.stems(_tool_words(t), widen=False) for t in tools]
    scores = [len(wanted & v) for v in vocabularies]
    if not any(scores):  # nothing matches by name: a search tool can look anything up
        scores = [int(schema_rules.searches(t.parameters)) for t in tools]
    enough = max(1, max(scores, default=0) / 3)
    calls: list[ToolCall] = []
    for schema, vocabulary, score in zip(tools, vocabularies, scores, strict=True):
        if score >= enough:
            found = schema_rules.arguments(schema.parameters, _clause_for(text, vocabulary))
            found = found or schema_rules.arguments(schema.parameters, text)
            calls += [_call(schema.name, a, turn, len(calls)) for a in found]
    return tuple(calls[: rules.MAX_CALLS])


def _still_open(task: _Task) -> str:
    """The instruction without the clauses that quote what its inputs found (a
    follow-up's "..., which says how long harm lasts needs more research"): searching a
    finding finds it again, so a follow-up searches for the rest, its topic."""
    found = [_word_run(text) for _, text in task.inputs]
    clauses = rules.split_clauses(task.instruction)
    kept = [c for c in clauses if not any(_quotes(_word_run(c), f) for f in found)]
    return ". ".join(kept) if kept and len(kept) < len(clauses) else task.instruction


def _word_run(text: str) -> list[str]:
    return [w.lower() for w in rules.words(text)]


def _quotes(clause: list[str], source: list[str]) -> bool:
    """Whether most of a clause (all but a few words that introduce it, "which says")
    is a run of the source's words, in order."""
    match = SequenceMatcher(None, clause, source, autojunk=False).find_longest_match()
    return match.size >= max(_QUOTED_WORDS, len(clause) - _INTRODUCING_WORDS)


_QUOTED_WORDS = 4
_INTRODUCING_WORDS = 3


def _clause_for(text: str, vocabulary: set[str]) -> str:
    """The clause of the text that matches a tool best, with the text's places if it has
    none ("find museums there" after "the weather in Paris")."""
    clauses = rules.split_clauses(text) or [text]
    clause = max(clauses, key=lambda c: len(rules.stems(c, skip=rules.places(c)) & vocabulary))
    text_places = rules.places(text)
    if text_places and not rules.places(clause):
        clause += f" ({', '.join(text_places)})"
    return clause


def _call(name: str, arguments: dict[str, Any], turn: int, index: int) -> ToolCall:
    text = json.dumps(arguments, sort_keys=True)
    digest = hashlib.sha256(f"{name}:{text}".encode()).hexdigest()[:8]
    return ToolCall(id=f"call_{turn}_{index + 1}_{digest}", name=name, arguments=text)


def _next_page(
    request: ModelRequest, observed: list[tuple[str, str, ToolMessage]]
) -> ToolCall | None:
    """The same call for the next page, when the last result names one: a JSON object
    with ``next_X`` (not null) for a tool that takes ``X``."""
    if not observed:
        return None
    name, _, last = observed[-1]
    schema = next((t for t in request.tools if t.name == name), None)
    try:
        result = json.loads(last.content)
    except ValueError:
        return None
    if schema is None or last.status != "ok" or not isinstance(result, dict):
        return None
    calls = {
        c.id: c for m in request.messages if isinstance(m, AssistantMessage) for c in m.tool_calls
    }
    made = calls.get(last.tool_call_id)
    taken = schema.parameters.get("properties", {})
    for key, value in result.items():
        if key.startswith("next_") and key[5:] in taken and value is not None:
            try:
                arguments = json.loads(made.arguments) if made is not None else {}
            except ValueError:
                arguments = {}
            arguments = {**(arguments if isinstance(arguments, dict) else {}), key[5:]: value}
            turn = 1 + sum(1 for m in request.messages if isinstance(m, AssistantMessage))
            return _call(name, arguments, turn, 0)
    return None


def _send_call(
    schema: ToolSchema, task: _Task, observed: list[tuple[str, str, ToolMessage]], turn: int
) -> ToolCall | None:
    phrase = re.split(r"\s+(?:to|into)\s+", rules.key_phrase(task.instruction))[0]
    subject = phrase.capitalize() or "Summary"
    body = _compose(task, observed)
    root = schema.parameters
    required = set(root.get("required", ()))
    arguments: dict[str, Any] = {}
    for name, prop in root.get("properties", {}).items():
        if _SUBJECT_PARAM.search(name):
            arguments[name] = subject
        elif _BODY_PARAM.search(name):
            arguments[name] = body
        elif _RECIPIENT_PARAM.search(name):
            found = re.search(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", task.instruction)
            arguments[name] = found.group() if found else "me"
        else:
            values = schema_rules.values(
                name, schema_rules.resolve(prop, root), task.instruction, name in required
            )
            if values:
                arguments[name] = values[0]
            elif name in required:
                return None
    return _call(schema.name, arguments, turn, 0)


def _compose(task: _Task, observed: list[tuple[str, str, ToolMessage]]) -> str:
    lines: list[str] = []
    for name, text in task.inputs:
        lines += [f"## {name}", text, ""]
    if observed:
        lines += ["## Tool results", *(_bullet(*o) for o in observed)]
    return "\n".join(lines).strip() or task.instruction


# --- final answers ----------------------------------------------------------------------


def final_text(request: ModelRequest) -> str:
    """A final answer in prose from the conversation's observations, or its task's inputs."""
    task = _task(request)
    earlier = _summarized(request)
    recalled = _recalled(request)
    observed = _seen(request)
    if observed or task.inputs or not (earlier or recalled):
        text = answer.worker_answer(task.instruction, task.inputs, observed)
    else:
        topic = task.instruction.splitlines()[0] if task.instruction else "the task"
        source = "what earlier turns found" if earlier else "memory"
        text = f"{PREFIX}From {source}, for: {topic}"
    # In the lead, which is what an aggregator keeps of an answer.
    lead, _, rest = text.partition("\n\n")
    if earlier:
        lead += " Earlier turns found: " + "; ".join(f.removeprefix("- ") for f in earlier) + "."
    if recalled:
        found_now = lead.replace(PREFIX, "").strip() if observed or task.inputs else ""
        lead += " " + " ".join(_recall_sentences(recalled, found_now))
    return "\n\n".join(p for p in (lead, rest) if p)


def _summarized(request: ModelRequest) -> list[str]:
    """The facts of the summary of earlier turns, when compaction folded some."""
    head = SUMMARY_HEADER.split("{", 1)[0]
    for message in request.messages:
        if isinstance(message, UserMessage) and message.content.startswith(head):
            return [line for line in message.content.splitlines() if line.startswith("- ")]
    return []


def _observations(request: ModelRequest) -> list[tuple[str, str, ToolMessage]]:
    """(tool name, its arguments shown briefly, observation) for each observation."""
    return [
        (m.name, rules.brief_arguments(arguments), m) for m, arguments in answer.observed(request)
    ]


_OUTCOME = {"ok": ":", "timeout": " timed out:", "skipped": " was skipped:", "error": " failed:"}


def _bullet(name: str, arguments: str, observation: ToolMessage) -> str:
    outcome = _OUTCOME.get(observation.status, " failed:")
    return f"- {name}({arguments}){outcome} {rules.render(observation.content)}"


def _unprefixed(text: str) -> str:
    return text.replace(PREFIX, "").strip()
