"""What kernel.sandbox costs: kernel start, execute_code("i+1") and an HTTP request from the
kernel to a loopback host, with the sandbox off and on, side by side in one run.

Two servers of ours run at once, each with the Jupyter Server it starts itself (the sandbox
confines only those kernels), one with `--capability kernel.sandbox` and the loopback host
allowed. Calls alternate between them, so both see the same load. Kernel start is use_notebook
creating a new notebook (a new kernel each time, no spares). The HTTP request is timed inside the
kernel: direct with the sandbox off, through the egress proxy with it on.
Not a test: it asserts nothing; it measures. Usage: tests/bench/run sandbox [--calls N] [--starts N]
"""

from __future__ import annotations

import asyncio
import http.server
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import common  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

BOUNDS = {"kernel start": 100.0, "execute_code": 0.5, "HTTP request from the kernel": 5.0}


def loopback_site() -> tuple[http.server.ThreadingHTTPServer, int]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def joined(result) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


async def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--starts", type=int, default=8)
    parser.add_argument("--requests", type=int, default=100)
    opts = parser.parse_args()
    site, port = loopback_site()
    work = Path(tempfile.mkdtemp(prefix="jmcp-bench-sandbox-"))
    roots = {}
    for name in ("off", "on"):
        roots[name] = work / name
        roots[name].mkdir()
    config = work / "config.toml"
    config.write_text(f'[kernel_sandbox]\nhosts = ["127.0.0.1:{port}"]\n')
    env = dict(os.environ, RUST_LOG="warn", JUPYTER_MCP_STATE_DIR="none")
    env.pop("JUPYTER_URL", None)
    args = {"off": ["start"], "on": ["start", "--capability", "kernel.sandbox", "--config", str(config)]}
    rows: dict[str, dict[str, list[float]]] = {k: {"off": [], "on": []} for k in BOUNDS}
    fetch = (
        "import time, urllib.request\n"
        f"opener = urllib.request.build_opener()\n"
        "samples = []\n"
        f"for _ in range({opts.requests}):\n"
        "    t = time.perf_counter()\n"
        f"    opener.open('http://127.0.0.1:{port}/', timeout=10).read()\n"
        "    samples.append(time.perf_counter() - t)\n"
        "print(' '.join(f'{s:.6f}' for s in samples))\n"
    )
    servers = {name: StdioServerParameters(command=opts.ours, args=args[name], env=env, cwd=str(roots[name]))
               for name in ("off", "on")}
    async with Client(servers["off"], mode="legacy", read_timeout_seconds=300) as off, \
            Client(servers["on"], mode="legacy", read_timeout_seconds=300) as on:
        clients = {"off": off, "on": on}
        for client in clients.values():
            for i in range(5):
                await client.call_tool("execute_code", {"code": f"{i}+1"})
        for i in range(opts.calls):
            for name, client in clients.items():
                started = time.perf_counter()
                await client.call_tool("execute_code", {"code": f"{i}+1"})
                rows["execute_code"][name].append(time.perf_counter() - started)
        for i in range(opts.starts):
            for name, client in clients.items():
                started = time.perf_counter()
                result = await client.call_tool("use_notebook", {
                    "notebook_name": f"n{i}", "notebook_path": f"n{i}.ipynb", "mode": "create"})
                rows["kernel start"][name].append(time.perf_counter() - started)
                assert not result.is_error, joined(result)
                await client.call_tool("unuse_notebook", {"notebook_name": f"n{i}"})
        for name, client in clients.items():
            text = joined(await client.call_tool("execute_code", {"code": fetch, "timeout": 300}))
            try:
                rows["HTTP request from the kernel"][name] = [float(x) for x in text.split()]
            except ValueError:
                raise SystemExit(f"the HTTP request from the sandbox {name} failed: {text}")
    site.shutdown()
    print(f"\nkernel.sandbox off vs on (our {Path(opts.ours).name}, each with its own embedded Jupyter), "
          f"median and p90, ms")
    print(f"{'':34} {'off':>16} {'on':>16} {'on - off (median)':>18} {'bound':>8}")
    for what, bound in BOUNDS.items():
        cells = []
        medians = {}
        for name in ("off", "on"):
            samples = sorted(rows[what][name])
            median = statistics.median(samples) * 1000
            p90 = samples[min(len(samples) - 1, int(round(0.9 * (len(samples) - 1))))] * 1000
            medians[name] = median
            cells.append(f"{median:7.2f} / {p90:7.2f}")
        delta = medians["on"] - medians["off"]
        verdict = "within" if delta <= bound else "OVER"
        print(f"{what + ' (n=' + str(len(rows[what]['on'])) + ')':34} {cells[0]:>16} {cells[1]:>16} "
              f"{delta:+17.2f}  {'+' + str(bound):>6} {verdict}")


if __name__ == "__main__":
    asyncio.run(main())
