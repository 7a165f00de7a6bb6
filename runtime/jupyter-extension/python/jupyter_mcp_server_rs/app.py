"""The extension app: starts the server binary as a child of the Jupyter Server and proxies /mcp."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request

from jupyter_server.extension.application import ExtensionApp
from tornado.httpclient import AsyncHTTPClient
from tornado.ioloop import IOLoop, PeriodicCallback
from traitlets import Enum, Float, List, Unicode

from .proxy import McpProxyHandler

# The Python server's extension module; both serving /mcp in one Jupyter cannot work.
UPSTREAM_MODULE = "jupyter_mcp_server"
BINARY = "jupyter-mcp-server"
# A dead child is restarted after 0.5 s, then 1, 2, 4 … up to 30 s while it keeps dying; a
# child that stayed up a minute starts the count again.
RESTART_FIRST_DELAY = 0.5
RESTART_MAX_DELAY = 30.0
RESTART_RESET = 60.0
# Variables the child reads secrets from; we set them, never inherit them.
SECRET_VARIABLES = ("MCP_TOKEN", "JUPYTER_TOKEN")


class ChildServer:
    """The server binary running beside Jupyter on a private loopback port.

    The port is a listening socket this process bound and keeps (`listener`), handed to each
    child as an open file descriptor: never a port freed and bound again, which another local
    user could take in between and so receive the child's token. A restarted child gets the same
    socket, so the port never changes and connections waiting in its queue are served."""

    def __init__(self, binary: str, args: list[str], secrets_env: dict[str, str], log,
                 listener: socket.socket):
        self.port = listener.getsockname()[1]
        self.token = secrets.token_urlsafe(32)
        self.log = log
        command = [binary, "start", "--transport", "streamable-http", *args]
        # Tokens go through the environment, never argv: any local user can read
        # /proc/PID/cmdline, while /proc/PID/environ is readable by this user only.
        env = {k: v for k, v in os.environ.items() if k not in SECRET_VARIABLES}
        env.update(secrets_env)
        env["MCP_TOKEN"] = self.token
        env["JUPYTER_MCP_LISTEN_FD"] = str(listener.fileno())
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, env=env, preexec_fn=_die_with_parent,
                                        pass_fds=(listener.fileno(),))
        self.started = time.monotonic()
        self.log.info("jupyter-mcp-server started (pid %s) for /mcp", self.process.pid)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.base + "/api/healthz", timeout=2) as reply:
                    if reply.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.info("jupyter-mcp-server stopped")


class JupyterMCPServerExtensionApp(ExtensionApp):
    """Serves MCP at /mcp through the jupyter-mcp-server binary."""

    name = "jupyter_mcp_server_rs"
    load_other_extensions = True

    otel_file = Unicode(
        None, allow_none=True, config=True,
        help="Write OpenTelemetry spans as JSON lines to this file. Unset: JUPYTER_MCP_OTEL_FILE, else off.",
    )
    capabilities = List(Unicode(), config=True, help="Capabilities to switch on, as NAME or NAME=off.")
    extensions = List(Unicode(), config=True, help="Paths of WebAssembly components to load.")
    execution_timeout = Float(
        None, allow_none=True, config=True, help="Default execution timeout in seconds (unset: 120)."
    )
    document_backend = Enum(
        ["auto", "file", "live"], "auto", config=True,
        help="How notebooks are edited: live (collaboration room), file (contents API), or auto.",
    )
    server_binary = Unicode(
        None, allow_none=True, config=True,
        help="The jupyter-mcp-server binary (default: the one installed with this package).",
    )

    child: ChildServer | None = None
    _listener: socket.socket | None = None
    _loaded = False
    _http: AsyncHTTPClient | None = None
    _watcher: PeriodicCallback | None = None
    _restarts = 0  # restarts in a row, reset once a child stayed up for RESTART_RESET seconds
    _restart_pending = False
    _stopping = False

    def http_client(self) -> AsyncHTTPClient:
        """Our own client: the shared one allows 10 connections, and event streams hold theirs."""
        if self._http is None:
            self._http = AsyncHTTPClient(force_instance=True, max_clients=1000)
        return self._http

    def initialize_settings(self) -> None:
        enabled = self.serverapp.jpserver_extensions
        if enabled.get(UPSTREAM_MODULE):
            raise RuntimeError(
                f"both jupyter-mcp-server-rs and the Python jupyter-mcp-server ({UPSTREAM_MODULE}) are "
                f"enabled in this Jupyter Server and both would serve /mcp; disable one, e.g. "
                f"`jupyter server extension disable {UPSTREAM_MODULE}`"
            )
        self.settings["jupyter_mcp_server_rs"] = self
        self._loaded = True

    async def _start_jupyter_server_extension(self, serverapp) -> None:
        # Jupyter's hook for after its port is bound. Starting the child here (not in a callback
        # queued at load time) matters twice: the child connects back to this server, and our
        # own port is picked only once Jupyter holds its port, so an ephemeral port Jupyter was
        # told to use can never be taken by us first.
        if self._loaded:  # not when loading was refused above
            self._start_child()

    def initialize_handlers(self) -> None:
        self.handlers.extend([(r"/mcp", McpProxyHandler), (r"/mcp/(.*)", McpProxyHandler)])

    def child_arguments(self) -> list[str]:
        server = self.serverapp
        args = ["--jupyter-url", server.connection_url]
        if self.otel_file:
            args += ["--otel-file", self.otel_file]
        for capability in self.capabilities:
            args += ["--capability", capability]
        for extension in self.extensions:
            args += ["--extension", extension]
        if self.execution_timeout is not None:
            args += ["--execution-timeout", str(self.execution_timeout)]
        args += ["--document-backend", self.document_backend]
        return args

    def child_secrets(self) -> dict[str, str]:
        token = getattr(self.serverapp.identity_provider, "token", "") or ""
        return {"JUPYTER_TOKEN": token} if token else {}

    def _start_child(self) -> None:
        binary = self.server_binary or find_binary()
        if binary is None:
            self.log.error("jupyter-mcp-server binary not found; /mcp is unavailable. Reinstall jupyter-mcp-server-rs.")
            return
        self._binary = binary
        self._listener = _listening_socket()
        self.child = ChildServer(binary, self.child_arguments(), self.child_secrets(), self.log, self._listener)
        if self._watcher is None:
            self._watcher = PeriodicCallback(self._watch_child, 250)
            self._watcher.start()

    def _watch_child(self) -> None:
        """Restarts a child that died (killed, crashed, or stopped through its own port)."""
        child = self.child
        if self._stopping or self._restart_pending or child is None:
            return
        status = child.process.poll()
        if status is None:
            if self._restarts and time.monotonic() - child.started > RESTART_RESET:
                self._restarts = 0
            return
        reason = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        delay = min(RESTART_FIRST_DELAY * 2**self._restarts, RESTART_MAX_DELAY)
        self._restarts += 1
        self._restart_pending = True
        self.log.warning(
            "jupyter-mcp-server (pid %s) %s; restarting it in %.1f s (restart %d in a row); "
            "/mcp answers 503 until it is back", child.process.pid, reason, delay, self._restarts,
        )
        IOLoop.current().call_later(delay, self._restart_child)

    def _restart_child(self) -> None:
        self._restart_pending = False
        if self._stopping:
            return
        try:
            self.child = ChildServer(self._binary, self.child_arguments(), self.child_secrets(), self.log,
                                     self._listener)
        except OSError as e:
            # The dead child stays in place, so the watcher tries again after a longer delay.
            self.log.error("could not restart jupyter-mcp-server: %s; trying again", e)

    def child_ready(self, timeout: float = 30) -> ChildServer | None:
        child = self.child
        if child is None or not child.ready(timeout):
            return None
        return child

    async def stop_extension(self) -> None:
        self._stopping = True
        if self._watcher is not None:
            self._watcher.stop()
        if self.child is not None:
            self.child.stop()
        if self._listener is not None:
            self._listener.close()


def find_binary() -> str | None:
    scripts = sysconfig.get_path("scripts")
    candidate = os.path.join(scripts, BINARY)
    if os.access(candidate, os.X_OK):
        return candidate
    beside_python = os.path.join(os.path.dirname(sys.executable), BINARY)
    if os.access(beside_python, os.X_OK):
        return beside_python
    return shutil.which(BINARY)


def _listening_socket() -> socket.socket:
    """A loopback port of our own, bound and listening for as long as the extension runs."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    return listener


def _die_with_parent() -> None:
    """Linux: the child gets SIGTERM if the Jupyter Server dies without stopping it."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
