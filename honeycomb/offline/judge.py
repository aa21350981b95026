"""The offline model as a guard's judge, by rules: what it is shown passes, unless it
is empty or holds what looks like a secret (an API key or token, a private key, a
password written out). A real model judges by the role's instructions; these rules
know nothing of them. Shown an answer under a heading (an eval's grade: the task and
the rubric, then :data:`ANSWER_HEADING` and the answer), it is the answer that must not
be empty.
"""

from __future__ import annotations

import re

from honeycomb.offline.rules import PREFIX
from runtime import ModelRequest, SystemMessage, UserMessage
from workers.guards import JUDGE_INSTRUCTIONS

__all__ = ["ANSWER_HEADING", "is_judge_request", "verdict"]

ANSWER_HEADING = "\n\nAnswer:\n"
"""What a judge is shown before the answer it grades, when it is shown more (an
eval's judge: the task and the rubric first)."""

_MARK = JUDGE_INSTRUCTIONS.split("{what}")[0]  # what every judge's prompt says first

_SECRETS = (
    ("an API key", re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}")),
    ("an access key", re.compile(r"\bAKIA[0-9A-Z]{16}\b")),
    ("a token", re.compile(r"\b(?:ghp|gho|ghs|github_pat|xox[abpr])[-_][A-Za-z0-9_-]{16,}")),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("a password", re.compile(r"(?i)\bpass(?:word|wd)?\s*[:=]\s*\S{4,}")),
)


def is_judge_request(request: ModelRequest) -> bool:
    """Whether ``request`` is a judge's call (see :class:`workers.guards.Judge`)."""
    return any(isinstance(m, SystemMessage) and _MARK in m.content for m in request.messages)


def verdict(request: ModelRequest) -> str:
    """``PASS``, or one sentence saying why not."""
    shown = next((m.content for m in reversed(request.messages) if isinstance(m, UserMessage)), "")
    _, headed, answer = shown.partition(ANSWER_HEADING)
    if not (answer if headed else shown).strip():  # a task and a rubric are no answer
        what = "the answer I was shown" if headed else "what I was shown"
        return f"{PREFIX}There is nothing to judge: {what} is empty."
    for what, pattern in _SECRETS:
        if pattern.search(shown):
            return f"{PREFIX}It holds what looks like {what}, which must not go further."
    return "PASS"
