"""A remote worker's text deltas on their way to the run's handlers at the driver,
masked with the secrets the driver knows (see :class:`Deltas`)."""

from __future__ import annotations

import msgspec

from runtime import TextDelta, Tracer
from runtime.secrets import HeldText, any_known


class Deltas:
    """A remote worker's text deltas on their way to the run's handlers, every secret
    known here masked as a local call's streamed text is (:class:`HeldText`): the
    actor knows none of the secrets this process was given, and a secret split across
    two deltas is in neither, so the end of what came that could begin one is held back
    until the next delta, or the worker's next event, says."""

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer
        self._held: HeldText | None = None
        self._last: TextDelta | None = None  # the fields of what the held text goes as

    def add(self, delta: TextDelta) -> None:
        last = self._last
        if last is not None and (last.worker, last.turn) != (delta.worker, delta.turn):
            self.flush()
        if self._held is None:
            if not any_known():  # nothing to hold back
                self._tracer.emit(delta)
                return
            self._held = HeldText(self._emit)
        self._last = delta
        self._held(delta.text)

    def _emit(self, text: str) -> None:
        assert self._last is not None
        self._tracer.emit(msgspec.structs.replace(self._last, text=text))

    def drop(self) -> None:
        """The attempt that wrote the text failed: what is held back is forgotten."""
        self._held = self._last = None

    def flush(self) -> None:
        """The text ended: what is held back goes on, masked."""
        held, self._held = self._held, None
        if held is not None:
            held.flush()
        self._last = None
