"""Guards named by import path in tests."""

from __future__ import annotations

from workers.guards import GuardCheck


def no_secrets(check: GuardCheck) -> str | None:
    """Refuses text that mentions a password."""
    return "it mentions a password" if "password" in check.text.lower() else None


async def short(check: GuardCheck) -> str | None:
    """Refuses answers over 40 characters."""
    return f"it is {len(check.text)} characters long, over 40" if len(check.text) > 40 else None


NOT_CALLABLE = 3
