"""kernel.sandbox: every escape a prompt-injected cell would try is refused (through
execute_code, a notebook cell, a subprocess, and a cell a person runs in JupyterLab on the
kernelspec `kernelspec install` wrote), ordinary work still works, each refusal is an event on the
execution's span, and a start where the sandbox cannot hold is refused. HOME is a fake one holding
a key, cloud credentials and a secrets file to steal."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import os
import shutil
import socket
import ssl
import subprocess
import threading
import zipfile
from pathlib import Path

import pytest

import nbformat

from conftest import chromium, extension_venv, joined, server_binary, server_env, start_lab
from harness import stop_jupyter

pytestmark = pytest.mark.anyio

ON = ["start", "--capability", "kernel.sandbox"]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
PERSON = Path(__file__).resolve().parent / "browser" / "person.cjs"


class Site:
    """An HTTP server on loopback that records the paths and headers it was asked with, serving
    `files` (or what `answer` makes of each request); HTTPS with `tls` (certificate, key)."""

    def __init__(self, files: dict[str, bytes] | None = None, tls: tuple[Path, Path] | None = None,
                 answer=None):
        self.files = files or {}
        self.asked: list[str] = []
        self.headers: list[dict[str, str]] = []
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                site.asked.append(self.path)
                site.headers.append({k.lower(): v for k, v in self.headers.items()})
                body = answer(self) if answer else site.files.get(self.path.split("?")[0])
                if body is None and not site.files:
                    body = b"hello from the allowed host"
                if body is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                kind = "text/html" if self.path.endswith("/") else "application/octet-stream"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def tiny_wheel() -> tuple[str, bytes]:
    """A pure-Python wheel, `sandboxtiny`, built here: what %pip installs from our index."""
    name = "sandboxtiny-1.0-py3-none-any.whl"
    files = {
        "sandboxtiny/__init__.py": b"ANSWER = 42\n",
        "sandboxtiny-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: sandboxtiny\nVersion: 1.0\n",
        "sandboxtiny-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append("sandboxtiny-1.0.dist-info/RECORD,,")
    files["sandboxtiny-1.0.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)
    return name, buffer.getvalue()


@pytest.fixture
def home(tmp_path) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE-KEY-MATERIAL")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("[default]\naws_secret_access_key=AWS-SECRET")
    (home / ".config" / "jupyter-mcp-server").mkdir(parents=True)
    (home / ".config" / "jupyter-mcp-server" / "secrets.json").write_text('{"TOKEN": "SERVER-SECRET"}')
    (home / ".bashrc").write_text("# untouched\n")
    return home


def sandbox_env(tmp_path: Path, home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = server_env({"HOME": str(home), "XDG_CACHE_HOME": str(tmp_path / "cache")})
    for name in ("JUPYTER_URL", "JUPYTER_TOKEN", "XDG_CONFIG_HOME", "JUPYTER_MCP_SECRETS_FILE"):
        env.pop(name, None)
    return {**env, **(extra or {})}


def write_config(tmp_path: Path, hosts: list[str]) -> Path:
    config = tmp_path / "config.toml"
    config.write_text("[kernel_sandbox]\nhosts = [" + ", ".join(json.dumps(h) for h in hosts) + "]\n")
    return config


# What each probe prints: "REFUSED <why>" or "ESCAPED <what>"; the kernel's code runs them all.
ESCAPES = r'''
import os, socket, subprocess, urllib.request
home = os.path.expanduser("~")
def probe(name, action):
    try:
        got = action()
        print(f"ESCAPED {name}: {got!r}"[:200])
    except Exception as error:
        print(f"REFUSED {name}: {type(error).__name__}: {error}"[:300])
def append_bashrc():
    with open(os.path.join(home, ".bashrc"), "a") as f:
        f.write("pwned\n")
def create_in_home():
    open(os.path.join(home, "planted.txt"), "w").write("x")
def shell_in_home():
    out = subprocess.run("echo x > ~/planted-by-sh.txt && cat ~/.ssh/id_ed25519", shell=True, capture_output=True, text=True)
    if out.returncode != 0:
        raise PermissionError(out.stderr.strip())
    return out.stdout
def read(path):
    return lambda: open(os.path.expanduser(path)).read()
def tcp(port):
    def connect():
        s = socket.create_connection(("127.0.0.1", port), timeout=3)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        return s.recv(100)
    return connect
def udp(port):
    def send():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"leak", ("127.0.0.1", port))
        return "sent"
    return send
def fetch(url):
    return lambda: urllib.request.urlopen(url, timeout=10).read()
probe("append ~/.bashrc", append_bashrc)
probe("create in home", create_in_home)
probe("sh -c in home", shell_in_home)
probe("read ssh key", read("~/.ssh/id_ed25519"))
probe("read aws", read("~/.aws/credentials"))
probe("read server secrets", read("~/.config/jupyter-mcp-server/secrets.json"))
probe("see server process", lambda: open(f"/proc/{SERVER_PID}/cmdline", "rb").read())
probe("read server environ", lambda: open(f"/proc/{SERVER_PID}/environ", "rb").read())
probe("signal server", lambda: os.kill(SERVER_PID, 0))
probe("direct tcp", tcp(TCP_PORT))
probe("direct udp", udp(UDP_PORT))
probe("fetch unlisted", fetch(f"http://127.0.0.1:{DENIED_PORT}/secret"))
probe("jupyter api direct", tcp(JUPYTER_PORT))
probe("jupyter api via proxy", fetch(f"http://127.0.0.1:{JUPYTER_PORT}/api/kernels"))
'''


def probes(text: str) -> dict[str, str]:
    lines = {}
    for line in text.splitlines():
        for verdict in ("REFUSED", "ESCAPED"):
            if line.startswith(verdict + " "):
                name, _, why = line[len(verdict) + 1:].partition(": ")
                lines[name] = f"{verdict} {why}"
    return lines


class Listeners:
    """A TCP and a UDP socket on loopback that must hear nothing from a sandboxed kernel."""

    def __init__(self):
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen()
        self.tcp.settimeout(0.5)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(0.5)

    def heard(self) -> list[str]:
        """What reached the listeners from a probe (its own bytes: `tcp` and `udp` below send
        them). A connection without them is not a probe's: an ephemeral port is reused, and a
        client of whatever held it before (a ZeroMQ socket of an ended kernel reconnects on its
        own) can knock on it; it is not counted, so it cannot fail the test."""
        heard = []
        while True:
            try:
                conn, _ = self.tcp.accept()
            except OSError:
                break
            with conn:
                conn.settimeout(1)
                try:
                    first = conn.recv(100)
                except OSError:
                    first = b""
            if first.startswith(b"GET / HTTP/1.0"):
                heard.append("tcp")
        while True:
            try:
                data, _ = self.udp.recvfrom(100)
            except OSError:
                break
            if data == b"leak":
                heard.append("udp")
        return heard

    def close(self):
        self.tcp.close()
        self.udp.close()


def assert_all_refused(results: dict[str, str], home: Path):
    expected = {"append ~/.bashrc", "create in home", "sh -c in home", "read ssh key", "read aws",
                "read server secrets", "see server process", "read server environ", "signal server", "direct tcp", "direct udp",
                "fetch unlisted", "jupyter api direct", "jupyter api via proxy"}
    assert set(results) == expected, results
    escaped = {name: verdict for name, verdict in results.items() if not verdict.startswith("REFUSED")}
    # A UDP datagram may be "sent" into the sandbox's own empty network; it must arrive nowhere.
    escaped.pop("direct udp", None)
    assert escaped == {}, escaped
    assert (home / ".bashrc").read_text() == "# untouched\n"
    assert not (home / "planted.txt").exists() and not (home / "planted-by-sh.txt").exists()
    assert "[kernel_sandbox] hosts" in results["fetch unlisted"], results["fetch unlisted"]
    assert "Jupyter Server's own port" in results["jupyter api via proxy"], results["jupyter api via proxy"]


def processes() -> list[tuple[int, int, list[bytes]]]:
    """(pid, parent pid, argv) of every process this machine shows us."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            found.append((int(entry), parent, argv))
    return found


def our_server() -> tuple[int, int]:
    """The pid of the server this test started, and its embedded Jupyter's port (0 if none)."""
    table = processes()
    server = next(pid for pid, parent, argv in table
                  if parent == os.getpid() and argv[0].endswith(b"jupyter-mcp-server"))
    descendants, port = {server}, 0
    for _ in range(4):
        for pid, parent, argv in table:
            if parent in descendants:
                descendants.add(pid)
                port = port or next((int(a.split(b"=")[1]) for a in argv if a.startswith(b"--port=")), 0)
    return server, port


def escapes_code(listeners: Listeners, denied: Site, jupyter_port: int | None = None) -> str:
    """The probes, told what a kernel must not reach: the server's pid and the Jupyter's port
    (found here, outside: a kernel with its own /proc cannot even look them up)."""
    server, embedded = our_server()
    assert jupyter_port or embedded, "the embedded Jupyter Server was not found"
    return (f"TCP_PORT={listeners.tcp.getsockname()[1]}\nUDP_PORT={listeners.udp.getsockname()[1]}\n"
            f"DENIED_PORT={denied.port}\nSERVER_PID={server}\nJUPYTER_PORT={jupyter_port or embedded}\n"
            + ESCAPES)


async def test_every_escape_is_refused_and_ordinary_work_still_works(tmp_path, home):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    root = tmp_path / "root"
    root.mkdir()
    allowed, denied = Site(), Site()
    wheel_name, wheel = tiny_wheel()
    index = Site({"/simple/sandboxtiny/": f'<a href="/files/{wheel_name}">{wheel_name}</a>'.encode(),
                  f"/files/{wheel_name}": wheel})
    listeners = Listeners()
    config = write_config(tmp_path, [f"127.0.0.1:{allowed.port}", f"127.0.0.1:{index.port}"])
    spans = tmp_path / "spans.jsonl"
    params = StdioServerParameters(command=server_binary(),
                                   args=[*ON, "--config", str(config), "--otel-file", str(spans)],
                                   env=sandbox_env(tmp_path, home), cwd=str(root))
    try:
        async with Client(params, mode="legacy", read_timeout_seconds=300) as client:
            # execute_code's default kernel.
            results = probes(joined(await client.call_tool(
                "execute_code", {"code": escapes_code(listeners, denied), "timeout": 120})))
            assert_all_refused(results, home)
            # A notebook's kernel, through a cell.
            await client.call_tool("use_notebook", {"notebook_name": "nb", "notebook_path": "nb.ipynb", "mode": "create"})
            cell = joined(await client.call_tool("insert_execute_code_cell", {
                "cell_index": 0, "cell_source": escapes_code(listeners, denied), "timeout": 120}))
            assert_all_refused(probes(cell), home)
            assert listeners.heard() == []
            assert denied.asked == [], "a refused host is never contacted"

            # Ordinary work: files in the root, temp files, subprocesses, numpy and matplotlib,
            # the allowed host through the proxy, and %pip from the allowed index.
            work = joined(await client.call_tool("execute_code", {"code": (
                "import os, subprocess, tempfile, urllib.request\n"
                "open('made-in-sandbox.txt', 'w').write('kept')\n"
                "fd, path = tempfile.mkstemp(); os.write(fd, b'tmp'); os.close(fd)\n"
                "print('tmp', open(path).read())\n"
                "print('sh', subprocess.run(['sh', '-c', 'echo from-a-subprocess'], capture_output=True, text=True).stdout.strip())\n"
                "import numpy as np; print('numpy', int(np.arange(10).sum()))\n"
                "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt\n"
                "plt.plot([1, 2]); plt.savefig('plot.png'); print('plot', os.path.getsize('plot.png') > 0)\n"
                f"print('allowed', urllib.request.urlopen('http://127.0.0.1:{allowed.port}/x', timeout=10).read().decode())\n"
                "print('sandboxed', os.environ.get('JUPYTER_MCP_KERNEL_SANDBOX'))\n"
            ), "timeout": 120}))
            for expected in ("tmp tmp", "sh from-a-subprocess", "numpy 45", "plot True",
                             "allowed hello from the allowed host", "sandboxed 1"):
                assert expected in work, work
            assert (root / "made-in-sandbox.txt").read_text() == "kept"
            assert allowed.asked == ["/x"]
            pip = joined(await client.call_tool("execute_code", {"code": (
                f"%pip install --no-deps --index-url http://127.0.0.1:{index.port}/simple/ sandboxtiny\n"
                "import sandboxtiny; print('installed', sandboxtiny.ANSWER)"
            ), "timeout": 240}))
            assert "installed 42" in pip, pip
        # Each refused egress is an event on its execution's span; allowed ones are counted.
        refusals = refused_egress(spans)
        assert ("127.0.0.1", str(denied.port)) in refusals, refusals
        assert any(span["attributes"].get("egress.allowed") == 1
                   and "urllib.request" in span["attributes"]["code.snippet"] for span in execute_spans(spans))
    finally:
        listeners.close()
        for site in (allowed, denied, index):
            site.close()


def execute_spans(path: Path) -> list[dict]:
    spans = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [span for span in spans if span["name"] == "execute"]


def refused_egress(path: Path) -> set[tuple[str, str]]:
    """(host, port) of every egress.refused event on an execute span, each naming its kernel."""
    refused = set()
    for span in execute_spans(path):
        for event in span["events"]:
            if event["name"] == "egress.refused":
                attributes = event["attributes"]
                assert attributes["kernel.id"] == span["attributes"]["kernel.id"], span
                assert "[kernel_sandbox] hosts" in attributes["egress.reason"] or \
                    "Jupyter Server's own port" in attributes["egress.reason"], attributes
                refused.add((attributes["egress.host"], attributes["egress.port"]))
    return refused


def start_refused(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([server_binary(), *args], capture_output=True, text=True, timeout=60,
                          env=env, cwd=cwd, stdin=subprocess.DEVNULL)


def test_a_machine_that_cannot_confine_is_refused_at_start(tmp_path, home):
    env = sandbox_env(tmp_path, home, {"JUPYTER_MCP_KERNEL_SANDBOX_UNAVAILABLE": "simulated"})
    out = start_refused(ON, env, tmp_path)
    assert out.returncode != 0 and out.stdout == ""
    assert "kernel.sandbox is on, but this machine cannot confine kernels" in out.stderr, out.stderr
    assert "turn kernel.sandbox off" in out.stderr


def test_kernels_on_a_code_sandbox_are_refused_at_start(tmp_path, home, jupyter_server):
    env = sandbox_env(tmp_path, home, {"CODE_SANDBOX_TOKEN": jupyter_server.token})
    out = start_refused([*ON, "--code-sandbox-url", jupyter_server.url], env, tmp_path)
    assert out.returncode != 0 and out.stdout == ""
    assert "kernels run on a code sandbox" in out.stderr and "--code-sandbox-url" in out.stderr, out.stderr


def test_a_bad_hosts_entry_stops_the_server_with_the_reason(tmp_path, home):
    config = write_config(tmp_path, ["https://example.org/path"])
    out = start_refused([*ON, "--config", str(config)], sandbox_env(tmp_path, home), tmp_path)
    assert out.returncode != 0
    assert "kernel_sandbox.hosts entry 'https://example.org/path' is not a bare host" in out.stderr, out.stderr


def test_the_start_log_names_what_is_enforced(tmp_path, home):
    config = write_config(tmp_path, ["pypi.org", "*.example.org"])
    env = sandbox_env(tmp_path, home, {"RUST_LOG": "jupyter_mcp_server=info"})
    process = subprocess.Popen([server_binary(), *ON, "--config", str(config)], env=env, cwd=tmp_path,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        said = ""
        for line in process.stderr:
            if "kernel.sandbox is on:" in line:
                said = line
                break
        process.stdin.close()
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert "namespaces" in said and "Landlock" in said and "seccomp" in said, said
    assert f"writable: {tmp_path.resolve()}" in said, said
    assert str(home / ".ssh") in said and "config.toml" in said, said
    assert "pypi.org, *.example.org" in said, said


async def test_a_jupyter_without_the_sandboxed_kernelspec_refuses_each_kernel_naming_the_install(
        tmp_path, home, jupyter_server):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    env = sandbox_env(tmp_path, home, {"JUPYTER_TOKEN": jupyter_server.token})
    before = jupyter_server.kernel_ids()
    params = StdioServerParameters(command=server_binary(), args=[*ON, "--jupyter-url", jupyter_server.url],
                                   env=env, cwd=str(tmp_path))
    async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
        for _ in range(2):  # refused every time, and the server keeps serving
            result = await client.call_tool("execute_code", {"code": "print('never runs')"})
            text = joined(result)
            assert result.is_error, text
            assert "has no sandboxed kernelspec" in text, text
            assert "jupyter-mcp-server kernelspec install --user" in text, text
        # Switching to another Jupyter would leave the sandbox: refused too.
        switched = await client.call_tool("connect_to_jupyter", {"jupyter_url": jupyter_server.url})
        assert switched.is_error and "kernel.sandbox is on" in joined(switched), joined(switched)
        assert jupyter_server.kernel_ids() == before, "no unconfined kernel was started"
        # Nor is the agent's code sent to a kernel someone started unconfined.
        theirs = jupyter_server.start_kernel()
        try:
            used = await client.call_tool("use_notebook", {
                "notebook_name": "theirs", "notebook_path": f"theirs-{theirs[:6]}.ipynb", "mode": "create",
                "kernel_id": theirs})
            assert used.is_error and f"kernel {theirs} runs the kernelspec 'python3', which is not sandboxed" \
                in joined(used), joined(used)
        finally:
            jupyter_server.request("DELETE", f"/api/kernels/{theirs}")


async def test_an_installed_kernelspec_confines_the_persons_kernel_and_the_agents(tmp_path, home):
    """`kernelspec install` in a Jupyter the user runs (JupyterLab): the person's kernel, started
    from it in the browser, and the agent's kernels (the server on --jupyter-url) are confined."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    node = shutil.which("node")
    assert node and os.environ.get("PLAYWRIGHT_CORE_DIR"), "run the suite through tests/run"
    browser = chromium()
    lab_dir = tmp_path / "lab"
    root = lab_dir / "nb"
    root.mkdir(parents=True)
    allowed, denied = Site(), Site()
    listeners = Listeners()
    config = write_config(tmp_path, [f"127.0.0.1:{allowed.port}"])
    env = sandbox_env(tmp_path, home, {"JUPYTER_DATA_DIR": str(lab_dir / "data")})
    installed = subprocess.run(
        [server_binary(), "kernelspec", "install", "--user", "--root-dir", str(root), "--config", str(config),
         "--python", str(extension_venv() / "bin" / "python")],
        env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert installed.returncode == 0, installed.stderr
    assert "Installed kernelspec 'python3-sandboxed' (\"Python 3 (sandboxed)\")" in installed.stderr
    assert f"writable: {root.resolve()}" in installed.stderr and str(home / ".ssh") in installed.stderr
    spec_dir = lab_dir / "data" / "kernels" / "python3-sandboxed"
    spec = json.loads((spec_dir / "kernel.json").read_text())
    assert spec["argv"][1:3] == ["kernel-sandbox", "run"] and spec["display_name"] == "Python 3 (sandboxed)"
    assert (spec_dir / "policy.json").stat().st_mode & 0o077 == 0, "the policy is the user's alone"

    lab = start_lab(lab_dir, env=env)
    page = None
    spans = tmp_path / "spans.jsonl"
    try:
        params = StdioServerParameters(
            command=server_binary(),
            # kernel.adopt-session: the agent joins the kernel of the person's session.
            args=[*ON, "--capability", "kernel.adopt-session", "--jupyter-url", lab.url, "--otel-file", str(spans)],
            env={**env, "JUPYTER_TOKEN": lab.token}, cwd=str(tmp_path))
        async with Client(params, mode="legacy", read_timeout_seconds=300) as client:
            # The agent's default kernel comes from the installed kernelspec.
            lab_port = int(lab.url.rsplit(":", 1)[1].split("/")[0])
            results = probes(joined(await client.call_tool(
                "execute_code", {"code": escapes_code(listeners, denied, lab_port), "timeout": 120})))
            assert_all_refused(results, home)
            work = joined(await client.call_tool("execute_code", {"code": (
                "import os, urllib.request\n"
                f"print('allowed', urllib.request.urlopen('http://127.0.0.1:{allowed.port}/y', timeout=10).read().decode())\n"
                "print('sandboxed', os.environ.get('JUPYTER_MCP_KERNEL_SANDBOX'))\n"), "timeout": 60}))
            assert "allowed hello from the allowed host" in work and "sandboxed 1" in work, work

            # The person opens a notebook on the sandboxed kernelspec in JupyterLab and runs it.
            nb = nbformat.v4.new_notebook()
            nb.metadata["kernelspec"] = {"name": "python3-sandboxed", "display_name": "Python 3 (sandboxed)",
                                         "language": "python"}
            nb.cells = [nbformat.v4.new_code_cell(escapes_code(listeners, denied, lab_port) + "print('PROBES-DONE')\n")]
            (root / "person.ipynb").write_text(nbformat.writes(nb))
            ARTIFACTS.mkdir(exist_ok=True)
            screenshot = ARTIFACTS / "jupyterlab-sandboxed-kernel.png"
            page = subprocess.Popen(
                [node, str(PERSON), f"{lab.url}/lab/tree/person.ipynb?token={lab.token}", str(screenshot)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=dict(os.environ, CHROMIUM=browser))
            assert page.stdout.readline().strip() == "ready", f"JupyterLab did not show the notebook; see {screenshot}"
            page.stdin.write(json.dumps({"run": 0, "until": "PROBES-DONE"}) + "\n")
            page.stdin.flush()
            shown = page.stdout.readline().strip()
            assert shown.startswith('"'), f"the person's cell did not finish ({shown}); see {screenshot}"
            assert_all_refused(probes(json.loads(shown)), home)
            status, sessions = lab.request("GET", "/api/sessions")
            person = next(s for s in sessions if s["path"].endswith("person.ipynb"))
            assert person["kernel"]["name"] == "python3-sandboxed", person

            # The agent joins the person's notebook: one kernel, the confined one.
            await client.call_tool("use_notebook", {"notebook_name": "person", "notebook_path": "person.ipynb"})
            listed = joined(await client.call_tool("list_notebooks", {}))
            line = next(line for line in listed.split("\n") if line.startswith("person\t"))
            assert line.split("\t")[2] == person["kernel"]["id"], listed
        assert listeners.heard() == [] and denied.asked == []
        assert allowed.asked == ["/y"]
        assert ("127.0.0.1", str(denied.port)) in refused_egress(spans)
    finally:
        if page is not None:
            page.stdin.close()
            try:
                page.wait(timeout=30)
            except subprocess.TimeoutExpired:
                page.kill()
        stop_jupyter(lab)
        listeners.close()
        for site in (allowed, denied):
            site.close()
