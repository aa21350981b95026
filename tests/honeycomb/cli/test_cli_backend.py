"""The command line's backend: ``--backend`` and ``--ray-address`` over the hive's
``backend:``, what it says, and a run on a real local Ray that the command starts and
stops (a subprocess: the command's own Ray, not the test process's)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from honeycomb import ConfigError
from honeycomb.cli.backend import chosen_backend, pool_running
from honeycomb.cli.main import _parser, main
from honeycomb.hive import load_hive
from honeycomb.hive.backend import BackendSpec
from runtime.secrets import masked
from tests.support.ray_head import answering

ray = pytest.importorskip("ray")

HIVE = """\
models:
  default: {provider: offline, latency: 0}
roles:
  planner:
    description: Splits the request into subtasks for the researcher.
  researcher:
    description: Looks up facts about cities.
    instructions: Look up every city named, then say briefly what you found.
    tools: [pid_tools:city_facts]
    max_turns: 3
  aggregator:
    description: Merges the results into the final answer.
planner: planner
aggregator: aggregator
"""

TOOLS = '''\
"""A tool next to the hive that says which process ran it."""

import os
from pathlib import Path

from honeycomb import tool


@tool
def city_facts(city: str) -> str:
    """Look up facts about a city.

    Args:
        city: The city.
    """
    with open(Path(__file__).with_name("pids"), "a") as out:
        out.write(f"{os.getpid()}\\n")
    return f"{city}: looked up in process {os.getpid()}"
'''

TASK = "Look up facts about Lisbon and Oslo."


def hive(tmp_path: Path, backend: str = "") -> Path:
    (tmp_path / "pid_tools.py").write_text(TOOLS)
    path = tmp_path / "hive.yaml"
    path.write_text(HIVE + textwrap.dedent(backend))
    return path


def chosen(backend: str | dict[str, Any], *argv: str) -> BackendSpec:
    """The backend ``honeycomb run hive.yaml ARGV`` runs on, for a hive with ``backend``."""
    args = _parser().parse_args(["run", "hive.yaml", *argv])
    spec = BackendSpec.model_validate({} if backend == "local" else {"ray": backend})
    return chosen_backend(spec, args)


def no_ray_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(**options: Any) -> None:
        raise AssertionError(f"Ray was started: {options}")

    monkeypatch.setattr(ray, "init", refuse)


# --- parsing and the order of overrides -----------------------------------------------------


@pytest.mark.parametrize("command", [["run", "hive.yaml"], ["resume", "abc"], ["demo"]])
def test_the_commands_that_run_a_hive_take_the_backend_flags(command: list[str]) -> None:
    args = _parser().parse_args([*command, "--backend", "ray", "--ray-address", "head:6379"])
    assert (args.backend, args.ray_address) == ("ray", "head:6379")
    args = _parser().parse_args(command)
    assert (args.backend, args.ray_address) == (None, None)


def test_an_unknown_backend_is_refused_with_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["run", "hive.yaml", "--backend", "dask"])
    assert "invalid choice: 'dask' (choose from 'local', 'ray')" in capsys.readouterr().err


def test_without_flags_the_hive_s_backend_runs() -> None:
    assert chosen("local").name == "local"
    declared = chosen({"actors": 3})
    assert declared.ray is not None
    assert declared.ray.actors == 3


def test_backend_local_overrides_the_hive_s_ray() -> None:
    assert chosen({"actors": 3}, "--backend", "local").ray is None


def test_backend_ray_keeps_the_hive_s_ray_settings_or_takes_the_defaults() -> None:
    kept = chosen({"actors": 3, "num_cpus": 1}, "--backend", "ray")
    assert kept.ray is not None
    assert (kept.ray.actors, kept.ray.num_cpus, kept.ray.address) == (3, 1, None)
    defaults = chosen("local", "--backend", "ray")
    assert defaults.ray is not None
    assert (defaults.ray.actors, defaults.ray.address) == (2, None)


def test_ray_address_implies_ray_and_overrides_the_hive_s_address() -> None:
    on_local = chosen("local", "--ray-address", "head:6379")
    assert on_local.ray is not None
    assert on_local.ray.address == "head:6379"
    declared = {"address": "old:1", "actors": 4, "runtime_env": {"env_vars": {"A": "b"}}}
    moved = chosen(declared, "--ray-address", "ray://new:10001")
    assert moved.ray is not None
    assert moved.ray.address == "ray://new:10001"
    assert (moved.ray.actors, moved.ray.runtime_env) == (4, {"env_vars": {"A": "b"}})
    # A local Ray's CPUs are not a cluster's: the hive's num_cpus is dropped.
    local = chosen({"num_cpus": 1}, "--ray-address", "head:6379")
    assert local.ray is not None
    assert (local.ray.address, local.ray.num_cpus) == ("head:6379", None)


def test_ray_address_with_backend_local_is_refused() -> None:
    with pytest.raises(ConfigError, match="--ray-address is for the Ray backend"):
        chosen("local", "--backend", "local", "--ray-address", "head:6379")


def test_backend_ray_without_the_extra_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    assert main(["run", str(hive(tmp_path)), TASK, "--backend", "ray", "--no-store"]) == 2
    err = capsys.readouterr().err
    assert "--backend ray: the Ray backend needs Ray" in err
    assert "pip install 'honeycomb-agents[ray]'" in err


# --- what the command does with it ----------------------------------------------------------


def test_validate_names_the_backend_and_starts_no_ray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    no_ray_starts(monkeypatch)
    path = hive(tmp_path, "backend: {ray: {actors: 3, address: 'head:6379'}}\n")
    assert main(["validate", str(path)]) == 0
    assert "OK (3 roles, 1 model; backend: Ray, 3 actors at head:6379)" in capsys.readouterr().out


def test_a_ray_address_s_password_is_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # ray://user:PASSWORD@head, in a hive's backend: or given as --ray-address, was
    # printed whole by validate ('backend: Ray, 2 actors at ray://u:PASSWORD@...') and
    # by run as the pool started and as it failed to.
    no_ray_starts(monkeypatch)
    declared, given = "rayFAKEpw-7h3Xq9zL", "rayFAKEpw-2wV8bN4m"
    path = hive(tmp_path, f"backend: {{ray: {{address: 'ray://u:{declared}@head:10001'}}}}\n")
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "backend: Ray, 2 actors at ray://u:[password hidden]@head:10001" in out
    on_it = chosen("local", "--ray-address", f"ray://u:{given}@head:10001")
    assert on_it.ray is not None
    assert masked(f"at {on_it.ray.address}") == "at ray://u:[password hidden]@head:10001"


def test_backend_local_runs_a_ray_hive_in_this_process_and_says_nothing_of_ray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    no_ray_starts(monkeypatch)
    path = hive(tmp_path, "backend: ray\n")
    assert main(["run", str(path), TASK, "--backend", "local", "--plain", "--no-store"]) == 0
    assert "backend:" not in capsys.readouterr().err
    assert set((tmp_path / "pids").read_text().split()) == {str(os.getpid())}


@pytest.mark.parametrize(
    ("failure", "said"),
    [
        (ConnectionError("could not connect to 127.0.0.1:1"),
         "Ray did not start: ConnectionError: could not connect to 127.0.0.1:1"),
        (SystemExit(1), "Ray did not start (it could not reach the cluster)"),
    ],
)  # fmt: skip
def test_a_named_address_that_cannot_be_joined_is_told_and_never_falls_back_to_a_local_ray(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    failure: BaseException,
    said: str,
) -> None:
    tried: list[dict[str, Any]] = []

    def init(**options: Any) -> None:
        tried.append(options)
        raise failure

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: tried.append({"shutdown": True}))
    path = hive(tmp_path, "backend: {ray: {actors: 3}}\n")
    with answering() as address:  # answers as a head does, as Ray's init fails
        argv = ["run", str(path), TASK, "--ray-address", address, "--plain", "--no-store"]
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"backend: Ray, 3 actors at {address}: {said}" in err
    assert [t["address"] for t in tried] == [address]  # once, and only there
    assert not (tmp_path / "pids").exists()  # no worker ran


class FakePool:
    """A pool whose start marks Ray started (or fails), and whose stop is counted."""

    def __init__(self, started: list[bool], failure: BaseException | None = None) -> None:
        self.started, self.failure, self.stopped = started, failure, 0

    async def start(self) -> None:
        if self.failure is not None:
            raise self.failure
        self.started[0] = True

    def stop(self) -> None:
        self.stopped += 1


@pytest.mark.parametrize("running_before", [False, True])
async def test_after_the_run_the_actors_stop_and_a_ray_the_command_started_shuts_down(
    monkeypatch: pytest.MonkeyPatch, running_before: bool
) -> None:
    started = [running_before]
    shut: list[bool] = []
    monkeypatch.setattr(ray, "is_initialized", lambda: started[0])
    monkeypatch.setattr(ray, "shutdown", lambda: shut.append(True))
    pool = FakePool(started)
    seen: list[str | None] = []

    async def run() -> None:
        async with pool_running(pool) as problem:  # type: ignore[arg-type]
            seen.append(problem)
            raise RuntimeError("the run failed")

    with pytest.raises(RuntimeError, match="the run failed"):
        await run()
    assert seen == [None]
    assert pool.stopped == 1
    # A Ray the program had started before is its own: it goes on.
    assert shut == ([] if running_before else [True])


async def test_a_pool_that_does_not_start_is_told_to_the_block_and_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = [False]
    monkeypatch.setattr(ray, "is_initialized", lambda: started[0])
    pool = FakePool(started, ConnectionError("no GCS at head:6379\nmore lines"))
    async with pool_running(pool) as problem:  # type: ignore[arg-type]
        assert problem == "Ray did not start: ConnectionError: no GCS at head:6379"
    assert pool.stopped == 1


async def test_a_ctrl_c_as_ray_shuts_down_waits_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut short, Ray's shutdown ended the command with status 1 (see the run below)."""
    started = [False]
    shut: list[bool] = []
    monkeypatch.setattr(ray, "is_initialized", lambda: started[0])

    def shutdown() -> None:
        signal.raise_signal(signal.SIGINT)  # what Ctrl-C sends, as Ray stops
        shut.append(True)

    monkeypatch.setattr(ray, "shutdown", shutdown)
    pool = FakePool(started)
    # The command's, once its run's handler is gone: Ctrl-C raises KeyboardInterrupt.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        async with pool_running(pool) as problem:  # type: ignore[arg-type]
            assert problem is None
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C cut Ray's shutdown short")
    finally:
        handler = signal.signal(signal.SIGINT, before)
    assert (pool.stopped, shut) == (1, [True])
    assert handler is signal.default_int_handler  # given back


# --- a real run on Ray ----------------------------------------------------------------------


@pytest.mark.xdist_group("ray")
def test_a_hive_runs_on_a_local_ray_the_command_starts_and_stops(tmp_path: Path) -> None:
    path = hive(tmp_path, "backend: {ray: {actors: 1, num_cpus: 1}}\n")
    assert load_hive(path).backend.name == "ray"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env |= {"RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(Path.cwd())}
    child = subprocess.Popen(
        [sys.executable, "-m", "honeycomb", "run", str(path), TASK, "--plain", "--no-store"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    out, err = child.communicate(timeout=110)
    assert child.returncode == 0, err[-2000:]
    assert "backend: Ray, 1 actor, a private local Ray" in err
    assert "Answer:" in out
    # The tool, next to the hive file, ran in the actor: another process than the
    # command's, the same one for every call.
    pids = set((tmp_path / "pids").read_text().split())
    assert len(pids) == 1
    (actor,) = pids
    assert int(actor) != child.pid
    # The command stopped its actor and the Ray it started.
    deadline = time.monotonic() + 20
    while _alive(int(actor)):
        assert time.monotonic() < deadline, f"the actor {actor} outlived the command"
        time.sleep(0.1)


@pytest.mark.xdist_group("ray")
def test_ctrl_c_as_ray_stops_after_the_run_does_not_fail_the_command(
    tmp_path: Path,
) -> None:
    """As in one process (test_run_seams): the run had ended. Ray's shutdown takes
    seconds after it, and a Ctrl-C that cut it short ended the command with status 1
    (Ray's, as its half torn-down driver exits)."""
    path = hive(tmp_path, "backend: {ray: {actors: 1, num_cpus: 1}}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env |= {"RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(Path.cwd()), "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen(
        [sys.executable, "-m", "honeycomb", "run", str(path), TASK, "--plain", "--no-store"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdout is not None
    assert child.stderr is not None
    seen = []
    for line in child.stdout:  # all of it (what it read ahead, communicate() would not)
        seen.append(line)
        if line.startswith("cost "):  # its answer's last line: its Ray is stopping
            child.send_signal(signal.SIGINT)
    err = child.stderr.read()
    # 130 when the Ctrl-C came once Ray had stopped (a slow reader here), as the
    # command ended: never 1.
    assert child.wait(timeout=110) in (0, 130), err[-2000:]
    assert "\nAnswer:\n" in "".join(seen)


FATAL_TOOLS = '''\
"""A tool next to the hive that kills the process it runs in (a Ray actor)."""

import os
import signal

from honeycomb import tool


@tool
def city_facts(city: str) -> str:
    """Look up facts about a city.

    Args:
        city: The city.
    """
    os.kill(os.getpid(), signal.SIGKILL)
    return city
'''


@pytest.mark.xdist_group("ray")
@pytest.mark.usefixtures("ray_session")
def test_with_json_standard_output_holds_only_json_lines_whatever_ray_says(
    tmp_path: Path,
) -> None:
    """Ray's driver prints what its cluster reports (here, an actor that died) on
    standard output: with ``--json``, that goes to standard error. The command joins
    the session's Ray by its address (a Ray of its own would start a head, its agents
    and monitors: seconds of CPU that this check does not need)."""
    path = hive(tmp_path, "backend: {ray: {actors: 1, actor_cpus: 0}}\n")
    (tmp_path / "pid_tools.py").write_text(FATAL_TOOLS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env |= {"RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(Path.cwd())}
    head = ray.get_runtime_context().gcs_address
    child = subprocess.run(
        [sys.executable, "-m", "honeycomb", "run", str(path), TASK, "--json", "--no-store",
         "--ray-address", head],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=110,
    )  # fmt: skip
    assert "WorkerLost" in child.stdout, child.stderr[-2000:]
    not_json = [line for line in child.stdout.splitlines() if not _is_json(line)]
    assert not_json == []
    assert "A worker died" in child.stderr


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
