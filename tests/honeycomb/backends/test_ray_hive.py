"""A hive on Ray: the keys its models read from the environment, and the life of the
pool its Executor makes (a real local Ray, the session's)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from honeycomb import Executor
from honeycomb.backends import RayBackend
from honeycomb.backends.ray import recipe

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")  # Ray brings its own

pytestmark = pytest.mark.xdist_group("ray")  # one test process starts the session's Ray


def _hive(folder: Path, text: str) -> Path:
    path = folder / "hive.yaml"
    path.write_text(text)
    return path


_ON_RAY = """
models:
  default: offline
roles:
  r: {description: Answers.}
aggregator: concat
backend: {ray: {actors: 1, actor_cpus: 0}}
"""


async def test_an_executor_stops_the_pool_its_hive_made_when_closed(
    ray_session: None, tmp_path: Path
) -> None:
    # Nothing stopped the actors of the pool from_yaml made for backend: ray: a service
    # that made an Executor for each request kept every one of them running.
    async with Executor.from_yaml(_hive(tmp_path, _ON_RAY)) as executor:
        result = await executor.run("t", subtasks=[("r", "hello")])
        assert result.status == "ok"
        pool = executor.shared.backend
        assert isinstance(pool, RayBackend)
        (pid,) = await pool.pids()
    _, alive = psutil.wait_procs([psutil.Process(pid)], timeout=30)
    assert not alive

    # aclose does it too, as often as the Executor runs again.
    executor = Executor.from_yaml(tmp_path / "hive.yaml")
    await executor.run("t", subtasks=[("r", "hello")])
    pool = executor.shared.backend
    assert isinstance(pool, RayBackend)
    (pid,) = await pool.pids()
    await executor.aclose()
    _, alive = psutil.wait_procs([psutil.Process(pid)], timeout=30)
    assert not alive

    # A pool given is the caller's: closing the Executor leaves it running.
    given = RayBackend(actors=1, actor_cpus=0)
    try:
        async with Executor.from_yaml(tmp_path / "hive.yaml", backend=given) as executor:
            await executor.run("t", subtasks=[("r", "hello")])
        (pid,) = await given.pids()
        assert psutil.Process(pid).is_running()
    finally:
        given.stop()


async def test_models_read_their_keys_from_variables_of_their_own_in_the_actors(
    ray_session: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The actors read OPENAI_API_KEY alone: a hive whose models had keys of their own
    # (api_key: ${NAME}) had every worker refused on Ray, two providers impossible.
    from tests.support.openai_server import OpenAIServer, text

    keys = {name: f"sk-{name}-{secrets.token_hex(8)}" for name in ("alpha", "beta")}
    for name, key in keys.items():
        monkeypatch.setenv(f"HONEYCOMB_TEST_{name.upper()}_KEY", key)
    with OpenAIServer(text("done")) as server:
        hive = _hive(
            tmp_path,
            f"""
models:
  alpha: {{model: m-alpha, base_url: "{server.base_url}", api_key: "${{HONEYCOMB_TEST_ALPHA_KEY}}"}}
  beta: {{model: m-beta, base_url: "{server.base_url}", api_key: "${{HONEYCOMB_TEST_BETA_KEY}}"}}
roles:
  a: {{model: alpha}}
  b: {{model: beta}}
aggregator: concat
backend:
  ray:
    actors: 1
    actor_cpus: 0
    runtime_env:
      env_vars:
        HONEYCOMB_TEST_ALPHA_KEY: "${{HONEYCOMB_TEST_ALPHA_KEY}}"
        HONEYCOMB_TEST_BETA_KEY: "${{HONEYCOMB_TEST_BETA_KEY}}"
""",
        )
        async with Executor.from_yaml(hive) as executor:
            for model in executor.models.values():  # what goes to the actors: no key
                sent = recipe(model, {})
                assert not any(key.encode() in sent for key in keys.values())
            result = await executor.run("t", subtasks=[("a", "one"), ("b", "two")])
            pool = executor.shared.backend
            assert isinstance(pool, RayBackend)
            (actor,) = await pool.pids()
    assert result.status == "ok", result
    sent_by = {r.body["model"]: r.headers["authorization"] for r in server.requests}
    assert sent_by == {"m-alpha": f"Bearer {keys['alpha']}", "m-beta": f"Bearer {keys['beta']}"}
    assert actor != os.getpid()


async def test_an_actor_without_a_models_key_variable_fails_its_workers_naming_it(
    ray_pool: RayBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    from honeycomb import OpenAIModel, Role, RunFailed
    from tests.support.openai_server import OpenAIServer, text

    key = f"sk-gamma-{secrets.token_hex(8)}"
    monkeypatch.setenv("HONEYCOMB_TEST_GAMMA_KEY", key)  # here, not in the session's Ray
    with OpenAIServer(text("done")) as server:
        model = OpenAIModel("m", base_url=server.base_url, api_key_env="HONEYCOMB_TEST_GAMMA_KEY")
        executor = Executor([Role(name="q")], model, aggregator="concat", backend=ray_pool)
        with pytest.raises(RunFailed) as caught:
            await executor.run("t", subtasks=[("q", "one")])
    assert caught.value.partial is not None
    (failed,) = caught.value.partial.subtasks.values()
    assert failed.error is not None
    assert failed.error.type == "ConfigError"
    assert failed.error.message.startswith(
        f"model {model!r} of role 'q' could not be made in a Ray actor: model 'm' reads "
        "its API key from HONEYCOMB_TEST_GAMMA_KEY, which this Ray actor's environment "
        "does not have: set HONEYCOMB_TEST_GAMMA_KEY on every node"
    )
    assert key not in failed.error.message
    assert not server.requests


_TOOLS = """
import os


def {name}() -> str:
    \"\"\"The process it runs in.\"\"\"
    return str(os.getpid())
"""


async def test_a_pool_given_imports_the_tools_beside_the_hive_and_its_hive_tools(
    ray_session: None, tmp_path: Path
) -> None:
    """A RayBackend given to from_yaml, its tools beside the hive file and beside a
    hive its lead calls as a tool: their roles could not be set up in the actors (No
    module named 'trip_tools_given'), as the hive's own backend: ray and --backend ray
    had the hive's folder on the actors' PYTHONPATH, and a pool given did not (nor did
    any pool have the folder of a hive called as a tool)."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "trip_tools_given.py").write_text(_TOOLS.format(name="trip_pid"))
    (tmp_path / "sub" / "sub_tools_given.py").write_text(_TOOLS.format(name="sub_pid"))
    (tmp_path / "sub" / "facts.yaml").write_text(
        "name: facts\nmodels: {default: offline}\nroles:\n  planner: {description: Plans.}\n"
        "  checker: {description: Checks facts., tools: ['sub_tools_given:sub_pid']}\n"
        "aggregator: concat\n"
    )
    hive = _hive(
        tmp_path,
        "models: {default: offline}\nroles:\n  lead:\n    description: Leads.\n"
        "    tools: ['trip_tools_given:trip_pid', 'hive:sub/facts.yaml']\naggregator: concat\n",
    )
    given = RayBackend(actors=1, actor_cpus=0)
    try:
        executor = Executor.from_yaml(hive, backend=given)
        result = await executor.run("t", subtasks=[("lead", "check the facts about bees")])
    finally:
        given.stop()
    assert result.status == "ok", result.subtasks["s1"].error
    assert "could not be set up" not in result.subtasks["s1"].text
    assert "Facts for" in result.subtasks["s1"].text  # the sub-run's answer
