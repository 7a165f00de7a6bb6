"""The spine: every tool through the official MCP client, on stdio and Streamable HTTP, in both protocol eras."""

from __future__ import annotations

import base64
import os
import json
import signal
import subprocess
import time

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from harness import alive, wait_gone
from conftest import MODES, RawStdio, client_for, joined, server_binary, server_env, texts

pytestmark = pytest.mark.anyio

# A 1x1 red PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


@pytest.mark.parametrize("mode", MODES)
async def test_handshake_and_tool_list(jupyter_server, mode, transport):
    async with client_for(jupyter_server, mode, transport=transport) as client:
        expected = "2025-11-25" if mode == "legacy" else "2026-07-28"
        assert client.protocol_version == expected
        assert client.server_info.name == "Jupyter MCP Server"
        tools = (await client.list_tools()).tools
        names = [t.name for t in tools]
        assert names == sorted(names), "tools are listed in a deterministic order"
        assert {"execute_code", "list_kernels", "list_files", "connect_to_jupyter"} <= set(names)
        assert "test_simple_text" not in names and "greet" not in names, "no conformance fixtures when shipped"
        by_name = {t.name: t for t in tools}
        schema = by_name["execute_code"].input_schema
        assert schema["required"] == ["code"]
        assert schema["properties"]["timeout"]["default"] == 30.0
        assert by_name["list_kernels"].annotations.read_only_hint is True
        assert by_name["execute_code"].annotations.destructive_hint is True


@pytest.mark.parametrize("mode", MODES)
async def test_execute_code_outputs(jupyter_server, mode, transport):
    async with client_for(jupyter_server, mode, transport=transport) as client:
        result = await client.call_tool("execute_code", {"code": "print('hello'); 6 * 7"})
        assert not result.is_error, joined(result)
        assert texts(result) == ["hello\n", "42"]

        image_code = (
            "import base64\nfrom IPython.display import Image, display\n"
            f"display(Image(data=base64.b64decode({base64.b64encode(PNG).decode()!r})))"
        )
        result = await client.call_tool("execute_code", {"code": image_code})
        images = [c for c in result.content if c.type == "image"]
        assert len(images) == 1, result.content
        assert images[0].mime_type == "image/png"
        assert base64.b64decode(images[0].data) == PNG

        result = await client.call_tool("execute_code", {"code": "1/0"})
        text = joined(result)
        assert "ZeroDivisionError" in text and "Traceback" in text
        assert "\x1b[" not in text, "ANSI codes are stripped"

        result = await client.call_tool("execute_code", {"code": "x = 1"})
        assert texts(result) == ["[No output generated]"]


async def test_images_can_be_disabled(jupyter_server, transport):
    async with client_for(jupyter_server, "legacy", env={"ALLOW_IMG_OUTPUT": "false"}, transport=transport) as client:
        code = (
            "import base64\nfrom IPython.display import Image, display\n"
            f"display(Image(data=base64.b64decode({base64.b64encode(PNG).decode()!r})))"
        )
        result = await client.call_tool("execute_code", {"code": code})
        assert texts(result) == ["[Image Output (PNG) - Image display disabled]"]


async def test_long_output_is_cut_with_a_note(jupyter_server, transport):
    async with client_for(jupyter_server, "legacy", "--max-output-chars", "1000", transport=transport) as client:
        result = await client.call_tool("execute_code", {"code": "print('y' * 5000)"})
        first, note = texts(result)
        assert first == "y" * 1000
        assert "OUTPUT TRUNCATED" in note and "4001 of 5001 characters" in note


@pytest.mark.parametrize("mode", MODES)
async def test_timeout_interrupts_and_kernel_survives(jupyter_server, mode, transport):
    async with client_for(jupyter_server, mode, transport=transport) as client:
        await client.call_tool("execute_code", {"code": "state = 'kept'"})
        started = time.monotonic()
        result = await client.call_tool(
            "execute_code", {"code": "import time\nprint('before', flush=True)\nwhile True: time.sleep(0.05)", "timeout": 2}
        )
        elapsed = time.monotonic() - started
        text = joined(result)
        assert "before" in text, "outputs produced before the timeout come back"
        assert "[TIMEOUT ERROR" in text and "interrupted" in text
        assert elapsed < 15, elapsed
        result = await client.call_tool("execute_code", {"code": "print(state)"})
        assert texts(result) == ["kept\n"], "the kernel was interrupted, not restarted"


async def test_overlapping_calls_on_one_kernel_queue(jupyter_server, transport):
    kernel_id = jupyter_server.start_kernel()
    try:
        async with client_for(jupyter_server, "legacy", transport=transport) as client:
            results = {}

            async def run(name, code):
                results[name] = await client.call_tool("execute_code", {"code": code, "kernel_id": kernel_id})

            async with anyio.create_task_group() as tg:
                tg.start_soon(run, "slow", "import time; time.sleep(1.5); print('slow done')")
                await anyio.sleep(0.2)
                tg.start_soon(run, "fast", "print('fast done')")
            assert texts(results["slow"]) == ["slow done\n"]
            assert texts(results["fast"]) == ["fast done\n"]
    finally:
        jupyter_server.request("DELETE", f"/api/kernels/{kernel_id}")


async def test_named_kernel_deleted_is_reported_gone(jupyter_server, transport):
    kernel_id = jupyter_server.start_kernel()
    async with client_for(jupyter_server, "legacy", transport=transport) as client:
        result = await client.call_tool("execute_code", {"code": "v = 5; v", "kernel_id": kernel_id})
        assert texts(result) == ["5"]
        listed = joined(await client.call_tool("list_kernels", {}))
        assert kernel_id in listed
        status, _ = jupyter_server.request("DELETE", f"/api/kernels/{kernel_id}")
        assert status == 204
        await anyio.sleep(0.5)
        for _ in range(2):
            result = await client.call_tool("execute_code", {"code": "v", "kernel_id": kernel_id})
            assert result.is_error
            assert "lost" in joined(result) and kernel_id in joined(result)


async def test_default_kernel_loss_is_reported_then_replaced(jupyter_server, transport):
    async with client_for(jupyter_server, "legacy", transport=transport) as client:
        before = jupyter_server.kernel_ids()
        await client.call_tool("execute_code", {"code": "w = 1"})
        (default_id,) = jupyter_server.kernel_ids() - before
        jupyter_server.request("DELETE", f"/api/kernels/{default_id}")
        await anyio.sleep(0.5)
        result = await client.call_tool("execute_code", {"code": "print(w)"})
        assert result.is_error and "default kernel" in joined(result) and "lost" in joined(result)
        result = await client.call_tool("execute_code", {"code": "print('fresh')"})
        assert texts(result) == ["fresh\n"]
    # The replacement was ours and is shut down with us.
    time.sleep(0.5)
    assert default_id not in jupyter_server.kernel_ids()


async def test_killed_kernel_process_is_reported_not_hidden(jupyter_server, transport):
    """Jupyter restarts a kernel whose process died under the same id: its state is still lost."""
    async with client_for(jupyter_server, "legacy", transport=transport) as client:
        await client.call_tool("execute_code", {"code": "precious = 42"})
        killed = await client.call_tool(
            "execute_code", {"code": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "timeout": 60})
        assert killed.is_error, joined(killed)
        assert "lost" in joined(killed) and "restarted" in joined(killed)
        fresh = await client.call_tool("execute_code", {"code": "print('precious' in globals())"})
        assert texts(fresh) == ["False\n"], "a fresh kernel, and the agent was told"


async def test_unknown_kernel_id(jupyter_server, transport):
    async with client_for(jupyter_server, "legacy", transport=transport) as client:
        result = await client.call_tool("execute_code", {"code": "1", "kernel_id": "no-such-kernel"})
        assert result.is_error
        assert "not found" in joined(result) and "list_kernels" in joined(result)


async def test_list_files_and_kernels(jupyter_server, transport):
    (jupyter_server.root / "sub").mkdir(exist_ok=True)
    (jupyter_server.root / "sub" / "data.csv").write_text("a,b\n1,2\n")
    (jupyter_server.root / "notes.txt").write_text("hi")
    async with client_for(jupyter_server, "legacy", transport=transport) as client:
        # Other tests leave files in the shared root: ask for enough rows to see ours.
        text = joined(await client.call_tool("list_files", {"limit": 1000}))
        assert text.startswith("Showing 0-")
        assert "Path\tType\tSize\tLast_Modified" in text
        assert "sub/data.csv\tfile\t8B\t" in text
        assert "notes.txt\tfile\t2B" in text
        only_csv = joined(await client.call_tool("list_files", {"pattern": "*.csv", "limit": 1000}))
        assert "sub/data.csv" in only_csv and "notes.txt" not in only_csv
        shallow = joined(await client.call_tool("list_files", {"max_depth": 0, "limit": 1000}))
        assert "sub/data.csv" not in shallow and "sub\tdirectory" in shallow
        missing = await client.call_tool("list_files", {"path": "nowhere"})
        assert missing.is_error and "not found" in joined(missing)

        kernel_id = jupyter_server.start_kernel()
        try:
            table = joined(await client.call_tool("list_kernels", {}))
            header, *rows = table.split("\n")
            assert header == "ID\tName\tDisplay_Name\tLanguage\tState\tConnections\tLast_Activity\tEnvironment"
            row = next(r for r in rows if r.startswith(kernel_id))
            cols = row.split("\t")
            assert cols[1] == "python3" and cols[3] == "python"
        finally:
            jupyter_server.request("DELETE", f"/api/kernels/{kernel_id}")


async def test_connect_to_jupyter(jupyter_server, transport):
    async with client_for(jupyter_server, "legacy", transport=transport) as client:
        bad = await client.call_tool("connect_to_jupyter", {"jupyter_url": "http://127.0.0.1:9"})
        assert bad.is_error and "Failed to connect" in joined(bad)
        wrong_token = await client.call_tool(
            "connect_to_jupyter", {"jupyter_url": jupyter_server.url, "jupyter_token": "wrong"}
        )
        assert wrong_token.is_error and "token" in joined(wrong_token)
        ok = await client.call_tool(
            "connect_to_jupyter", {"jupyter_url": jupyter_server.url, "jupyter_token": jupyter_server.token}
        )
        assert not ok.is_error
        assert joined(ok).startswith(f"Successfully connected to Jupyter server: {jupyter_server.url}")
        assert texts(await client.call_tool("execute_code", {"code": "print(3)"})) == ["3\n"]


@pytest.mark.parametrize("mode", MODES)
async def test_bad_input_keeps_the_server_serving(jupyter_server, mode, transport):
    async with client_for(jupyter_server, mode, transport=transport) as client:
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("no_such_tool", {})
        assert unknown.value.error.code == -32602
        assert "no_such_tool" in unknown.value.error.message

        wrong_type = await client.call_tool("execute_code", {"code": "1", "timeout": "soon"})
        assert wrong_type.is_error and "timeout" in joined(wrong_type)
        missing = await client.call_tool("execute_code", {})
        assert missing.is_error and "code" in joined(missing)
        extra = await client.call_tool("list_files", {"max_depth": 9})
        assert extra.is_error and "max_depth" in joined(extra)

        result = await client.call_tool("execute_code", {"code": "print('still here')"})
        assert texts(result) == ["still here\n"]


def test_malformed_stdin_lines_get_errors(jupyter_server):
    """Raw stdio: garbage, invalid UTF-8 and a bad request each get an answer; stdout is only JSON-RPC."""
    proc = subprocess.Popen(
        [server_binary(), "start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=server_env(),
    )
    lines = [
        b"this is not json",
        b"\xff\xfe\xfd",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}).encode(),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "nope"}}).encode(),
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}).encode(),
    ]
    out, _ = proc.communicate(b"\n".join(lines) + b"\n", timeout=60)
    assert proc.returncode == 0
    replies = [json.loads(line) for line in out.decode().splitlines()]
    parse_errors = [r for r in replies if r.get("error", {}).get("code") == -32700]
    assert len(parse_errors) == 2 and all(r["id"] is None for r in parse_errors)
    by_id = {r["id"]: r for r in replies if r.get("id") is not None}
    assert by_id[1]["result"]["protocolVersion"] == "2025-11-25"
    assert by_id[2]["error"]["code"] == -32602
    assert len(by_id[3]["result"]["tools"]) >= 4


def test_cli_errors_and_version():
    out = subprocess.run([server_binary(), "--version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.startswith("jupyter-mcp-server ")
    bad = subprocess.run([server_binary(), "start", "--transport", "pigeon"], capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "pigeon" in bad.stderr and bad.stdout == ""
    unknown = subprocess.run([server_binary(), "start", "--frobnicate"], capture_output=True, text=True, timeout=30)
    assert unknown.returncode != 0 and "--frobnicate" in unknown.stderr
    env = server_env({"JUPYTER_MCP_EXECUTION_TIMEOUT": "abc"})
    bad_env = subprocess.run([server_binary(), "start"], capture_output=True, text=True, timeout=30, env=env)
    assert bad_env.returncode != 0 and "abc" in bad_env.stderr


def test_missing_jupyter_fails_at_once(tmp_path):
    # No jupyter on PATH, and none where runtime/serve installs one (under HOME).
    env = server_env({"PATH": str(tmp_path), "HOME": str(tmp_path)})
    env.pop("JUPYTER_URL", None)
    env.pop("JUPYTER_MCP_SERVE_VENV", None)
    started = time.monotonic()
    out = subprocess.run([server_binary(), "start"], capture_output=True, text=True, timeout=30, env=env,
                         stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert out.returncode != 0
    assert "no `jupyter` command" in out.stderr and "pip install jupyter-server ipykernel" in out.stderr
    assert out.stdout == ""
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("mode", MODES)
async def test_embedded_jupyter_starts_and_stops_on_eof(tmp_path, mode):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    (tmp_path / "here.txt").write_text("x")
    env = server_env()
    env.pop("JUPYTER_URL", None)
    env.pop("JUPYTER_TOKEN", None)
    params = StdioServerParameters(command=server_binary(), args=["start"], env=env, cwd=str(tmp_path))
    async with Client(params, mode=mode, read_timeout_seconds=120) as client:
        listing = joined(await client.call_tool("list_files", {}))
        assert "here.txt" in listing, "the embedded server is rooted at the working directory"
        pids = joined(await client.call_tool("execute_code", {"code": "import os; print(os.getpid(), os.getppid())"}))
        kernel_pid, jupyter_pid = map(int, pids.split())
        assert alive(kernel_pid) and alive(jupyter_pid)
    assert wait_gone([kernel_pid, jupyter_pid]) == [], "the embedded Jupyter and its kernel are stopped"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_embedded_jupyter_stops_on_signals(tmp_path, sig):
    env = server_env()
    env.pop("JUPYTER_URL", None)
    server = RawStdio(["start"], env=env, cwd=tmp_path)
    result = server.call_tool(2, "execute_code", {"code": "import os; print(os.getpid(), os.getppid())"})
    kernel_pid, jupyter_pid = map(int, result["content"][0]["text"].split())
    proc = server.proc
    proc.send_signal(sig)
    assert proc.wait(timeout=40) == 0
    assert wait_gone([kernel_pid, jupyter_pid]) == []


def descendants(pid: int) -> list[int]:
    """Every process below `pid` now (children, their children, ...), read from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, of in parents.items() if of == parent]
        found += children
        frontier += children
    return found


def embedded_env() -> dict[str, str]:
    env = server_env()
    env.pop("JUPYTER_URL", None)
    env.pop("JUPYTER_TOKEN", None)
    return env


def test_a_server_killed_mid_execution_leaves_nothing_running(tmp_path):
    """SIGKILL (no cleanup of ours can run): the Jupyter Server is told by the Linux kernel
    (parent-death signal) and stops its kernels; nothing we started is alive 5 s later."""
    server = RawStdio(["start"], env=embedded_env(), cwd=tmp_path)
    result = server.call_tool(2, "execute_code", {"code": "import os; print(os.getpid(), os.getppid())"})
    kernel_pid, jupyter_pid = map(int, result["content"][0]["text"].split())
    server.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "execute_code", "arguments": {"code": "import time; time.sleep(120)", "timeout": 300}}})
    time.sleep(1.5)
    started = descendants(server.proc.pid)
    assert kernel_pid in started and jupyter_pid in started, started
    server.proc.kill()
    server.proc.wait(timeout=10)
    assert wait_gone(started, 5) == [], "a process the killed server started is still running"


def test_a_server_killed_while_jupyter_starts_leaves_nothing_running(tmp_path):
    server = RawStdio(["start", "--start-new-code-sandbox", "true"], env=embedded_env(), cwd=tmp_path)
    deadline = time.monotonic() + 60
    started = []
    while time.monotonic() < deadline and not started:
        started = descendants(server.proc.pid)
        time.sleep(0.05)
    assert started, "the server never started its Jupyter"
    time.sleep(0.5)  # Jupyter is importing its extensions, not yet serving
    started = descendants(server.proc.pid)
    server.proc.kill()
    server.proc.wait(timeout=10)
    assert wait_gone(started, 5) == [], "a process the killed server started is still running"


def test_stdin_closed_on_a_loaded_machine_exits_within_the_clients_grace(tmp_path):
    """The official client closes stdin and waits 2 s before SIGTERM: we are gone within 1.5 s,
    with a CPU burner beside us, and so is everything we started."""
    server = RawStdio(["start"], env=embedded_env(), cwd=tmp_path)
    server.call_tool(2, "use_notebook", {"notebook_name": "a", "notebook_path": "a.ipynb", "mode": "create"})
    server.call_tool(3, "use_notebook", {"notebook_name": "b", "notebook_path": "b.ipynb", "mode": "create"})
    result = server.call_tool(4, "execute_code", {"code": "print(1)"})
    assert not result.get("isError"), result
    started = descendants(server.proc.pid)
    assert len(started) >= 3, started  # Jupyter and the two notebooks' kernels (execute_code runs in b's)
    burner = subprocess.Popen(["python3", "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        closed = time.monotonic()
        server.proc.stdin.close()
        server.proc.wait(timeout=30)
        took = time.monotonic() - closed
    finally:
        burner.kill()
    assert took <= 1.5, f"the server took {took:.2f} s to exit after stdin closed"
    assert wait_gone(started, 5) == [], "a process the server started outlived it"


async def test_the_official_clients_shutdown_on_a_loaded_machine_leaves_nothing(tmp_path):
    """The official client's own end of a session (stdin closed, then its 2 s grace and signals):
    with a CPU burner beside us, nothing the server started outlives the session."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=server_binary(), args=["start"], env=embedded_env(), cwd=str(tmp_path))
    burner = subprocess.Popen(["python3", "-c", "while True: pass"])
    try:
        async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
            for name in ("a", "b"):
                used = await client.call_tool("use_notebook", {"notebook_name": name, "notebook_path": f"{name}.ipynb",
                                                               "mode": "create"})
                assert not used.is_error, joined(used)
            pids = joined(await client.call_tool("execute_code", {"code": "import os; print(os.getpid(), os.getppid())"}))
            kernel_pid, jupyter_pid = map(int, pids.split())
            started = descendants(jupyter_pid) + [jupyter_pid]
            assert kernel_pid in started and len(started) >= 3, started
    finally:
        burner.kill()
    assert wait_gone(started, 5) == [], "a process the server started outlived the client's session"
