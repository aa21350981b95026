"""docs/events.md documents every event kind and every field, so the schema apps
build on cannot drift from the code unnoticed. The events are those of
``honeycomb.events`` (tests/test_public_api.py checks it holds every one)."""

from __future__ import annotations

import re

import honeycomb.events
from honeycomb.events import Event
from tests.support import ROOT

DOC = (ROOT / "docs" / "events.md").read_text()
TRACING = (ROOT / "docs" / "tracing.md").read_text()


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
        named = set(re.findall(r"`(\w+): ", row.split("|", 3)[3]))
        assert named <= set(cls.__struct_fields__), (
            f"{cls.kind}: no field {named - set(cls.__struct_fields__)}"
        )


def _logged_names() -> set[str]:
    """The names of the log entries the code writes besides its events: each literal
    given to ``logs.log`` (or to an endpoint's ``_switched``, which logs it)."""
    found: set[str] = set()
    for package in ("runtime", "workers", "honeycomb"):
        for path in (ROOT / package).rglob("*.py"):
            found.update(_LOGGED.findall(path.read_text()))
    return found


_LOGGED = re.compile(r'(?:\blogs\.log|\._switched)\(\s*"([a-z_.]+)"')


def test_every_log_entry_besides_the_events_is_documented() -> None:
    """docs/tracing.md lists the entries Honeycomb logs besides its events (it left
    out memory.store_failed)."""
    logging = TRACING.split("## Logging", 1)[1].split("\n## ", 1)[0]
    names = _logged_names()
    assert {"model_call.retry", "event_handler.failed"} <= names
    missing = sorted(n for n in names if f"`{n}`" not in logging)
    assert not missing, f"docs/tracing.md#logging does not name {missing}"
