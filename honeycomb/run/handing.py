"""What one part of a run hands on to the next, fitted to the model it is handed to.

A dependent subtask's worker is given the results of the subtasks it depends on, an
aggregator every subtask's result, a lead planning in rounds every result so far: all
grow with the results, and the receiving model's context does not. When the prompt
would not fit, each result handed on gets a fair share of what the context leaves
(:func:`fit_texts`): a short one keeps all of itself, the others share the rest, each
cut to its share ending with a note that says so, how much was left out and where the
whole is; a ``handed_on.cut`` log entry says it too. When it fits, nothing changes.

What the context leaves (:class:`Reader`): the smallest of the role's compaction
budget and the tokens one call of its model holds (a local model's context), less room
for its answer and the role's own prompt (its system prompt, the rest of the message,
its tools), measured as compaction measures a request
(:func:`workers.context.estimate_tokens`, the role's token counter if it has one).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

from msgspec.structs import replace
from pydantic import BaseModel

from honeycomb.run.context import RunContext
from honeycomb.run.prompts import ResultEntry
from runtime import ModelRequest, OutputSchema, SystemMessage, UserMessage, logs
from runtime.model import context_of, request_writer
from runtime.value import Value
from workers import Role, Worker
from workers.context import (
    TOKENS_PER_MESSAGE,
    TokenCounter,
    checked_counter,
    estimate_tokens,
    prompt_room,
)
from workers.worker import format_task

__all__ = [
    "CUT_NOTE",
    "Reader",
    "fit_results",
    "fit_texts",
    "fitted_inputs",
    "fitted_results",
    "reader_of",
]

CUT_NOTE = (
    "\n\n[cut here to fit the context of the model it is handed to: {left:,} of "
    "{total:,} characters left out; the whole text is {where}]"
)
"""What ends a text cut to its share."""


class Reader(Value, frozen=True, kw_only=True):
    """The model texts are handed to, as far as their fit goes.

    Attributes:
        name: Its worker's name, as the log names it.
        room: The tokens its prompt may take (None: not known, nothing is cut).
        measure: The tokens of a prompt as its model is sent it, its system prompt,
            tools and output schema included.
        count: Its role's token counter (None: the estimate).
        run_id: Its run's id.
        kept: Whether its run keeps a store, which holds the whole texts.
    """

    name: str
    room: int | None
    measure: Callable[[str], int]
    count: TokenCounter | None = None
    run_id: str = ""
    kept: bool = False


def reader_of(context: RunContext, worker: Worker) -> Reader:
    """``worker`` of ``context``'s run as a reader of what is handed to it."""
    settings, compaction = worker.setup.settings, worker.setup.settings.compaction
    count = checked_counter(compaction) if compaction is not None else None
    tools = worker.setup.tools.schemas
    output = settings.output_type
    request = ModelRequest(
        messages=(SystemMessage(content=worker.setup.system_prompt), UserMessage(content="")),
        tools=tools,
        output=OutputSchema.for_model(output) if output is not None else None,
    )
    write = request_writer(worker.model)

    def measure(prompt: str) -> int:
        system = request.messages[0]
        sent = replace(request, messages=(system, UserMessage(content=prompt)))
        if write is not None:
            sent = write(sent)
        return estimate_tokens(sent.messages, sent.tools, count)

    return Reader(
        name=worker.name,
        room=_room(worker),
        measure=measure,
        count=count,
        run_id=context.run_id,
        kept=context.kept,
    )


def _room(worker: Worker) -> int | None:
    """The tokens ``worker``'s prompt may take (:func:`workers.context.prompt_room`)."""
    settings = worker.setup.settings
    held = context_of(worker.model)  # the prompt and its answer together
    tools = bool(worker.setup.tools.schemas)
    return prompt_room(settings.compaction, held, settings.max_output_tokens, tools=tools)


def fitted_inputs(
    task: str, inputs: Mapping[str, str], ids: Sequence[str], reader: Reader
) -> dict[str, str]:
    """The results a subtask's worker is given (``inputs``, of the subtasks ``ids``)
    under ``task`` (its instruction and what it is shown of a session), fitted to what
    its model holds."""
    names = list(inputs)
    texts = _handed(
        lambda shown: format_task(task, dict(zip(names, shown, strict=True))),
        list(inputs.values()),
        ids,
        reader,
    )
    return dict(zip(names, texts, strict=True))


def fitted_results(
    write: Callable[[Sequence[ResultEntry]], str],
    entries: Sequence[ResultEntry],
    context: RunContext,
    role: Role,
    *,
    output_type: type[BaseModel] | None = None,
    max_output_tokens: int | None = None,
) -> str:
    """The prompt ``write`` makes of ``entries`` (an aggregator's, a lead's round),
    their texts fitted to what a worker of ``role`` (answering in ``output_type``,
    within ``max_output_tokens`` unless its role sets its own) holds."""
    worker = context.worker(role, output_type=output_type, max_output_tokens=max_output_tokens)
    return fit_results(write, entries, reader_of(context, worker))


def fit_results(
    write: Callable[[Sequence[ResultEntry]], str], entries: Sequence[ResultEntry], reader: Reader
) -> str:
    """The prompt ``write`` makes of ``entries``, their texts fitted to ``reader``."""
    with_texts = functools.partial(_with_texts, entries)
    texts = _handed(
        lambda shown: write(with_texts(shown)),
        [e.text for e in entries],
        [e.id for e in entries],
        reader,
    )
    return write(with_texts(texts))


def _with_texts(entries: Sequence[ResultEntry], texts: Sequence[str]) -> list[ResultEntry]:
    return [replace(e, text=t) for e, t in zip(entries, texts, strict=True)]


_ATTEMPTS = 4
"""Fits at most of one prompt: each after the first takes from the share what the
prompt was over (texts measured alone add up to a little less than together)."""


def _handed(
    write: Callable[[Sequence[str]], str],
    texts: Sequence[str],
    ids: Sequence[str],
    reader: Reader,
) -> list[str]:
    """``texts`` (the results of the subtasks ``ids``) as they are handed on in the
    prompt ``write`` makes of them: as they are when it fits ``reader``'s room, else
    each within its share of what the rest of the prompt leaves."""
    room = reader.room
    if room is None or reader.measure(write(texts)) <= room:
        return list(texts)
    share = room - reader.measure(write([""] * len(texts)))
    where = [_where(i, reader.kept) for i in ids]
    fitted = list(texts)
    for _ in range(_ATTEMPTS):
        fitted = fit_texts(texts, share, where, reader.count)
        over = reader.measure(write(fitted)) - room
        if over <= 0 or share <= 0:
            break
        share -= over
    for sid, text, shown in zip(ids, texts, fitted, strict=True):
        if shown != text:
            logs.log(
                "handed_on.cut",
                {
                    "run_id": reader.run_id,
                    "to": reader.name,
                    "subtask": sid,
                    "chars": len(text),
                    "shown_chars": len(shown),  # its note included
                    "room_tokens": room,
                },
                level="warning",
            )
    return fitted


def _where(sid: str, kept: bool) -> str:
    """Where the whole of subtask ``sid``'s text is."""
    store = " and in the run store" if kept else ""
    return f"subtask {sid}'s result, in the run's result (RunResult.subtasks){store}"


def fit_texts(
    texts: Sequence[str], tokens: int, where: Sequence[str], count: TokenCounter | None = None
) -> list[str]:
    """``texts`` within ``tokens`` together, shared fairly: taken from the shortest up,
    each keeps all of itself when it is within an equal share of what is left, and the
    longer ones share the rest equally, each cut to its share (:func:`cut_to`, the note
    saying the whole is ``where[i]``)."""
    sizes = [_tokens(t, count) for t in texts]
    shares = list(sizes)
    left = max(tokens, 0)
    order = sorted(range(len(texts)), key=sizes.__getitem__)
    for done, index in enumerate(order):
        shares[index] = min(sizes[index], left // (len(texts) - done))
        left -= shares[index]
    return [
        text if share >= size else cut_to(text, share, place, count)
        for text, size, share, place in zip(texts, sizes, shares, where, strict=True)
    ]


def cut_to(text: str, tokens: int, where: str, count: TokenCounter | None = None) -> str:
    """``text``'s start within ``tokens``, ended at a line or a word, then the note of
    what was left out (:data:`CUT_NOTE`); the note alone when not even it fits."""

    def kept(chars: int) -> str:
        note = CUT_NOTE.format(left=len(text) - chars, total=len(text), where=where)
        return text[:chars] + note

    low, high = 0, len(text)  # the most characters kept that fit: a binary search
    while low < high:
        middle = (low + high + 1) // 2
        if _tokens(kept(middle), count) <= tokens:
            low = middle
        else:
            high = middle - 1
    end = max(text.rfind("\n", 0, low + 1), text.rfind(" ", 0, low + 1))
    chars = end if end > low * 4 // 5 else low  # a whole word, unless that loses much
    return kept(chars) if chars else kept(0).lstrip("\n")


def _tokens(text: str, count: TokenCounter | None) -> int:
    """The tokens of ``text`` alone, as its reader counts it."""
    return estimate_tokens((UserMessage(content=text),), count=count) - TOKENS_PER_MESSAGE
