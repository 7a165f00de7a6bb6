"""What a new user meets first: the README's client configs started the way MCP clients start
servers (a minimal environment: `env -i HOME=… PATH=/usr/bin:/bin`, no cargo, no jupyter on
PATH), `runtime/serve --print-config`, a first build stopped when its client goes away, and the
one line that says the server is ready."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from conftest import RawStdio, joined, server_binary, texts

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
SERVE = ROOT / "runtime" / "serve"
CLIENT_PATH = "/usr/bin:/bin"


def client_home(tmp_path: Path) -> Path:
    """A HOME as a user's would be after `runtime/serve` ran once in a terminal: the built binary
    in the default target dir (here the suite's own build) and Jupyter in the serve venv (here the
    suite's venv, the one running this test)."""
    home = tmp_path / "home"
    cache = home / ".cache" / "jupyter-mcp-server"
    debug = cache / "target" / "debug"
    debug.mkdir(parents=True)
    (debug / "jupyter-mcp-server").symlink_to(server_binary())
    (debug / ".serve-built").touch()
    (cache / "serve-venv").symlink_to(Path(sys.prefix))
    assert (cache / "serve-venv" / "bin" / "jupyter").is_file(), "the test venv holds Jupyter Server"
    return home


def minimal_env(home: Path, *extra: str) -> list[str]:
    """`env -i` with what a desktop client passes (the run mark lets conftest stop leftovers)."""
    return ["/usr/bin/env", "-i", f"HOME={home}", f"PATH={CLIENT_PATH}",
            f"JMCP_TEST_RUN={os.environ['JMCP_TEST_RUN']}", *extra]


def readme_snippets() -> list[tuple[str, dict]]:
    """The stdio server entries of the README's JSON client configs, as written."""
    readme = (ROOT / "README.md").read_text()
    found = []
    for block in re.findall(r"```json\n(.*?)```", readme, flags=re.S):
        config = json.loads(block)
        for key in ("mcpServers", "servers"):
            for name, server in config.get(key, {}).items():
                if "command" in server:
                    found.append((f"{key}.{name}", server))
    return found


def placed(server: dict, root_dir: Path) -> tuple[str, list[str]]:
    """A snippet with its placeholders filled in as its reader would."""
    fill = lambda s: (s.replace("/path/to/this/repo", str(ROOT)).replace("/home/me/notebooks", str(root_dir))  # noqa: E731
                      .replace("${workspaceFolder}", str(root_dir)))
    return fill(server["command"]), [fill(a) for a in server.get("args", [])]


async def run_like_a_client(command: list[str], stderr: Path) -> None:
    """tools/list and execute_code through the official client, stderr kept for the test."""
    params = StdioServerParameters(command="/bin/sh", args=["-c", 'exec "$@" 2>>"$0"', str(stderr), *command],
                                   env={})
    async with Client(params, mode="legacy", read_timeout_seconds=180) as client:
        tools = (await client.list_tools()).tools
        assert "execute_code" in {t.name for t in tools}
        result = await client.call_tool("execute_code", {"code": "print(6 * 7)"})
        assert texts(result) == ["42\n"], joined(result)


async def test_readme_snippets_work_from_a_clients_environment(tmp_path):
    snippets = readme_snippets()
    assert len(snippets) >= 2, "the Claude/Cursor and VS Code stdio snippets"
    home = client_home(tmp_path)
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for where, server in snippets:
        command, args = placed(server, notebooks)
        log = tmp_path / f"{where}.log"
        await run_like_a_client(minimal_env(home, command, *args), log)
        stderr = log.read_text()
        assert "cargo: command not found" not in stderr and "Compiling" not in stderr, stderr
        assert "serving MCP on stdio" in stderr, stderr


async def test_print_config_starts_the_built_binary_with_the_serve_venv(tmp_path):
    home = client_home(tmp_path)
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    configs = {}
    for client in ("claude", "cursor", "vscode"):
        printed = subprocess.run(minimal_env(home, str(SERVE), "--print-config", client, "--root-dir", str(notebooks)),
                                 capture_output=True, text=True, timeout=120)
        assert printed.returncode == 0, printed.stderr
        configs[client] = json.loads(printed.stdout)
    binary = str(home / ".cache/jupyter-mcp-server/target/debug/jupyter-mcp-server")
    claude = configs["claude"]["mcpServers"]["jupyter"]
    assert claude == {"command": binary, "args": ["--root-dir", str(notebooks)]}, claude
    assert configs["cursor"] == configs["claude"]
    assert configs["vscode"] == {"servers": {"jupyter": {"type": "stdio", **claude}}}

    log = tmp_path / "binary.log"
    await run_like_a_client(minimal_env(home, claude["command"], *claude["args"]), log)
    stderr = log.read_text()
    assert "no jupyter on PATH; using the one runtime/serve installed" in stderr, stderr
    assert str(home / ".cache/jupyter-mcp-server/serve-venv/bin/jupyter") in stderr, stderr
    assert stderr.count("serving MCP on stdio") == 1, stderr


def test_unbuilt_binary_without_cargo_names_the_command_to_run(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    started = subprocess.run(minimal_env(home, str(SERVE), "--root-dir", str(tmp_path)), stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=60)
    assert started.returncode != 0
    assert started.stdout == "", "stdout is MCP's"
    assert "cargo is not on PATH" in started.stderr, started.stderr
    assert f"{SERVE} --print-config claude" in started.stderr, started.stderr


def test_a_binary_without_jupyter_says_what_to_do(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    started = subprocess.run(minimal_env(home, "RUST_BACKTRACE=1", server_binary(), "--root-dir", str(tmp_path)),
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert started.returncode == 1
    assert "no `jupyter` command was found on PATH" in started.stderr, started.stderr
    assert "Run runtime/serve once in a terminal" in started.stderr, started.stderr
    assert "Stack backtrace" not in started.stderr and "backtrace" not in started.stderr.lower(), started.stderr


def cargo_processes(target_dir: Path) -> list[int]:
    """Processes whose environment names this target dir (the build and its compilers)."""
    mark = f"CARGO_TARGET_DIR={target_dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_client_leaving_during_the_first_build_stops_it(tmp_path):
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("needs cargo on PATH")
    target = tmp_path / "target"
    env = {**os.environ, "CARGO_TARGET_DIR": str(target)}
    env.pop("CARGO_BUILD_BUILD_DIR", None)
    log = tmp_path / "serve.log"
    with open(log, "wb") as err:
        serve = subprocess.Popen([str(SERVE), "--root-dir", str(tmp_path)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=err, env=env)
    try:
        deadline = time.monotonic() + 120
        # The script itself carries the variable too; the build is what runs beside it.
        while not [pid for pid in cargo_processes(target) if pid != serve.pid]:
            assert serve.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the build never started"
            time.sleep(0.1)
        time.sleep(1)
        assert "building jupyter-mcp-server for the first time" in log.read_text()
        serve.stdin.close()  # the client gives up
        assert serve.wait(timeout=30) != 0
        deadline = time.monotonic() + 30
        while cargo_processes(target) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert cargo_processes(target) == [], "the build outlived its client"
        assert "the client went away; stopping" in log.read_text()
    finally:
        if serve.poll() is None:
            serve.send_signal(signal.SIGTERM)
            serve.wait(timeout=30)
        for pid in cargo_processes(target):
            os.kill(pid, signal.SIGKILL)


# Jupyter's own words on any session, not about our requests: an untrusted notebook (every
# notebook not signed in this Jupyter), its websocket ping settings.
NOT_OURS = ("is not trusted", "websocket_ping_timeout")


def jupyter_complaints(log: str) -> list[str]:
    """The warnings, errors and tracebacks the embedded Jupyter Server logged to our stderr."""
    return [line for line in log.splitlines()
            if (re.match(r"\[[WEC] \d", line) or "Traceback" in line or "ZMQError" in line)
            and not any(phrase in line for phrase in NOT_OURS)]


def test_a_session_leaves_nothing_for_jupyter_to_complain_about(tmp_path):
    # Our own Jupyter, logging warnings to our stderr (the default level): a notebook created,
    # run and read, then the client closing our stdin while code still runs.
    log = tmp_path / "server.log"
    env = {k: v for k, v in os.environ.items() if k not in ("JUPYTER_URL", "JUPYTER_TOKEN")}
    env["RUST_LOG"] = "jupyter_mcp_server=info,warn"
    with open(log, "wb") as err:
        server = RawStdio(["start", "--root-dir", str(tmp_path)], env=env, stderr=err)
    try:
        opened = server.call_tool(2, "use_notebook", {"notebook_name": "n", "notebook_path": "n.ipynb",
                                                      "mode": "create"})
        assert not opened.get("isError"), opened
        inserted = server.call_tool(3, "insert_cell", {"cell_index": -1, "cell_type": "code",
                                                       "cell_source": "print(6 * 7)"})
        assert not inserted.get("isError"), inserted
        ran = server.call_tool(4, "execute_cell", {"cell_index": 0})
        assert "42" in json.dumps(ran), ran
        read = server.call_tool(5, "read_notebook", {"notebook_name": "n"})
        assert "print(6 * 7)" in json.dumps(read), read
        server.send({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {
            "name": "execute_code", "arguments": {"code": "import time\nfor _ in range(600): time.sleep(0.1)",
                                                  "timeout": 120}}})
        time.sleep(3)  # the client leaves mid-run
        server.proc.stdin.close()
        assert server.proc.wait(timeout=90) == 0
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
    stderr = log.read_text()
    assert "embedded Jupyter Server stopped" in stderr, stderr
    assert stderr.count("serving MCP on stdio") == 1, stderr
    assert jupyter_complaints(stderr) == [], stderr


# The first answer's bounds from spawn (issue: initialize 50 ms, tools/list 100 ms), tested with
# margin for a loaded test machine; the benchmark (tests/bench/run first-answer) prints the real
# figures. Our own Jupyter takes seconds to answer, so these hold only if nothing waits for it.
FIRST_ANSWER_LIMIT = 0.25
TOOLS_LIST_LIMIT = 0.4


def read_reply(proc: subprocess.Popen, request_id, notifications: list | None = None) -> dict:
    while True:
        line = proc.stdout.readline()
        assert line, "the server closed stdout"
        message = json.loads(line)
        if message.get("id") == request_id:
            return message
        if notifications is not None and "method" in message:
            notifications.append(message)


def test_the_first_answer_never_waits_for_jupyter_on_stdio(tmp_path):
    log = tmp_path / "server.log"
    env = {k: v for k, v in os.environ.items() if k not in ("JUPYTER_URL", "JUPYTER_TOKEN")}
    env["RUST_LOG"] = "jupyter_mcp_server=info,jupyter_client=info,warn"
    with open(log, "wb") as err:
        spawned = time.monotonic()
        proc = subprocess.Popen([server_binary(), "--root-dir", str(tmp_path)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, env=env)
    send = lambda m: (proc.stdin.write((json.dumps(m) + "\n").encode()), proc.stdin.flush())  # noqa: E731
    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
        read_reply(proc, 1)
        initialized = time.monotonic() - spawned
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = read_reply(proc, 2)
        tools_listed = time.monotonic() - spawned
        assert "embedded Jupyter Server ready" not in log.read_text(), "answered before Jupyter was up"
        assert initialized <= FIRST_ANSWER_LIMIT and tools_listed <= TOOLS_LIST_LIMIT, (initialized, tools_listed)
        assert {"execute_code", "use_notebook"} <= {t["name"] for t in listed["result"]["tools"]}
        # A call that needs Jupyter waits for it, hearing why, then runs.
        notifications: list = []
        send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "execute_code", "arguments": {"code": "6 * 7"}, "_meta": {"progressToken": "first"}}})
        ran = read_reply(proc, 3, notifications)
        assert [c["text"] for c in ran["result"]["content"]] == ["42"], ran
        waiting = [n["params"]["message"] for n in notifications if n["method"] == "notifications/progress"]
        assert any(m.startswith("Waiting for the embedded Jupyter Server to start") for m in waiting), notifications
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    assert "embedded Jupyter Server stopped" in log.read_text()


def test_the_first_answer_never_waits_for_jupyter_over_http(tmp_path):
    from conftest import free_port

    port = free_port()
    log = tmp_path / "server.log"
    env = {k: v for k, v in os.environ.items() if k not in ("JUPYTER_URL", "JUPYTER_TOKEN")}
    env["MCP_TOKEN"] = "first-answer-token"
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": "Bearer first-answer-token", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream"}
    with open(log, "wb") as err:
        spawned = time.monotonic()
        proc = subprocess.Popen([server_binary(), "--root-dir", str(tmp_path), "--transport", "streamable-http",
                                 "--port", str(port)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err, env=env)
    try:
        def post(body, headers=None):
            request = urllib.request.Request(base + "/mcp", data=json.dumps(body).encode(),
                                             headers={**auth, **(headers or {})})
            with urllib.request.urlopen(request, timeout=30) as response:
                return dict(response.headers), response.read().decode()

        while True:
            try:
                headers, _ = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
                break
            except (ConnectionError, urllib.error.URLError):
                assert time.monotonic() - spawned < 5 and proc.poll() is None, log.read_text()
                time.sleep(0.005)
        initialized = time.monotonic() - spawned
        session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
        follow = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"}
        post({"jsonrpc": "2.0", "method": "notifications/initialized"}, follow)
        _, listed = post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, follow)
        tools_listed = time.monotonic() - spawned
        with urllib.request.urlopen(base + "/api/healthz", timeout=10) as response:
            health = json.loads(response.read())
        assert "embedded Jupyter Server ready" not in log.read_text(), "answered before Jupyter was up"
        assert initialized <= FIRST_ANSWER_LIMIT and tools_listed <= TOOLS_LIST_LIMIT, (initialized, tools_listed)
        assert '"execute_code"' in listed
        assert health["status"] == "starting" and health["jupyter"]["state"] == "starting", health
        _, ran = post({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                       "params": {"name": "execute_code", "arguments": {"code": "6 * 7"}}}, follow)
        assert '"text":"42"' in ran, ran
        with urllib.request.urlopen(base + "/api/healthz", timeout=10) as response:
            health = json.loads(response.read())
        assert health["status"] == "healthy" and "state" not in health["jupyter"], health
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0


def test_a_jupyter_that_never_comes_up_is_named_in_each_call(tmp_path):
    """Our own Jupyter exits at start: the server still answers, and each call that needs Jupyter
    says what happened and what to do; connect_to_jupyter stays open as the way out."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "jupyter"
    fake.write_text("#!/bin/sh\necho 'fake jupyter: no server today' >&2\nexit 3\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("JUPYTER_URL", "JUPYTER_TOKEN")}
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    log = tmp_path / "server.log"
    with open(log, "wb") as err:
        server = RawStdio(["--root-dir", str(tmp_path)], env=env, stderr=err)
    try:
        failed = server.call_tool(2, "list_notebooks", {})
        assert failed.get("isError"), failed
        text = failed["content"][0]["text"]
        assert "The embedded Jupyter Server could not be started" in text and "exited" in text, text
        assert "--jupyter-url" in text and "stderr" in text, text
        listed = server.call_tool(3, "list_files", {})
        assert listed.get("isError") and "could not be started" in listed["content"][0]["text"], listed
    finally:
        server.proc.stdin.close()
        assert server.proc.wait(timeout=60) == 0
    assert "fake jupyter: no server today" in log.read_text()
