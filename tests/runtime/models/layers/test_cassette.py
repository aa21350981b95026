"""The cassette layers alone, around a fake model: what is recorded, how a request is
matched, streamed replay, mismatches, and cassette files that are not right."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import msgspec
import pytest

from runtime.errors import CassetteError, CassetteMismatch, ModelError, ModelHTTPError
from runtime.limits.spending import paid_by, payer
from runtime.messages import AssistantMessage, ToolCall, ToolMessage, Usage, UserMessage
from runtime.model import ModelRequest, ModelResponse, TextSink, ToolSchema
from runtime.models.cassettes import Cassette, CassetteWriter
from runtime.models.layers import cost_cap
from runtime.models.layers.cassette import RecordingModel, ReplayModel, cassette, cassette_case
from runtime.models.layers.cassette_embeddings import RecordingEmbeddings, ReplayEmbeddings
from runtime.models.pricing import Price, PricedModel
from runtime.secrets import add_secret
from runtime.testing import FunctionModel


def ask(text: str, *, worker: str = "s1", tools: tuple[str, ...] = ()) -> ModelRequest:
    return ModelRequest(
        messages=(UserMessage(content=text),),
        tools=tuple(ToolSchema(name=name) for name in tools),
        conversation=f"run1/{worker}",
    )


def echo() -> FunctionModel:
    """Answers with what it was asked and how many calls it has had."""
    calls: list[int] = []

    def answer(request: ModelRequest) -> str:
        calls.append(1)
        return f"{request.messages[-1].content} #{len(calls)}"

    return FunctionModel(answer)


async def test_a_streamed_call_replays_in_the_pieces_it_came_in(tmp_path: Path) -> None:
    tape = tmp_path / "t.jsonl"
    recording = cassette(echo(), record=tape)
    shown: list[str] = []
    recorded = await recording.stream(ask("one two three"), shown.append)  # type: ignore[attr-defined]
    replaying = cassette(echo(), replay=tape)
    again: list[str] = []
    replayed = await replaying.stream(ask("one two three"), again.append)  # type: ignore[attr-defined]
    assert replayed == recorded
    assert again == shown
    assert len(shown) > 1


async def test_a_call_recorded_whole_streams_its_text_at_once(tmp_path: Path) -> None:
    tape = tmp_path / "t.jsonl"
    await cassette(echo(), record=tape).complete(ask("hello"))
    shown: list[str] = []
    replayed = await cassette(echo(), replay=tape).stream(ask("hello"), shown.append)  # type: ignore[attr-defined]
    assert shown == ["hello #1"] == [replayed.message.content]


async def test_tool_call_ids_and_run_ids_do_not_count_and_times_of_day_are_one(
    tmp_path: Path,
) -> None:
    def turn(call_id: str, stamp: str, run: str) -> ModelRequest:
        return ModelRequest(
            messages=(
                UserMessage(content="send it"),
                AssistantMessage(tool_calls=(ToolCall(id=call_id, name="send"),)),
                ToolMessage(tool_call_id=call_id, name="send", content=f"outbox/{stamp}-x.md"),
            ),
            conversation=f"{run}/s1",
        )

    tape = tmp_path / "t.jsonl"
    await cassette(echo(), record=tape).complete(turn("call_abc", "20261202-103737-625318", "r1"))
    replayed = await cassette(echo(), replay=tape).complete(
        turn("call_xyz", "20270101-000000-000001", "r2")
    )
    assert replayed.message.content is not None


async def test_identical_requests_are_answered_by_their_own_worker_whatever_the_order(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "t.jsonl"
    recording = cassette(echo(), record=tape)
    first = await recording.complete(ask("same", worker="s1"))
    second = await recording.complete(ask("same", worker="s2"))
    assert first.message.content != second.message.content
    replaying = cassette(echo(), replay=tape)
    assert await replaying.complete(ask("same", worker="s2")) == second
    assert await replaying.complete(ask("same", worker="s1")) == first
    # Asked more often than recorded: the recorded answers again, in the same order.
    assert await replaying.complete(ask("same", worker="s1")) == first
    assert await replaying.complete(ask("same", worker="s3")) == first


async def test_a_case_prefers_what_was_recorded_for_it(tmp_path: Path) -> None:
    tape = tmp_path / "t.jsonl"
    recording = cassette(echo(), record=tape)
    with cassette_case("a"):
        in_a = await recording.complete(ask("same"))
    with cassette_case("b"):
        in_b = await recording.complete(ask("same"))
    replaying = cassette(echo(), replay=tape)
    with cassette_case("b"):
        assert await replaying.complete(ask("same")) == in_b
    with cassette_case("a"):
        assert await replaying.complete(ask("same")) == in_a


async def test_a_request_not_recorded_names_the_worker_case_and_first_difference(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "t.jsonl"
    await cassette(echo(), record=tape).complete(ask("weather in Lisbon", tools=("weather",)))
    replaying = cassette(echo(), replay=tape)
    with cassette_case("trip"), pytest.raises(CassetteMismatch) as raised:
        await replaying.complete(ask("weather in Lisbon", worker="s2", tools=("forecast",)))
    error = raised.value
    assert (error.file, error.model, error.worker, error.case) == (
        str(tape),
        "default",
        "s2",
        "trip",
    )
    assert error.difference.startswith("tools: recorded ['weather'], asked ['forecast']")
    with pytest.raises(CassetteMismatch) as raised:
        await replaying.complete(ask("weather in Lisbin", tools=("weather",)))
    assert raised.value.difference == (
        "message 1 (user), content: at character 16: recorded 'weather in Lisbon', "
        "asked 'weather in Lisbin' (recorded for worker 's1')"
    )


def schema(day: str) -> ToolSchema:
    """A tool whose argument schema is longer than a difference shows whole."""
    properties = {
        "city": {"type": "string", "description": "The name of the city to look up."},
        "day": {"type": "string", "description": day},
    }
    return ToolSchema(name="weather", parameters={"type": "object", "properties": properties})


async def test_a_long_value_that_differs_is_shown_where_it_does(tmp_path: Path) -> None:
    tape = tmp_path / "t.jsonl"
    asked = msgspec.structs.replace(ask("weather?"), tools=(schema("Which day of the weekend."),))
    await cassette(echo(), record=tape).complete(asked)
    changed = msgspec.structs.replace(asked, tools=(schema("Which day of the week."),))
    with pytest.raises(CassetteMismatch) as raised:
        await cassette(echo(), replay=tape).complete(changed)
    assert raised.value.difference == (
        "tool 'weather', parameters: at character 165 of its JSON: recorded ..."
        'iption":"Which day of the weekend."}}}, asked ...iption":"Which day of the week."}}} '
        "(recorded for worker 's1')"
    )


async def test_a_model_the_cassette_never_recorded_is_named(tmp_path: Path) -> None:
    tape = tmp_path / "t.jsonl"
    await cassette({"fast": echo()}, record=tape)["fast"].complete(ask("hi"))
    with pytest.raises(
        CassetteMismatch, match=r"holds no call of model 'slow' \(its models: fast\)"
    ):
        await ReplayModel(tape, name="slow").complete(ask("hi"))


async def test_secrets_never_enter_a_cassette(tmp_path: Path) -> None:
    add_secret("sk-live-0123456789abcdef", "api key")
    tape = tmp_path / "t.jsonl"
    leaky = FunctionModel(lambda request: "the key is sk-live-0123456789abcdef")
    await cassette(leaky, record=tape).complete(ask("key? sk-live-0123456789abcdef"))
    written = tape.read_text()
    assert "sk-live-0123456789abcdef" not in written
    assert "[api key hidden]" in written


async def test_a_secret_streamed_across_pieces_never_enters_a_cassette(tmp_path: Path) -> None:
    add_secret("sk-live-0123456789abcdef", "api key")
    tape = tmp_path / "t.jsonl"

    class Splitting(FunctionModel):
        async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
            on_text("the key is sk-live-01234")  # a token at a time, the key in two
            on_text("56789abcdef, kept")
            return await self.complete(request)

    model = Splitting(lambda request: "the key is sk-live-0123456789abcdef, kept")
    await cassette(model, record=tape).stream(ask("key?"), [].append)  # type: ignore[attr-defined]
    written = tape.read_text()
    assert "sk-live-01234" not in written
    replayed: list[str] = []
    await cassette(echo(), replay=tape).stream(ask("key?"), replayed.append)  # type: ignore[attr-defined]
    assert "".join(replayed) == "the key is [api key hidden], kept"


async def test_a_replay_costs_what_the_recorded_model_charged(tmp_path: Path) -> None:
    tape = tmp_path / "t.jsonl"
    price = Price(input_per_mtok=1.0, output_per_mtok=2.0)
    recorded = await RecordingModel(PricedModel(echo(), price), tape).complete(ask("hi"))
    replaying = ReplayModel(tape)
    assert cost_cap.price_of(replaying) == price
    assert (await replaying.complete(ask("hi"))).usage == recorded.usage
    assert recorded.usage.cost > 0


def test_a_cassette_is_recorded_or_replayed_not_both(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not both"):
        cassette(echo(), record=tmp_path / "a", replay=tmp_path / "b")


async def test_a_replay_needs_only_the_models_names(tmp_path: Path) -> None:
    tape = tmp_path / "t.jsonl"
    recorded = await cassette({"gpt": echo()}, record=tape)["gpt"].complete(ask("hi"))
    replaying = cassette({"gpt": "a model that cannot be built here"}, replay=tape)
    assert await replaying["gpt"].complete(ask("hi")) == recorded
    with pytest.raises(TypeError, match="'gpt' is 'spec', not a model to record"):
        cassette({"gpt": "spec"}, record=tape)  # type: ignore[dict-item]


HEADER = '{"kind": "cassette", "version": 1}\n'


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, r"t\.jsonl: cannot read: No such file"),
        ("", r"t\.jsonl: empty: not a cassette"),
        ('{"kind": "model", "name": "m"}\n', r"t\.jsonl:1: not a cassette: its first line is not"),
        (
            HEADER + '{"kind": "call", "model": 3}\n',
            r"t\.jsonl:2: not a line of a cassette: .*\$\.model",
        ),
        (HEADER + "not json\n", r"t\.jsonl:2: not a line of a cassette: JSON is malformed"),
        (HEADER + '{"kind": "tape"}\n', r"t\.jsonl:2: not a line of a cassette: .*'tape'"),
        ('{"kind": "cassette", "version": 9}\n', r"t\.jsonl:1: a cassette of version 9;"),
    ],
    ids=["missing", "empty", "no header", "bad field", "not json", "unknown kind", "version"],
)
def test_a_cassette_file_that_is_not_right_is_named_with_its_line(
    tmp_path: Path, content: str | None, said: str
) -> None:
    tape = tmp_path / "t.jsonl"
    if content is not None:
        tape.write_text(content)
    with pytest.raises(CassetteError, match=said) as raised:
        Cassette(tape)
    assert raised.value.file == str(tape)


async def test_a_recorded_call_reads_back_as_it_was_asked(tmp_path: Path) -> None:
    tape = tmp_path / "t.jsonl"
    with cassette_case("c1"):
        await cassette({"m": echo()}, record=tape)["m"].complete(ask("hi", worker="s7"))
    (call,) = Cassette(tape).calls
    assert (call.model, call.worker, call.case, call.pieces) == ("m", "s7", "c1", None)
    assert call.request.conversation is None  # its run id is not kept
    assert msgspec.structs.replace(ask("hi"), conversation=None) == call.request


class Ledger:
    """A payer that keeps what it is told."""

    def __init__(self) -> None:
        self.told: list[tuple[str, Usage, str | None]] = []

    def check(self) -> None:
        pass

    def spent(self, model: str, usage: Usage, duration_s: float, error: str | None) -> None:
        self.told.append((model, usage, error))


class Flaky:
    """Embeddings whose first attempt at each call times out (charged) and whose
    second answers; texts with "down" fail at both."""

    name = "embed-small:4"
    price = Price(input_per_mtok=10.0, output_per_mtok=0.0)

    def __init__(self) -> None:
        self.calls = 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        who = payer()
        assert who is not None
        who.spent(self.name, Usage(input_tokens=3), 0.5, "ModelTimeout: 0.5s")
        if any("down" in text for text in texts):
            raise ModelHTTPError(503, model=self.name)
        who.spent(self.name, Usage(input_tokens=2, cost=0.01), 0.1, None)
        return [[float(len(text)), 0.5, -1.25, 1e-7] for text in texts]


async def test_embeddings_are_replayed_with_their_vectors_spending_and_failures(
    tmp_path: Path,
) -> None:
    tape, inner = tmp_path / "t.jsonl", Flaky()
    writer = CassetteWriter(tape)
    recording, recorded = RecordingEmbeddings(inner, writer), Ledger()
    with paid_by(recorded):
        vectors = await recording.embed(["Lisbon trams", "at 2026-12-02T10:37:37Z"])
        with pytest.raises(ModelHTTPError):
            await recording.embed(["the endpoint is down"])
    replaying, replayed = ReplayEmbeddings(Cassette(tape), "embed-small:4"), Ledger()
    assert replaying.price == inner.price  # a budget in dollars counts them alike
    with paid_by(replayed):
        assert await replaying.embed(["Lisbon trams", "at 2026-12-03T08:00:00Z"]) == vectors
        with pytest.raises(ModelHTTPError) as failed:  # as its caller was told then
            await replaying.embed(["the endpoint is down"])
    assert (failed.value.status, failed.value.model) == (503, "embed-small:4")
    assert replayed.told == recorded.told
    assert len(replayed.told) == 3
    assert inner.calls == 2  # the replay called nothing
    with pytest.raises(CassetteMismatch) as mismatch:
        await replaying.embed(["Lisbon trains"])
    assert str(mismatch.value) == (
        f"{tape}: a call of embeddings 'embed-small:4' that the cassette did not record: "
        "text 1: at character 11: recorded 'Lisbon trams', asked 'Lisbon trains'; record "
        "it again if the change is meant"
    )
    with pytest.raises(CassetteError, match="its embeddings: 'embed-small:4'"):
        ReplayEmbeddings(Cassette(tape), "embed-large")


async def test_an_embeddings_failure_a_cassette_kept_as_text_replays_as_before(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "t.jsonl"  # as recorded before a failure's class was kept
    embed = {"kind": "embed", "embeddings": "e", "texts": ["down"], "error": "ModelTimeout: 5s"}
    tape.write_text(
        HEADER + '{"kind": "embeddings", "name": "e"}\n' + msgspec.json.encode(embed).decode()
    )
    with pytest.raises(ModelError, match=r"^\(as recorded\) ModelTimeout: 5s$"):
        await ReplayEmbeddings(Cassette(tape), "e").embed(["down"])


async def test_the_run_folder_is_written_as_cwd_only_where_it_stands_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "ci").mkdir()
    tape, app = tmp_path / "t.jsonl", tmp_path / "app"
    said = f"see {app}/notes.md,\n{app}/a.md and {app}, not {app}le/x nor example.com{app}/x"
    monkeypatch.chdir(app)
    await cassette(FunctionModel(lambda request: said), record=tape).complete(ask("where?"))
    written = tape.read_text()
    assert "see <cwd>/notes.md,\\n<cwd>/a.md and <cwd>, not " in written
    assert f"not {app}le/x nor example.com{app}/x" in written
    monkeypatch.chdir(tmp_path / "ci")  # replayed in another clone
    replayed = await cassette(echo(), replay=tape).complete(ask("where?"))
    ci = tmp_path / "ci"
    assert replayed.message.content == (
        f"see {ci}/notes.md,\n{ci}/a.md and {ci}, not {app}le/x nor example.com{app}/x"
    )
