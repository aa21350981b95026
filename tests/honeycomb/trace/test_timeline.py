"""``honeycomb trace``: a run's spans laid out as a timeline with its critical path, in
the terminal, as JSON lines and as a web page (checked in headless Chromium)."""

from __future__ import annotations

import io
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import anyio
import pytest
from rich.cells import cell_len
from rich.console import Console

from honeycomb import Executor, Plan, Policy, Role, Subtask, tool
from honeycomb.cli.main import main
from honeycomb.run.plan import critical_path
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from honeycomb.trace.critical import longest_chain
from honeycomb.trace.html import to_html
from honeycomb.trace.spans import Span, SpanKind, SpanRecorder, from_jsonl
from honeycomb.trace.terminal import CHARS, render_timeline
from honeycomb.trace.timeline import Timeline, build_timeline
from runtime import AssistantMessage, ModelRequest
from runtime.testing import call
from tests.support.chromium import chromium
from tests.support.concurrency import Rendezvous

# Untrusted text from the run: it must come out escaped in the page and inert in the
# terminal. If the page did not escape it, the injected script would record an error.
TASK = 'trace me </script><script>throw new Error("injected")</script> & \x1b[31m"red"'
# Seconds per model call; c waits for a. b runs beside a → c, long enough that the run's
# own time between its workers (tens of ms under load) is well under half of b's, and
# short enough that a → c stays the longest chain by far.
LATENCY = {"a": 0.08, "b": 0.05, "c": 0.05}
PLAN = Plan(
    subtasks=(
        Subtask(id="a", role="worker", instruction="slow"),
        Subtask(id="b", role="worker", instruction="fast"),
        Subtask(id="c", role="worker", instruction="after a", depends_on=("a",)),
    )
)


def _model() -> FunctionModel:
    async def answer(request: ModelRequest) -> AssistantMessage | str:
        worker = (request.conversation or "").rsplit("/", 1)[-1]
        await anyio.sleep(LATENCY[worker])
        if not any(isinstance(m, AssistantMessage) for m in request.messages):
            return AssistantMessage(tool_calls=(call("probe", {"fail": worker == "b"}),))
        return f"done {worker}"

    return FunctionModel(answer)


async def probe(fail: bool = False) -> str:
    """Probe something."""
    await anyio.sleep(0.01)
    if fail:
        raise ValueError('bad <probe> & "quote"')
    return "fine"


async def dag_run(db: Path, *, trace: bool = True) -> Timeline:
    """Run the plan a → c, b into ``db`` as run r1; its timeline from the store."""
    executor = Executor(
        [Role(name="worker", description="Probes.", tools=("probe",))],
        _model(),
        tools=[tool(probe)],
        aggregator="concat",
        policy=Policy(max_workers=8),
        store=db,
        trace=trace,
    )
    result = await executor.run(TASK, subtasks=PLAN, run_id="r1")
    assert result.status == "ok"
    store = RunStore(db)
    stored = await store.load("r1")
    assert stored is not None
    assert stored.plan is not None
    plan = Plan.model_validate_json(stored.plan)
    return build_timeline(store.spans("r1"), plan.subtasks, run_id="r1", task=stored.task)


# --- the model ----------------------------------------------------------------------


async def test_a_row_per_worker_and_the_critical_chain(db: Path) -> None:
    timeline = await dag_run(db)
    assert [(r.kind, r.name) for r in timeline.rows] == [
        ("plan", "plan"),
        ("worker", "a"),
        ("worker", "b"),
        ("worker", "c"),
        ("aggregate", "aggregate"),
    ]
    assert timeline.critical_path == ("a", "c")
    assert {r.name for r in timeline.rows if r.critical} == {"plan", "a", "c", "aggregate"}
    rows = {r.name: r for r in timeline.workers}
    assert rows["c"].depends_on == ("a",)
    assert rows["c"].start >= rows["a"].end - 0.005  # c waited for a
    for row in timeline.workers:
        assert row.status == "ok"
        assert row.role == "worker"
        assert [b.kind for b in row.bars] == ["model_call", "tool_call", "model_call"]
        assert row.bars[1].name == "probe"
        assert all(0 <= b.start <= b.end <= timeline.length_s for b in row.bars)
        assert row.start <= row.bars[0].start
        assert row.bars[-1].end <= row.end
    assert rows["b"].bars[1].status == "error"
    assert rows["b"].bars[1].error is not None
    assert "bad <probe>" in rows["b"].bars[1].error
    assert rows["a"].bars[1].status == "ok"


async def test_the_figures_agree_with_the_spans(db: Path) -> None:
    timeline = await dag_run(db)
    spans = RunStore(db).spans("r1")
    [run] = [s for s in spans if s.kind == "run"]
    workers = {s.name: s.duration_s for s in spans if s.kind == "worker"}
    [plan_span] = [s for s in spans if s.kind == "plan"]
    [aggregate] = [s for s in spans if s.kind == "aggregate"]
    assert timeline.wall_s == pytest.approx(run.duration_s)
    assert timeline.plan_s == pytest.approx(plan_span.duration_s)
    assert timeline.aggregate_s == pytest.approx(aggregate.duration_s)
    assert timeline.sum_worker_s == pytest.approx(sum(workers.values()))
    fixed = plan_span.duration_s + aggregate.duration_s
    assert timeline.serial_s == pytest.approx(fixed + sum(workers.values()))
    assert timeline.critical_path_s == pytest.approx(fixed + workers["a"] + workers["c"])
    assert timeline.critical_path_s == pytest.approx(fixed + critical_path(PLAN, workers))
    assert timeline.speedup == pytest.approx(timeline.serial_s / timeline.wall_s)
    # b ran beside a and c, so serial is longer than the run by about b's time (less
    # the run's own time outside its phases and workers)
    assert timeline.serial_s - timeline.wall_s > workers["b"] / 2
    assert timeline.speedup > 1.0
    assert timeline.critical_path_s <= timeline.wall_s + 0.001
    calls = [s for s in spans if s.kind == "model_call"]
    assert timeline.model_calls == len(calls) == 6
    assert timeline.tool_calls == 3
    assert timeline.input_tokens == sum(s.input_tokens for s in calls) == run.input_tokens > 0
    assert timeline.output_tokens == run.output_tokens > 0
    assert sum(r.input_tokens for r in timeline.rows) == timeline.input_tokens


async def test_the_run_span_is_stored_when_run_returns(db: Path) -> None:
    """It closes on the run's last event, after the record's last commit; a CLI
    process that exits at once must not lose it."""
    executor = Executor(
        [Role(name="worker", description="Probes.", tools=("probe",))],
        _model(),
        tools=[tool(probe)],
        aggregator="concat",
        store=db,
    )
    await executor.run(TASK, subtasks=PLAN, run_id="r1")
    spans = RunStore(db).spans("r1")  # read at once, by another connection
    [run] = [s for s in spans if s.kind == "run"]
    assert run.name == TASK
    assert run.status == "ok"


def test_the_longest_chain_follows_the_dependencies() -> None:
    diamond = Plan.of(
        [
            {"id": "a", "role": "r", "instruction": "x"},
            {"id": "b", "role": "r", "instruction": "x", "depends_on": ["a"]},
            {"id": "c", "role": "r", "instruction": "x", "depends_on": ["a"]},
            {"id": "d", "role": "r", "instruction": "x", "depends_on": ["b", "c"]},
            {"id": "e", "role": "r", "instruction": "x"},
        ]
    )
    durations = {"a": 1.0, "b": 1.0, "c": 3.0, "d": 1.0, "e": 4.5}
    assert longest_chain(diamond.dependencies, durations) == (("a", "c", "d"), 5.0)
    assert longest_chain(diamond.dependencies, {**durations, "e": 6.0}) == (("e",), 6.0)
    assert longest_chain({}, {"x": 1.0, "y": 2.0}) == (("y",), 2.0)
    assert longest_chain({}, {}) == ((), 0.0)
    cyclic = {"a": ("b",), "b": ("a",)}
    assert longest_chain(cyclic, {"a": 1.0, "b": 2.0}) == (("b",), 2.0)


def test_spans_without_a_run_span_or_a_plan_still_lay_out() -> None:
    spans = [
        _span("w", "worker", "x", 10.0, 12.0, worker="x"),
        _span("m", "model_call", "gpt", 10.5, 11.0, parent="w", worker="x"),
        _span("w2", "worker", "y", 10.2, 11.0, worker="y"),
    ]
    timeline = build_timeline(spans)
    assert [r.name for r in timeline.rows] == ["x", "y"]
    assert timeline.critical_path == ("x",)
    assert timeline.wall_s == pytest.approx(2.0)
    assert timeline.rows[0].bars[0].start == pytest.approx(0.5)
    assert timeline.status == "unknown"


# --- the terminal --------------------------------------------------------------------


def _plain(timeline: Timeline, width: int = 100) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width)  # not a terminal: no colour
    console.print(render_timeline(timeline, console.width))
    return out.getvalue()


async def test_the_terminal_view_draws_a_line_per_row(db: Path) -> None:
    text = _plain(await dag_run(db))
    assert "\x1b" not in text  # plain text, and the task's escape code was neutralised
    lines = text.splitlines()
    assert lines[0].startswith("run r1 · ok · trace me")
    by_name = {line[2:].split()[0]: line for line in lines if line[2:3].isalnum()}
    assert {"plan", "a", "b", "c", "aggregate"} <= set(by_name)
    assert by_name["a"].startswith("★ ")
    assert by_name["c"].startswith("★ ")
    assert by_name["b"].startswith("  ")
    assert CHARS["model_call"] in by_name["a"]
    assert CHARS["tool_call"] in by_name["a"]
    assert CHARS["error"] in by_name["b"]  # b's probe raised
    assert CHARS["error"] not in by_name["a"]
    assert all(len(line) <= 100 for line in lines)
    assert "critical path" in text
    assert "plan → a → c → aggregate" in text
    assert "speedup x" in text


def test_only_a_call_that_failed_is_drawn_as_an_error() -> None:
    # Every status but ok and timeout was drawn as an error: a repeat skipped in a run
    # that went well, and a call waiting for a person (drawn as waiting now).
    spans = [
        _span("r", "run", TASK, 0.0, 4.0),
        _span("w", "worker", "fine", 0.0, 4.0, parent="r", worker="fine"),
        _span("t1", "tool_call", "t", 0.0, 2.0, parent="w", worker="fine", status="waiting"),
        _span("t2", "tool_call", "t", 2.0, 4.0, parent="w", worker="fine", status="skipped"),
        _span("v", "worker", "cut", 0.0, 4.0, parent="r", worker="cut"),
        _span("t3", "tool_call", "t", 0.0, 4.0, parent="v", worker="cut", status="cancelled"),
    ]  # fmt: skip
    timeline = build_timeline(spans)
    lines = {line[2:].split()[0]: line for line in _plain(timeline).splitlines() if line[2:3]}
    assert CHARS["error"] not in lines["fine"]
    assert CHARS["tool_call"] in lines["fine"]  # the repeat skipped
    assert CHARS["error"] in lines["cut"]
    html = to_html(timeline)
    assert html.count('class="bar tool_call waiting"') == 1
    assert html.count('class="bar tool_call error"') == 1  # the cancelled call alone


def test_a_task_of_wide_characters_is_cut_to_the_width_it_takes() -> None:
    # A task in Chinese was cut by its number of characters, each two columns wide:
    # the header took three lines of 60, and a row so named ran past its bars' start.
    task, wide = "比较里斯本和波尔图的天气" * 10, "天气预报员" * 6
    spans = [
        _span("r", "run", task, 0.0, 2.0),
        _span("w", "worker", wide, 0.0, 2.0, parent="r", worker=wide),
        _span("m", "model_call", "m", 0.0, 2.0, parent="w", worker=wide),
        _span("v", "worker", "plain", 0.0, 2.0, parent="r", worker="plain"),
        _span("n", "model_call", "m", 0.0, 2.0, parent="v", worker="plain"),
    ]  # fmt: skip
    lines = _plain(build_timeline(spans, task=task), width=60).splitlines()
    assert lines[0].startswith("run  · ok · 比较里斯本")
    assert lines[0].endswith("…")
    assert all(cell_len(line) <= 60 for line in lines)
    row, plain = (line for line in lines if line[2:].startswith(("天气", "plain")))
    bar = CHARS["model_call"]
    assert row[2:].split()[0].endswith("…")
    assert cell_len(row[: row.index(bar)]) == plain.index(bar)  # the bars start as one


# --- the command line ----------------------------------------------------------------


def test_trace_after_a_demo_prints_rows_and_writes_files(
    fast_demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    assert main(["demo", "--plain", "--latency", "0", "--store", str(db)]) == 0
    [run] = RunStore(db).runs()
    stored = anyio.run(RunStore(db).load, run.run_id)
    assert stored is not None
    assert stored.plan is not None
    ids = Plan.model_validate_json(stored.plan).ids
    capsys.readouterr()
    page, lines = tmp_path / "trace.html", tmp_path / "spans.jsonl"
    args = ["trace", run.run_id, "--store", str(db), "--html", str(page), "--jsonl", str(lines)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"run {run.run_id} · ok")
    for subtask_id in ids:
        assert any(line[2:].startswith(subtask_id + " ") for line in out.splitlines()), out
    assert from_jsonl(lines.read_text()) == RunStore(db).spans(run.run_id)
    assert sorted(_Page.of(page.read_text()).workers) == sorted(ids)


def test_trace_says_what_is_missing(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trace", "r1", "--store", str(tmp_path / "none.db")]) == 2
    assert "none.db: no run store" in capsys.readouterr().err
    anyio.run(lambda: dag_run(db, trace=False))
    assert [r.run_id for r in RunStore(db).runs()] == ["r1"]  # kept, without spans
    assert RunStore(db).spans("r1") == []
    assert main(["trace", "r2", "--store", str(db)]) == 2
    assert "no run 'r2'" in capsys.readouterr().err
    assert main(["trace", "r1", "--store", str(db)]) == 2
    assert "tracing was off" in capsys.readouterr().err


# --- the page ------------------------------------------------------------------------


class _Page(HTMLParser):
    """What a test needs of the page: worker rows, critical marks, the root's data."""

    def __init__(self) -> None:
        super().__init__()
        self.workers: list[str] = []
        self.critical: set[str] = set()
        self.root: dict[str, str | None] = {}
        self.scripts = 0
        self.first_script = ""
        self._in_script = False

    @classmethod
    def of(cls, html: str) -> _Page:
        page = cls()
        page.feed(html)
        return page

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "html":
            self.root = found
        if tag == "script":
            self.scripts += 1
            self._in_script = self.scripts == 1
        if "row" in (found.get("class") or "").split():
            self.workers.append(found.get("data-worker") or "")
            if found.get("data-critical") == "true":
                self.critical.add(found.get("data-worker") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.first_script += data


def test_the_page_escapes_what_came_from_the_run() -> None:
    evil = '<img src=x onerror="alert(1)">'
    spans = [
        _span("r", "run", TASK, 0.0, 2.0),
        _span("w", "worker", evil, 0.0, 1.0, parent="r", worker=evil),
        _span("t", "tool_call", evil, 0.1, 0.2, parent="w", worker=evil, error=evil),
    ]
    html = to_html(build_timeline(spans))
    assert "<img" not in html
    assert "<script>throw" not in html
    assert "http://" not in html
    assert "https://" not in html
    page = _Page.of(html)
    assert page.workers == [evil]  # the attribute reads back as the original text
    assert page.scripts == 2
    assert "addEventListener('error'" in page.first_script


async def test_the_page_runs_in_headless_chromium(db: Path, tmp_path: Path) -> None:
    browser = chromium()
    timeline = await dag_run(db)
    page = tmp_path / "trace.html"
    page.write_text(to_html(timeline), encoding="utf-8")
    done = await anyio.to_thread.run_sync(_dump_dom, browser, page, tmp_path / "profile")
    assert done.returncode == 0, done.stderr[-2000:]
    dom = _Page.of(done.stdout)
    assert dom.workers == ["a", "b", "c"]
    assert dom.critical == {"a", "c"}
    assert "data-errors" not in dom.root, dom.root.get("data-errors")
    assert dom.root.get("data-ready") == "3"


def test_the_error_catcher_in_the_page_works(tmp_path: Path) -> None:
    """The test above could not fail if the page's error catcher caught nothing."""
    browser = chromium()
    spans = [_span("w", "worker", "x", 0.0, 1.0, worker="x")]
    html = to_html(build_timeline(spans)).replace(
        '<div id="tip" hidden></div>', "<script>undefinedFunction();</script>"
    )
    page = tmp_path / "broken.html"
    page.write_text(html, encoding="utf-8")
    done = _dump_dom(browser, page, tmp_path / "profile")
    dom = _Page.of(done.stdout)
    assert "undefinedFunction" in (dom.root.get("data-errors") or "")
    assert dom.root.get("data-ready") == "1"


def _dump_dom(browser: str, page: Path, profile: Path) -> subprocess.CompletedProcess[str]:
    """The page's DOM after its scripts ran, from headless Chromium (no network)."""
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={profile}", "--dump-dom", page.as_uri(),
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)


def _span(
    span_id: str,
    kind: SpanKind,
    name: str,
    start: float,
    end: float,
    *,
    parent: str | None = None,
    worker: str | None = None,
    error: str | None = None,
    status: str = "ok",
) -> Span:
    return Span(
        span_id=span_id, parent_id=parent, kind=kind, name=name, start=start, end=end,
        worker=worker, error=error, status=status,
    )  # fmt: skip


async def test_calls_that_ran_at_once_are_drawn_one_under_another() -> None:
    """A worker's five calls that ran at once take five lanes of its row, on the page
    and in the terminal, where a row takes three lines at most, the third saying how
    many ran at once; they were drawn over one another, as one call (the shorter
    hidden under the longer, their details out of the mouse's reach)."""
    met = Rendezvous(5)

    @tool
    async def fetch(n: int) -> str:
        """Fetch n: returns once all five fetches run."""
        await met.meet()
        return str(n)

    def answer(request: ModelRequest) -> AssistantMessage | str:
        if len(request.messages) > 2:
            return "done"
        return AssistantMessage(tool_calls=tuple(call("fetch", {"n": n}) for n in range(5)))

    recorder = SpanRecorder()
    executor = Executor(
        [Role(name="w", tools=("fetch",))], FunctionModel(answer), tools=[fetch],
        aggregator="concat",
    )  # fmt: skip
    result = await executor.run("t", subtasks=[("w", "go")], on_event=[recorder])
    [row] = build_timeline(recorder.spans, result.plan.subtasks).workers
    tools = [b for b in row.bars if b.kind == "tool_call"]
    assert sorted(b.lane for b in tools) == [0, 1, 2, 3, 4]
    assert row.lanes == 5
    assert [b.lane for b in row.bars if b.kind == "model_call"] == [0, 0]  # one at a time
    lines = _plain(build_timeline(recorder.spans, result.plan.subtasks)).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("★ s1 "))
    for below in lines[at + 1 : at + 3]:  # a line a lane, the row's name and time aside
        bars = below.removesuffix("  5 at once")
        assert bars.strip(CHARS["tool_call"] + " ") == ""
        assert CHARS["tool_call"] in bars
    assert lines[at + 2].endswith("  5 at once")  # the last line holds lanes 2 to 4
    assert lines[at + 3].startswith("★ aggregate")
    html = to_html(build_timeline(recorder.spans, result.plan.subtasks))
    assert 'data-worker="s1" data-critical="true" style="height:74px"' in html
    assert all(html.count(f";top:{top}px") == 1 for top in (16, 29, 42, 55))


def test_the_calls_of_a_run_under_way_are_on_the_rows_it_ends_with() -> None:
    """A span is kept as it ends: in a run under way, the calls of a phase, a nested
    worker or a hive called as a tool, whose enclosing spans are not kept yet, each made
    a root row of their worker's name (the lead's role, ``s1/c2``, ``s1/c1/s1``). A
    later round's planning under way is its round's row, running; a nested worker's
    row comes after its caller's; a hive's calls are on its caller's row."""
    spans = [
        _span("r", "run", "task", 0.0, 9.0, status="running"),
        _span("p", "plan", "plan", 0.0, 1.0, parent="r"),
        _span("w", "worker", "s1", 1.0, 5.0, parent="r", worker="s1"),
        _span("m1", "model_call", "gpt", 1.5, 2.0, parent="t1", worker="s1/c1/s1"),
        _span("m2", "model_call", "gpt", 2.0, 2.5, parent="t2", worker="s1/c2"),
        _span("m3", "model_call", "gpt", 5.5, 6.0, parent="t3", worker="lead"),
    ]
    plan = [Subtask(id="s1", role="worker", instruction="go")]
    timeline = build_timeline(spans, plan, phases={"plan:2.1:0b7d44e2": "round 2"})
    rows = [(r.name, r.kind, r.parent, r.status, len(r.bars)) for r in timeline.rows]
    assert rows == [
        ("plan", "plan", None, "ok", 0),
        ("s1", "worker", None, "ok", 1),
        ("s1/c2", "worker", "s1", "running", 1),
        ("round 2", "plan", None, "running", 1),
    ]
    assert [r.round for r in timeline.rows] == [1, 1, 1, 2]


def test_the_calls_of_a_phase_a_life_left_cut_off_are_on_its_row() -> None:
    """A life whose process died while the lead (which plans and aggregates) merged
    left the calls of its aggregation under no kept span, and the resumed run's
    timeline drew them as a worker row of the role's name, counted as a worker,
    beside the aggregate row the next life kept. They are on the aggregate row: the
    phase the role's kept turns were in, that their life had not ended."""
    a, b = "aaaaaaaa0000000", "bbbbbbbb0000000"
    spans = [
        _span(f"{a}1", "plan", "plan", 0.0, 1.0, parent=f"{a}0"),
        _span(f"{a}2", "turn", "turn 1", 0.0, 1.0, parent=f"{a}1", worker="lead"),
        _span(f"{a}3", "worker", "s1", 1.0, 2.0, parent=f"{a}0", worker="s1"),
        _span(f"{a}4", "model_call", "gpt", 2.0, 2.5, parent=f"{a}5", worker="lead"),
        _span(f"{b}0", "run", "task", 5.0, 7.0),
        _span(f"{b}1", "aggregate", "aggregate", 5.0, 7.0, parent=f"{b}0"),
        _span(f"{b}2", "turn", "turn 1", 5.0, 7.0, parent=f"{b}1", worker="lead"),
        _span(f"{b}3", "model_call", "gpt", 5.0, 7.0, parent=f"{b}2", worker="lead"),
    ]
    plan = [Subtask(id="s1", role="worker", instruction="go")]
    timeline = build_timeline(spans, plan)
    rows = [(r.name, r.status, len(r.bars)) for r in timeline.rows]
    assert rows == [("plan", "ok", 0), ("s1", "ok", 0), ("aggregate", "ok", 2)]
    assert len(timeline.subtask_workers) == 1
