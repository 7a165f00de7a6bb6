"""What kernel.sandbox costs: kernel start, execute_code("i+1") and an HTTP request from the
kernel to a loopback host, with the sandbox off and on, side by side in one run.

Two servers of ours run at once, each with the Jupyter Server it starts itself (the sandbox
confines only those kernels), one with `--capability kernel.sandbox` and the loopback host
allowed. Calls alternate between them, so both see the same load. Kernel start is use_notebook
creating a new notebook (a new kernel each time, no spares). The HTTP request is timed inside the
kernel: direct with the sandbox off, through the egress proxy with it on; and an HTTPS request to
a host with a credential (a loopback site with a test root standing in for the machine's roots):
direct with the sandbox off, with it on through the proxy, which terminates TLS, verifies the
site and adds the header from the secrets store (bound: +10 ms at the median).
Not a test: it asserts nothing; it measures. Usage: tests/bench/run sandbox [--calls N] [--starts N]
"""

from __future__ import annotations

import asyncio
import http.server
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import common  # noqa: E402
from test_sandbox_credentials import make_authority  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

HTTPS = "HTTPS request, credentialed host"
BOUNDS = {"kernel start": 100.0, "execute_code": 0.5, "HTTP request from the kernel": 5.0, HTTPS: 10.0}
SECRET = "bench-secret-value"


def loopback_site(tls: tuple[Path, Path] | None = None) -> tuple[http.server.ThreadingHTTPServer, int]:
    """A site answering "ok", or with `tls` (certificate, key) over HTTPS answering whether the
    request carried the credential."""
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self):  # noqa: N802
            body = b"ok"
            if tls:
                body = b"authorized" if self.headers.get("Authorization") == f"Bearer {SECRET}" else b"plain"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(tls[0]), str(tls[1]))
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def timed_fetches(url: str, requests: int) -> str:
    """Kernel code: `requests` GETs of `url`, a new connection each, printing the seconds of each
    and the last answer."""
    return (
        "import time, urllib.request\n"
        "opener = urllib.request.build_opener()\n"
        "samples = []\n"
        f"for _ in range({requests}):\n"
        "    t = time.perf_counter()\n"
        f"    answer = opener.open({url!r}, timeout=10).read().decode()\n"
        "    samples.append(time.perf_counter() - t)\n"
        "print(answer, ' '.join(f'{s:.6f}' for s in samples))\n"
    )


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
    # The credentialed host: HTTPS with a test root that stands in for the machine's roots (the
    # proxy verifies the host against it; the kernel without the sandbox trusts it directly).
    root_ca, cert, key = make_authority(work)
    tls_site, tls_port = loopback_site((cert, key))
    roots = {}
    for name in ("off", "on"):
        roots[name] = work / name
        roots[name].mkdir()
    config = work / "config.toml"
    config.write_text(f'[kernel_sandbox]\nhosts = ["127.0.0.1:{port}"]\n'
                      f'[[kernel_sandbox.credentials]]\nhost = "127.0.0.1:{tls_port}"\nsecret = "BENCH_TOKEN"\n')
    env = dict(os.environ, RUST_LOG="warn", JUPYTER_MCP_STATE_DIR="none", SSL_CERT_FILE=str(root_ca),
               JUPYTER_MCP_SECRETS_FILE=str(work / "secrets.json"))
    env.pop("JUPYTER_URL", None)
    subprocess.run([opts.ours, "secret", "set", "BENCH_TOKEN"], input=SECRET, text=True, env=env, check=True,
                   capture_output=True, timeout=30)
    args = {"off": ["start"], "on": ["start", "--capability", "kernel.sandbox", "--config", str(config)]}
    rows: dict[str, dict[str, list[float]]] = {k: {"off": [], "on": []} for k in BOUNDS}
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
        fetches = {"HTTP request from the kernel": (f"http://127.0.0.1:{port}/", "ok"),
                   HTTPS: (f"https://127.0.0.1:{tls_port}/", None)}
        for what, (url, expected) in fetches.items():
            for name, client in clients.items():
                code = timed_fetches(url, opts.requests)
                text = joined(await client.call_tool("execute_code", {"code": code, "timeout": 300}))
                # The proxy adds the credential; without the sandbox the request goes as it is.
                wanted = expected or {"on": "authorized", "off": "plain"}[name]
                answer, *samples = text.split()
                try:
                    rows[what][name] = [float(x) for x in samples]
                except ValueError:
                    raise SystemExit(f"{what} from the sandbox {name} failed: {text}")
                if answer != wanted:
                    raise SystemExit(f"{what} from the sandbox {name}: answered {answer!r}, not {wanted!r}")
    site.shutdown()
    tls_site.shutdown()
    print(f"\nkernel.sandbox off vs on (our {Path(opts.ours).name}, each with its own embedded Jupyter), "
          f"median and p90, ms")
    print(f"{'':42} {'off':>16} {'on':>16} {'on - off (median)':>18} {'bound':>8}")
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
        print(f"{what + ' (n=' + str(len(rows[what]['on'])) + ')':42} {cells[0]:>16} {cells[1]:>16} "
              f"{delta:+17.2f}  {'+' + str(bound):>6} {verdict}")


if __name__ == "__main__":
    asyncio.run(main())
