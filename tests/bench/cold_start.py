"""Cold and warm start with wasm guests: how long a client waits for `initialize`, and when each
guest is ready, with an empty compile cache and then with a filled one.

Guests: the Python example (greeter, ~18 MB: componentize-py carries CPython) and the Rust
`declares` example. Before guests loaded off the handshake path, `initialize` was answered only
once every guest had loaded, so its cold figure was the "all guests ready" column. Not a test: it
measures. Usage: tests/bench/run cold-start (needs JUPYTER_MCP_GUESTS_DIR: guests/build).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GUESTS = ["greeter", "declares"]


def run_once(binary: str, config: Path) -> dict[str, float]:
    """Starts the server, times initialize, waits for every guest, returns the figures (s)."""
    log = tempfile.NamedTemporaryFile(prefix="jmcp-cold-", suffix=".log", delete=False)
    started = time.monotonic()
    proc = subprocess.Popen([binary, "start", "--jupyter-url", "http://127.0.0.1:9", "--document-backend", "file",
                             "--config", str(config)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                            env={**os.environ, "RUST_LOG": "jupyter_mcp_server=info"})
    proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
        + "\n").encode())
    proc.stdin.flush()
    proc.stdout.readline()
    figures = {"initialize": time.monotonic() - started}
    ready: dict[str, float] = {}
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        text = Path(log.name).read_text(errors="replace")
        for name in GUESTS:
            if name not in ready and re.search(rf"loaded wasm guest \S*{name}\.wasm", text):
                ready[name] = time.monotonic() - started
        if "every wasm guest has loaded" in text:
            break
        time.sleep(0.01)
    figures["all ready"] = time.monotonic() - started
    figures.update({f"{name} ready": ready.get(name, float("nan")) for name in GUESTS})
    proc.stdin.close()
    proc.wait(timeout=30)
    os.unlink(log.name)
    return figures


def main() -> None:
    binary = os.environ["JUPYTER_MCP_SERVER_BIN"]
    guests = Path(os.environ["JUPYTER_MCP_GUESTS_DIR"])
    with tempfile.TemporaryDirectory(prefix="jmcp-cold-") as tmp:
        cache = Path(tmp) / "cache"
        config = Path(tmp) / "server.toml"
        config.write_text(f'cache_dir = "{cache}"\n' + "".join(
            f'[[extension]]\npath = "{guests / (name + ".wasm")}"\n' for name in GUESTS))
        cold = run_once(binary, config)
        warm = run_once(binary, config)
    print("start with wasm guests (seconds after the process started)")
    print(f"{'':<18}{'cold cache':>12}{'warm cache':>12}")
    for key in cold:
        print(f"{key:<18}{cold[key]:>12.3f}{warm[key]:>12.3f}")
    print("before guests loaded off the handshake path, initialize came after 'all ready'")


if __name__ == "__main__":
    sys.exit(main())
