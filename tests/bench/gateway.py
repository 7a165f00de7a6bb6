"""Kernels on a cluster: execute_code round trip and kernel start through each gateway topology,
ours beside the Python server on the same gateways, in one run.

Topologies: a Jupyter Server handing its kernels to Enterprise Gateway (`--GatewayClient.url`);
`--code-sandbox-url` straight at Enterprise Gateway (notebooks on a Jupyter Server); the same at
Kernel Gateway. "kernel start" is the first execute_code of a fresh server: the start request,
the connection and the first answer. Not a test: it measures.
Usage: tests/bench/run gateway [--calls N] [--upstream-calls N]
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateways import start_enterprise_gateway, start_jupyter_on_gateway, start_kernel_gateway  # noqa: E402
import common  # noqa: E402
from harness import start_jupyter, stop_jupyter  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402


async def measure(command: str, args: list[str], env: dict[str, str], calls: int) -> tuple[float, float]:
    """(seconds to the first answer, a kernel started for it; median round trip after)."""
    params = StdioServerParameters(command=command, args=args, env=env)
    async with Client(params, mode="legacy", read_timeout_seconds=300) as client:
        started = time.perf_counter()
        first = await client.call_tool("execute_code", {"code": "0+1", "timeout": 120})
        start = time.perf_counter() - started
        text = " ".join(getattr(c, "text", "") for c in first.content)
        if "1" not in text:
            return start, float("nan")
        samples = []
        for i in range(calls):
            began = time.perf_counter()
            await client.call_tool("execute_code", {"code": f"{i}+1"})
            samples.append(time.perf_counter() - began)
        return start, statistics.median(samples)


# A topology that never answers is a figure, not a hang of the whole run.
TOPOLOGY_SECONDS = 240


async def bounded(measuring):
    try:
        return await asyncio.wait_for(measuring, TOPOLOGY_SECONDS)
    except asyncio.TimeoutError:
        raise TimeoutError(f"no figures within {TOPOLOGY_SECONDS} s") from None


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--upstream-calls", type=int, default=10)
    opts = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="jmcp-bench-gw-"))
    failures = []
    started = []
    rows = []
    try:
        eg = start_enterprise_gateway(tmp / "eg")
        started.append(eg.stop)
        kg = start_kernel_gateway(tmp / "kg")
        started.append(kg.stop)
        on_eg = start_jupyter_on_gateway(tmp / "js-eg", eg)
        started.append(lambda: stop_jupyter(on_eg))
        notebooks = start_jupyter(tmp / "js")
        started.append(lambda: stop_jupyter(notebooks))
        base = dict(os.environ, RUST_LOG="warn")
        topologies = [
            ("Jupyter Server -> Enterprise Gateway",
             ["--jupyter-url", on_eg.url, "--jupyter-token", on_eg.token], {}),
            ("code sandbox = Enterprise Gateway",
             ["--jupyter-url", notebooks.url, "--jupyter-token", notebooks.token,
              "--code-sandbox-url", eg.url], {"CODE_SANDBOX_TOKEN": eg.token}),
            ("code sandbox = Kernel Gateway",
             ["--jupyter-url", notebooks.url, "--jupyter-token", notebooks.token,
              "--code-sandbox-url", kg.url], {"CODE_SANDBOX_TOKEN": kg.token}),
        ]
        for name, args, extra in topologies:
            env = dict(base, **extra)
            ours = asyncio.run(bounded(measure(opts.ours, ["start", *args], env, opts.calls)))
            print(f"{name}: ours measured", file=sys.stderr, flush=True)
            upstream = None
            if common.upstream(opts):
                try:
                    upstream = asyncio.run(bounded(measure(
                        opts.upstream, ["start", "--transport", "stdio", *args], env, opts.upstream_calls)))
                except Exception as e:  # the Python server failing here is a figure too
                    failures.append(f"(Python server on '{name}': {e!r})")
                print(f"{name}: Python server measured", file=sys.stderr, flush=True)
            rows.append((name, ours, upstream))
    finally:
        for stop in reversed(started):
            stop()
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nthrough gateways: kernel start (first execute_code) and median round trip, "
          f"{opts.calls} calls (Python server: {opts.upstream_calls})")
    print(f"{'topology':38} {'ours start s':>12} {'ours ms':>9} {'Py start s':>11} {'Py ms':>9} {'Py/ours':>8}")
    for name, (start, rtt), upstream in rows:
        py_start, py_rtt = upstream if upstream else (float("nan"), float("nan"))
        ratio = py_rtt / rtt if upstream and rtt == rtt and rtt > 0 else float("nan")
        print(f"{name:38} {start:12.2f} {rtt * 1e3:9.2f} {py_start:11.2f} {py_rtt * 1e3:9.2f} {ratio:8.1f}")
    for failure in failures:
        print(failure)
    if not opts.upstream:
        print("(Python server not given: set UPSTREAM_JUPYTER_MCP_SERVER or use tests/bench/run)")


if __name__ == "__main__":
    main()
