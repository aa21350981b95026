"""The offline model's planner: clauses of the task matched to roles by the words they
share (see :mod:`honeycomb.offline.model`); as a lead planning a later round, a
follow-up for each result that asks for one (:func:`follow_up_for`)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from msgspec.structs import replace

from honeycomb.offline import rules as rules
from honeycomb.run.plan import INSTRUCTION_CHARS, Plan, Subtask
from honeycomb.run.prompts import (
    CATALOG_HEADER,
    ROUND_HEADER,
    CatalogEntry,
    conversation_of,
    parse_catalog,
    parse_results,
)
from runtime import AssistantMessage, ModelRequest, UserMessage
from runtime.value import Value

__all__ = ["follow_up_for", "last_answer", "plan_for", "task_text"]

_REJECTED = re.compile(r"invalid plan|the plan is invalid", re.I)
# The limits as the planner's prompt and its checks say them, not as a task may ("in
# at most 2 sentences"): the prompt's own line, the problems of a plan sent back.
_LIMIT = re.compile(r"^Use at most (\d+) subtasks\.", re.M)
_ALLOWED = re.compile(r"; at most (\d+) allowed\b")
_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_ROOM = re.compile(r"Otherwise add at most (\d+) new subtasks")
_ROUND = re.compile("^" + ROUND_HEADER + r" (\d+) of at most \d+\.", re.M)
# A sentence of a result that asks for more work: "needs follow-up", "more research is
# needed", "calls for further study", "remains unclear" ...
_ASKS_FOR_MORE = re.compile(
    r"\bfollow[- ]?ups?\b|\b(?:needs?|requires?|calls? for|asks? for|wants?)\s+"
    r"(?:\w+\s+)?(?:more|further|deeper)\b|\b(?:more|further)\s+\w+\s+(?:is|are)\s+"
    r"needed\b|\bremains?\s+(?:unclear|unknown|open)\b",
    re.I,
)
_FOLLOW_UP = re.compile(r"\b[Ff]ollow up on (\S+?)[:,]")  # either form _follow_up writes
_MESSAGE = re.compile(r"^## Message \d+\n(.*?)\n(?:Found by its subtasks:|Answer:)", re.M | re.S)
_SENTENCE = re.compile(r"[^.!?\n]*[.!?]?")
_ANAPHORA = rules.wordset("each there them those these they both all city cities place places")
_NO_WORDS = "The task has no words to act on: say so, and ask what is wanted."
"""The one subtask of a task without words: what a model given an empty task does."""


class _Draft(Value, frozen=True, kw_only=True):
    role: str
    clauses: tuple[str, ...]
    writer: bool


def plan_for(request: ModelRequest) -> Plan:
    """A plan for the planner's request, or the previous plan fixed if it was rejected;
    its ids those the plan's schema allows, in order, when it names them (as a model
    whose decoding follows the schema would)."""
    users = [m.content for m in request.messages if isinstance(m, UserMessage)]
    catalog_text = next((u for u in users if CATALOG_HEADER in u), task_text(request))
    ids = schema_ids(request.output.json_schema) if request.output is not None else ()
    if _round_of(catalog_text) is not None:  # a lead planning a later round
        return follow_up_for(catalog_text, ids)
    task, catalog = parse_catalog(catalog_text)
    roles = list(catalog)  # the roles the run gives work to: a role named planner too
    # The prompt's line is the last of its kind: after the task and the conversation.
    limits = _LIMIT.findall(catalog_text)
    found = [int(limits[-1])] if limits else []
    found += [int(n) for u in users for n in _ALLOWED.findall(u)]
    limit = max(1, min(found)) if found else 10
    if any(_REJECTED.search(u) for u in users):  # in a later message, or added to the first
        fixed = _fix_plan(last_answer(request), [e.role for e in roles], limit, ids)
        if fixed is not None:
            return fixed
    return _rule_plan(task, roles, limit, ids, _messages_of(conversation_of(catalog_text)))


def schema_ids(schema: dict[str, Any]) -> tuple[str, ...]:
    """The subtask ids a plan's JSON schema allows (its subtasks' ``id`` enum), in
    order; none when it allows any."""
    items = schema.get("properties", {}).get("subtasks", {}).get("items", {})
    ref = items.get("$ref", "")
    if ref.startswith("#/$defs/"):
        items = schema.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
    found = items.get("properties", {}).get("id", {})
    if "const" in found:
        return (str(found["const"]),)
    return tuple(str(i) for i in found.get("enum", ()))


def follow_up_for(text: str, ids: Sequence[str] = ()) -> Plan:
    """A lead's later round: for each result that asks for more (its first sentence
    that does), a subtask of the same role that follows it up and depends on it,
    unless one already does (a follow-up, asked to "Follow up on ID: ...", or an
    ``ID.more``, is not followed up again); none (done) when no result asks."""
    _, results = parse_results(text)
    rooms = _ROOM.findall(text)
    room = int(rooms[-1]) if rooms else 1  # the prompt's, after the results
    number = _round_of(text) or 2
    known = {r.id for r in results}
    # What was followed up already: a follow-up says so in what it was asked.
    followed = {found[1] for r in results if (found := _FOLLOW_UP.search(r.asked))}
    added: list[Subtask] = []
    for result in results:
        asking = _asking_sentence(result.text) if result.ok else None
        follow_id = f"{result.id[:56]}.more"
        again = result.id.endswith(".more") or _FOLLOW_UP.search(result.asked) is not None
        if asking is None or again or follow_id in known or result.id in followed:
            continue
        if len(added) == room:
            continue
        added.append(
            Subtask(
                id=ids[len(added)] if len(added) < len(ids) else follow_id,
                role=result.role,
                instruction=_fitted([_follow_up(result.id, asking)]),
                depends_on=(result.id,),
                round=number,
            )
        )
        known.add(follow_id)
    return Plan(subtasks=tuple(added))


def _round_of(text: str) -> int | None:
    """The round a planner's message asks for, if it is a later round's (None: a first
    plan): its own line, after the roles' (a task may say "Planning round" too)."""
    limits = list(_LIMIT.finditer(text))
    after = limits[-1].end() if limits else 0
    rounds = [m for m in _ROUND.finditer(text) if m.start() > after]
    return int(rounds[-1].group(1)) if rounds else None


def _follow_up(result_id: str, asking: str) -> str:
    """The instruction that follows up the sentence ``asking`` of result ``result_id``:
    by the heading it is under, when it has one (``Pesticides and forage — ...``), which
    is what a search for more looks for."""
    heading, dash, says = asking.replace(rules.PREFIX, "").strip().partition(" — ")
    if not dash:
        return f"Follow up on {result_id}: {heading}"
    return f"{heading}: follow up on {result_id}, which says {says[:1].lower()}{says[1:]}"


def _asking_sentence(text: str) -> str | None:
    for found in _SENTENCE.finditer(text):
        sentence = found.group(0)
        if _ASKS_FOR_MORE.search(sentence):
            return sentence.strip()
    return None


def _messages_of(conversation: str) -> list[str]:
    """The earlier messages of a session's conversation, oldest first."""
    return [" ".join(m.split()) for m in _MESSAGE.findall(conversation)]


def _rule_plan(
    task: str,
    roles: Sequence[CatalogEntry],
    limit: int,
    given: Sequence[str] = (),
    earlier: Sequence[str] = (),
) -> Plan:
    if not roles:
        return Plan(subtasks=())
    clauses = rules.split_clauses(task)
    if not clauses:  # "", "  ", "?!": nothing to match a role by, or to say again
        sid = given[0] if given else f"{roles[0].role[:40]}-1"
        return Plan(subtasks=(Subtask(id=sid, role=roles[0].role, instruction=_NO_WORDS),))
    vocab = {e.role: _role_vocabulary(e) for e in roles}
    overall = _best_role(task, roles, vocab)
    if overall is None:  # a follow-up ("and Madrid?"): of the latest message with a topic
        topic = next((m for m in reversed(earlier) if _best_role(m, roles, vocab)), None)
        if topic is not None:
            role = _best_role(topic, roles, vocab) or roles[0].role
            said = f"{_followed(task, topic)} (following on from: {topic.rstrip('.!? ')})."
            sid = given[0] if given else f"{role[:40]}-1"
            return Plan(subtasks=(Subtask(id=sid, role=role, instruction=_fitted([said])),))
    overall = overall or roles[0].role
    drafts: list[_Draft] = []
    for clause in clauses:
        # A clause that names no role's words goes on with the one before it ("research
        # how bees dance, how they keep warm, ..."), else to the task's best role.
        previous = drafts[-1].role if drafts else overall
        drafts.append(
            _Draft(
                role=_best_role(clause, roles, vocab) or previous,
                clauses=(clause,),
                writer=rules.mentions(clause, rules.WRITER_WORDS),
            )
        )
    drafts = _fit(drafts, limit)
    counts: Counter[str] = Counter()
    ids: list[str] = []
    for index, draft in enumerate(drafts):
        counts[draft.role] += 1
        ids.append(
            given[index] if index < len(given) else f"{draft.role[:40]}-{counts[draft.role]}"
        )
    others = tuple(i for i, d in zip(ids, drafts, strict=True) if not d.writer)
    task_places = rules.places(task)
    return Plan(
        subtasks=tuple(
            Subtask(
                id=i,
                role=d.role,
                instruction=_fitted([_sentence(c, task_places) for c in d.clauses]),
                depends_on=others if d.writer else (),
            )
            for i, d in zip(ids, drafts, strict=True)
        )
    )


def _followed(task: str, topic: str) -> str:
    """A follow-up said again in the words of the message it follows: "And Madrid?"
    after "Compare the weather in Lisbon and Porto" is "Compare the weather in Madrid";
    one that names no place stays as it was said."""
    places, before = rules.places(task), rules.places(topic)
    if not places or not before:
        return _sentence(task, places)[:-1]
    head = topic[: topic.index(before[0])]
    return f"{head}{' and '.join(places)}"


def _role_vocabulary(entry: CatalogEntry) -> dict[str, int]:
    """Stems that point to a role: its name counts twice, its description and tools once."""
    text = " ".join([entry.description, *(f"{n} {d}" for n, d in entry.tools)])
    vocab = dict.fromkeys(rules.stems(text.replace("_", " "), widen=False), 1)
    name = entry.role.replace("_", " ").replace("-", " ")
    vocab.update(dict.fromkeys(rules.stems(name, widen=False), 2))
    return vocab


def _best_role(
    text: str, roles: Sequence[CatalogEntry], vocab: dict[str, dict[str, int]]
) -> str | None:
    wanted = rules.stems(text, skip=rules.places(text))
    best, best_score = None, 0
    for entry in roles:  # ties go to the role listed first
        score = sum(vocab[entry.role].get(s, 0) for s in wanted)
        if score > best_score:
            best, best_score = entry.role, score
    return best


def _fit(drafts: list[_Draft], limit: int) -> list[_Draft]:
    """At most ``limit`` drafts: first merge those of one role, then fold the tail."""
    if len(drafts) <= limit:
        return drafts
    merged: dict[tuple[str, bool], _Draft] = {}
    for d in drafts:
        key = (d.role, d.writer)
        old = merged.get(key)
        merged[key] = d if old is None else replace(d, clauses=old.clauses + d.clauses)
    drafts = list(merged.values())
    if len(drafts) <= limit:
        return drafts
    tail = drafts[limit - 1 :]
    folded = _Draft(
        role=tail[0].role,
        clauses=tuple(c for d in tail for c in d.clauses),
        writer=any(d.writer for d in tail),
    )
    return [*drafts[: limit - 1], folded]


def _sentence(clause: str, task_places: Sequence[str]) -> str:
    text = clause[0].upper() + clause[1:]
    anaphoric = {w.lower() for w in rules.words(clause)} & _ANAPHORA
    if task_places and anaphoric and not rules.places(clause):
        text += f" ({', '.join(task_places)})"
    return text + "."


def _fitted(sentences: Sequence[str]) -> str:
    """The sentences of one subtask as its instruction, within what a plan's schema
    allows (:data:`~honeycomb.run.plan.INSTRUCTION_CHARS`), as a model that follows the
    schema writes it: those that fit, in order, or the first cut at a word, when it
    alone does not, its end marked."""
    text = ""
    for sentence in sentences:
        joined = f"{text} {sentence}" if text else sentence
        if len(joined) > INSTRUCTION_CHARS:
            break
        text = joined
    if text:
        return text
    cut = sentences[0][: INSTRUCTION_CHARS - 1]
    at_word = cut.rsplit(" ", 1)[0] if " " in cut else cut
    return f"{at_word.rstrip()}…"


def _fix_plan(
    previous: str | None, roles: Sequence[str], limit: int, ids: Sequence[str] = ()
) -> Plan | None:
    """The rejected plan with unknown roles, bad ids (none of ``ids``, when given) and
    dangling deps dropped, cut to size."""
    try:
        items = json.loads((previous or "").strip().strip("`").removeprefix("json"))["subtasks"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(items, list):
        return None
    kept: list[Subtask] = []
    for item in items:
        if not isinstance(item, dict) or len(kept) == limit:
            continue
        sid, role = str(item.get("id", "")), item.get("role")
        instruction = str(item.get("instruction", "")).strip()
        earlier = {s.id for s in kept}
        if role not in roles or not instruction or sid in earlier or not _ID.fullmatch(sid):
            continue
        if ids and sid not in ids:
            continue
        listed = item.get("depends_on")
        deps = (
            tuple(str(d) for d in listed if str(d) in earlier) if isinstance(listed, list) else ()
        )
        kept.append(Subtask(id=sid, role=role, instruction=_fitted([instruction]), depends_on=deps))
    return Plan(subtasks=tuple(kept)) if kept else None


def task_text(request: ModelRequest) -> str:
    messages = request.messages
    if len(messages) > 1 and isinstance(messages[1], UserMessage):
        return messages[1].content
    return next((m.content for m in messages if isinstance(m, UserMessage)), "")


def last_answer(request: ModelRequest) -> str | None:
    answers = [m.content for m in request.messages if isinstance(m, AssistantMessage)]
    return next((a for a in reversed(answers) if a), None)
