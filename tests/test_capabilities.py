"""Capabilities through the real binary: sources, precedence, discovery, and the two kernel ones."""

from __future__ import annotations

import json
import subprocess
import uuid

import anyio
import pytest

from conftest import MODES, client_for, joined, lose_kernel, notebook_with_kernel, server_binary, server_env, texts

pytestmark = pytest.mark.anyio

EXTENSION = "io.jupyter-mcp/capabilities"


def nb_client(jupyter_server, *args, mode="legacy", env=None, transport="stdio"):
    return client_for(jupyter_server, mode, "--document-backend", "file", *args, env=env, transport=transport)


async def block_of(client):
    resource = await client.read_resource("capabilities://", cache_mode="bypass")
    assert resource.contents[0].mime_type == "application/json"
    return json.loads(resource.contents[0].text)


def declared(block, name):
    return next(c for c in block["declared"] if c["name"] == name)


@pytest.mark.parametrize("mode", MODES)
async def test_discover_and_resource_agree(jupyter_server, transport, mode):
    async with nb_client(jupyter_server, "--capability", "kernel.auto-restart", mode=mode, transport=transport) as client:
        block = await block_of(client)
        assert block["version"] == "1"
        assert block["capabilities"] == ["kernel.auto-restart", "output.compact"]
        assert declared(block, "kernel.auto-restart") | {"description": ""} == {
            "name": "kernel.auto-restart", "description": "", "enabled": True, "source": "cli"}
        assert declared(block, "kernel.adopt-session")["source"] == "default"
        advertised = client.server_capabilities.extensions[EXTENSION]
        assert advertised == block, "server/discover (or initialize) and capabilities:// agree"
        assert "capabilities://" in [str(r.uri) for r in (await client.list_resources(cache_mode="bypass")).resources]


async def test_sources_and_precedence(jupyter_server):
    env = {"JUPYTER_MCP_CAPABILITIES": "kernel.auto-restart, kernel.adopt-session=yes"}
    async with nb_client(jupyter_server, env=env) as client:
        block = await block_of(client)
        assert block["capabilities"] == ["kernel.adopt-session", "kernel.auto-restart", "output.compact"]
        assert declared(block, "kernel.auto-restart")["source"] == "env"
    async with nb_client(jupyter_server, "--capability", "kernel.auto-restart=Disabled", env=env) as client:
        block = await block_of(client)
        assert block["capabilities"] == ["kernel.adopt-session", "output.compact"], "the command line beats the environment"
        assert declared(block, "kernel.auto-restart") | {"description": ""} == {
            "name": "kernel.auto-restart", "description": "", "enabled": False, "source": "cli"}


async def test_config_file_source(jupyter_server, tmp_path):
    config = tmp_path / "server.toml"
    config.write_text('[capabilities]\n"kernel.auto-restart" = true\n"kernel.adopt-session" = true\n')
    env = {"JUPYTER_MCP_CAPABILITIES": "kernel.adopt-session=off"}
    async with nb_client(jupyter_server, "--config", str(config), env=env) as client:
        block = await block_of(client)
        assert declared(block, "kernel.auto-restart")["source"] == "config"
        assert declared(block, "kernel.adopt-session") | {"description": ""} == {
            "name": "kernel.adopt-session", "description": "", "enabled": False, "source": "env"}
        assert block["capabilities"] == ["kernel.auto-restart", "output.compact"]


def test_unknown_name_in_config_file_stops_the_server(jupyter_server, tmp_path):
    config = tmp_path / "server.toml"
    config.write_text('[capabilities]\n"kernel.autorestart" = true\n')
    out = subprocess.run(
        [server_binary(), "start", "--config", str(config), "--jupyter-url", jupyter_server.url],
        capture_output=True, text=True, timeout=30, env=server_env(), stdin=subprocess.DEVNULL)
    assert out.returncode != 0
    assert "kernel.autorestart" in out.stderr and "the config file" in out.stderr


@pytest.mark.parametrize("where", ["cli", "env"])
def test_unknown_names_stop_the_server(jupyter_server, where):
    args = [server_binary(), "start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token]
    env = server_env()
    if where == "cli":
        args += ["--capability", "kernel.autorestart"]
    else:
        env["JUPYTER_MCP_CAPABILITIES"] = "kernel.auto-restart,kernel.autorestart=on"
    out = subprocess.run(args, capture_output=True, text=True, timeout=30, env=env, stdin=subprocess.DEVNULL)
    assert out.returncode != 0
    assert "kernel.autorestart" in out.stderr
    assert "kernel.adopt-session, kernel.auto-restart" in out.stderr, "the error names what exists"
    assert ("--capability" if where == "cli" else "JUPYTER_MCP_CAPABILITIES") in out.stderr


@pytest.mark.parametrize("how", ["deleted", "killed"])
async def test_auto_restart_off_refuses_until_restart(jupyter_server, how):
    async with nb_client(jupyter_server) as client:
        kernel_id = await notebook_with_kernel(client, jupyter_server, "off")
        await lose_kernel(jupyter_server, client, kernel_id, how)
        for _ in range(2):
            result = await client.call_tool("execute_cell", {"cell_index": 0})
            assert result.is_error
            text = joined(result)
            assert "The kernel of 'off' is gone" in text and "every variable, import and definition" in text
            assert "restart_notebook" in text and "kernel.auto-restart" in text
        restarted = await client.call_tool("restart_notebook", {"notebook_name": "off"})
        assert not restarted.is_error, "restart_notebook is never blocked"
        assert texts(await client.call_tool("execute_cell", {"cell_index": 0, "stream": False})) == ["ran\n"]


@pytest.mark.parametrize("how", ["deleted", "killed"])
async def test_auto_restart_on_replaces_and_says_so(jupyter_server, how):
    async with nb_client(jupyter_server, "--capability", "kernel.auto-restart") as client:
        kernel_id = await notebook_with_kernel(client, jupyter_server, "on")
        await lose_kernel(jupyter_server, client, kernel_id, how)
        result = await client.call_tool("execute_cell", {"cell_index": 0, "stream": False})
        assert not result.is_error, joined(result)
        note, output = texts(result)
        assert note.startswith("[KERNEL REPLACED: the kernel of 'on'") and "new, empty kernel" in note
        assert output == "ran\n"
        listed = joined(await client.call_tool("list_notebooks", {}))
        new_id = listed.split("\n")[1].split("\t")[2]
        if how == "killed":
            assert new_id == kernel_id, "the kernel Jupyter already restarted is accepted"
        else:
            assert new_id != kernel_id and new_id in jupyter_server.kernel_ids()


async def test_adopt_session(jupyter_server):
    path = f"adopt-{uuid.uuid4().hex[:6]}.ipynb"
    (jupyter_server.root / path).write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}))
    status, session = jupyter_server.request(
        "POST", "/api/sessions", {"path": path, "name": path, "type": "notebook", "kernel": {"name": "python3"}})
    assert status == 201
    theirs = session["kernel"]["id"]
    try:
        async with nb_client(jupyter_server, "--capability", "kernel.adopt-session") as client:
            text = joined(await client.call_tool("use_notebook", {"notebook_name": "a", "notebook_path": path}))
            assert f"Adopted kernel '{theirs}'" in text
            assert joined(await client.call_tool("list_notebooks", {})).split("\n")[1].split("\t")[2] == theirs
            released = joined(await client.call_tool("unuse_notebook", {"notebook_name": "a"}))
            assert "keeps running" in released
        await anyio.sleep(0.5)
        assert theirs in jupyter_server.kernel_ids()
    finally:
        jupyter_server.request("DELETE", f"/api/sessions/{session['id']}")
