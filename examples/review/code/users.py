"""User accounts (a bundled sample to review; this one is clean)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class User:
    name: str
    email: str


def find(users: list[User], email: str) -> User | None:
    """The user with this email address, if any."""
    return next((u for u in users if u.email.lower() == email.lower()), None)
