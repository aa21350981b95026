"""``honeycomb serve``'s page where it meets output guards: an answer a guard refused is
shown by no view of its run, as the run's stream drops it."""

from __future__ import annotations

import html
from pathlib import Path

import httpx

from honeycomb import Executor, GuardCheck, Guards, Role
from honeycomb.testing import ScriptedModel
from honeycomb.web import create_app
from tests.support.asgi_server import ThreadedServer

TOKEN = "test-token-0123456789"
BEARER = {"authorization": f"Bearer {TOKEN}"}
CODE = "the vault code is 4417"


def no_codes(check: GuardCheck) -> str | None:
    return "it names a vault code" if "vault code" in check.text else None


async def test_answers_a_workers_output_guards_refused_are_not_on_its_page(db: Path) -> None:
    """One worker's first answer is refused and its second accepted; the other's
    guards refuse both, and it fails. Neither refused answer is on the page: each
    stands as refused, beside the corrections that say why."""
    clerk = Role(name="clerk", guards=Guards(output=(no_codes,)), output_retries=1)
    model = ScriptedModel(
        {
            "r1/fixed": [CODE, "I cannot say."],
            "r1/tripped": [CODE, f"{CODE}, still"],
        }
    )
    executor = Executor([clerk], model, store=db, aggregator="concat")
    plan = [("clerk", "say it"), ("clerk", "say it")]
    subtasks = [{"id": name, "role": role, "instruction": text} for name, (role, text) in
                zip(("fixed", "tripped"), plan, strict=True)]  # fmt: skip
    result = await executor.run("the code", subtasks=subtasks, run_id="r1")
    assert result.status == "partial"
    app = create_app(db, token=TOKEN)
    with ThreadedServer(app, name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            pages = [(await client.get(path)).text for path in ("/runs/r1", "/runs/r1/live")]
    for page in map(html.unescape, pages):
        assert "4417" not in page
        assert page.count("(an answer its output guards refused)") == 3
        assert page.count("Your answer was not accepted:") == 2
        assert "I cannot say." in page
