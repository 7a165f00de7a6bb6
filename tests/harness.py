"""Real parts the tests and benchmarks share: a Jupyter Server on loopback."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
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


def start_jupyter(tmp: Path) -> JupyterServer:
    jupyter = shutil.which("jupyter")
    assert jupyter, "jupyter is not on PATH; run the suite through tests/run"
    for name in ("rt", "data", "nb"):
        (tmp / name).mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex
    port = free_port()
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp / "rt"))
    log = open(tmp / "jupyter.log", "wb")
    process = subprocess.Popen(
        [
            jupyter, "server", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
            "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={tmp / 'nb'}", "--FileContentsManager.delete_to_trash=False",
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


