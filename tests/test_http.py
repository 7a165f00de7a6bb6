"""Streamable HTTP specifics: authentication, Origin/Host checks, management routes, progress and cancellation."""

from __future__ import annotations

import json
import subprocess
import time

import anyio
import pytest

from conftest import MODES, client_for, joined, raw, server_binary, server_env, start_http_server, texts

pytestmark = pytest.mark.anyio

def test_refusals_on_mcp(http_server):
    url = http_server.mcp_url
    status, headers, _ = raw(url)
    assert status == 401 and headers.get("www-authenticate", "").startswith("Bearer")
    status, headers, _ = raw(url, headers={"Authorization": "Bearer wrong"})
    assert status == 401 and headers.get("www-authenticate", "").startswith("Bearer")
    good = {"Authorization": f"Bearer {http_server.token}"}
    status, _, body = raw(url, headers={**good, "Origin": "https://evil.example"})
    assert status == 403 and "Origin" in body
    status, _, body = raw(url, headers={**good, "Host": "evil.example"})
    assert status == 403 and "Host" in body
    status, _, body = raw(url, headers={**good, "Origin": "http://localhost:8888"})
    assert status == 200 and '"protocolVersion":"2025-11-25"' in body


def sse_events(text: str) -> list[dict]:
    """The events of an SSE body, each as its fields (`data` joined over its lines)."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict = {}
        for line in block.splitlines():
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            fields[name] = f"{fields[name]}\n{value}" if name in fields else value
        if fields:
            events.append(fields)
    return events


def test_priming_events_only_for_sessions_that_expect_them(http_server):
    """SDKs before 2025-11-25 parse every SSE event's data as JSON: an empty priming event broke
    Gemini CLI's tools/list. Sessions on those revisions get none; newer ones keep theirs."""
    auth = {"Authorization": f"Bearer {http_server.token}"}

    def session(version: str) -> list[str]:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
        status, headers, opened = raw(http_server.mcp_url, headers=auth, body=init)
        assert status == 200, opened
        session_id = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
        follow = {**auth, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": version}
        status, _, _ = raw(http_server.mcp_url, headers=follow,
                           body={"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert status in (200, 202)
        status, _, listed = raw(http_server.mcp_url, headers=follow,
                                body={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert status == 200, listed
        return [opened, listed]

    for version in ("2025-06-18", "2025-03-26"):
        for body in session(version):
            events = sse_events(body)
            assert events and all(e.get("data", "").strip() for e in events), (version, body[:300])
            assert all(json.loads(e["data"])["jsonrpc"] == "2.0" for e in events)
    opened, _ = session("2025-11-25")
    assert any("id" in e and not e.get("data", "").strip() for e in sse_events(opened)), opened[:300]


def test_management_routes(http_server, jupyter_server):
    status, _, body = raw(http_server.base + "/api/healthz", method="GET")
    health = json.loads(body)
    assert status == 200
    assert health["status"] == "healthy" and health["success"] is True
    assert health["kernel_status"] == "not_initialized" and health["jupyter"]["reachable"] is True
    status, _, _ = raw(http_server.base + "/api/healthz", method="GET", headers={"Host": "evil.example"})
    assert status == 421
    status, _, _ = raw(http_server.base + "/api/stop", method="DELETE", headers={"Host": "evil.example"})
    assert status == 421
    status, _, _ = raw(http_server.base + "/api/stop", method="DELETE", headers={"Origin": "https://evil.example"})
    assert status == 403
    status, _, _ = raw(http_server.base + "/api/stop", method="DELETE")
    assert status == 401, "stop needs the token"
    assert http_server.process.poll() is None

    env = server_env({"MCP_TOKEN": http_server.token})
    connected = subprocess.run(
        [server_binary(), "connect", "--server-url", http_server.base, "--jupyter-url", jupyter_server.url,
         "--jupyter-token", jupyter_server.token], capture_output=True, text=True, env=env, timeout=30)
    assert connected.returncode == 0, connected.stderr
    assert "Successfully connected" in connected.stdout
    refused = subprocess.run(
        [server_binary(), "connect", "--server-url", http_server.base, "--jupyter-url", "http://127.0.0.1:9"],
        capture_output=True, text=True, env=env, timeout=30)
    assert refused.returncode != 0 and "Failed to connect" in refused.stderr

    stopped = subprocess.run([server_binary(), "stop", "--server-url", http_server.base], capture_output=True,
                             text=True, env=env, timeout=30)
    assert stopped.returncode == 0, stopped.stderr
    assert http_server.process.wait(timeout=30) == 0


def test_http_refuses_to_start_without_auth(jupyter_server):
    env = server_env()
    env.pop("MCP_TOKEN", None)
    out = subprocess.run(
        [server_binary(), "start", "--transport", "streamable-http", "--port", "0", "--jupyter-url", jupyter_server.url],
        capture_output=True, text=True, timeout=30, env=env, stdin=subprocess.DEVNULL)
    assert out.returncode != 0
    assert "--mcp-token" in out.stderr and "--insecure-mcp-noauth" in out.stderr


async def test_insecure_noauth_warns_and_serves(jupyter_server, tmp_path):
    server = start_http_server(["start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token],
                               token=None, log_dir=tmp_path)
    try:
        status, _, _ = raw(server.mcp_url)
        assert status == 200
        assert "insecure-mcp-noauth" in server.log.read_text()
    finally:
        server.stop()


@pytest.mark.parametrize("mode", MODES)
async def test_progress_notifications(jupyter_server, transport, mode):
    updates = []

    async def on_progress(progress, total, message):
        updates.append((progress, total, message))

    async with client_for(jupyter_server, mode, transport=transport) as client:
        result = await client.call_tool(
            "execute_code",
            {"code": "import time\nfor i in range(6):\n    print(i, flush=True)\n    time.sleep(1)",
             "timeout": 20, "progress_interval": 1},
            progress_callback=on_progress,
        )
        assert not result.is_error
        assert "".join(texts(result)) == "0\n1\n2\n3\n4\n5\n"
    assert len(updates) >= 3, updates
    progresses = [p for p, _, _ in updates]
    assert progresses == sorted(progresses) and len(set(progresses)) == len(progresses)
    assert all(total == 20 for _, total, _ in updates)
    assert all(m.startswith("Execution in progress: ") and "/ 20s" in m for _, _, m in updates)
    assert any("outputs" in m for _, _, m in updates)


@pytest.mark.parametrize("mode", MODES)
async def test_cancellation_interrupts_the_kernel(jupyter_server, transport, mode):
    kernel_id = jupyter_server.start_kernel()
    try:
        async with client_for(jupyter_server, mode, transport=transport) as client:
            await client.call_tool("execute_code", {"code": "marker = 'kept'", "kernel_id": kernel_id})
            with anyio.move_on_after(2) as scope:
                await client.call_tool(
                    "execute_code", {"code": "import time\nwhile True: time.sleep(0.05)", "timeout": 120,
                                     "kernel_id": kernel_id})
            assert scope.cancelled_caught, "the long call was abandoned"
            started = time.monotonic()
            # Queued behind the cancelled call: it runs only once the kernel was interrupted.
            result = await client.call_tool("execute_code", {"code": "print(marker)", "kernel_id": kernel_id})
            assert texts(result) == ["kept\n"], joined(result)
            assert time.monotonic() - started < 20
    finally:
        jupyter_server.request("DELETE", f"/api/kernels/{kernel_id}")
