"""What an MCP server sends back holds no secret once it arrives: its tools' list (a
description, a default in a schema), why it would not start, and what the SDK logs of
it, against a server of a few lines that speaks MCP's JSON-RPC over stdio, run as a
subprocess."""

from __future__ import annotations

import subprocess
import sys
import traceback

import pytest

from runtime import McpServer, McpServerError, ModelRetry
from runtime.tools.mcp import mcp_tools
from tests.support.mcp_servers import ROOT, running

pytestmark = pytest.mark.timeout(60)

TOKEN = "tok-0f-the-server-9d2c"
"""The server's secret, given in its env."""

SERVER = """
import json, os, sys
token = os.environ["SERVER_TOKEN"]
refuse = len(sys.argv) > 1
for line in sys.stdin:
    asked = json.loads(line)
    if "id" not in asked:
        continue  # a notification
    if refuse:
        answer = {"error": {"code": -32000, "message": f"the key {token} is not allowed"}}
    elif asked["method"] == "initialize":
        answer = {"result": {
            "protocolVersion": asked["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "tattler", "version": "1"},
        }}
    elif asked["method"] == "tools/list":
        schema = {"type": "object", "properties": {"key": {"type": "string", "default": token}}}
        tool = {"name": "fetch", "description": f"Fetches with {token}.", "inputSchema": schema}
        answer = {"result": {"tools": [tool]}}
    elif asked["method"] == "tools/call":  # a progress not as MCP has it, then the answer
        progress = {"method": "notifications/progress", "params": {"progress": token}}
        print(json.dumps({"jsonrpc": "2.0", **progress}), flush=True)
        answer = {"result": {"content": [{"type": "text", "text": "fetched"}]}}
    else:
        answer = {"error": {"code": -32601, "message": "no such method"}}
    print(json.dumps({"jsonrpc": "2.0", "id": asked["id"], **answer}), flush=True)
"""


def tattler(*args: str) -> McpServer:
    """The server above, which says its token in what it sends back."""
    return McpServer(
        name="tattler",
        command=sys.executable,
        args=("-c", SERVER, *args),
        env={"SERVER_TOKEN": TOKEN},
    )


async def test_a_server_s_tools_are_listed_without_its_secrets() -> None:
    server = tattler()
    async with running(server) as run:
        (fetch,) = mcp_tools(server, await run.listed("tattler")).values()
    assert fetch.schema.description == "Fetches with [secret hidden]."
    assert fetch.schema.parameters["properties"]["key"]["default"] == "[secret hidden]"


async def test_why_a_server_would_not_start_is_told_without_its_secrets() -> None:
    async with running(tattler("--refuse")) as run:
        with pytest.raises(McpServerError) as refused:
            await run.listed("tattler")
        with pytest.raises(ModelRetry) as told:  # what the model reads
            await run.call("tattler", "fetch", {})
    assert "the key [secret hidden] is not allowed" in str(refused.value)
    assert TOKEN not in str(refused.value)
    assert TOKEN not in told.value.message
    # Nor in its traceback, which shows the SDK's error behind it.
    assert TOKEN not in "".join(traceback.format_exception(refused.value))


async def test_a_line_a_server_wrote_to_stdout_is_shown_without_a_part_of_its_secret() -> None:
    """A program that does not speak MCP there shows its line, cut: it was cut before its
    secrets were masked, and the part of one before the cut was no secret known."""
    said = (
        "import os, time; print('x' * 190, os.environ['SERVER_TOKEN'], flush=True); time.sleep(60)"
    )
    server = McpServer(
        name="talker",
        command=sys.executable,
        args=("-c", said),
        env={"SERVER_TOKEN": TOKEN},
        start_timeout=0.5,
    )
    with pytest.raises(McpServerError) as refused:
        async with running(server) as run:
            await run.listed("talker")
    # Its first 200 characters: the secret's first 9 among them, once.
    assert str(refused.value).endswith(f"it wrote: '{'x' * 190} [secret h')")
    assert TOKEN[:9] not in str(refused.value)


async def test_a_password_in_a_url_among_a_server_s_args_is_a_secret() -> None:
    """A database's URL given as an argument (``postgresql://app:PASSWORD@db/x``): its
    password is masked in why the server would not start (it said its arguments) and
    in the server's repr, as one in a streamable-HTTP server's ``url`` is."""
    dsn = "postgresql://app:db-pass-4k9Lw2@db/shop"
    said = "import sys; print('could not connect to', sys.argv[1], file=sys.stderr); sys.exit(3)"
    server = McpServer(name="shop", command=sys.executable, args=("-c", said, dsn))
    assert "db-pass-4k9Lw2" not in repr(server)
    async with running(server) as run:
        with pytest.raises(McpServerError) as refused:
            await run.listed("shop")
    assert "could not connect to postgresql://app:[password hidden]@db/shop" in str(refused.value)


async def test_the_password_of_a_url_in_a_server_s_env_is_a_secret_alone() -> None:
    """An env value is a secret whole; the password of a URL in it is one alone too,
    as a server that fails to log in may say only that."""
    said = (
        "import os, sys; url = os.environ['DATABASE_URL']; "
        "print('login failed, password', url.split(':')[2].split('@')[0], file=sys.stderr); "
        "sys.exit(3)"
    )
    dsn = "postgresql://app:db-pass-7Hw3Xq@db/shop"
    server = McpServer(
        name="shop", command=sys.executable, args=("-c", said), env={"DATABASE_URL": dsn}
    )
    async with running(server) as run:
        with pytest.raises(McpServerError) as refused:
            await run.listed("shop")
    assert "login failed, password [password hidden]" in str(refused.value)


_CALLS_THE_TATTLER = """
import asyncio, logging, sys, threading
from runtime.tools.mcp import McpServers
from tests.runtime.tools.test_mcp_secrets import tattler

if sys.argv[1] == "configured":
    logging.basicConfig()
logged = threading.Event()


def seen(record):
    logged.set()  # the SDK logged the progress it passed over
    return True


logging.getLogger("client").addFilter(seen)  # the SDK's client session's logger


async def main():
    async with McpServers([tattler()]) as live:
        with live.run() as run:
            assert await run.call("tattler", "fetch", {}) == "fetched"
            assert await asyncio.to_thread(logged.wait, 30), "the SDK logged nothing"


asyncio.run(main())
"""


@pytest.mark.parametrize("logging", ["unconfigured", "configured"])
def test_what_the_sdk_logs_of_a_server_is_printed_only_where_logging_is_configured(
    logging: str,
) -> None:
    """A notification not as MCP has it (a progress without its token) is logged by the
    SDK as a warning with its traceback, which quotes its values: with no logging
    configured, Python printed it on standard error, and where logging was configured,
    the server's secret with it (the SDK's session logs as ``client``, outside ``mcp``).
    It is dropped where nothing takes it, and masked where it goes."""
    done = subprocess.run(
        [sys.executable, "-c", _CALLS_THE_TATTLER, logging],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    if logging == "configured":
        assert "WARNING:client:Failed to validate notification" in done.stderr
        assert "input_value='[secret hidden]'" in done.stderr
        assert TOKEN not in done.stderr
    else:
        assert done.stderr == ""
