"""The offline model's final answers, written as short prose by rules (see
:mod:`honeycomb.offline.model`).

A worker's answer opens with a lead paragraph, the few sentences that matter (the best of
several records, the top match of each search, each computed value, what was sent and
where, what failed), followed by one line per observation. The aggregator's answer joins
the lead paragraphs of every subtask and names the ones that failed. Every answer starts
with ``[offline simulation]``; nothing in it is made up beyond what the tools returned.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from honeycomb.offline import rules as rules
from honeycomb.run.prompts import parse_results
from runtime import AssistantMessage, ModelRequest, ToolMessage
from runtime.value import Value

__all__ = ["Seen", "aggregate", "lead", "observed", "seen", "worker_answer"]

PREFIX = rules.PREFIX
NOTE = "put together by rules, with no language model (a real model writes this answer itself)"

_UNITS = (
    ("_pct", "%"),
    ("_percent", "%"),
    ("_c", " °C"),
    ("_f", " °F"),
    ("_eur", " EUR"),
    ("_usd", " USD"),
    ("_ms", " ms"),
    ("_s", " s"),
    ("_min", " min"),
    ("_km", " km"),
    ("_kg", " kg"),
    ("_m", " million"),
)
# Numbers that are better low ("rain chance", "cost", "severity"); others are better high.
_WORSE_WHEN_HIGH = rules.stems(
    "rain risk cost price delay wait error bug issue severity fail late wind duration "
    "distance crowd queue",
    widen=False,
)
_ASKS_TO_RANK = "compare best which rank choose pick top prefer"
_TITLE_KEY = re.compile(r"title|name|heading|file|path|subject", re.I)
_TEXT_KEY = re.compile(r"snippet|summary|text|excerpt|content|body|tip|finding|note", re.I)
_EXPR_KEY = re.compile(r"expr", re.I)
_RAISED = re.compile(r"raised \w+: ")


class Seen(Value, frozen=True, kw_only=True):
    """One observation with the call it answers."""

    tool: str
    arguments: dict[str, Any]
    ok: bool
    value: Any  # the JSON the tool returned, or its text


def observed(request: ModelRequest) -> list[tuple[ToolMessage, str]]:
    """The observations of a conversation, each with its call's JSON arguments ("" if
    the call is not in the conversation)."""
    calls = {
        c.id: c.arguments
        for m in request.messages
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls
    }
    return [
        (m, calls.get(m.tool_call_id, "")) for m in request.messages if isinstance(m, ToolMessage)
    ]


def seen(request: ModelRequest) -> list[Seen]:
    """The observations of a conversation, each with its call's arguments."""
    return [
        Seen(
            tool=m.name,
            arguments=_loads_dict(arguments),
            ok=m.status == "ok",
            value=_loads(m.content) if m.status == "ok" else _error_text(m),
        )
        for m, arguments in observed(request)
    ]


def worker_answer(
    instruction: str, inputs: Sequence[tuple[str, str]], observed: Sequence[Seen]
) -> str:
    """A worker's answer: a lead paragraph, then one line per observation."""
    if not observed and not inputs:
        if not instruction.strip():
            return f"{PREFIX}I was given no task: say what you would like me to do."
        return f"{PREFIX}I have no tool results to go on. The task was: {instruction}"
    sentences = _lead_sentences(instruction, observed)
    if inputs:
        names = _listed([name.split(" (")[0] for name, _ in inputs])
        if any(
            s.ok and rules.mentions(s.tool.replace("_", " "), rules.SEND_WORDS) for s in observed
        ):
            sentences.append(f"It holds the results of {names}.")  # what it sent on
        elif not observed:
            sentences.append(f"From {names}:")
            sentences += [lead(text) for _, text in inputs]
    text = PREFIX + " ".join(s for s in sentences if s)
    details = [f"- {_detail(s, instruction)}" for s in observed] if len(observed) > 1 else []
    return "\n\n".join([text, "\n".join(details)]) if details else text


def lead(text: str) -> str:
    """The lead paragraph of an answer, without the offline marker."""
    body = text.replace(PREFIX, "").strip()
    return body.split("\n\n", 1)[0].strip()


def aggregate(text: str) -> str:
    """The aggregator's answer: every subtask's lead paragraph, failures named."""
    task, results = parse_results(text)
    done = [e for e in results if e.ok]
    failed = [e for e in results if not e.ok]
    topic = re.split(r"[:;.]", task, maxsplit=1)[0].strip() or "the task"
    found = f"what {_count(len(done), 'worker')} found" if done else "the results"
    paragraphs = [f"{PREFIX}Here is {found} for “{topic}”, {NOTE}."]
    leads = [lead(e.text) for e in done if lead(e.text)]
    # A synthesis that already holds other results' leads stands for them; a lead said
    # twice is said once.
    paragraphs += _under_headings(
        t
        for i, t in enumerate(leads)
        if not any(t in o and (len(o) > len(t) or j < i) for j, o in enumerate(leads) if j != i)
    )
    if failed:
        missing = "; ".join(
            f"{e.id} ({e.role}): {lead(e.text)[:200] or 'no detail'}" for e in failed
        )
        paragraphs.append(f"Missing, because {_count(len(failed), 'subtask')} failed: {missing}")
    if not results:
        paragraphs.append("No subtask produced a result.")
    return "\n\n".join(paragraphs)


def _under_headings(leads: Iterable[str]) -> list[str]:
    """The leads, each heading said once: a lead under a heading an earlier one has
    (``Pesticides and forage — ...``, a follow-up's) goes on that one's paragraph."""
    paragraphs: list[str] = []
    where: dict[str, int] = {}
    for text in leads:
        heading, dash, rest = text.partition(" — ")
        if dash and heading in where:
            paragraphs[where[heading]] += f" {rest}"
            continue
        if dash and len(heading) <= _HEADING_CHARS:
            where[heading] = len(paragraphs)
        paragraphs.append(text)
    return paragraphs


_HEADING_CHARS = 80


# --- lead sentences ---------------------------------------------------------------------


def _lead_sentences(instruction: str, observed: Sequence[Seen]) -> list[str]:
    sentences: list[str] = []
    ok = [s for s in observed if s.ok]
    for tool in dict.fromkeys(s.tool for s in ok):
        group = [s for s in ok if s.tool == tool]
        records = [s for s in group if isinstance(s.value, dict)]
        if len(records) > 1 and rules.mentions(instruction, _ASKS_TO_RANK):
            sentences.append(_best(tool, records))
        elif records:
            sentences += [_record(s) + "." for s in records]
        for s in group:
            if isinstance(s.value, list):
                sentences.append(_top_match(s))
            elif not isinstance(s.value, dict):
                sentences.append(_scalar(s, instruction))
    failed = [s for s in observed if not s.ok]
    if failed:
        first = failed[0]
        sentences.append(
            f"{len(failed)} of {_count(len(observed), 'tool call')} did not succeed; "
            f"{first.tool} for {_shown(first.arguments)} failed: {_ended(str(first.value))}"
        )
    return sentences


def _best(tool: str, records: Sequence[Seen]) -> str:
    """The best of several records: lowest where high is bad, then highest of the rest."""
    keys = [k for k, v in records[0].value.items() if _number(v)]
    shared = [k for k in keys if all(_number(r.value.get(k)) for r in records)]
    low = [k for k in shared if rules.stems(k.replace("_", " "), widen=False) & _WORSE_WHEN_HIGH]
    high = [k for k in shared if k not in low][:1]
    if not shared:
        return " ".join(_record(r) + "." for r in records)

    def rank(record: Seen) -> tuple[float, ...]:
        value = record.value
        return (*(value[k] for k in low), *(-value[k] for k in high))

    best = min(records, key=rank)  # ties go to the first
    why = [f"lowest {_field(k)}" for k in low] + [f"highest {_field(k)}" for k in high]
    return (
        f"Best {_noun(tool)} of the {len(records)} looked up ({', then '.join(why)}): "
        f"{_record(best)}."
    )


def _record(s: Seen) -> str:
    """A record as a clause: the fields the call asked about label it, then the rest."""
    asked = {str(v).lower() for v in s.arguments.values()}
    label = [str(v) for v in s.value.values() if isinstance(v, str) and v.lower() in asked]
    rest = [
        _fact(k, v)
        for k, v in s.value.items()
        if not (isinstance(v, str) and v.lower() in asked) and _fact(k, v)
    ]
    name = ", ".join(_capital(v) for v in label) or _capital(_noun(s.tool))
    return f"{name}: {', '.join(rest)}" if rest else name


def _fact(key: str, value: Any) -> str:
    if _number(value):
        if not _unit(key) and key.endswith("s") and "_" not in key:
            return f"{value:g} {key}"  # a count: "3 issues"
        return f"{_field(key)} {value:g}{_unit(key)}"
    if isinstance(value, str) and len(value) <= 400:
        return value
    if isinstance(value, str):  # a long text: its first line is what it is about
        first = value.strip().split("\n", 1)[0]
        return first if len(first) <= 200 else first[:199] + "…"
    return ""


def _top_match(s: Seen) -> str:
    looked_for = _shown(s.arguments)
    if not s.value:
        return f"Nothing found for {looked_for}."
    top = s.value[0]
    if not isinstance(top, dict) or not s.arguments:  # a listing, not a search
        shown = "; ".join(_title(v) for v in s.value[:12])
        more = f" and {len(s.value) - 12} more" if len(s.value) > 12 else ""
        return f"{_capital(_noun(s.tool))} ({len(s.value)}): {shown}{more}."
    title = next((str(v) for k, v in top.items() if _TITLE_KEY.search(k)), "")
    body = next((str(v) for k, v in top.items() if _TEXT_KEY.search(k)), "")
    if title and body:
        return f"{title.rstrip('.')} — {_sentence(body)}"
    return _sentence(_record(Seen(tool=s.tool, arguments=s.arguments, ok=True, value=top)))


def _title(item: Any) -> str:
    if isinstance(item, dict):
        return next((str(v) for k, v in item.items() if _TITLE_KEY.search(k)), _shown(item))
    return str(item)


def _scalar(s: Seen, instruction: str) -> str:
    expr = next((str(v) for k, v in s.arguments.items() if _EXPR_KEY.search(k)), None)
    if expr is not None:
        # "Work out the cost of 3 nights ..." names what the number is: the cost.
        what = rules.key_phrase(instruction).split(" of ")[0]
        if what and len(what.split()) <= 3 and not rules.numbers(what):
            return f"The {what.lower()} comes to {s.value} ({expr})."
        return f"{expr} = {s.value}."
    if rules.mentions(s.tool.replace("_", " "), rules.SEND_WORDS):
        subject = next((str(v) for k, v in s.arguments.items() if _TITLE_KEY.search(k)), "")
        what = f"“{subject}”" if subject else "it"
        return f"Sent {what} with {s.tool}: {s.value}."
    return f"{_noun(s.tool).capitalize()} for {_shown(s.arguments)}: {s.value}."


def _detail(s: Seen, instruction: str) -> str:
    if not s.ok:
        return f"{s.tool} for {_shown(s.arguments)} failed: {s.value}"
    if isinstance(s.value, dict):
        return _record(s)
    if isinstance(s.value, list):
        return _top_match(s)
    return _scalar(s, instruction)


# --- words ------------------------------------------------------------------------------


def _noun(tool: str) -> str:
    """``get_weather`` -> "weather": the tool's name without a leading verb."""
    parts = tool.split("_")
    verb = len(parts) > 1 and rules.mentions(parts[0], "get list read fetch search find look")
    return " ".join(parts[1:] if verb else parts)


def _field(key: str) -> str:
    for suffix, _ in _UNITS:
        if key.endswith(suffix):
            key = key[: -len(suffix)]
            break
    return key.replace("_", " ")


def _unit(key: str) -> str:
    return next((unit for suffix, unit in _UNITS if key.endswith(suffix)), "")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _capital(text: str) -> str:
    """ "saturday" -> "Saturday"; names such as "billing.py" or "MSG-1" stay as they are."""
    return text[:1].upper() + text[1:] if re.fullmatch(r"[a-z][a-z ]*", text) else text


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text if text[-1:] in ".!?" else text + "."


def _shown(arguments: dict[str, Any]) -> str:
    return rules.brief_arguments(json.dumps(arguments)) or "no arguments"


def _listed(names: Sequence[str]) -> str:
    return " and ".join(filter(None, [", ".join(names[:-1]), names[-1]])) if names else ""


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _loads(content: str) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return content.strip()


def _loads_dict(arguments: str) -> dict[str, Any]:
    loaded = _loads(arguments or "{}")
    return loaded if isinstance(loaded, dict) else {}


def _error_text(message: ToolMessage) -> str:
    text = " ".join(message.content.split()).removeprefix("Error: ")
    found = _RAISED.search(text)
    return rules.shorten(text[found.end() :] if found else text, 160).rstrip(".")


def _ended(sentence: str) -> str:
    """A sentence with its full stop (none after the "…" of one cut short)."""
    return sentence if sentence.endswith("…") else f"{sentence}."
