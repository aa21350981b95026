"""``honeycomb serve``'s eval pages: the evals of the store, one eval's report with its
runs linked, and what changed from a baseline picked on the page; everything escaped,
and the token needed as for every page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from honeycomb import Executor
from honeycomb.evals import Case, CaseRun, evaluate
from honeycomb.hive import load_hive
from honeycomb.store import RunStore
from tests.support.evals import tiny_hive
from tests.support.serving import served

TOKEN = "a-token-for-the-eval-pages"
EVIL = "<script>x</script>"


@pytest.fixture
async def store(tmp_path: Path) -> Path:
    db = tmp_path / "runs.db"
    executor = Executor.from_hive(load_hive(tiny_hive(tmp_path)), store=RunStore(db))

    def greets(answer: str, run: CaseRun) -> bool:
        return "Lisbon" in answer

    def never(answer: str, run: CaseRun) -> str:
        return f"not {EVIL}"

    cases = [Case(id=EVIL, task="Say hello to Lisbon", checks=(greets,))]
    await evaluate(executor, cases, eval_id="ev-good")
    broken = [Case(id=EVIL, task="Say hello to Lisbon", checks=(never,))]
    await evaluate(executor, broken, eval_id="ev-bad")
    return db


@pytest.fixture
def client(store: Path) -> Iterator[httpx.Client]:
    with served(store, TOKEN) as client:
        yield client


def test_the_evals_page_lists_the_evals_newest_first(client: httpx.Client) -> None:
    page = client.get("/evals")
    assert page.status_code == 200
    assert page.text.index("ev-bad") < page.text.index("ev-good")
    assert '<a href="/evals/ev-good">ev-good</a>' in page.text
    assert '<a href="/evals">evals</a>' in client.get("/").text  # from every page


def test_an_eval_page_shows_its_report_with_its_runs_linked_and_escaped(
    client: httpx.Client, store: Path
) -> None:
    page = client.get("/evals/ev-bad")
    assert page.status_code == 200
    assert EVIL not in page.text
    assert "&lt;script&gt;x&lt;/script&gt;" in page.text
    assert "0 of 1 case passed" in page.text
    (run,) = [r.run_id for r in RunStore(store).runs() if r.run_id in page.text][:1]
    assert f'<a href="/runs/{run}">{run}</a>' in page.text
    assert client.get(f"/runs/{run}").status_code == 200


def test_an_eval_compared_with_a_baseline_shows_the_regression(client: httpx.Client) -> None:
    page = client.get("/evals/ev-bad", params={"baseline": "ev-good"})
    assert page.status_code == 200
    assert "<h2>against ev-good</h2>" in page.text
    assert "1 newly failing, 0 newly passing" in page.text
    # The totals' deltas, as the command gives them: p95 beside p50.
    assert re.search(r"· p50 [+-]\d+\.\d\ds · p95 [+-]\d+\.\d\ds</p>", page.text)
    assert '<option value="ev-good" selected>' in page.text


def test_an_unknown_eval_is_a_404_and_the_token_is_needed(client: httpx.Client) -> None:
    assert client.get("/evals/ev-none").status_code == 404
    assert client.get("/evals/ev-bad", params={"baseline": "ev-none"}).status_code == 404
    refused = client.get("/evals", headers={"authorization": "Bearer wrong"})
    assert refused.status_code == 401


def test_the_evals_page_says_when_the_store_holds_more_than_it_lists(
    client: httpx.Client,
) -> None:
    """The evals page listed the newest 200 and said nothing of the others (its
    ``?limit=`` unread), where the runs and sessions say the store holds more and link
    to them; now it lists as they do."""
    page = client.get("/evals", params={"limit": "1"})
    assert page.status_code == 200
    assert "the newest 1 eval in runs.db (it holds more)" in page.text
    assert '<a href="/evals?limit=2">show the newest 2</a>' in page.text
    assert "ev-bad" in page.text
    assert "ev-good" not in page.text
    every = client.get("/evals", params={"limit": "2"}).text
    assert "ev-good" in every
    assert "it holds more" not in every
    assert client.get("/evals", params={"limit": "0"}).status_code == 422
