"""What an endpoint says is left of its rate limits: the ``x-ratelimit-*`` headers,
read into a :class:`QuotaLeft` that an :class:`~runtime.AdaptiveLimiter` paces by."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from runtime.value import Value

__all__ = ["QuotaLeft", "quota_from_headers"]


class QuotaLeft(Value, frozen=True, kw_only=True):
    """What an endpoint said is left of its rate limits, after one answer.

    Attributes:
        requests: Requests left now.
        requests_reset_s: Seconds until the requests limit is whole again.
        requests_limit: The requests limit itself.
        tokens: Tokens left now.
        tokens_reset_s: Seconds until the tokens limit is whole again.
        tokens_limit: The tokens limit itself.
    """

    requests: float | None = None
    requests_reset_s: float | None = None
    requests_limit: float | None = None
    tokens: float | None = None
    tokens_reset_s: float | None = None
    tokens_limit: float | None = None


def quota_from_headers(headers: Mapping[str, str]) -> QuotaLeft | None:
    """The ``x-ratelimit-{remaining,reset,limit}-{requests,tokens}`` headers (OpenAI's,
    also sent by Groq, Together, vLLM behind a gateway ...), or None when none of them
    makes sense. Resets are read as OpenAI writes them (``1s``, ``6m0s``, ``250ms``) or
    as plain seconds."""
    found: dict[str, float] = {}
    for kind in ("requests", "tokens"):
        for part, field in (
            ("remaining", kind),
            ("reset", f"{kind}_reset_s"),
            ("limit", f"{kind}_limit"),
        ):
            value = headers.get(f"x-ratelimit-{part}-{kind}")
            number = None if value is None else _number(value, duration=part == "reset")
            if number is not None:
                found[field] = number
    if "requests" not in found and "tokens" not in found:
        return None
    return QuotaLeft(**found)


_DURATION = re.compile(r"(\d+(?:\.\d*)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _number(value: str, *, duration: bool) -> float | None:
    """A non-negative number; for a duration, seconds from ``1m30.5s`` or ``20ms``."""
    text = value.strip()
    try:
        number = float(text)
    except ValueError:
        if not duration or not text or _DURATION.sub("", text):
            return None
        number = sum(float(n) * _UNIT_S[unit] for n, unit in _DURATION.findall(text))
    return number if math.isfinite(number) and number >= 0 else None
