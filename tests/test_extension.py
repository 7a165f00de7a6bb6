"""Extension mode: our package pip-installed into a Jupyter environment (tests/ensure-extension-venv),
serving /mcp on the Jupyter Server's own port, reached by the official MCP client."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from conftest import joined, mcp_client, modern, server_binary, server_env, start_lab, texts
from harness import alive, stop_jupyter, wait_gone

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def lab():
    tmp = Path(tempfile.mkdtemp(prefix="jmcp-ext-"))
    spans = tmp / "spans.jsonl"
    server = start_lab(tmp, f"--JupyterMCPServerExtensionApp.otel_file={spans}")
    server.spans = spans
    yield server
    stop_jupyter(server)
    shutil.rmtree(tmp, ignore_errors=True)


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


async def test_mcp_on_the_jupyter_port_with_jupyter_token(lab):
    status, body = get(lab.url + "/mcp/healthz", {"Authorization": f"token {lab.token}"})
    assert status == 200 and json.loads(body)["jupyter"]["reachable"] is True
    path = f"ext-{uuid.uuid4().hex[:6]}.ipynb"
    updates = []

    async def on_progress(progress, total, message):
        updates.append(progress)

    async with mcp_client(lab, lab.token) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"use_notebook", "insert_execute_code_cell", "execute_code"} <= names
        used = await client.call_tool("use_notebook", {"notebook_name": "n", "notebook_path": path, "mode": "create"})
        assert not used.is_error and "(live backend)" in joined(used)
        ran = await client.call_tool("insert_execute_code_cell", {"cell_index": -1, "cell_source": "print(6 * 7)"})
        assert not ran.is_error and texts(ran)[0] == "42\n"
        # Progress streams through the proxy while the call runs.
        slow = await client.call_tool(
            "execute_code",
            {"code": "import time\nfor i in range(3):\n    time.sleep(1)\nprint('done')", "progress_interval": 1},
            progress_callback=on_progress,
        )
        assert not slow.is_error and "done" in joined(slow)
    assert len(updates) >= 2


async def test_only_query_narrows_a_clients_tools_through_the_proxy(lab):
    async with mcp_client(lab, lab.token, query="?only=list_kernels,execute_code") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"list_kernels", "execute_code"}
    async with mcp_client(lab, lab.token, query="?only=notebooks") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"use_notebook", "read_file"} <= names


async def test_requests_without_the_jupyter_token_are_refused(lab):
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}).encode()
    for headers in ({}, {"Authorization": "token wrong"}):
        request = urllib.request.Request(lab.url + "/mcp", data=init, method="POST", headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 403
    # The child's management routes are not reachable through Jupyter.
    status, _ = get(lab.url + "/mcp/api/stop", {"Authorization": f"token {lab.token}"})
    assert status == 404


READ_ONLY_AUTHORIZER = """
from jupyter_server.auth.authorizer import Authorizer


class ReadOnlyMcp(Authorizer):
    \"\"\"Through /mcp this user may only read; Jupyter's own API (the child's calls) is open.\"\"\"

    def is_authorized(self, handler, user, action, resource):
        return action == "read" or not handler.request.path.startswith("/mcp")
"""


async def test_jupyters_authorizer_narrows_mcp_as_it_narrows_jupyter(tmp_path):
    """A custom Authorizer that lets a user only read: /mcp shows and runs only the reading tools,
    and a call that needs more is refused naming the permission Jupyter withheld."""
    (tmp_path / "readonly_auth.py").write_text(READ_ONLY_AUTHORIZER)
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}")
    (tmp_path / "lab").mkdir()
    server = start_lab(tmp_path / "lab", "--ServerApp.authorizer_class=readonly_auth.ReadOnlyMcp", env=env)
    try:
        async with mcp_client(server, server.token) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"list_kernels", "list_notebooks", "read_notebook", "list_files"} <= names, names
            assert not names & {"execute_code", "insert_cell", "use_notebook", "connect_to_jupyter"}, names
            assert not (await client.call_tool("list_kernels", {})).is_error
        proxy = type("Proxy", (), {"mcp_url": server.url + "/mcp", "token": server.token})
        refused = answer_or_error(modern(proxy, "tools/call", {"name": "execute_code", "arguments": {"code": "1"}}))
        assert "'execute on kernels'" in refused and "code:execute" in refused, refused
        refused = answer_or_error(modern(proxy, "tools/call", {"name": "insert_cell", "arguments": {
            "cell_index": 0, "cell_source": "x"}}))
        assert "'write on contents'" in refused, refused
    finally:
        stop_jupyter(server)


def answer_or_error(messages: list[dict]) -> str:
    """The text of a refusal, whether it came as an HTTP error body or a JSON-RPC error."""
    (message,) = messages
    return json.dumps(message)


async def test_otel_file_traitlet_writes_spans(lab):
    async with mcp_client(lab, lab.token) as client:
        assert not (await client.call_tool("list_kernels", {})).is_error
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = lab.spans.read_text().splitlines() if lab.spans.exists() else []
        if any(json.loads(line)["name"] == "tool_call:list_kernels" for line in lines):
            return
        time.sleep(0.1)
    raise AssertionError(f"no tool_call:list_kernels span in {lab.spans}")


def child_pid(log: Path) -> int:
    found = re.search(r"jupyter-mcp-server started \(pid (\d+)\)", log.read_text())
    assert found, "the extension did not log its child"
    return int(found.group(1))


def test_child_stops_with_the_server(tmp_path):
    server = start_lab(tmp_path)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "jupyter-mcp-server started" not in (tmp_path / "jupyter.log").read_text():
        time.sleep(0.1)
    pid = child_pid(tmp_path / "jupyter.log")
    assert alive(pid)
    stop_jupyter(server)
    assert wait_gone([pid], 20) == [], "the MCP child outlived the Jupyter Server"


def test_refuses_to_run_beside_the_python_server(tmp_path):
    server = start_lab(tmp_path, "--ServerApp.jpserver_extensions=jupyter_mcp_server=True")
    try:
        status, _ = get(server.url + "/mcp/healthz", {"Authorization": f"token {server.token}"})
        assert status == 404
        log = (tmp_path / "jupyter.log").read_text()
        assert "both jupyter-mcp-server-rs and the Python jupyter-mcp-server" in log
        assert "jupyter-mcp-server started" not in log
    finally:
        stop_jupyter(server)


def child_pids(log: Path) -> list[int]:
    return [int(p) for p in re.findall(r"jupyter-mcp-server started \(pid (\d+)\)", log.read_text())]


def wait_for_child(log: Path, count: int, seconds: float = 60) -> int:
    """Waits until the extension has started `count` children; returns the newest one's pid."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pids = child_pids(log)
        if len(pids) >= count:
            return pids[-1]
        time.sleep(0.1)
    raise AssertionError(f"the extension started {len(child_pids(log))} children, not {count}:\n{log.read_text()}")


def proc_cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def proc_environ(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(p.decode().split("=", 1) for p in pairs if b"=" in p)


async def test_child_tokens_are_off_its_command_line(lab):
    log = Path(lab.root).parent / "jupyter.log"
    pid = wait_for_child(log, 1)
    line = proc_cmdline(pid)
    child_token = proc_environ(pid)["MCP_TOKEN"]
    assert len(child_token) >= 32
    for secret in (lab.token, child_token):
        assert secret not in line, f"a token is readable in /proc/{pid}/cmdline: {line}"
    assert "--mcp-token" not in line and "--jupyter-token" not in line
    # Its port is a socket the extension bound and handed over open, never a port number freed
    # and bound again.
    assert "--port" not in line, line
    fd = proc_environ(pid)["JUPYTER_MCP_LISTEN_FD"]
    assert os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    # And the child still works: it got both tokens from its environment.
    status, body = get(lab.url + "/mcp/healthz", {"Authorization": f"token {lab.token}"})
    assert status == 200 and json.loads(body)["jupyter"]["reachable"] is True


def test_a_foreign_origin_is_refused_even_with_the_token(lab):
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}).encode()

    def post(origin: str | None) -> int:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "Authorization": f"token {lab.token}"}
        if origin:
            headers["Origin"] = origin
        request = urllib.request.Request(lab.url + "/mcp", data=init, method="POST", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                return reply.status
        except urllib.error.HTTPError as e:
            return e.code

    assert post("https://evil.example") == 403
    assert post("http://evil.example:8888") == 403
    assert post(None) == 200
    assert post(lab.url) == 200, "the Jupyter Server's own pages may call /mcp"
    assert post("http://localhost:1234") == 200, "loopback pages are allowed, as in the standalone server"


def test_the_child_comes_back_after_it_dies(tmp_path):
    server = start_lab(tmp_path)
    log = tmp_path / "jupyter.log"
    auth = {"Authorization": f"token {server.token}"}
    try:
        first = wait_for_child(log, 1)
        status, _ = get(server.url + "/mcp/healthz", auth)
        assert status == 200
        # Killed.
        os.kill(first, signal.SIGKILL)
        second = wait_for_child(log, 2)
        assert second != first and alive(second)
        assert re.search(rf"jupyter-mcp-server \(pid {first}\) was killed by signal 9; restarting it in", log.read_text())
        status, _ = get(server.url + "/mcp/healthz", auth)
        assert status == 200
        # Stopped through its own port (once a way to make /mcp answer 503 for good).
        environ = proc_environ(second)
        ports = re.findall(r"serving MCP over Streamable HTTP at http://127\.0\.0\.1:(\d+)/mcp", log.read_text())
        # Each child serves the one socket the extension bound and keeps: the same port.
        assert len(ports) == 2 and len(set(ports)) == 1, ports
        port = ports[-1]
        request = urllib.request.Request(f"http://127.0.0.1:{port}/api/stop", method="DELETE",
                                         headers={"Authorization": f"Bearer {environ['MCP_TOKEN']}"})
        with urllib.request.urlopen(request, timeout=30) as reply:
            assert reply.status == 200
        third = wait_for_child(log, 3)
        assert re.search(rf"jupyter-mcp-server \(pid {second}\) exited with status 0; restarting it in", log.read_text())
        # Each restart in a row waits longer.
        delays = [float(d) for d in re.findall(r"restarting it in ([\d.]+) s", log.read_text())]
        assert delays == sorted(delays) and delays[1] > delays[0], delays
        status, body = get(server.url + "/mcp/healthz", auth)
        assert status == 200 and json.loads(body)["jupyter"]["reachable"] is True
        assert alive(third)
    finally:
        stop_jupyter(server)


def test_a_handed_over_descriptor_that_is_no_listening_socket_is_refused(tmp_path):
    """--listen-fd (JUPYTER_MCP_LISTEN_FD) takes only a bound, listening TCP socket."""
    import socket
    import subprocess

    plain = open(tmp_path / "not-a-socket", "w")
    idle = socket.socket()
    idle.bind(("127.0.0.1", 0))  # bound, never listening
    try:
        for fd, why in ((plain.fileno(), "is not a socket"), (idle.fileno(), "is a socket that is not listening"),
                        (1, "is stdin, stdout or stderr")):
            env = server_env({"JUPYTER_MCP_LISTEN_FD": str(fd)})
            done = subprocess.run([server_binary(), "start", "--transport", "streamable-http", "--insecure-mcp-noauth",
                                   "--jupyter-url", "http://127.0.0.1:9"], env=env, pass_fds=(fd,) if fd > 2 else (),
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
            assert done.returncode != 0, done.stderr
            assert f"file descriptor {fd} {why}" in done.stderr, done.stderr
    finally:
        plain.close()
        idle.close()
