"""``--record`` and ``--replay`` of a hive whose memory embeds through an endpoint (the
local OpenAI-compatible server): ``honeycomb eval`` and ``honeycomb run`` replay with
the endpoint asked nothing, spending what the recording spent."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from honeycomb.cli import main
from honeycomb.cli.exits import ExitStatus
from runtime.models.cassettes import Cassette
from tests.support.evals import write
from tests.support.openai_server import OpenAIServer

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("sqlite_vec")]

HIVE = """
name: remembering
models:
  offline: {provider: offline, latency: 0}
memory:
  path: memory.db
  embeddings: {model: embed-small, base_url: "URL", api_key: sk-test,
               price: {input_per_mtok: 1000}}
roles:
  planner:
    description: Splits the request into subtasks.
  writer:
    description: Writes a short answer.
    memory: {recall: 2, store_result: true}
  aggregator:
    description: Merges the results.
planner: planner
aggregator: aggregator
"""

CASES = """
name: greetings
cases:
  - id: lisbon
    task: Say hello to Lisbon
    assert: [{contains: Lisbon}]
  - id: oslo
    task: Say hello to Oslo
    assert: [{contains: Oslo}]
"""

NOBODY = "http://127.0.0.1:9/v1"
"""An endpoint nobody serves."""


@pytest.fixture
def sqlite_vec() -> None:
    pytest.importorskip("sqlite_vec")


def hive_at(folder: Path, url: str) -> None:
    write(folder, "hive.yaml", HIVE.replace("URL", url))


def run_figures(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (a["status"], a["passed"], a["tokens"], a["cost"], a["model_calls"], a["verdicts"])
        for case in report["cases"]
        for a in case["attempts"]
    ]


def test_an_eval_replays_its_memorys_embeddings_with_no_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "evals.yaml", CASES)
    args = ["eval", "hive.yaml", "evals.yaml", "--plain", "--no-store", "--json"]
    with OpenAIServer() as server:
        hive_at(tmp_path, server.base_url)
        assert main([*args, "--record", "calls.jsonl"]) == ExitStatus.OK
        recorded = json.loads(capsys.readouterr().out)
        asked = len(server.requests)
        assert asked > 0
        hive_at(tmp_path, NOBODY)  # the hive's endpoint is gone: the cassette answers
        assert main([*args, "--replay", "calls.jsonl"]) == ExitStatus.OK
        replayed = json.loads(capsys.readouterr().out)
        assert len(server.requests) == asked
    assert run_figures(replayed) == run_figures(recorded)
    assert recorded["totals"]["cost"] > 0  # the embeddings' price
    assert {call.case for call in Cassette(tmp_path / "calls.jsonl").embedded} == {
        "lisbon",
        "oslo",
    }
    assert not (tmp_path / "memory.db").exists()  # an eval's memories are its own


def test_a_run_replays_its_memorys_embeddings_with_no_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["run", "hive.yaml", "Say hello to Lisbon", "--no-store", "--json"]
    with OpenAIServer() as server:
        hive_at(tmp_path, server.base_url)
        assert main([*args, "--record", "run.jsonl"]) == ExitStatus.OK
        recorded = capsys.readouterr().out.splitlines()
        asked = len(server.requests)
        # Replayed where the hive's embeddings are OpenAI's, and there is no key.
        hive_text = (tmp_path / "hive.yaml").read_text()
        keyless = hive_text.replace(f'base_url: "{server.base_url}", api_key: sk-test,', "")
        assert keyless != hive_text
        write(tmp_path, "hive.yaml", keyless)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        assert main([*args, "--replay", "run.jsonl"]) == ExitStatus.OK
        replayed = capsys.readouterr().out.splitlines()
        assert len(server.requests) == asked
    ended, again = json.loads(recorded[-1]), json.loads(replayed[-1])
    assert again["result"]["answer_text"] == ended["result"]["answer_text"]
    assert again["result"]["usage"] == ended["result"]["usage"]
    assert ended["result"]["usage"]["cost"] > 0
    assert not (tmp_path / "memory.db").exists()  # recorded and replayed on its own


REMEMBERING_CHAT = """\
name: chatty
models:
  offline: {provider: offline, latency: 0}
memory: {path: memory.db}
roles:
  planner:
    description: Splits requests into subtasks.
  researcher:
    description: Finds facts about cities and their weather.
    memory: {recall: 2, store_result: true}
  aggregator:
    description: Merges the findings.
"""


def test_a_chat_with_memory_recorded_replays_in_the_same_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "hive.yaml", REMEMBERING_CHAT)
    said = "".join(f"{line}\n" for line in ["Find the weather in Rome.", "And in Rome again?"])

    def chat(*options: str) -> tuple[int, str, str]:
        monkeypatch.setattr("sys.stdin", io.StringIO(said))
        code = main(["chat", "hive.yaml", "--plain", "--no-store", *options])
        out, err = capsys.readouterr()
        return code, out, err

    code, recorded, _ = chat("--record", "chat.jsonl")
    assert code == ExitStatus.OK
    # The second message recalled what the first kept, in the chat's own memory.
    code, replayed, err = chat("--replay", "chat.jsonl")
    assert code == ExitStatus.OK, replayed
    assert "CassetteMismatch" not in replayed
    assert replayed.count("[offline simulation]") == recorded.count("[offline simulation]") == 2
    assert "the memory is this command's own (the hive's memory files" in err
    assert not (tmp_path / "memory.db").exists()


@pytest.mark.xdist_group("ray")
@pytest.mark.usefixtures("ray_session")
def test_a_run_on_ray_replays_its_memorys_embeddings_with_no_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["run", "hive.yaml", "Say hello to Lisbon", "--no-store", "--json"]
    on_ray = "backend: {ray: {actors: 1, actor_cpus: 0}}\n"
    with OpenAIServer() as server:
        write(tmp_path, "hive.yaml", HIVE.replace("URL", server.base_url) + on_ray)
        assert main([*args, "--record", "run.jsonl"]) == ExitStatus.OK
        recorded = capsys.readouterr().out.splitlines()
        asked = len(server.requests)
        write(tmp_path, "hive.yaml", HIVE.replace("URL", NOBODY) + on_ray)
        assert main([*args, "--replay", "run.jsonl"]) == ExitStatus.OK
        replayed = capsys.readouterr().out.splitlines()
        assert len(server.requests) == asked
    ended, again = json.loads(recorded[-1]), json.loads(replayed[-1])
    assert again["result"]["answer_text"] == ended["result"]["answer_text"]
    assert again["result"]["usage"] == ended["result"]["usage"]
    assert ended["result"]["usage"]["cost"] > 0
    assert {call.worker for call in Cassette(tmp_path / "run.jsonl").calls} >= {"s1"}


def test_a_replay_of_a_cassette_without_the_memorys_embeddings_exits_2_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "hive.yaml", HIVE.replace("URL", NOBODY))
    old = tmp_path / "old.jsonl"  # as a cassette recorded before embeddings were
    old.write_text('{"kind":"cassette","version":1}\n{"kind":"model","name":"offline"}\n')
    for command in (["run", "hive.yaml", "Say hello"], ["eval", "hive.yaml", "evals.yaml"]):
        write(tmp_path, "evals.yaml", CASES)
        code = main([*command, "--plain", "--no-store", "--replay", str(old)])
        err = capsys.readouterr().err
        assert code == ExitStatus.UNUSABLE, err
        assert "Traceback" not in err
        assert (
            f"{old}: the run's memory embeds with 'embed-small', whose calls the cassette "
            "did not record (its embeddings: none): record it again"
        ) in err
