"""A secret a hive puts in an MCP server's ``args`` from the environment
(``--token ${TOKEN}``), or in its ``url`` (a key in its path, as some hosted servers
take it), is a secret as the server's ``env`` values are: never in the server's repr,
masked wherever a run shows it (a server that echoes its arguments to its error
output, a call's error, a log of its requests). A variable that holds a setting
(``${HOME}``) is no secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb.hive import load_hive
from runtime.secrets import isolated, masked
from runtime.tools.mcp import McpServers

TOKEN = "ghp-FAKE0a9b1d19c2e3f4a5b6"


def test_a_token_in_args_from_the_environment_is_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("HOME", "/home/someone-of-many")
    (tmp_path / "hive.yaml").write_text(
        "models: {default: offline}\n"
        "mcp_servers:\n"
        "  github:\n"
        "    command: github-mcp\n"
        "    args: [--token, '${GITHUB_TOKEN}', --home, '${HOME}/mcp']\n"
        "roles:\n  planner: {description: Plans.}\n  writer: {description: Writes.}\n"
    )
    with isolated():
        [server] = load_hive(tmp_path / "hive.yaml").mcp_servers
        assert server.secrets == (TOKEN,)  # the home folder is a setting, not a secret
        assert TOKEN not in repr(server)
        assert "[secret hidden]" in repr(server)
        assert "/home/someone-of-many/mcp" in repr(server)
        said = f"github-mcp --token {TOKEN}: bad credentials"
        assert masked(said) == said  # not known before its servers are
        servers = McpServers([server])
        assert TOKEN not in masked(said)  # as a run shows what the server said
        del servers


def test_a_key_in_a_url_s_path_from_the_environment_is_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its repr showed it (a token written in the path is shown: nothing says it is
    one), and so did the log of each request to it."""
    key = "sk-ak-FAKE7f3e9d1c5b"
    monkeypatch.setenv("ACTIONS_KEY", key)
    (tmp_path / "hive.yaml").write_text(
        "models: {default: offline}\n"
        "mcp_servers:\n"
        "  actions:\n"
        "    url: 'https://actions.example.com/mcp/${ACTIONS_KEY}/mcp'\n"
        "roles:\n  planner: {description: Plans.}\n  writer: {description: Writes.}\n"
    )
    with isolated():
        [server] = load_hive(tmp_path / "hive.yaml").mcp_servers
        assert server.secrets == (key,)
        assert repr(server) == (
            "McpServer('actions', url='https://actions.example.com/mcp/[secret hidden]/mcp')"
        )
        said = f"HTTP Request: POST {server.url} 200 OK"
        servers = McpServers([server])
        assert masked(said) == (
            "HTTP Request: POST https://actions.example.com/mcp/[secret hidden]/mcp 200 OK"
        )
        del servers
