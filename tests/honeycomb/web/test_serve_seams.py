"""``honeycomb serve`` where it meets what is around it: a decision's form of megabytes
of arguments, a CSRF value past ASCII, a run whose hive file no longer loads or whose
process is gone, the token kept beside the store across restarts (a page open on the
server follows it again, or says the server has another token), and Ctrl-C while the
server continues a run."""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import os
import queue
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from honeycomb.cli.main import main
from honeycomb.cli.serve import Resumer, _kept_token, store_approvals
from honeycomb.cli.stores import DEFAULT_STORE
from honeycomb.executor import Executor
from honeycomb.run.decide import pending_of
from honeycomb.store import RunStore
from honeycomb.web import create_app
from honeycomb.web.app import end_streams
from honeycomb.web.approvals import StoreApprovals
from runtime import RunFailed
from runtime.tools.approvals import PendingApproval
from tests.honeycomb.cli import test_chat_approvals
from tests.honeycomb.web import test_serve, test_serve_edges
from tests.honeycomb.web.test_serve import TOKEN, _later, _signed_in, _until, _value, _Watched
from tests.honeycomb.web.test_serve_edges import BEARER, _Recorded
from tests.support import approvals
from tests.support.asgi_server import ThreadedServer
from tests.support.chromium import IN_CHROMIUM

# Fixtures of the neighbouring tests, used here as they are.
finished = test_serve.finished
waiting = test_serve_edges.waiting
hive = test_chat_approvals.hive

BIG = "x" * 1_500_000
"""A string argument past Starlette's default limit of a form's field (1 MB)."""


class _Large(_Recorded):
    """A call whose arguments hold :data:`BIG`, decisions recorded."""

    async def pending(self, run_id: str) -> list[PendingApproval]:
        return [
            PendingApproval(
                call_id="c1", worker="a", role="worker", turn=1, tool="send",
                arguments={"body": BIG}, why="send needs approval", asked_at=0.0,
            )
        ]  # fmt: skip


def test_a_decision_on_a_call_of_megabytes_of_arguments_is_read(db: Path) -> None:
    """The form sends the box as the page shows it: read, however large the call's
    arguments; a form past what the call's arguments need is refused naming the field."""
    decisions = _Large()
    app = create_app(db, token=TOKEN, approvals=decisions)
    shown = json.dumps({"body": BIG}, indent=2, ensure_ascii=False)
    url = "/runs/r1/calls/c1/decision"
    with ThreadedServer(app, name="serve") as server, httpx.Client(base_url=server.url) as client:
        form = {"decision": "approve", "worker": "a", "arguments": shown}
        read = client.post(url, data=form, headers=BEARER, timeout=30)
        assert read.status_code == 303, read.text
        past = client.post(
            url, data={**form, "arguments": "x" * 6_000_000}, headers=BEARER, timeout=30
        )
    assert past.status_code == 422
    assert "arguments: larger than the" in past.text
    assert decisions.made == [{"body": BIG}]


def test_a_csrf_value_past_ascii_is_refused_not_a_failure(db: Path) -> None:
    decisions = _Recorded()
    app = create_app(db, token=TOKEN, approvals=decisions)
    with ThreadedServer(app, name="serve") as server, _signed_in(server) as client:
        answer = client.post("/runs/r1/calls/c1/decision", data={"decision": "deny", "csrf": "é"})
    assert answer.status_code == 403
    assert "the page&#x27;s CSRF value is missing or wrong" in answer.text
    assert decisions.made == []


# --- in a real headless Chromium ------------------------------------------------------


@IN_CHROMIUM
async def test_in_chromium_a_form_sends_its_arguments_only_when_edited(
    finished: Path, db: Path, browser: Any
) -> None:
    """The box as the page made it is the model's arguments, which the server has: it
    is not sent back (megabytes of them would be); an edited box is."""
    decisions = _Recorded()
    app = create_app(db, token=TOKEN, approvals=decisions)
    with ThreadedServer(app, name="serve") as server:
        context = await browser.new_context()
        watched = _Watched(await context.new_page())
        page = watched.page
        await page.goto(f"{server.url}/runs/r1?token={TOKEN}")
        form = "form.approval[data-call='c1']"
        async with page.expect_navigation():
            await page.click(f"{form} button[value=approve]")
        assert decisions.made == [None]  # the model's, not sent
        await page.click(f"{form} details.edit summary")
        await page.fill(f"{form} textarea[name=arguments]", '{"to": "bob"}')
        async with page.expect_navigation():
            await page.click(f"{form} button[value=approve]")
        assert decisions.made == [None, {"to": "bob"}]
        assert watched.errors == [], "\n".join(watched.errors)
        await context.close()


class _Restarting:
    """One address whose server is stopped and started again, maybe with another
    token: what a page open on ``honeycomb serve`` sees when it is started again."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)

    def restart(self, token: str, db: Path) -> None:
        end_streams(self.app)  # as the server does as it stops
        self.app = create_app(db, token=token, poll_s=0.1)


LOST = "Lost the server: this page follows its run again once the server answers."
OTHER_TOKEN = (
    "This page no longer follows its run: the server now has another token (it was "
    "started again without --token). Open the address it printed."
)


@IN_CHROMIUM
async def test_in_chromium_a_page_follows_its_run_again_or_says_the_token_changed(
    waiting: Path, browser: Any
) -> None:
    """Started again with its token, the server has the page back: a line says it was
    lost meanwhile, then goes. Started with another token, the page says so."""
    restarting = _Restarting(create_app(waiting, token=TOKEN, poll_s=0.1))
    with ThreadedServer(restarting, name="serve") as server:
        context = await browser.new_context()
        watched = _Watched(await context.new_page())
        page = watched.page
        await page.goto(f"{server.url}/runs/w?token={TOKEN}")
        await _until(lambda: _later(watched, 0), "yes")  # its events are connected

        async def lost() -> str:
            return await watched.dataset("lost") or ""

        restarting.restart(TOKEN, waiting)
        await _until(lost, LOST)
        assert await page.inner_text("p.lost") == LOST
        await _until(lost, "")  # connected again
        assert not await page.is_visible("p.lost")
        restarting.restart("another-token-0123456789", waiting)
        await _until(lost, OTHER_TOKEN)
        assert await page.inner_text("p.lost") == OTHER_TOKEN
        await context.close()


EVER_LOST = """new MutationObserver(function () {
  var root = document.documentElement;
  if (root.dataset.lost) { root.dataset.everLost = root.dataset.lost; }
}).observe(document.documentElement, {attributes: true, attributeFilter: ['data-lost']})"""
"""Keeps in ``<html data-ever-lost>`` any line the page said it lost its run with."""


@IN_CHROMIUM
async def test_in_chromium_a_page_follows_its_run_across_responses_of_its_events(
    waiting: Path, browser: Any
) -> None:
    """Each response of a run's events lasts ``stream_s`` (a service's server stops
    within it): the page asks for the next at once, says nothing of it, keeps what
    was typed in its form, and still takes the run's changes (a call decided
    elsewhere goes from it)."""
    [call] = await pending_of(RunStore(waiting), "w")
    decided = StoreApprovals(RunStore(waiting))
    app = create_app(waiting, token=TOKEN, approvals=decided, poll_s=0.05, stream_s=0.3)
    with ThreadedServer(app, name="serve") as server:
        context = await browser.new_context()
        watched = _Watched(await context.new_page())
        page = watched.page
        asked: list[str] = []
        page.on(
            "request",
            lambda r: (
                asked.append(r.url) if r.url.endswith("/events") or "/events?" in r.url else None
            ),
        )
        await page.goto(f"{server.url}/runs/w?token={TOKEN}")
        await page.evaluate(EVER_LOST)
        await page.fill("form.approval input[name=reason]", "typed by a person")
        await _until(lambda: _asked_more(asked, 3), "yes")  # three responses later
        assert await watched.dataset("updates") == "1"  # each asked with what it shows
        assert await watched.dataset("everLost") is None
        assert await _value(page, "form.approval input[name=reason]") == "typed by a person"
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            form = {"decision": "deny", "reason": "elsewhere", "worker": call.worker}
            answer = await client.post(f"/runs/w/calls/{call.call_id}/decision", data=form)
        assert answer.status_code == 303
        await page.wait_for_selector("form.approval", state="detached")
        assert await watched.dataset("errors") is None
        assert watched.errors == [], "\n".join(watched.errors)
        await context.close()


async def _asked_more(asked: list[str], than: int) -> str:
    return "yes" if len(asked) > than else "no"


# --- runs of a hive file --------------------------------------------------------------


def _waits(hive: Path, db: Path, run_id: str = "h1") -> PendingApproval:
    """Run ``hive`` (its outbox asking) into the store ``db`` until it waits; the call
    it waits on."""
    assert main(["run", str(hive), "--plain", "--store", str(db), "--run-id", run_id]) == 3
    [call] = anyio.run(pending_of, RunStore(db), run_id)
    return call


def _cut_off(db: Path, run_id: str) -> None:
    """Leave run ``run_id`` of ``db`` as a process killed while it waited leaves it:
    stored as running, with no process to carry it on (``interrupted``)."""
    with contextlib.closing(sqlite3.connect(db)) as raw, raw:
        raw.execute("UPDATE runs SET status = 'running', result = NULL WHERE run_id = ?", (run_id,))
    found = RunStore(db).find(run_id)
    assert found is not None
    assert found.status == "interrupted"


def test_an_edit_on_a_run_whose_hive_file_no_longer_loads_names_where_it_breaks(
    hive: Path, tmp_path: Path
) -> None:
    """The edit cannot be checked against the tool's schema: refused, saying where the
    file breaks; the page still shows the call, which still waits."""
    db = tmp_path / "runs.db"
    call = _waits(hive, db)
    text = hive.read_text()
    hive.write_text(text.replace("max_turns: 4", "max_turns: many", 1))
    line = text[: text.index("max_turns: 4")].count("\n") + 1
    app = create_app(db, token=TOKEN, approvals=store_approvals(RunStore(db), db))
    with (
        ThreadedServer(app, name="serve") as server,
        httpx.Client(base_url=server.url, headers=BEARER) as client,
    ):
        page = client.get("/runs/h1")
        assert page.status_code == 200
        assert f'data-call="{call.call_id}"' in page.text
        edited = {**call.arguments, "subject": "Edited"}
        form = {"decision": "approve", "worker": call.worker, "arguments": json.dumps(edited)}
        refused = client.post(f"/runs/h1/calls/{call.call_id}/decision", data=form)
    assert refused.status_code == 409
    said = html.unescape(refused.text)
    assert "the edited arguments cannot be checked against the tool's schema here" in said
    assert f"{hive}:{line}:5: roles.meteorologist.max_turns:" in said
    assert anyio.run(pending_of, RunStore(db), "h1") == [call]  # nothing recorded


async def test_the_page_of_an_interrupted_run_made_in_python_leaves_it_to_its_code(
    waiting: Path,
) -> None:
    """The server does not continue a run made in Python: its page does not say so."""
    _cut_off(waiting, "w")
    app = create_app(waiting, token=TOKEN, approvals=StoreApprovals(RunStore(waiting)))
    page = await test_serve_edges._page(app, "/runs/w")
    assert "<form" in page
    assert (
        "The run stopped before it finished (its process is gone). Once its calls are "
        "decided, continue it with <code>Executor.resume(&#x27;w&#x27;)</code> in the code "
        "that made it."
    ) in page


async def test_the_events_of_an_interrupted_run_follow_it_as_it_is_resumed(
    waiting: Path, tmp_path: Path
) -> None:
    """The events of an interrupted run ended at once, as a finished run's do: a page
    open on it (which says to continue it with Executor.resume or honeycomb resume)
    never showed it go on once it was continued elsewhere."""
    _cut_off(waiting, "w")
    executor = approvals.executor(waiting, tmp_path / "effects.txt")
    await executor.decide("w", "pay_1", approve=True)
    app = create_app(waiting, token=TOKEN, approvals=StoreApprovals(RunStore(waiting)), poll_s=0.05)
    seen: list[str] = []
    with ThreadedServer(app, name="serve") as server:
        async with (
            httpx.AsyncClient(base_url=server.url, headers=BEARER) as client,
            client.stream("GET", "/runs/w/events") as events,
        ):
            async for line in events.aiter_lines():
                if line.startswith("data: "):
                    seen.append(json.loads(line[len("data: ") :])["status"])
                if seen == ["interrupted"]:  # the page follows it: continue it now
                    assert (await executor.resume("w")).status == "ok"
                    seen.append("resumed")
                if line.startswith("event: end"):
                    break
    assert seen[:2] == ["interrupted", "resumed"]
    assert seen[-1] == "ok"  # the change it ended with, then the events end


def test_a_decided_call_of_an_interrupted_run_has_the_server_continue_it(
    hive: Path, tmp_path: Path, fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its process is gone: the server continues it, as a run that ended waiting."""
    db = tmp_path / "runs.db"
    call = _waits(hive, db)
    _cut_off(db, "h1")
    store = RunStore(db)
    app = create_app(db, token=TOKEN, approvals=store_approvals(store, db))
    with (
        ThreadedServer(app, name="serve") as server,
        httpx.Client(base_url=server.url, headers=BEARER) as client,
    ):
        form = {"decision": "approve", "worker": call.worker}
        decided = client.post(f"/runs/h1/calls/{call.call_id}/decision", data=form)
        assert decided.status_code == 303
        deadline = time.monotonic() + 30
        while (found := store.find("h1")) is None or found.status != "ok":
            assert time.monotonic() < deadline, f"the run is still {found and found.status}"
            time.sleep(0.05)
    assert "run h1: decided; continuing it" in capsys.readouterr().err
    assert len(list(fast_demo.glob("*.md"))) == 1  # approved: sent, once


def test_the_server_does_not_continue_a_run_on_other_models_than_answered_it(
    hive: Path,
    tmp_path: Path,
    fast_demo: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A run made with ``--model offline`` of a hive whose roles think with a paid
    model, decided on the page: the server kept no option that chose its models, so it
    would have finished the run on the paid one. It does not: the page says why, and
    how the run goes on."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-sent")
    hive.write_text(hive.read_text().replace("default_model: offline", "default_model: gpt"))
    db = tmp_path / "runs.db"
    argv = ["run", str(hive), "--plain", "--store", str(db), "--run-id", "m1"]
    assert main([*argv, "--model", "offline"]) == 3

    async def decide() -> Resumer:
        decided = store_approvals(RunStore(db), db)
        [call] = await decided.pending("m1")
        await decided.decide("m1", call.call_id, approve=True)
        assert isinstance(decided.resume, Resumer)
        await asyncio.gather(*decided.resume.going.values())
        return decided.resume

    resumer = asyncio.run(decide())
    why = resumer.failure("m1")
    assert why is not None
    assert why.startswith(
        "it was answered by offline so far, and its hive file would continue it on "
        "gpt-4o-mini. To continue it on the models it started with, give the options"
    )
    assert "run m1: cannot continue it: it was answered by offline" in capsys.readouterr().err
    found = RunStore(db).find("m1")
    assert found is not None
    assert found.status == "waiting"  # decided, and left for a command that says its models
    assert not list(fast_demo.glob("*.md"))  # nothing sent


# --- the command ----------------------------------------------------------------------


class _Served:
    """``honeycomb serve`` in a process of its own: the address and token it printed,
    and what it says on stderr, line by line as it comes."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        command = [sys.executable, "-m", "honeycomb", "serve", *args]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        assert self.process.stdout is not None
        self.line = self.process.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:(\d+)/hc-[0-9a-f]{16}/)\?token=(\S+)", self.line)
        assert found is not None, self.line
        self.address, self.port, self.token = found[1], found[2], found[3]
        self.bearer = {"authorization": f"Bearer {self.token}"}
        self._said: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.err: list[str] = []

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._said.put(line)
        self._said.put(None)

    def said(self, wanted: str) -> None:
        """Wait until a line of stderr holds ``wanted``."""
        while True:
            line = self._said.get(timeout=30)
            assert line is not None, f"it ended without saying {wanted!r}: {self.err}"
            self.err.append(line)
            if wanted in line:
                return

    def stop(self, stopped_by: signal.Signals = signal.SIGINT) -> str:
        """Ctrl-C (or ``stopped_by``); all it said on stderr."""
        self.process.send_signal(stopped_by)
        assert self.process.wait(timeout=30) == 0
        self._reader.join(timeout=10)
        while (line := self._said.get_nowait()) is not None:
            self.err.append(line)
        return "".join(self.err)


@contextlib.contextmanager
def _serving(*args: str, env: dict[str, str] | None = None) -> Iterator[_Served]:
    served = _Served(*args, env=env)
    try:
        yield served
    finally:
        if served.process.poll() is None:
            served.stop()


def test_serve_keeps_its_token_beside_the_store_and_a_page_follows_it_again(
    waiting: Path,
) -> None:
    """Started again without ``--token``, it has the address it had: the cookie a page
    got from it opens the pages again."""
    db = waiting
    kept = db.with_name("runs.db.serve-token")
    with httpx.Client(follow_redirects=False) as client:  # as a browser keeps the cookie
        with _serving("--store", str(db), "--port", "0") as first:
            assert client.get(f"{first.address}?token={first.token}").status_code == 303
            assert client.get(first.address + "runs/w/live").status_code == 200
        with _serving("--store", str(db), "--port", first.port) as again:
            assert again.line == first.line
            assert client.get(again.address + "runs/w/live").status_code == 200
    assert kept.read_text() == first.token + "\n"
    assert kept.stat().st_mode & 0o777 == 0o600  # its owner's alone


def test_a_kept_token_others_can_read_or_too_short_is_replaced(db: Path) -> None:
    kept = db.with_name("runs.db.serve-token")
    token = _kept_token(db)
    assert _kept_token(db) == token
    kept.chmod(0o644)
    other = _kept_token(db)
    assert other != token
    assert kept.read_text() == other + "\n"
    assert kept.stat().st_mode & 0o777 == 0o600
    kept.write_text("short\n")
    assert _kept_token(db) not in (other, "short")


def test_a_store_at_a_url_gets_a_new_token_each_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    url = "postgresql://app@db.internal/prod"
    read_as_a_path = tmp_path / "postgresql:" / "app@db.internal"
    read_as_a_path.mkdir(parents=True)  # a folder where the URL, read as a file, would be
    assert _kept_token(url) != _kept_token(url)
    assert list(read_as_a_path.iterdir()) == []  # nothing kept


@pytest.mark.parametrize("kept", ["default", "elsewhere"])
def test_the_page_of_an_interrupted_run_says_how_it_goes_on(
    hive: Path, tmp_path: Path, kept: str
) -> None:
    """In the command line's terms: ``--store`` named unless it is the default."""
    db = DEFAULT_STORE if kept == "default" else tmp_path / "elsewhere" / "runs.db"
    _waits(hive, db)  # in the test's folder, where the default store is
    _cut_off(db, "h1")
    named = [] if kept == "default" else ["--store", str(db)]
    with _serving(*named, "--port", "0") as served:
        page = httpx.get(served.address + "runs/h1", headers=served.bearer).text
    command = shlex.join(["honeycomb", "resume", "h1", *named])
    assert (
        "The run stopped before it finished (its process is gone). Once its calls are "
        "decided on this page, this server continues it; or continue it with "
        f"<code>{command}</code>."
    ) in page


def test_the_page_of_a_run_the_server_could_not_continue_says_why(
    hive: Path, tmp_path: Path
) -> None:
    """Its last call decided on the page, the server cannot continue the run (its hive
    file broke since): the page says so, and why, beside how the run goes on. It said
    only that the server continues such a run, which waited on, the reason on the
    server's stderr alone."""
    db = tmp_path / "runs.db"
    call = _waits(hive, db)
    text = hive.read_text()
    hive.write_text(text.replace("max_turns: 4", "max_turns: many", 1))
    line = text[: text.index("max_turns: 4")].count("\n") + 1
    with _serving("--store", str(db), "--port", "0") as served:
        form = {"decision": "approve", "worker": call.worker}
        decided = httpx.post(
            f"{served.address}runs/h1/calls/{call.call_id}/decision",
            data=form,
            headers=served.bearer,
        )
        assert decided.status_code == 303
        served.said("run h1: cannot continue it")
        page = httpx.get(served.address + "runs/h1", headers=served.bearer).text
    said = html.unescape(page)
    assert 'data-status="waiting"' in page
    assert "This server could not continue it: " in said
    assert f"{hive}:{line}:5: roles.meteorologist.max_turns:" in said
    assert "No call is left to decide: the run goes on once it is resumed" in said


@pytest.mark.parametrize("stopped_by", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_while_the_server_continues_a_run_says_how_to_continue_it(
    hive: Path, tmp_path: Path, fast_demo: Path, stopped_by: signal.Signals
) -> None:
    """The run is cut off (``interrupted``), and stderr names the command that goes on;
    so too when SIGTERM stops the server (as a service manager stops it)."""
    db = tmp_path / "runs.db"
    call = _waits(hive, db)
    slow = {**os.environ, "HONEYCOMB_DEMO_TOOL_LATENCY": "60"}  # the approved call waits
    with _serving("--store", str(db), "--port", "0", env=slow) as served:
        form = {"decision": "approve", "worker": call.worker}
        decided = httpx.post(
            f"{served.address}runs/h1/calls/{call.call_id}/decision",
            data=form,
            headers=served.bearer,
        )
        assert decided.status_code == 303
        served.said("run h1: decided; continuing it")
        # Said before it takes the run up: stopped then, the run is still waiting (nothing
        # of it went on). Stopped once the run is under way (its approved call waits).
        with contextlib.closing(RunStore(db)) as store:
            deadline = time.monotonic() + 30
            while (going := store.find("h1")) is None or going.status != "running":
                assert time.monotonic() < deadline, f"not under way: {going}"
                time.sleep(0.05)
        err = served.stop(stopped_by)
    command = shlex.join(["honeycomb", "resume", "h1", "--store", str(db)])
    assert f"run h1: cut off as this server stopped; continue it with {command}\n" in err
    found = RunStore(db).find("h1")
    assert found is not None
    assert found.status == "interrupted"
    assert not fast_demo.exists()  # nothing was sent


def test_the_ray_actors_of_a_run_the_server_continued_are_stopped(
    hive: Path, tmp_path: Path, fast_demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hive with ``backend: ray`` makes a pool of actors for each run the server
    continues; none was ever stopped, and each continued run left its actors running
    as long as the server ran."""
    from honeycomb.backends import RayBackend

    db = tmp_path / "runs.db"
    _waits(hive, db)
    pool = RayBackend(actors=1)  # as the hive's backend: ray builds it
    stopped: list[bool] = []
    monkeypatch.setattr(pool, "stop", lambda: stopped.append(True))

    class Continued:  # the hive's Executor, on that pool; its run goes on, and fails
        shared = types.SimpleNamespace(backend=pool, crew=types.SimpleNamespace(default_model=""))
        roles = types.MappingProxyType({})  # thinks with no model: none told apart

        async def resume(self, run_id: str) -> None:
            raise RunFailed("its workers failed")

    monkeypatch.setattr(Executor, "from_yaml", lambda *_, **__: Continued())
    anyio.run(Resumer(db).resume, "h1")
    assert stopped == [True]
