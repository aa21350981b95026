"""A cut tells what works under it where it fell, whenever that asks."""

from __future__ import annotations

from runtime.limits.cut import RunCut


def test_a_cut_tells_those_that_ask_before_it_falls_and_after_once_each() -> None:
    """A Ray actor's recording asks through the driver to be told of its worker's cut,
    and the driver may hear it after the cut fell there (a busy machine): it was never
    told, the recording kept no cut line, and its replay failed the worker on a
    CassetteMismatch where the recorded one timed out."""
    expired: list[float | None] = []
    cut = RunCut(expired.append)
    before: list[float] = []
    after: list[float] = []
    writer, late_writer = object(), object()
    cut.tell(before.append, writer)
    cut.tell(before.append, writer)  # the same writer, at its next call
    cut.now(2.5)
    assert expired == [2.5]  # the limit's expiry is asked of whoever set the cut
    cut.fell(2.5)
    assert before == [2.5]
    cut.tell(after.append, late_writer)
    cut.tell(after.append, late_writer)
    assert after == [2.5]
    assert before == [2.5]
