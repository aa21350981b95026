"""``honeycomb memory`` where it meets what workers keep: a model's note may hold a
terminal's escapes, which the commands must not pass to the terminal; and ``honeycomb
demo --memory`` saying what the pages say it says."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from honeycomb.cli.exits import ExitStatus
from honeycomb.cli.main import main
from honeycomb.hive import load_hive
from runtime import SQLiteMemory
from tests.support import ROOT

ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31m"  # a window title, a cleared screen, red


def test_list_and_search_show_no_terminal_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "memory.db"
    memory = SQLiteMemory(file)
    note = f"Lisbon{ESCAPES} is sunny\x00 in May"
    kept = asyncio.run(memory.add(note, namespace="trip", role=f"guide{ESCAPES}"))
    memory.close()
    assert kept.text == note  # kept as it was said: only what is shown is made inert
    assert main(["memory", "list", "--file", str(file)]) == 0
    assert main(["memory", "search", "lisbon", "--namespace", "trip", "--file", str(file)]) == 0
    assert main(["memory", "search", f"madrid{ESCAPES}", "--file", str(file)]) == 0
    shown = capsys.readouterr()
    for text in (shown.out, shown.err):
        assert not set(text) & {"\x1b", "\x07", "\x00"}
    lines = shown.out.splitlines()
    assert (
        sum(f"{kept.id} " in line and "Lisbon" in line and "sunny" in line for line in lines) == 2
    )
    assert "(search one with: honeycomb memory search" in shown.out


def test_the_recall_line_the_pages_quote_is_the_one_the_second_demo_prints(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memory_page = (ROOT / "docs" / "memory.md").read_text()
    cli_page = (ROOT / "docs" / "cli.md").read_text()
    [quoted] = re.findall(r"honeycomb demo --memory --plain +# (.+)", memory_page)
    assert f"`{quoted}`" in cli_page
    for _ in range(2):
        assert main(["demo", "--memory", "--plain", "--latency", "0", "--no-store"]) == 0
    shown = capsys.readouterr().out
    assert re.search(rf"\] {re.escape(quoted)}$", shown, re.M), quoted


EMBEDDED = """\
models:
  default: offline
memory:
  path: memory.db
  embeddings: {model: embed-small, base_url: "http://127.0.0.1:9/v1", api_key: "${HC_EMBED_KEY}"}
roles:
  planner: {description: Plans.}
  guide:
    description: Finds things.
    memory: {namespace: trip}
"""


def test_a_hive_whose_embeddings_key_is_not_set_lists_its_memory_and_names_the_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``honeycomb memory list --hive`` of a hive whose embeddings read their key from a
    variable not set failed as the hive loaded ('environment variable ... is not set'),
    though listing calls no endpoint. The key is read as the embeddings are called:
    list and forget go on, search names the variable (never sending OPENAI_API_KEY in its
    place), validate warns of it and run does not start without it."""
    monkeypatch.delenv("HC_EMBED_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-another-endpoints-key")
    path = tmp_path / "hive.yaml"
    path.write_text(EMBEDDED)
    memory = SQLiteMemory(tmp_path / "memory.db")
    kept = asyncio.run(memory.add("Lisbon trams climb", namespace="trip"))
    memory.close()
    hive = ["--hive", str(path)]
    assert main(["memory", "list", *hive]) == ExitStatus.OK
    assert f"{kept.id} " in capsys.readouterr().out
    assert main(["memory", "search", "lisbon", "--namespace", "trip", *hive]) == ExitStatus.UNUSABLE
    said = "reads its API key from the environment variable HC_EMBED_KEY, which is not set"
    assert said in capsys.readouterr().err
    assert main(["validate", str(path)]) == ExitStatus.OK
    warned = "memory.embeddings.api_key: the memory's embeddings model 'embed-small' reads its API"
    assert warned in capsys.readouterr().out
    assert main(["run", str(path), "Lisbon?", "--plain"]) == ExitStatus.UNUSABLE
    assert "HC_EMBED_KEY, which is not set" in capsys.readouterr().err
    assert main(["memory", "forget", kept.id, *hive]) == ExitStatus.OK
    embeddings = load_hive(path).memory().embeddings
    monkeypatch.setenv("HC_EMBED_KEY", "sk-embeddings-key")  # read as it is called
    assert embeddings.endpoint.missing_key() is None
