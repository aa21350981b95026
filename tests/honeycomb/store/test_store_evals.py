"""The evals a run store keeps: a report by its eval id (an eval kept again replaces
it), the latest listed first; a store made before there were evals reads none, is
left as it was by reading, and keeps them once a run opens it."""

from __future__ import annotations

from pathlib import Path

from honeycomb import Executor
from honeycomb.hive import load_hive
from honeycomb.store import RunStore
from tests.support.evals import tiny_hive
from tests.support.old_stores import digest, write_old_store
from tests.support.stores import Where


async def test_a_report_is_kept_by_its_id_and_the_latest_are_listed_first(
    store: Where,
) -> None:
    store = RunStore(store)  # either store
    await store.open()
    await store.keep_eval("ev-1", "trip", 100.0, True, b'{"one": 1}')
    await store.keep_eval("ev-2", "trip", 200.0, False, b'{"two": 2}')
    await store.keep_eval("ev-1", "trip", 300.0, False, b'{"one": "again"}')
    assert [(e.eval_id, e.passed) for e in store.evals()] == [("ev-1", False), ("ev-2", False)]
    assert [e.eval_id for e in store.evals(limit=1)] == ["ev-1"]
    assert store.eval_report("ev-1") == '{"one": "again"}'
    assert store.eval_report("ev-3") is None
    store.close()


async def test_a_store_of_before_evals_reads_none_and_keeps_them_once_opened(
    tmp_path: Path,
) -> None:
    today = tmp_path / "today.db"
    await Executor.from_hive(load_hive(tiny_hive(tmp_path)), store=today).run("Say hello")
    old = tmp_path / "old.db"
    write_old_store(old, 4, today)
    before = digest(old)
    store = RunStore(old)
    assert store.evals() == []
    assert store.eval_report("ev-1") is None
    assert digest(old) == before  # reading wrote nothing
    await store.open()  # upgraded, as a run opens it
    await store.keep_eval("ev-1", "tiny", 1.0, True, b"{}")
    assert [e.eval_id for e in store.evals()] == ["ev-1"]
    assert len(store.runs()) == 1  # its runs kept
    store.close()
