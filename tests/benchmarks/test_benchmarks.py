"""The benchmarks: a smoke run of every scenario and of the peers (correctness, not
timing), and the checks that make a run count only when the workload really ran."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import context
from benchmarks import evals as evals_benchmark
from benchmarks.fanout import (
    IMPORT_PROBE,
    OWN_PACKAGES,
    Samples,
    dependencies,
    evaluate,
    points,
)
from benchmarks.fanout import main as bench
from benchmarks.floor import run_floor
from benchmarks.peers.__main__ import main as peers_bench
from benchmarks.spec import Counts, Params, expected_observation, lookup_value, verdict
from benchmarks.workload import run_honeycomb
from honeycomb.cli.main import main as honeycomb_main
from tests.support import ROOT

SMALL = Params(n=3, k=3, t=2, lm=0.0, lt=0.0)


def _bench(*args: str, out: Path) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    """``honeycomb bench ...`` in a subprocess, with no API key: nothing may call out."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run(
        [sys.executable, "-m", "honeycomb", "bench", *args, "--out", str(out)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, check=False,
    )  # fmt: skip
    (lines,) = out.glob("*.jsonl")
    return done, [json.loads(line) for line in lines.read_text().splitlines()]


def test_the_smoke_run_measures_every_scenario_and_every_run_is_valid(tmp_path: Path) -> None:
    done, results = _bench("--smoke", out=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    table = done.stdout
    scenarios = ("A latency-bound", "E memory", "B overhead", "C tool parallelism",
                 "D side effects", "F observability", "G durability", "H context",
                 "J streaming",
                 "import time")  # fmt: skip
    for scenario in scenarios:
        assert f"| {scenario} |" in table
    assert "MISSED" not in table
    assert "INVALID" not in table
    contexts = [r for r in results if r["scenario"] == "H"]
    assert [r["impl"] for r in contexts] == list(context.IMPLS)
    assert all(r["valid"] for r in contexts)
    runs = [r for r in results if "model_calls" in r and r["scenario"] != "H"]
    assert {r["impl"] for r in runs} == {"honeycomb", "floor", "uvloop", "tracing off",
                                         "logging off", "store off", "both off",
                                         "streaming off", "deltas off"}  # fmt: skip
    assert "| uvloop |" in table  # A's column, uvloop being installed (the dev extra)
    assert "A also on uvloop" in done.stderr
    assert all(r["valid"] for r in runs)
    for r in runs:
        params = Params(**r["params"])
        assert (r["model_calls"], r["tool_calls"]) == (params.model_calls, params.tool_calls)
    assert {r["params"]["n"] for r in runs if r["scenario"] == "A"} == {1, 10}
    assert {r["params"]["n"] for r in runs if r["scenario"] == "E"} == {10}
    assert next(tmp_path.glob("*.jsonl")).with_suffix(".svg").is_file()


def test_a_is_timed_next_to_the_floor_in_each_process_and_memory_in_a_process_of_its_own() -> None:
    chosen = {(p.scenario, p.label): p for p in points(["A", "E"], [1000, 10000])}
    for n in (1000, 10000):
        a, e = chosen["A", f"N={n}"], chosen["E", f"N={n}"]
        assert a.paired
        assert a.impls == ("honeycomb", "floor")
        assert not e.paired  # each implementation's peak is its own process's
    assert chosen["A", "N=1000"].inner == 3
    assert chosen["A", "N=10000"].inner == 1


def test_the_peers_run_the_same_workload_through_their_own_loops(tmp_path: Path) -> None:
    done, results = _bench("--peers", "--smoke", out=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    header = next(line for line in done.stdout.splitlines() if line.startswith("| scenario"))
    for name in ("Honeycomb", "OpenAI Agents SDK", "LangGraph", "pydantic-ai"):
        assert name in header
    assert "INVALID" not in done.stdout
    impls = {r["impl"] for r in results}
    assert impls == {"floor", "honeycomb", "openai-agents", "langgraph", "pydantic-ai"}
    for r in results:
        params = Params(**r["params"])
        assert r["valid"], r
        assert (r["model_calls"], r["tool_calls"]) == (params.model_calls, params.tool_calls)


def test_an_unknown_peer_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command's own main(), in this process (honeycomb bench --peers runs in the
    smoke test's process)."""
    with pytest.raises(SystemExit) as exited:
        honeycomb_main(["bench", "--peers=crewai", "--out", str(tmp_path)])
    assert exited.value.code == 2
    assert "unknown peer 'crewai'" in capsys.readouterr().err


@pytest.mark.parametrize("run", [run_floor, run_honeycomb], ids=["floor", "honeycomb"])
def test_a_run_of_the_workload_is_valid(run: object) -> None:
    outcome = asyncio.run(run(SMALL))  # type: ignore[operator]
    assert outcome["valid"], outcome["problems"]
    assert (outcome["model_calls"], outcome["tool_calls"]) == (9, 12)


def test_a_model_that_saw_the_wrong_observations_makes_the_run_invalid() -> None:
    counts = Counts()
    counts.model_call(SMALL, worker=0, turn=1, seen=[])
    good = [expected_observation(0, 1, 0), expected_observation(0, 1, 1)]
    counts.model_call(SMALL, worker=0, turn=2, seen=good)
    assert counts.broken == []
    counts.model_call(SMALL, worker=0, turn=3, seen=good)  # turn 2's observations missing
    assert counts.broken
    assert "worker 0 turn 3" in counts.broken[0]
    outcome = verdict(SMALL, counts, ["done-0", "done-1", "done-2"])
    assert not outcome["valid"]
    assert "1 model calls saw wrong observations" in outcome["problems"]


def test_missing_calls_and_answers_make_the_run_invalid() -> None:
    counts = Counts()
    counts.model_calls, counts.tool_calls = SMALL.model_calls, SMALL.tool_calls
    assert verdict(SMALL, counts, ["done-0", "done-1", "done-2"])["valid"]
    problems = verdict(SMALL, counts, ["done-0", "done-2"])["problems"]
    assert problems == ["1 answers missing from the aggregate"]
    counts.tool_calls -= 1
    failure = RuntimeError("boom")
    problems = verdict(SMALL, counts, ["done-0", "done-1", "done-2"], [failure])["problems"]
    assert problems == ["1 workers failed, e.g. RuntimeError('boom')", "tool calls 11 != 12"]


def test_the_lookup_tool_returns_the_observation_its_key_names() -> None:
    assert lookup_value("4-2-1") == expected_observation(4, 2, 1) == "value-4-2-1"


def test_a_measuring_process_reports_its_own_peak_memory_not_its_parents() -> None:
    ballast = bytearray(300 * 1024 * 1024)  # this process: over 300 MB resident
    ballast[::4096] = b"\1" * len(range(0, len(ballast), 4096))
    probe = "from benchmarks.measure import _rss_mb; print(_rss_mb())"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=ROOT, check=True)  # fmt: skip
    assert 5 < float(done.stdout) < 150  # an interpreter with the standard library
    del ballast


def test_the_import_time_counts_everything_the_import_loads(tmp_path: Path) -> None:
    """The probe imports nothing before the module it times, so asyncio, pydantic and
    the rest are counted (a probe inside the measuring process had them loaded)."""
    (tmp_path / "probe_target.py").write_text(
        "import sys\nopen(sys.argv[-1] + '.seen', 'w').write('\\n'.join(sorted(sys.modules)))\n"
    )
    subprocess.run([sys.executable, "-c", IMPORT_PROBE, "probe_target"], cwd=tmp_path,
                   check=True, capture_output=True)  # fmt: skip
    seen = set((tmp_path / "probe_target.seen").read_text().split())
    assert seen.isdisjoint({"asyncio", "json", "pydantic", "typing", "dataclasses", "honeycomb"})


def test_the_import_is_timed_next_to_its_dependencies_imported_alone() -> None:
    """The same modules ``import honeycomb`` loads, without Honeycomb's own."""
    loaded = dependencies(sys.executable)
    assert {"asyncio", "anyio", "pydantic", "pydantic._internal._model_construction"} <= set(loaded)
    assert not [name for name in loaded if name.partition(".")[0] in OWN_PACKAGES]
    (point,) = points(["I"], [1])
    assert point.paired


def test_the_import_target_judges_the_ratio_of_neighbouring_tries() -> None:
    """Honeycomb's own share of the import, not the machine's moment: the ratio of
    tries that ran next to each other, whatever the absolute times."""
    (point,) = points(["I"], [1])
    mine, theirs = [0.25, 0.36, 0.36], [0.30, 0.30, 0.32]  # in the order they ran
    runs = {"import": [{"import_s": min(mine), "tries_s": mine}],
            "its dependencies": [{"import_s": min(theirs), "tries_s": theirs}]}  # fmt: skip
    (row,) = evaluate([Samples(point, runs)])
    assert row.met is True
    assert row.paired_ratio == pytest.approx(1.125)  # 0.83, 1.2, 1.125: not 0.25 / 0.30
    runs["import"] = [{"import_s": 0.35, "tries_s": [0.35]}]
    runs["its dependencies"] = [{"import_s": 0.34, "tries_s": [0.34]}]
    (row,) = evaluate([Samples(point, runs)])
    assert row.met is True  # 350 ms on a slow moment, but only 3% above its dependencies
    runs["import"] = [{"import_s": 0.20, "tries_s": [0.20]}]
    runs["its dependencies"] = [{"import_s": 0.15, "tries_s": [0.15]}]
    (row,) = evaluate([Samples(point, runs)])
    assert row.met is False  # fast, but 1.33x what it must import


def test_the_context_scenario_meets_its_targets() -> None:
    """Counts, not timings: the same on any machine, so judged in the tests too."""
    results = context.measure()
    assert all(check.met for check in context.targets(results)), context.table(results)
    by = {r["impl"]: r for r in results}
    whole, window = by["whole transcript"], by["window only"]
    assert whole["largest_request_tokens"] > context.BUDGET_TOKENS  # the budget binds
    assert window["largest_request_tokens"] <= context.BUDGET_TOKENS
    assert window["facts_retained"] < 0.9  # what the window cuts, the summary keeps
    assert by["compaction"]["summary_calls"] > 0


def test_a_fact_lost_by_the_summary_is_a_missed_target() -> None:
    results = context.measure()
    for result in results:
        if result["impl"] == "compaction":
            result["facts_retained"] = 0.8
    checks = {c.name: c.met for c in context.targets(results)}
    assert checks == {
        "input tokens <= 35% of the whole transcript": True,
        f"no request over the budget ({context.BUDGET_TOKENS:,})": True,
        "planted facts retained at turn 60 >= 90%": False,
    }


def test_a_switched_pair_keeps_each_side_its_own_params_in_either_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Repeats alternate which side goes first: the params must follow the side."""
    from benchmarks import fanout

    sent: list[dict[str, Any]] = []

    def spawn(spec: dict[str, Any], python: str, point: Any) -> list[dict[str, Any]]:
        sent.append(spec)
        return [{} for _ in spec["pair"]]

    monkeypatch.setattr(fanout, "_spawn", spawn)
    point = next(p for p in points(["J"], [1]) if p.label == "B, streamed")
    for impls in (point.impls, point.impls[::-1]):
        results = fanout.measure(point, impls, "python")
        assert [r["impl"] for r in results] == list(impls)
        variants = sent[-1]["variants"]
        streamed = {i: v.get("stream", False) for i, v in zip(impls, variants, strict=True)}
        assert streamed == {"honeycomb": True, "streaming off": False}


def test_a_at_1000_on_uvloop_is_judged_against_the_ideal_not_the_floor() -> None:
    (point,) = points(["A"], [1000], uvloop=True)
    assert point.impls == ("honeycomb", "floor", "uvloop")  # in the same processes
    ideal = Params(n=1000).ideal_s  # 0.19 s

    def runs(uvloop_s: float) -> dict[str, list[dict[str, float]]]:
        return {"honeycomb": [{"wall_s": 0.65}], "floor": [{"wall_s": 0.6}],
                "uvloop": [{"wall_s": uvloop_s}]}  # fmt: skip

    a, on_uvloop = evaluate([Samples(point, runs(2.4 * ideal))])
    assert a.uvloop is not None
    assert a.uvloop.median == pytest.approx(2.4 * ideal)
    assert on_uvloop.scenario == "A on uvloop"
    assert on_uvloop.ideal_ratio == pytest.approx(2.4)
    assert on_uvloop.met is True
    _, on_uvloop = evaluate([Samples(point, runs(2.6 * ideal))])
    assert on_uvloop.met is False  # within 1.1x of the floor, but 2.6x the ideal


def smoke(name: str, out: Path) -> tuple[str, list[dict[str, Any]]]:
    """Run ``python -m benchmarks.<name> --smoke``, which must succeed: what it printed,
    and the JSON lines of its results."""
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", "--smoke", "--out", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (lines,) = out.glob(f"{name}-*.jsonl")
    return done.stdout, [json.loads(line) for line in lines.read_text().splitlines()]


def test_the_goodput_smoke_runs_both_implementations_against_every_kind_of_quota(
    tmp_path: Path,
) -> None:
    printed, results = smoke("goodput", tmp_path)
    assert {(r["headers"], r["impl"]) for r in results} == {
        (headers, impl) for headers in ("x-ratelimit", "retry-after", "bare")
        for impl in ("honeycomb", "openai client")
    }  # fmt: skip
    for r in results:
        if r["impl"] == "honeycomb" and r["headers"] == "x-ratelimit":
            # Paced by the headers: nothing fails, every turn is answered. Told only by
            # 429s, how many attempts a worker spends depends on when a busy machine
            # lets each start (the full run judges that: docs/rate-limits.md).
            assert r["failed_workers"] == 0, r
            assert r["answers"] - r["throttled"] == 100  # 20 workers x 5 turns, all answered
        if r["impl"] == "honeycomb":
            assert r["model_calls"] > 0, r
        assert r["lower_bound_s"] > 0  # the quota binds, even this small
    assert "| x-ratelimit | honeycomb |" in printed


@pytest.mark.xdist_group("ray")
async def test_the_ray_smoke_runs_each_workload_on_both_backends(
    ray_session: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the session's Ray (``--smoke`` in a process of its own starts a Ray of its own)."""
    from benchmarks import on_ray

    assert await on_ray.main(on_ray.SMOKE_N, on_ray.SMOKE_N, 2, smoke=True) == 0
    out = capsys.readouterr().out
    assert "CPU-heavy A, N=20, 2 actors" in out  # every worker checked, on both backends
    assert "A, N=20: local" in out
    assert "ms of CPU a subtask" in out
    assert "MISSED" not in out  # a smoke run judges no target


@pytest.mark.real_model
@pytest.mark.xdist_group("real_model")
def test_the_real_model_smoke_runs_honeycomb_the_gather_and_serial_on_the_same_bodies(
    tmp_path: Path,
) -> None:
    printed, records = smoke("real_model", tmp_path)
    runs = [r for r in records if "impl" in r]
    assert sorted(r["impl"] for r in runs) == ["gather", "honeycomb", "serial"]
    assert all(r["tokens"] == 4 * 4 for r in runs)  # 4 workers, 4 tokens each, every run
    assert all(r["busy"]["readings"] > 0 for r in runs)
    assert {"ratio", "speedup", "load"} <= set(records[-1])
    assert "| Honeycomb |" in printed
    assert "MISSED" not in printed  # a smoke run judges no target


def test_the_evals_benchmark_scores_every_case_and_measures_its_overhead() -> None:
    """Its figures, small: every case passes, and each figure is there."""
    found = evals_benchmark.measure(cases=20, concurrency=4, store=True)
    assert found["cases"] == 20
    assert found["store"] is True
    assert found["scoring_ms_per_case"] > 0
    assert len(found["report_bytes"]) == 3


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (["--scenario", "Z"], "--scenario: takes scenarios among A,B,C,D,E,F,G,H,I,J"),
        (["--sizes", "abc"], "--sizes: takes whole numbers of at least 1"),
        (["--sizes", "0,10"], "--sizes: takes whole numbers of at least 1"),
        (["--repeats", "0"], "--repeats: takes a whole number of at least 1, not '0'"),
        (["--from", "nowhere.jsonl"], "--from: no such file: nowhere.jsonl"),
        (["--peers", "--scenario", "C"], "--scenario: takes scenarios among A,B,"),
        (["--peers", "--repeats", "0"], "--repeats: takes a whole number of at least 1, not '0'"),
    ],
)
def test_a_bench_option_out_of_its_range_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: list[str], said: str
) -> None:
    # --scenario Z measured nothing and wrote an empty results file (--peers: a table
    # of 0 runs); --sizes abc, --repeats 0 and --from of no file ended in a traceback.
    command = peers_bench if given[0] == "--peers" else bench
    with pytest.raises(SystemExit) as exited:
        command([*given[given[0] == "--peers" :], "--out", str(tmp_path / "out")])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    prog = "honeycomb bench --peers" if command is peers_bench else "honeycomb bench"
    assert f"{prog}: error: argument {said}" in err
    assert err.count("\n") == 1
    assert not (tmp_path / "out").exists()
