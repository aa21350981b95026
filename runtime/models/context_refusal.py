"""A server's refusal of a prompt past the context of a call, told as what to set and
to what (:class:`~runtime.errors.ContextExceeded`): llama.cpp's, which gives each of its
slots that many tokens, the prompt and the answer together, and refuses a prompt past
them (a 400, ``exceed_context_size_error``); any other server's, which counts no tokens
for us, as the context to say (:func:`context_hint`).

Said here once, for the two ways a llama.cpp server is reached: in this process
(:class:`~runtime.models.llama.LlamaModel`, whose context is its own to give) and a
server of one's own behind an endpoint's model (the OpenAI adapters), whose context is
the server's.
"""

from __future__ import annotations

import re

from runtime.errors import ContextExceeded, ModelHTTPError
from runtime.model import ModelRequest

__all__ = [
    "CONTEXT_STEP",
    "context_hint",
    "refused_context",
    "told_in_process",
    "told_of_server",
]

CONTEXT_STEP = 256
"""llama.cpp sizes each slot's context in steps of this many tokens."""

_OWN = (
    "the context of each of its slots (LlamaModel(context=...), a hive model's context:, "
    "--context of honeycomb's --model local)"
)
_SERVER = (
    "the context of each of the server's slots (llama.cpp's server gives each its "
    "--ctx-size divided by its --parallel)"
)
_SAID = "the model's context_tokens=..., a hive model's context:, --context of honeycomb's --model"


_PAST_CONTEXT = re.compile(r"context.?length|context size|context window|exceed_context", re.I)
"""What a refusal of a prompt past the model's context says: OpenAI's
``context_length_exceeded``, vLLM's "maximum context length is", llama.cpp's
``exceed_context_size_error`` ("exceeds the available context size")."""


def context_hint(body: object, context_tokens: int | None) -> str | None:
    """What a 400 that refuses a prompt past the model's context (``body`` says so, in
    any server's words) asks to change, by the context the model was said to have
    (None: not said); None for another 400."""
    if _PAST_CONTEXT.search(str(body)) is None:
        return None
    if context_tokens is None:
        return (
            f"say the model's context as its server serves it ({_SAID}), and a run fits "
            "what it sends to it"
        )
    return f"the model's context_tokens ({context_tokens}) may be more than the server serves"


def refused_context(exc: ModelHTTPError) -> tuple[int, int] | None:
    """``(prompt tokens, tokens a call may hold)`` when ``exc`` is a server's refusal of
    a prompt past the context (llama.cpp's, or one told already); None otherwise."""
    if isinstance(exc, ContextExceeded):
        return exc.prompt_tokens, exc.context_tokens
    body = exc.body
    if exc.status != 400 or not isinstance(body, dict):
        return None
    prompt, held = body.get("n_prompt_tokens"), body.get("n_ctx")
    if body.get("type") != "exceed_context_size_error":
        return None
    if not (isinstance(prompt, int) and isinstance(held, int)):
        return None
    return prompt, held


def told_of_server(
    exc: ModelHTTPError, request: ModelRequest, said: int | None
) -> ContextExceeded | None:
    """``exc`` told as a refusal by a server of one's own, if it is one (None
    otherwise): the context its slots hold is its own setting; ``said``, the context
    the model says it has (its ``context_tokens``), to which a run fits what it hands
    the model."""
    refused = refused_context(exc)
    if refused is None:
        return None
    prompt, held = refused
    answer = _answer(request)
    advice = f"{_held(prompt, held, '', _SERVER)}; {_give(prompt, answer, None)}"
    if said is None:
        advice += (
            f"; and say that context as the model's ({_SAID}), so that a run fits what it "
            "hands the model to it"
        )
    elif said > held:
        advice += f"; the model says its context is {said} ({_SAID}): more than the server gives"
    return _exceeded(exc, prompt, held, answer, advice)


def told_in_process(
    exc: ModelHTTPError, request: ModelRequest, given: int, trained: int | None
) -> ContextExceeded | None:
    """``exc`` told as a refusal by llama.cpp in this process, if it is one (None
    otherwise): ``given`` is the context its slots were given, ``trained`` the tokens
    the model was trained on (None: not known), past which no slot gets more."""
    refused = refused_context(exc)
    if refused is None:
        return None
    prompt, held = refused
    answer = _answer(request)
    capped = " (all the model was trained on)" if held < given else ""
    advice = f"{_held(prompt, held, capped, _OWN)}; {_give(prompt, answer, trained)}"
    return _exceeded(exc, prompt, held, answer, advice)


def _answer(request: ModelRequest) -> int:
    return request.max_output_tokens or 1


def _held(prompt: int, held: int, capped: str, setting: str) -> str:
    return f"its prompt is {prompt} tokens, more than a call may hold: {held}{capped}, {setting}"


def _give(prompt: int, answer: int, trained: int | None) -> str:
    """The context to give, within what the model was trained on (no slot gets more),
    or that no context holds the prompt."""
    enough = -(-(prompt + answer) // CONTEXT_STEP) * CONTEXT_STEP
    most = None if trained is None else trained // CONTEXT_STEP * CONTEXT_STEP
    if most is not None and prompt >= most:
        return (
            f"no context holds it: the model was trained on {trained} tokens, the most a "
            "slot gets; shorten the prompt, or use a model with a longer context"
        )
    if most is not None and enough > most:
        return (
            f"give context {most}, all the model was trained on, for this prompt and an "
            f"answer of up to {most - prompt} tokens"
        )
    return f"give context {enough} or more for this prompt and an answer of {answer} tokens"


def _exceeded(
    exc: ModelHTTPError, prompt: int, held: int, answer: int, advice: str
) -> ContextExceeded:
    return ContextExceeded(
        exc.body,
        prompt_tokens=prompt,
        context_tokens=held,
        answer_tokens=answer,
        hint=advice,
        model=exc.model,
    )
