"""Shared fixtures: a real Jupyter Server on loopback and our binary driven by the official MCP client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import anyio
import nbformat
import pytest
from harness import JupyterServer, free_port, start_jupyter
from mcp import Client
from mcp.client.stdio import StdioServerParameters

MODES = ["legacy", "auto"]

# Every process the tests start inherits this mark (through the environment, down to kernels), so
# whatever a failing test left behind is found and stopped when the session ends.
RUN_MARK = f"JMCP_TEST_RUN={uuid.uuid4().hex}".encode()
os.environ["JMCP_TEST_RUN"] = RUN_MARK.split(b"=", 1)[1].decode()


def processes_left_by_tests() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if RUN_MARK in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def pytest_sessionfinish(session, exitstatus):
    left = processes_left_by_tests()
    if not left:
        return
    names = []
    for pid in left:
        with contextlib.suppress(OSError):
            names.append(Path(f"/proc/{pid}/comm").read_text().strip())
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and processes_left_by_tests():
        time.sleep(0.1)
    for pid in processes_left_by_tests():
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    print(f"\nconftest: stopped {len(left)} processes the tests left running: {', '.join(sorted(set(names)))}")


def server_binary() -> str:
    path = os.environ.get("JUPYTER_MCP_SERVER_BIN")
    if not path or not Path(path).is_file():
        pytest.exit(
            "JUPYTER_MCP_SERVER_BIN must name the built jupyter-mcp-server binary; run the suite through tests/run",
            returncode=2,
        )
    return path


@pytest.fixture(scope="session")
def jupyter_server():
    tmp = Path(tempfile.mkdtemp(prefix="jmcp-test-"))
    server = start_jupyter(tmp)
    yield server
    server.process.terminate()
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def anyio_backend():
    return "asyncio"


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("RUST_LOG", "jupyter_mcp_server=debug,warn")
    # Each server its own execution store: never the user's, and never one another's (a store
    # is one process's; a second server on it would keep its records in memory only).
    env.setdefault("JUPYTER_MCP_STATE_DIR", tempfile.mkdtemp(prefix="jmcp-state-"))
    env.update(extra or {})
    return env


TRANSPORTS = ["stdio", "http"]


@pytest.fixture(params=TRANSPORTS)
def transport(request):
    return request.param


@dataclass
class HttpServer:
    """Our binary serving Streamable HTTP on a free loopback port."""

    process: subprocess.Popen
    port: int
    token: str | None
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp_url(self) -> str:
        return self.base + "/mcp"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()


def start_http_server(args: list[str], env: dict[str, str] | None = None, token: str | None = "test-token",
                      log_dir: Path | None = None, hub_mode: bool = False,
                      auth_args: list[str] | None = None) -> HttpServer:
    """Our binary on Streamable HTTP; in Hub mode (`--jupyterhub-url` in `args`) with no token of
    its own: the Hub's tokens are the authentication; `auth_args` (e.g. `--oauth-issuer URL`)
    replace the token flags."""
    port = free_port()
    auth = [] if hub_mode else ["--mcp-token", token] if token else ["--insecure-mcp-noauth"]
    if auth_args is not None:
        auth = auth_args
    log = Path(tempfile.mkstemp(prefix="jmcp-http-", suffix=".log", dir=log_dir)[1])
    process = subprocess.Popen(
        [server_binary(), *args, "--transport", "streamable-http", "--port", str(port), *auth],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(log, "wb"), env=server_env(env),
    )
    server = HttpServer(process=process, port=port, token=token, log=log)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited: {log.read_text()}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(server.base + "/api/healthz", timeout=5) as resp:
                if resp.status == 200:
                    return server
        time.sleep(0.05)
    server.stop()
    raise RuntimeError("HTTP server did not become ready")


@contextlib.asynccontextmanager
async def http_client(server: HttpServer, mode: str, **client_kwargs):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {server.token}"} if server.token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120)) as hc:
        async with Client(streamable_http_client(server.mcp_url, http_client=hc), mode=mode,
                          read_timeout_seconds=120, **client_kwargs) as client:
            yield client


@contextlib.asynccontextmanager
async def client_for(jupyter: JupyterServer, mode: str, *extra_args: str, env: dict[str, str] | None = None,
                     transport: str = "stdio", **client_kwargs):
    """The official client connected to a fresh instance of our server on the given transport."""
    args = ["start", "--jupyter-url", jupyter.url, "--jupyter-token", jupyter.token, *extra_args]
    if transport == "stdio":
        params = StdioServerParameters(command=server_binary(), args=args, env=server_env(env))
        async with Client(params, mode=mode, read_timeout_seconds=120, **client_kwargs) as client:
            yield client
        return
    server = start_http_server(args, env)
    try:
        async with http_client(server, mode, **client_kwargs) as client:
            yield client
    finally:
        server.stop()


def texts(result) -> list[str]:
    return [c.text for c in result.content if getattr(c, "type", None) == "text"]


def joined(result) -> str:
    return "\n".join(texts(result))


async def call(client, tool, **arguments):
    """A tool call that must succeed."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} failed: {joined(result)}"
    return result


async def refused(client, tool, **arguments) -> str:
    """A tool call that must be refused; its error text."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} should have been refused: {joined(result)}"
    return joined(result)


def cell_id_of(result) -> str:
    """The id of the cell a tool acted on, from the result's namespaced `_meta`."""
    return result.meta["io.jupyter-mcp/cell_id"]


class RawStdio:
    """Our binary on stdio driven by hand, for what the official client cannot do (signals)."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None,
                 stderr=subprocess.DEVNULL):
        self.proc = subprocess.Popen([server_binary(), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr, env=env or server_env(), cwd=cwd)
        self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def call_tool(self, request_id: int, name: str, arguments: dict) -> dict:
        """Calls a tool and returns its result, skipping other lines."""
        return self.request(request_id, "tools/call", {"name": name, "arguments": arguments})["result"]

    def request(self, request_id, method: str, params: dict) -> dict:
        """Sends a request and returns its whole answer (result or error), skipping other lines."""
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return self.reply(request_id)

    def reply(self, request_id) -> dict:
        """The answer to a request sent before (the opening `initialize` is "init")."""
        while True:
            line = self.proc.stdout.readline()
            assert line, "server closed stdout early"
            reply = json.loads(line)
            if reply.get("id") == request_id:
                return reply


# ---- wasm guests: built by guests/build, configured through a config file ----

# Compiled guests are cached here across tests and runs (the Python guest takes seconds to compile).
CACHE = Path(os.environ.get("JUPYTER_MCP_TEST_WASM_CACHE",
                            Path.home() / ".cache" / "jupyter-mcp-server" / "wasm-test"))


def prune_cache(days: int = 3) -> None:
    """Compiled guests of older sources are never used again (a Python one is ~35 MB)."""
    cutoff = time.time() - days * 86400
    for artifact in CACHE.glob("*.cwasm"):
        if artifact.stat().st_mtime < cutoff:
            artifact.unlink(missing_ok=True)


prune_cache()


def guest(name: str) -> Path:
    directory = os.environ.get("JUPYTER_MCP_GUESTS_DIR")
    if not directory:
        pytest.fail("JUPYTER_MCP_GUESTS_DIR must name the built guests (guests/build); run through tests/run")
    return Path(directory) / f"{name}.wasm"


def toml_str(value) -> str:
    return json.dumps(str(value))


def extension_entry(path: Path, config: dict | None = None, grants: list[str] | None = None,
                    **limits: int) -> str:
    lines = ["[[extension]]", f"path = {toml_str(path)}"]
    if grants is not None:
        lines.append(f"grants = {json.dumps(grants)}")
    if limits:
        lines.append("limits = { " + ", ".join(f"{k} = {v}" for k, v in limits.items()) + " }")
    if config:
        lines.append("config = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in config.items()) + " }")
    return "\n".join(lines) + "\n"


def write_config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "server.toml"
    path.write_text(f"cache_dir = {toml_str(CACHE)}\n" + body)
    return path


def serve(jupyter_server, *args: str, env: dict[str, str] | None = None):
    return start_http_server(["start", "--jupyter-url", jupyter_server.url, "--jupyter-token",
                              jupyter_server.token, "--document-backend", "file", *args], env)


# Logged once every configured wasm guest has loaded or been refused (they load after the
# server starts serving).
GUESTS_READY = "every wasm guest has loaded"


def serve_guests(jupyter_server, *args: str, env: dict[str, str] | None = None):
    """`serve`, then wait until the configured guests are ready (a cold compile takes seconds)."""
    server = serve(jupyter_server, *args, env=env)
    wait_for_log(server, GUESTS_READY, timeout=300)
    return server


def route(server, method: str, path: str, body: dict | None = None, token: str | None = None) -> tuple[int, dict]:
    """One request to a management route (`/api/...`) of a Streamable HTTP server, with its token."""
    request = urllib.request.Request(server.base + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {token or server.token}",
                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def log_of(server) -> str:
    return server.log.read_text(errors="replace")


def wait_for_log(server, text: str, timeout: float = 10) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = log_of(server)
        if text in log:
            return log
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in the server log:\n{log_of(server)[-4000:]}")


# ---- our pip package inside a Jupyter Server of its own (tests/ensure-extension-venv) ----

def extension_venv() -> Path:
    venv = os.environ.get("JUPYTER_MCP_EXTENSION_VENV")
    assert venv, "JUPYTER_MCP_EXTENSION_VENV is not set; run the suite through tests/run"
    return Path(venv)


def start_lab(tmp: Path, *traitlets: str, env: dict[str, str] | None = None):
    venv = extension_venv()
    environment = dict(env or os.environ)
    environment["PATH"] = f"{venv / 'bin'}:{environment['PATH']}"
    environment.pop("JUPYTER_MCP_OTEL_FILE", None)
    environment.update(env or {})
    return start_jupyter(tmp, jupyter=str(venv / "bin" / "jupyter"), extra=list(traitlets), env=environment)


@contextlib.asynccontextmanager
async def mcp_client(jupyter, token: str | None, mode: str = "auto", query: str = ""):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"token {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120)) as hc:
        async with Client(streamable_http_client(jupyter.url + "/mcp" + query, http_client=hc), mode=mode,
                          read_timeout_seconds=120) as client:
            yield client


# ---- notebooks and their kernels ----

async def notebook_with_kernel(client, jupyter_server, name):
    path = f"{name}-{uuid.uuid4().hex[:6]}.ipynb"
    await client.call_tool("use_notebook", {"notebook_name": name, "notebook_path": path, "mode": "create"})
    await client.call_tool("insert_cell", {"cell_index": 0, "cell_type": "code", "cell_source": "print('ran')"})
    listed = joined(await client.call_tool("list_notebooks", {}))
    return next(line for line in listed.split("\n") if line.startswith(name + "\t")).split("\t")[2]


async def lose_kernel(jupyter_server, client, kernel_id, how):
    if how == "deleted":
        jupyter_server.request("DELETE", f"/api/kernels/{kernel_id}")
    else:  # the process dies; Jupyter restarts it under the same id
        await client.call_tool("execute_code", {"code": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "timeout": 30})
    # Lost once the server has noticed: list_notebooks shows the kernel dead.
    deadline = time.monotonic() + 30
    while f"\t{kernel_id}\tdead\t" not in joined(await client.call_tool("list_notebooks", {})):
        assert time.monotonic() < deadline, f"kernel {kernel_id} still not seen as lost"
        await anyio.sleep(0.05)
    if how != "deleted":
        # Jupyter restarts a killed kernel under the same id, and nothing shows when it is done (its
        # REST model says 'starting' until a client connects), so this one wait stays a pause.
        await anyio.sleep(1.0)


# ---- raw HTTP requests, shared by the HTTP, protocol, apps and hygiene tests ----

INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


def raw(url: str, method: str = "POST", headers: dict | None = None, body: dict | None = None):
    data = json.dumps(body if body is not None else INIT).encode() if method in ("POST", "PUT") else None
    req = urllib.request.Request(url, data=data, method=method, headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


@pytest.fixture
def http_server(jupyter_server, tmp_path):
    server = start_http_server(["start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token],
                               log_dir=tmp_path)
    yield server
    server.stop()


MODERN = "2026-07-28"


@pytest.fixture
def file_http_server(jupyter_server, tmp_path):
    server = start_http_server(["start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token,
                                "--document-backend", "file"], log_dir=tmp_path)
    yield server
    server.stop()


def modern(server, method: str, params: dict, *, capabilities: dict | None = None, log_level: str | None = None):
    """One stateless request; returns every JSON-RPC message of its answer (notifications, then the response)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    }
    if log_level:
        meta["io.modelcontextprotocol/logLevel"] = log_level
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "Authorization": f"Bearer {server.token}", "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    name = params.get("name") or params.get("taskId") or params.get("uri")
    if name:
        headers["Mcp-Name"] = name
    request = urllib.request.Request(server.mcp_url, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as resp:
            kind, text = resp.headers.get("content-type", ""), resp.read().decode()
    except urllib.error.HTTPError as e:
        kind, text = e.headers.get("content-type", ""), e.read().decode()
    if "text/event-stream" in kind:
        return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
    return [json.loads(text)]


def answer(messages: list[dict]) -> dict:
    response = [m for m in messages if "id" in m and ("result" in m or "error" in m)]
    assert len(response) == 1, messages
    return response[0]


def chromium() -> str:
    """The Chromium tests/run found or installed; without one the test is skipped, saying how to
    get it (never passed silently)."""
    path = os.environ.get("CHROMIUM") or "/usr/bin/chromium"
    if not Path(path).exists():
        pytest.skip("no Chromium for the browser test: install it with `sudo apt-get install chromium` "
                    "(tests/run does so itself when run as root)")
    return path


def open_lab_page(lab, path: str, screenshot: Path) -> subprocess.Popen:
    """JupyterLab showing `path` in headless Chromium, driven by tests/browser/lab.cjs: once it
    says "ready", write one JSON line {"source", "output"} and read "seen" or why not."""
    node = shutil.which("node")
    assert node and os.environ.get("PLAYWRIGHT_CORE_DIR"), "run the suite through tests/run"
    browser = chromium()
    screenshot.parent.mkdir(exist_ok=True)
    driver = Path(__file__).resolve().parent / "browser" / "lab.cjs"
    return subprocess.Popen(
        [node, str(driver), f"{lab.url}/lab/tree/{path}?token={lab.token}", str(screenshot)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=dict(os.environ, CHROMIUM=browser),
    )


def lab_notebook(lab, prefix: str, sources: list[str]) -> str:
    """A new notebook of code cells in the lab's root, with a Python kernelspec (as JupyterLab
    needs to open it without asking); returns its path."""
    path = f"{prefix}-{uuid.uuid4().hex[:6]}.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    (lab.root / path).write_text(nbformat.writes(nb))
    return path


@contextlib.contextmanager
def lab_person(lab, path: str, screenshot_name: str):
    """A person at JupyterLab showing `path` in headless Chromium (tests/browser/person.cjs):
    yields `person(**command)`, which sends one command and asserts it was done. The page is
    closed (a screenshot saved under tests/artifacts) when the block ends."""
    node = shutil.which("node")
    assert node and os.environ.get("PLAYWRIGHT_CORE_DIR"), "run the suite through tests/run"
    browser = chromium()
    artifacts = Path(__file__).resolve().parent / "artifacts"
    artifacts.mkdir(exist_ok=True)
    driver = Path(__file__).resolve().parent / "browser" / "person.cjs"
    page = subprocess.Popen(
        [node, str(driver), f"{lab.url}/lab/tree/{path}?token={lab.token}", str(artifacts / screenshot_name)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=dict(os.environ, CHROMIUM=browser))

    def person(**command) -> None:
        page.stdin.write(json.dumps(command) + "\n")
        page.stdin.flush()
        said = page.stdout.readline().strip()
        assert said == "done", f"the person could not {command}: {said}"

    try:
        assert page.stdout.readline().strip() == "ready", "JupyterLab did not show the notebook"
        yield person
    finally:
        try:
            page.stdin.close()
            page.wait(timeout=30)
        except (subprocess.TimeoutExpired, BrokenPipeError):
            page.kill()


# The live backend's second peer (a person's JupyterLab, as far as the room can tell) and the file
# on disk, for the tests of the live backend and of co-editing.

def write_notebook(jupyter, path: str, sources: list[str]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    (jupyter.root / path).write_text(nbformat.writes(nb))


async def peer_for(jupyter, path: str, username: str = "peer") -> "NbModelClient":
    from jupyter_nbmodel_client import NbModelClient, get_jupyter_notebook_websocket_url

    url = get_jupyter_notebook_websocket_url(jupyter.url, path, jupyter.token)
    peer = NbModelClient(url, path=path, username=username)
    await peer.start()
    await peer.wait_until_synced()
    return peer


def peer_sources(peer: "NbModelClient") -> list[str]:
    return [str(peer[i]["source"]) for i in range(len(peer))]


class Person:
    """The official client's elicitation callback as a person: answers what `next` says
    ("accept", "decline" or "cancel"), remembering every question asked."""

    def __init__(self) -> None:
        self.next = "accept"
        self.questions: list[str] = []

    async def __call__(self, context, params):
        import mcp.types as types

        self.questions.append(params.message)
        return types.ElicitResult(action=self.next)


async def eventually(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        await asyncio.sleep(0.02)


def disk_sources(jupyter, path: str) -> list[str] | None:
    """The sources saved on disk (validated), or None while Jupyter is midway through a save."""
    try:
        nb = nbformat.reads((jupyter.root / path).read_text(), as_version=4)
    except nbformat.reader.NotJSONError:
        return None
    nbformat.validate(nb)
    return [c.source for c in nb.cells]
