"""A run of ``honeycomb demo --approve`` stopped before its outbox call asked is
continued asking it too: the command printed to continue it says ``--approve``, and
``resume --approve`` makes the call ask (without it, the run sent the summary
unasked)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from honeycomb import Executor
from honeycomb.cli.main import main
from honeycomb.cli.running import demo_hive_path
from honeycomb.events import ModelCallStarted
from honeycomb.hive import load_hive
from tests.honeycomb.cli.test_resume_hint_secrets import hint_of


def test_the_command_that_continues_a_demo_that_asks_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--approve", "--plain", "--store", "runs.db", "--run-id", "d1"]) == 3
    said = capsys.readouterr()
    continued = "honeycomb resume d1 --store runs.db --approve"
    assert hint_of(said.err) == continued
    assert said.out.endswith(f"\n  {continued}\n")  # under the calls that wait


async def _stopped_before_the_outbox_asked(store: Path) -> None:
    """The trip's courier, stopped as its model thinks: no call of it asked yet."""
    executor = Executor.from_hive(load_hive(demo_hive_path()), store=store)
    thinking = asyncio.Event()

    def seen(event: object) -> None:
        if isinstance(event, ModelCallStarted) and event.worker == "s1":
            thinking.set()

    courier = [("courier", "Send the summary 'Done' to the outbox.")]
    run = asyncio.ensure_future(
        executor.run("Send the summary", subtasks=courier, run_id="d2", on_event=[seen])
    )
    await thinking.wait()
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run
    await executor.store.aclose()


@pytest.mark.parametrize("approve", [True, False])
def test_resume_approve_makes_the_outbox_call_ask(
    approve: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    asyncio.run(_stopped_before_the_outbox_asked(tmp_path / "runs.db"))
    command = ["resume", "d2", "--store", "runs.db", "--json"]
    status = main([*command, "--approve"] if approve else command)
    sent = list((tmp_path / "outbox").glob("*.md"))
    assert (status, len(sent)) == ((3, 0) if approve else (0, 1))  # waiting, or sent
