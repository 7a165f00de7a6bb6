"""Hub mode against a real JupyterHub (its proxy from npm, a test authenticator, the local-process
spawner with each user's server in a directory of its own): one MCP endpoint for every user, each
on their own server with their own token, none able to reach another's — both with our server
started directly and run by the Hub as a managed service behind its proxy."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import anyio
import pytest
from conftest import extension_entry, joined, server_binary, server_env, start_http_server, write_config
from harness import free_port, start_hub, stop_hub
from mcp import Client

pytestmark = pytest.mark.anyio

SERVICE = "mcp"
# How long the server trusts the Hub's answer about a token (domain::users::IDENTITY_TTL).
IDENTITY_TTL = 10


def proxy_bin() -> str:
    path = os.environ.get("JUPYTER_MCP_HUB_PROXY")
    assert path, "JUPYTER_MCP_HUB_PROXY is not set; run the suite through tests/run"
    return path


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    port = free_port()
    service_port = free_port()
    service = {
        "name": SERVICE,
        "url": f"http://127.0.0.1:{service_port}",
        "command": [server_binary(), "start"],
        "environment": {
            "JUPYTERHUB_URL": f"http://127.0.0.1:{port}/",
            "RUST_LOG": "jupyter_mcp_server=debug,warn",
            "JMCP_TEST_RUN": os.environ["JMCP_TEST_RUN"],
        },
    }
    hub = start_hub(tmp_path_factory.mktemp("hub"), proxy_bin(), services=[service], port=port)
    for user in ("alice", "bob", "carol", "dave", "erin", "frank", "broken", "slow"):
        hub.add_user(user)
    yield hub
    stop_hub(hub)


@pytest.fixture(scope="module")
def direct(hub):
    """Our binary started by hand in Hub mode: no --mcp-token."""
    server = start_http_server(["start", "--jupyterhub-url", hub.url], hub_mode=True)
    yield server
    server.stop()


def endpoint(hub, direct, how: str) -> str:
    if how == "direct":
        return direct.mcp_url
    return f"{hub.url}services/{SERVICE}/mcp"


@contextlib.asynccontextmanager
async def hub_client(url: str, token: str, mode: str = "auto"):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(240)) as hc:
        async with Client(streamable_http_client(url, http_client=hc), mode=mode, read_timeout_seconds=240) as client:
            yield client


def post(url: str, token: str | None, body: dict, headers: dict | None = None) -> tuple[int, dict, str]:
    """One raw POST to /mcp: (status, headers, body)."""
    all_headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   **(headers or {})}
    if token:
        all_headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers=all_headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, dict(response.headers), response.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode(errors="replace")


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def kernel_of(listing: str, name: str) -> str:
    line = next(line for line in listing.split("\n") if line.startswith(name + "\t"))
    return line.split("\t")[2]


@pytest.mark.parametrize("how", ["direct", "service"])
async def test_two_users_work_apart(hub, direct, how):
    url = endpoint(hub, direct, how)
    alice_token, _ = hub.new_token("alice")
    bob_token, _ = hub.new_token("bob")
    tag = uuid.uuid4().hex[:6]
    path = f"work-{tag}.ipynb"
    async with hub_client(url, alice_token) as alice, hub_client(url, bob_token) as bob:
        # Both use the same notebook name and path: each gets their own.
        for client, who in ((alice, "alice"), (bob, "bob")):
            used = await client.call_tool("use_notebook", {"notebook_name": "work", "notebook_path": path,
                                                           "mode": "create"})
            assert not used.is_error, joined(used)
            ran = await client.call_tool("insert_execute_code_cell", {
                "cell_index": 0, "cell_source": f"secret_{who} = '{who}-{tag}'\nprint(secret_{who})"})
            assert f"{who}-{tag}" in joined(ran), joined(ran)
            edited = await client.call_tool("overwrite_cell_source", {
                "cell_index": 0, "cell_source": f"secret_{who} = '{who}-{tag}'  # edited by {who}"})
            assert not edited.is_error, joined(edited)
            out = await client.call_tool("execute_code", {"code": f"owner = '{who}'; print(owner)"})
            assert who in joined(out)
        alice_kernel = kernel_of(joined(await alice.call_tool("list_notebooks", {})), "work")
        bob_kernel = kernel_of(joined(await bob.call_tool("list_notebooks", {})), "work")
        assert alice_kernel != bob_kernel

        # Bob cannot see Alice's variables, in his notebook's kernel or his default one.
        seen = joined(await bob.call_tool("execute_cell", {"cell_index": 0}))
        assert f"alice-{tag}" not in seen
        probe = joined(await bob.call_tool("execute_code", {"code": "print(secret_alice)"}))
        assert "NameError" in probe and f"alice-{tag}" not in probe, probe
        variables = joined(await bob.call_tool("inspect_variables", {}))
        assert "secret_alice" not in variables and f"alice-{tag}" not in variables
        # ...nor name her kernel, by id, in any tool.
        listed = joined(await bob.call_tool("list_kernels", {}))
        assert alice_kernel not in listed and bob_kernel in listed
        by_id = await bob.call_tool("execute_code", {"code": "print(secret_alice)", "kernel_id": alice_kernel})
        assert by_id.is_error or "NameError" in joined(by_id), joined(by_id)
        assert f"alice-{tag}" not in joined(by_id)
        # ...nor her notebooks, by name or path.
        cells = joined(await bob.call_tool("read_cell", {"cell_index": 0}))
        assert "edited by bob" in cells and "alice" not in cells
        files = joined(await bob.call_tool("list_files", {}))
        assert "alice" not in files
        for sneaky in (f"../alice/{path}", f"/../alice/{path}", f"{hub.home('alice')}/{path}"):
            got = await bob.call_tool("read_file", {"path": sneaky})
            assert f"alice-{tag}" not in joined(got), (sneaky, joined(got))
            opened = await bob.call_tool("use_notebook", {"notebook_name": "theirs", "notebook_path": sneaky,
                                                           "mode": "connect"})
            assert f"alice-{tag}" not in joined(opened)
            if not opened.is_error:
                assert f"alice-{tag}" not in joined(await bob.call_tool("read_cells", {"notebook_name": "theirs"}))

        # ...nor through resources: the same URI reads each user's own notebook.
        for client, who, other in ((bob, "bob", "alice"), (alice, "alice", "bob")):
            whole = (await client.read_resource("notebook://work", cache_mode="bypass")).contents[0].text
            assert f"edited by {who}" in whole and f"{other}-{tag}" not in whole
            listed = [str(r.uri) for r in (await client.list_resources(cache_mode="bypass")).resources]
            assert "notebook://theirs" not in listed or who == "bob"

        # Alice still has her own work, untouched.
        mine = joined(await alice.call_tool("read_cell", {"cell_index": 0}))
        assert "edited by alice" in mine
        assert "alice" in joined(await alice.call_tool("execute_code", {"code": "print(owner)"}))
    # On disk: each notebook in its owner's own directory, with its owner's edit.
    for who in ("alice", "bob"):
        saved = (hub.home(who) / path)
        deadline = time.monotonic() + 30
        while f"edited by {who}" not in (saved.read_text() if saved.exists() else ""):
            assert time.monotonic() < deadline, f"{who}'s edit never reached {saved}"
            await anyio.sleep(0.2)
        other = "bob" if who == "alice" else "alice"
        assert f"edited by {other}" not in saved.read_text()
    # The users' tokens are secrets: in no log line of ours (the service logs into the Hub's log).
    logs = direct.log.read_text(errors="replace") + (hub.dir / "hub.log").read_text(errors="replace")
    assert "Hub mode" in logs
    assert alice_token not in logs and bob_token not in logs


async def test_a_stopped_server_is_started_on_demand_with_progress(hub, direct):
    token, _ = hub.new_token("carol")
    assert not hub.server("carol"), "carol's server starts stopped"
    updates = []

    async def on_progress(progress, total, message):
        updates.append((progress, total, message))

    async with hub_client(direct.mcp_url, token) as carol:
        result = await carol.call_tool("execute_code", {"code": "print(6 * 7)"}, progress_callback=on_progress)
        assert not result.is_error, joined(result)
        assert "42" in joined(result)
    assert hub.server("carol")["ready"]
    messages = [m for _, _, m in updates]
    assert any("Starting your server on the JupyterHub" in m for m in messages), messages
    # The Hub's own spawn messages come through as they happen.
    assert len(messages) >= 2, messages
    progresses = [p for p, _, _ in updates]
    assert progresses == sorted(progresses)


async def test_a_refused_or_failed_start_is_a_clear_error(hub, direct):
    # A token that may use its user's server but not start it: the Hub refuses the start.
    status, body = hub.api("POST", "/users/erin/tokens", {"scopes": ["read:users:name!user", "access:servers!user",
                                                                   "read:servers!user"]})
    assert status == 201, body
    async with hub_client(direct.mcp_url, body["token"]) as erin:
        refused = await erin.call_tool("execute_code", {"code": "1"})
        assert refused.is_error, joined(refused)
        assert f"the JupyterHub at {hub.url}" in joined(refused) and "refused to start your server" in joined(refused)
    # A spawn that fails on the Hub's side.
    token, _ = hub.new_token("broken")
    async with hub_client(direct.mcp_url, token) as broken:
        failed = await broken.call_tool("execute_code", {"code": "1"})
        assert failed.is_error, joined(failed)
        text = joined(failed)
        assert f"the JupyterHub at {hub.url}" in text and ("failed to start" in text or "refused to start" in text), text
        # The server keeps serving: the same user's next call gets the same clear answer.
        assert (await broken.call_tool("execute_code", {"code": "1"})).is_error


async def test_a_spawn_past_the_timeout_is_a_clear_error(hub):
    """--jupyterhub-spawn-timeout bounds the wait for a user's server; the server keeps serving."""
    server = start_http_server(["start", "--jupyterhub-url", hub.url, "--jupyterhub-spawn-timeout", "3"],
                               hub_mode=True)
    try:
        token, _ = hub.new_token("slow")
        async with hub_client(server.mcp_url, token) as slow:
            started = time.monotonic()
            late = await slow.call_tool("execute_code", {"code": "1"})
            assert late.is_error, joined(late)
            text = joined(late)
            assert f"the JupyterHub at {hub.url}" in text and "did not become ready within 3s" in text, text
            assert time.monotonic() - started < 60, "the wait was not bounded by the spawn timeout"
            # The server keeps serving.
            with urllib.request.urlopen(server.base + "/api/healthz", timeout=30) as health:
                assert health.status == 200
    finally:
        server.stop()


async def test_a_server_stopped_under_a_user_is_reported_then_restarted(hub, direct):
    token, _ = hub.new_token("dave")
    async with hub_client(direct.mcp_url, token) as dave:
        first = await dave.call_tool("execute_code", {"code": "kept = 1; print('up')"})
        assert "up" in joined(first)
        hub.stop_server("dave")
        failed = await dave.call_tool("execute_code", {"code": "print(kept)"})
        assert failed.is_error, joined(failed)
        text = joined(failed)
        assert "is not running" in text and hub.url.rstrip("/") in text and "Call again" in text, text
        again = await dave.call_tool("execute_code", {"code": "print('back')"})
        assert not again.is_error and "back" in joined(again), joined(again)
        assert hub.server("dave")["ready"]
        gone = joined(await dave.call_tool("execute_code", {"code": "print(kept)"}))
        assert "NameError" in gone, "a restarted server starts afresh"


@pytest.mark.parametrize("how", ["direct", "service"])
async def test_tokens_the_hub_refuses_are_refused(hub, direct, how):
    url = endpoint(hub, direct, how)
    status, headers, body = post(url, None, INITIALIZE)
    assert status == 401 and "JupyterHub API token" in body, body
    status, _, body = post(url, "not-a-token", INITIALIZE)
    assert status == 401 and hub.url.rstrip("/") in body and "hub/token" in body, body
    token, token_id = hub.new_token("alice")
    status, _, body = post(url, token, INITIALIZE)
    assert status == 200, body
    hub.revoke("alice", token_id)
    # Refused within the time the server trusts the Hub's answer (with margin for a slow box).
    deadline = time.monotonic() + IDENTITY_TTL + 20
    while True:
        status, _, body = post(url, token, INITIALIZE)
        if status == 401:
            break
        assert time.monotonic() < deadline, "a revoked token was still accepted"
        await anyio.sleep(0.5)
    assert "does not accept this token" in body and hub.url.rstrip("/") in body, body


def assert_session_is_the_openers(url: str, opener: str, other: str) -> None:
    """A session `opener` opened: refused to `other` as an unknown id is, still the opener's."""
    status, headers, _ = post(url, opener, INITIALIZE)
    assert status == 200
    session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    session_headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    status, _, body = post(url, other, listing, session_headers)
    assert status == 404 and "session not found" in body, body
    status, _, body = post(url, opener, listing, session_headers)
    assert status in (200, 202), body


async def test_a_session_belongs_to_the_user_who_opened_it(hub, direct):
    assert_session_is_the_openers(direct.mcp_url, hub.new_token("alice")[0], hub.new_token("bob")[0])


def scoped_token(hub, user: str, scopes: list[str]) -> str:
    status, body = hub.api("POST", f"/users/{user}/tokens", {"scopes": scopes, "note": "scoped"})
    assert status == 201, body
    return body["token"]


async def test_a_hub_token_is_used_only_for_what_its_scopes_grant(hub, direct):
    """Tokens of each scope, issued by the Hub: only one that may access the user's server is
    used; a weaker one neither runs code on a connection the full token opened nor replaces it."""
    full, _ = hub.new_token("frank")
    async with hub_client(direct.mcp_url, full) as frank:
        ran = await frank.call_tool("execute_code", {"code": "kept = 41 + 1\nprint(kept)"})
        assert not ran.is_error and "42" in joined(ran), joined(ran)
        # The kernel's connection is open now. A token that may only read the server's model:
        for scopes in (["read:servers!user"], ["read:users:name!user", "read:servers!user"],
                       ["access:servers!server=frank/other"]):  # another of their servers
            weak = scoped_token(hub, "frank", scopes)
            status, _, body = post(direct.mcp_url, weak, INITIALIZE)
            assert status == 403, (scopes, body)
            assert "access:servers!user=frank" in body and hub.url.rstrip("/") in body, body
            call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": {"name": "execute_code", "arguments": {"code": "print(kept)"}}}
            status, _, body = post(direct.mcp_url, weak, call, {"mcp-protocol-version": "2026-07-28"})
            assert status == 403 and "kept" not in body, body
        # The full token's calls still work: no weaker token replaced it.
        again = await frank.call_tool("execute_code", {"code": "print(kept)"})
        assert not again.is_error and "42" in joined(again), joined(again)
    # Scoped to the server itself: enough.
    server_scoped = scoped_token(hub, "frank", ["access:servers!server=frank/"])
    async with hub_client(direct.mcp_url, server_scoped) as frank:
        ran = await frank.call_tool("execute_code", {"code": "print(kept)"})
        assert not ran.is_error and "42" in joined(ran), joined(ran)

    # A session is the token's that opened it, even against the same user's other token.
    assert_session_is_the_openers(direct.mcp_url, full, hub.new_token("frank")[0])

    # A server-scoped token cannot see that the server stopped, nor start it: it is told how.
    hub.stop_server("frank")
    async with hub_client(direct.mcp_url, scoped_token(hub, "frank", ["access:servers!server=frank/"])) as frank:
        refused = await frank.call_tool("execute_code", {"code": "1"})
        assert refused.is_error and "cannot be started from here" in joined(refused), joined(refused)


async def test_hub_mode_refuses_what_would_cross_users(hub, direct):
    token, _ = hub.new_token("alice")
    request = urllib.request.Request(
        direct.base + "/api/connect", method="PUT",
        data=json.dumps({"jupyter_url": "http://127.0.0.1:1"}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 403
    assert "refused in Hub mode" in refused.value.read().decode()
    # A user's token is no say over the server itself.
    stop = urllib.request.Request(direct.base + "/api/stop", method="DELETE",
                                  headers={"Authorization": f"Bearer {token}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(stop, timeout=30)
    assert refused.value.code == 403 and direct.process.poll() is None
    async with hub_client(direct.mcp_url, token) as alice:
        names = {t.name for t in (await alice.list_tools()).tools}
        assert "execute_code" in names and "connect_to_jupyter" not in names
    # The process started without a token of its own.
    assert "--mcp-token" not in open(f"/proc/{direct.process.pid}/cmdline").read().replace("\0", " ")


async def test_spare_kernels_are_each_users_own(hub):
    server = start_http_server(["start", "--jupyterhub-url", hub.url, "--capability", "kernel.prewarm"],
                               hub_mode=True)
    try:
        tokens = {who: hub.new_token(who)[0] for who in ("alice", "bob")}
        spares = {}
        for who, token in tokens.items():
            async with hub_client(server.mcp_url, token) as client:
                await client.call_tool("execute_code", {"code": "1"})
                deadline = time.monotonic() + 90
                while True:
                    listing = joined(await client.call_tool("list_kernels", {}))
                    if "[kernel.prewarm]" in listing:
                        spares[who] = re.findall(r"[0-9a-f]{8}-[0-9a-f-]{27}", listing.split("[kernel.prewarm]", 1)[1])
                        if spares[who]:
                            break
                    assert time.monotonic() < deadline, listing
                    await anyio.sleep(0.2)
        for who, token in tokens.items():
            _, kernels = hub.user_request(who, token, "GET", "/api/kernels")
            ids = {k["id"] for k in kernels}
            assert set(spares[who]) <= ids, f"{who}'s spares run on {who}'s own server"
            other = "bob" if who == "alice" else "alice"
            assert not set(spares[other]) & ids
    finally:
        server.stop()


def test_hub_mode_settings_are_checked_at_start(hub, tmp_path):
    granted = write_config(tmp_path, extension_entry(tmp_path / "guest.wasm", grants=["read-cells"]))
    for extra, expected in ((["--transport", "stdio"], "Streamable HTTP only"),
                            (["--jupyter-url", "http://127.0.0.1:1"], "--jupyter-url cannot be used in Hub mode"),
                            (["--config", str(granted)], "granted notebook host functions")):
        done = subprocess.run([server_binary(), "start", "--jupyterhub-url", hub.url, *extra],
                              env=server_env(), capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and expected in done.stderr, done.stderr
