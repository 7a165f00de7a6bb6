"""How soon a client's first requests are answered when the server starts its own Jupyter Server:
`initialize` and `tools/list` from the moment the process is spawned (bounds: 50 ms and 100 ms),
and the first `execute_code` (which waits for Jupyter). Beside ours: an earlier build of ours
(`--previous`, one that answered only once Jupyter was up) and the Python server 2.2.4, which
cannot start a Jupyter of its own and is given a running one. Not a test: it measures.
Usage: tests/bench/run first-answer [--runs N]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import connect, parser, upstream  # noqa: E402
from harness import start_jupyter, stop_jupyter  # noqa: E402

INITIALIZE_BOUND_MS = 50
TOOLS_LIST_BOUND_MS = 100


def once(command: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Spawns a stdio server; returns ms from spawn to the initialize answer, the tools/list
    answer and the first execute_code answer."""
    spawned = time.monotonic()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env)

    def send(message: dict) -> None:
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()

    def answer(request_id: int) -> float:
        while True:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("the server closed stdout")
            if json.loads(line).get("id") == request_id:
                return (time.monotonic() - spawned) * 1e3

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
        initialized = answer(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = answer(2)
        send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
              "params": {"name": "execute_code", "arguments": {"code": "6 * 7"}}})
        ran = answer(3)
        return initialized, listed, ran
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> None:
    args = parser(__doc__)
    args.add_argument("--runs", type=int, default=5)
    opts = args.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("JUPYTER_URL", "JUPYTER_TOKEN")}
    env["RUST_LOG"] = "warn"
    rows = []
    with tempfile.TemporaryDirectory(prefix="jmcp-first-") as tmp:
        root = Path(tmp)
        for label, binary in (("ours", opts.ours), ("previous build", opts.previous)):
            if not binary:
                continue
            figures = [once([binary, "--root-dir", str(root)], env) for _ in range(opts.runs)]
            rows.append((f"{label}, its own Jupyter", figures))
        python = upstream(opts)
        if python:
            jupyter = start_jupyter(root / "jupyter")
            try:
                command = [python, "start", "--transport", "stdio", *connect(jupyter)]
                figures = [once(command, env) for _ in range(opts.runs)]
                rows.append(("Python server 2.2.4, a running Jupyter", figures))
            finally:
                stop_jupyter(jupyter)
    print(f"\nfirst answers from spawn over stdio, median of {opts.runs} starts (ms)")
    print(f"{'server':<44}{'initialize':>12}{'tools/list':>12}{'execute_code':>14}")
    for label, figures in rows:
        medians = [statistics.median(column) for column in zip(*figures)]
        print(f"{label:<44}{medians[0]:>12.1f}{medians[1]:>12.1f}{medians[2]:>14.0f}")
    print(f"{'bound':<44}{INITIALIZE_BOUND_MS:>12}{TOOLS_LIST_BOUND_MS:>12}{'-':>14}")


if __name__ == "__main__":
    main()
