"""docs/events.md documents every event kind and every field, so the schema apps
build on cannot drift from the code unnoticed. The events are those of
``honeycomb.events`` (tests/test_public_api.py checks it holds every one)."""

from __future__ import annotations

import honeycomb.events
from honeycomb.events import Event
from tests.support import ROOT

DOC = (ROOT / "docs" / "events.md").read_text()


def events() -> list[type[Event]]:
    found = []
    for name in honeycomb.events.__all__:
        value = getattr(honeycomb.events, name)
        if isinstance(value, type) and issubclass(value, Event) and value is not Event:
            found.append(value)
    return found


def test_every_event_and_field_is_documented() -> None:
    assert len(events()) > 10
    for cls in events():
        [row] = [line for line in DOC.splitlines() if line.startswith(f"| `{cls.kind}` |")]
        assert f"`{cls.__name__}`" in row
        for name in cls.__struct_fields__:
            if name in ("run_id", "worker"):
                continue  # documented once, for every event
            assert f"`{name}: " in row, f"{cls.kind}: field {name} is not documented"
