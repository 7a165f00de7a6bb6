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


@dataclass
class JupyterServer:
    url: str
    token: str
    root: Path
    process: subprocess.Popen

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.url.rstrip("/") + path,
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                raw = resp.read()
                return resp.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, raw.decode(errors="replace")

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
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"Jupyter Server exited early; see {tmp / 'jupyter.log'}")
        with contextlib.suppress(OSError):
            if server.request("GET", "/api/status")[0] == 200:
                return server
        time.sleep(0.2)
    process.terminate()
    raise RuntimeError("Jupyter Server did not become ready in 90 s")




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


def stop_jupyter(server: JupyterServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


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
