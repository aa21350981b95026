"""``honeycomb serve``'s eval pages where an eval kept cannot be read (an earlier
version wrote what this one does not read): the page says so, as the command does,
and the list and the other evals' pages go on working."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from honeycomb import Executor
from honeycomb.evals import Case, evaluate
from honeycomb.hive import load_hive
from honeycomb.store import RunStore
from tests.support.evals import tiny_hive
from tests.support.serving import served

TOKEN = "a-token-for-the-eval-pages"
ODD = "<b>trip</b>\x00\x1b[2J"
"""A cases file's name: markup, a NUL and a terminal's escape (YAML's "\\0", "\\e")."""


@pytest.fixture
async def store(tmp_path: Path) -> Path:
    db = tmp_path / "runs.db"
    runs = RunStore(db)
    executor = Executor.from_hive(load_hive(tiny_hive(tmp_path)), store=runs)
    await evaluate(executor, [Case(id="lisbon", task="Say hello to Lisbon")], eval_id="ev-new")
    # A report an earlier version kept with a score it wrote as null (a NaN).
    attempt = {"run_id": "r", "passed": False, "score": None, "status": "ok"}
    old = {"eval_id": "ev-old", "name": "greetings", "hive": "hive.yaml"}
    old["cases"] = [{"id": "lisbon", "task": "t", "attempts": [attempt]}]
    await runs.keep_eval("ev-old", "greetings", 0.0, False, json.dumps(old).encode())
    odd = {"eval_id": "ev-odd", "name": ODD, "hive": "hive.yaml"}
    await runs.keep_eval("ev-odd", ODD, 1.0, False, json.dumps(odd).encode())
    runs.close()
    return db


@pytest.fixture
def client(store: Path) -> Iterator[httpx.Client]:
    with served(store, TOKEN) as client:
        yield client


def test_an_eval_that_cannot_be_read_is_a_page_saying_so(client: httpx.Client) -> None:
    for page in (
        client.get("/evals/ev-old"),
        client.get("/evals/ev-new", params={"baseline": "ev-old"}),
    ):
        assert page.status_code == 500  # a page that names the cause, not a trace
        assert "eval ev-old cannot be read: Expected `float`, got `null`" in page.text
    assert client.get("/evals").status_code == 200
    assert client.get("/evals/ev-new").status_code == 200


def test_an_evals_name_is_escaped_and_shown_well_formed_in_the_list(
    client: httpx.Client,
) -> None:
    listed = client.get("/evals").text
    assert "&lt;b&gt;trip&lt;/b&gt;\ufffd\ufffd[2J" in listed  # as the report's page shows it
    assert "\x00" not in listed
    assert "\x1b" not in listed
