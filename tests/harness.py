"""Real parts the tests and benchmarks share: a Jupyter Server on loopback."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def json_request(url: str, token: str, method: str, body: dict | None = None) -> tuple[int, object]:
    """One JSON request with a Jupyter-style token: (status, decoded body, or its text)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            raw = resp.read()
            return resp.status, (json.loads(raw) if raw.strip() else None)
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw.decode(errors="replace")


def wait_ready(process: subprocess.Popen, ready, what: str, log: Path, seconds: float) -> None:
    """Waits until `ready()` holds; raises (the process stopped) when it exits or takes too long."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited early:\n{log.read_text(errors='replace')[-4000:]}")
        with contextlib.suppress(OSError):
            if ready():
                return
        time.sleep(0.2)
    process.terminate()
    raise RuntimeError(f"{what} did not become ready in {seconds:.0f} s; see {log}")


@dataclass
class JupyterServer:
    url: str
    token: str
    root: Path
    process: subprocess.Popen

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
        return json_request(self.url.rstrip("/") + path, self.token, method, body)

    def kernel_ids(self) -> set[str]:
        status, kernels = self.request("GET", "/api/kernels")
        assert status == 200, kernels
        return {k["id"] for k in kernels}

    def start_kernel(self) -> str:
        status, model = self.request("POST", "/api/kernels", {"name": "python3"})
        assert status == 201, model
        return model["id"]


def start_jupyter(tmp: Path, port: int | None = None, token: str | None = None,
                  extra: list[str] | None = None, jupyter: str | None = None,
                  env: dict[str, str] | None = None) -> JupyterServer:
    jupyter = jupyter or shutil.which("jupyter")
    assert jupyter, "jupyter is not on PATH; run the suite through tests/run"
    for name in ("rt", "data", "nb"):
        (tmp / name).mkdir(parents=True, exist_ok=True)
    token = token or uuid.uuid4().hex
    port = port or free_port()
    env = dict(env or os.environ, JUPYTER_RUNTIME_DIR=str(tmp / "rt"), JUPYTER_DATA_DIR=str(tmp / "data"))
    log = open(tmp / "jupyter.log", "ab")
    process = subprocess.Popen(
        [
            jupyter, "server", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
            "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={tmp / 'nb'}", "--FileContentsManager.delete_to_trash=False", *(extra or []),
        ],
        cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
    )
    server = JupyterServer(url=f"http://127.0.0.1:{port}", token=token, root=tmp / "nb", process=process)
    wait_ready(process, lambda: server.request("GET", "/api/status")[0] == 200, "Jupyter Server",
               tmp / "jupyter.log", 90)
    return server




def alive(pid: int) -> bool:
    """Whether a process runs (a zombie is gone for our purposes)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pids, seconds: float = 30.0) -> list[int]:
    """Waits for processes to end; returns those still running."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.2)
    return [p for p in pids if alive(p)]


def peak_rss_mb(pid: int) -> float:
    """A process's peak resident memory so far (VmHWM), in MB."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for {pid}")


def stop_process(process: subprocess.Popen, seconds: float = 20) -> None:
    """SIGTERM, then SIGKILL if it is still there after `seconds`; reaped either way."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def stop_jupyter(server: JupyterServer) -> None:
    stop_process(server.process)


def restart_jupyter(server: JupyterServer) -> JupyterServer:
    """Stops the server and starts it again on the same port, token and directories."""
    stop_jupyter(server)
    port = int(server.url.rsplit(":", 1)[1])
    return start_jupyter(server.root.parent, port=port, token=server.token)


class TcpProxy:
    """A loopback TCP relay the tests can break: `cut()` drops every open connection, and while
    `swallow` is set, bytes from clients are read but never delivered (lost in transit)."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.swallow = False
        self.connections: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self.lock:
                self.connections += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        try:
            while data := src.recv(65536):
                if from_client and self.swallow:
                    continue
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self.lock:
            connections, self.connections = self.connections, []
        for s in connections:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        self.listener.close()
        self.cut()


# ---- a real JupyterHub on loopback (Hub mode) ----

HUB_CONFIG = '''
import os, sys
c = get_config()  # noqa
settings = {settings!r}
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = settings["port"]
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = settings["hub_port"]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:%d" % settings["proxy_api_port"]
c.ConfigurableHTTPProxy.command = [settings["proxy"]]
c.JupyterHub.db_url = "sqlite:///" + os.path.join(settings["dir"], "hub.sqlite")
c.JupyterHub.cookie_secret_file = os.path.join(settings["dir"], "cookie_secret")
c.JupyterHub.pid_file = os.path.join(settings["dir"], "hub.pid")
c.JupyterHub.cleanup_servers = True
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allow_all = True
# Each user's server is a local process, in a directory of its own.
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = os.path.join(settings["dir"], "homes", "{{username}}")
c.Spawner.cmd = [os.path.join(os.path.dirname(sys.executable), "jupyterhub-singleuser")]
c.Spawner.args = ["--allow-root", "--FileContentsManager.delete_to_trash=False"]
# Jupyter Server asks for confirmation on SIGINT: go straight to SIGTERM when stopping one.
c.LocalProcessSpawner.interrupt_timeout = 0
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
c.Spawner.env_keep.extend(["JMCP_TEST_RUN"])
# The user "broken" never gets a server: the Hub reports the failed spawn. The user "slow" gets
# one only after two minutes: longer than a test's spawn timeout.
async def _refuse_broken(spawner):
    if spawner.user.name == "broken":
        raise RuntimeError("this test user's server never starts")
    if spawner.user.name == "slow":
        import asyncio
        await asyncio.sleep(120)
c.Spawner.pre_spawn_hook = _refuse_broken
# The tests' own admin: creates users and their tokens, revokes them, stops servers.
c.JupyterHub.services = [{{"name": "test-admin", "api_token": os.environ["JMCP_HUB_ADMIN_TOKEN"]}}]
c.JupyterHub.load_roles = [{{
    "name": "test-admin", "services": ["test-admin"],
    "scopes": ["admin:users", "admin:servers", "tokens", "read:hub"],
}}]
for service in settings["services"]:
    c.JupyterHub.services.append(service)
'''


@dataclass
class Hub:
    url: str
    admin_token: str
    dir: Path
    process: subprocess.Popen

    def api(self, method: str, path: str, body: dict | None = None, token: str | None = None):
        """The Hub's REST API, as the tests' admin service unless a token is given."""
        return json_request(self.url + "hub/api" + path, token or self.admin_token, method, body)

    def add_user(self, name: str) -> None:
        status, body = self.api("POST", f"/users/{name}")
        assert status in (201, 409), body

    def new_token(self, user: str) -> tuple[str, str]:
        """A fresh API token of the user (as from the Hub's token page): (token, its id)."""
        status, body = self.api("POST", f"/users/{user}/tokens", {"note": "jupyter-mcp-server test"})
        assert status == 201, body
        return body["token"], body["id"]

    def revoke(self, user: str, token_id: str) -> None:
        status, body = self.api("DELETE", f"/users/{user}/tokens/{token_id}")
        assert status == 204, body

    def server(self, user: str) -> dict | None:
        status, body = self.api("GET", f"/users/{user}")
        assert status == 200, body
        return body.get("servers", {}).get("")

    def start_server(self, user: str) -> None:
        status, body = self.api("POST", f"/users/{user}/server")
        assert status in (201, 202, 400), body
        self.wait_server(user, ready=True)

    def stop_server(self, user: str) -> None:
        status, body = self.api("DELETE", f"/users/{user}/server")
        assert status in (202, 204, 400), body
        self.wait_server(user, ready=False)

    def wait_server(self, user: str, ready: bool, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            server = self.server(user)
            now = bool(server and server.get("ready") and not server.get("pending"))
            if now == ready and not (server and server.get("pending")):
                return
            time.sleep(0.2)
        raise AssertionError(f"{user}'s server did not become {'ready' if ready else 'stopped'}")

    def home(self, user: str) -> Path:
        return self.dir / "homes" / user

    def user_request(self, user: str, token: str, method: str, path: str, body: dict | None = None):
        """A request to the user's own server through the Hub's proxy, with their token."""
        return json_request(self.url + f"user/{user}" + path, token, method, body)


def start_hub(tmp: Path, proxy: str, services: list[dict] | None = None,
              env: dict[str, str] | None = None, port: int | None = None) -> Hub:
    """JupyterHub on loopback with its proxy, a test authenticator and local-process spawner.
    `services` are extra `c.JupyterHub.services` entries."""
    jupyterhub = shutil.which("jupyterhub")
    assert jupyterhub, "jupyterhub is not on PATH; run the suite through tests/run"
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "homes").mkdir(exist_ok=True)
    port = port or free_port()
    settings = {
        "port": port, "hub_port": free_port(), "proxy_api_port": free_port(), "proxy": proxy,
        "dir": str(tmp), "services": services or [],
    }
    (tmp / "jupyterhub_config.py").write_text(HUB_CONFIG.format(settings=settings))
    admin = uuid.uuid4().hex
    environment = dict(os.environ, JMCP_HUB_ADMIN_TOKEN=admin, **(env or {}))
    log = open(tmp / "hub.log", "ab")
    process = subprocess.Popen(
        [jupyterhub, "-f", str(tmp / "jupyterhub_config.py")], cwd=tmp, env=environment,
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    hub = Hub(url=f"http://127.0.0.1:{port}/", admin_token=admin, dir=tmp, process=process)
    wait_ready(process, lambda: hub.api("GET", "/")[0] == 200, "JupyterHub", tmp / "hub.log", 120)
    return hub


def stop_hub(hub: Hub) -> None:
    """Stops the Hub (which stops the users' servers, its proxy and its services)."""
    hub.process.terminate()
    try:
        hub.process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(hub.process.pid, 9)
        hub.process.wait()


# ---- a real Redis on loopback (the replica tests, the execute bench), and just enough of its
# protocol (RESP2) to read what is kept ----

class RedisError(Exception):
    """An error reply (`-ERR ...`, `-NOAUTH ...`)."""


class Resp:
    """One connection to Redis speaking RESP2: commands out as arrays of bulk strings, replies
    parsed into bytes, ints, lists and None."""

    def __init__(self, port: int, password: str | None = None, username: str | None = None,
                 timeout: float = 10, ca: Path | None = None):
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        if ca is not None:
            import ssl

            self.socket = ssl.create_default_context(cafile=str(ca)).wrap_socket(
                self.socket, server_hostname="127.0.0.1")
        self.reader = self.socket.makefile("rb")
        if password is not None:
            self.call("AUTH", *([username] if username else []), password)

    def close(self) -> None:
        self.reader.close()
        self.socket.close()

    def call(self, *args):
        parts = [str(a).encode() if not isinstance(a, bytes) else a for a in args]
        self.socket.sendall(b"*%d\r\n" % len(parts)
                            + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))
        reply = self.read()
        if isinstance(reply, RedisError):
            raise reply
        return reply

    def read(self):
        line = self.reader.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("Redis closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest
        if kind == b"-":
            return RedisError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            return None if size < 0 else self.reader.read(size + 2)[:-2]
        if kind == b"*":
            size = int(rest)
            return None if size < 0 else [self.read() for _ in range(size)]
        raise ValueError(f"not a RESP2 reply: {line!r}")


def flattened(reply) -> list[bytes]:
    if isinstance(reply, list):
        return [part for item in reply for part in flattened(item)]
    if isinstance(reply, int):
        return [str(reply).encode()]
    return [] if reply is None else [reply]


# How each type's whole value is read.
READ_ALL = {
    b"string": ("GET",),
    b"hash": ("HGETALL",),
    b"list": ("LRANGE", "{key}", 0, -1),
    b"set": ("SMEMBERS",),
    b"zset": ("ZRANGE", "{key}", 0, -1, "WITHSCORES"),
    b"stream": ("XRANGE", "{key}", "-", "+"),
}


class Redis:
    """Debian's redis-server on a free loopback port: no persistence, its folder in the test's
    tmp_path; a password, when given, only in a 0600 config file (never on its argv)."""

    def __init__(self, binary: str, root: Path, password: str | None = None,
                 users: dict[str, str] | None = None, tls: bool = False):
        root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.password = password
        # With `tls`: TLS only, under a certificate for 127.0.0.1 from a CA of its own (self.ca).
        self.ca = tls_certificates(root) if tls else None
        self.log = root / "redis.log"
        config = root / "redis.conf"
        lines = [f"requirepass {password}"] if password else []
        # An ACL user of its own: reaches every key and channel, as the server's account would.
        lines += [f"user {name} on >{secret} ~* &* +@all" for name, secret in (users or {}).items()]
        descriptor = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as f:
            f.write("".join(line + "\n" for line in lines))
        ports = ["--port", str(self.port)]
        if self.ca:
            ports = ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", str(root / "server.pem"),
                     "--tls-key-file", str(root / "server.key"), "--tls-ca-cert-file", str(self.ca),
                     "--tls-auth-clients", "no"]
        self.process = subprocess.Popen(
            [binary, str(config), "--bind", "127.0.0.1", *ports, "--save", "",
             "--appendonly", "no", "--dir", str(root), "--daemonize", "no", "--protected-mode", "yes"],
            stdin=subprocess.DEVNULL, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            assert self.process.poll() is None, f"redis-server exited: {self.log.read_text(errors='replace')}"
            with contextlib.suppress(OSError):
                connection = self.connect()
                try:
                    if connection.call("PING") == b"PONG":
                        break
                finally:
                    connection.close()
            assert time.monotonic() < deadline, f"redis-server did not answer PING: {self.log.read_text()}"
            time.sleep(0.05)

    def url(self, db: int | None = None) -> str:
        return f"{'rediss' if self.ca else 'redis'}://{self.host}" + (f"/{db}" if db is not None else "")

    def connect(self, db: int = 0) -> Resp:
        connection = Resp(self.port, self.password, ca=self.ca)
        if db:
            connection.call("SELECT", db)
        return connection

    def contents(self, db: int = 0) -> dict[bytes, list[bytes]]:
        """Every key of `db` (SCAN, not KEYS) with every part of its value, whatever its type."""
        connection = self.connect(db)
        try:
            found, cursor = {}, b"0"
            while True:
                cursor, batch = connection.call("SCAN", cursor, "COUNT", 1000)
                for key in batch:
                    kind = connection.call("TYPE", key)
                    if kind == b"none":  # expired between SCAN and TYPE
                        continue
                    assert kind in READ_ALL, f"key {key!r} has a type this test cannot read: {kind!r}"
                    command, *rest = READ_ALL[kind]
                    args = [key if a == "{key}" else a for a in rest] or [key]
                    found[key] = flattened(connection.call(command, *args))
                if cursor == b"0":
                    return found
        finally:
            connection.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()


def tls_certificates(root: Path) -> Path:
    """A CA of its own and a server certificate for 127.0.0.1 it signed (server.pem, server.key)
    in `root`, made with openssl; returns the CA's certificate."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=root, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test CA",
            "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key",
            "-out", "server.csr")
    (root / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", "san.ext", "-out", "server.pem")
    return root / "ca.pem"
