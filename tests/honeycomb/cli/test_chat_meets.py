"""``honeycomb chat`` with the session's other features: its answers streamed."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from honeycomb.cli.chat import Chat
from honeycomb.executor import Executor
from honeycomb.hive import load_hive
from tests.support.hives import CHATTY, hive


async def test_off_a_terminal_the_answer_is_written_as_it_comes(tmp_path: Path) -> None:
    chatty = load_hive(hive(tmp_path, CHATTY))
    chat = Chat(chatty, Executor.from_hive(chatty), "u1", "plain")
    written: list[tuple[str, int]] = []  # each write, and how many turns had ended

    class Out(io.StringIO):
        def write(self, text: str) -> int:
            written.append((text, len(chat.results)))
            return super().write(text)

    out = Out()
    await chat.talk(io.StringIO("Find the weather in Rome.\n"), out, Console(file=io.StringIO()))
    (result,) = chat.results
    answer = result.answer_text.strip()
    # Its pieces came while its turn was answered, and it was not written again after.
    assert answer in "".join(text for text, ended in written if not ended)
    assert out.getvalue().count(answer) == 1
    assert f"{answer}\n\n  subtask " in out.getvalue()  # then its workers, as ever
