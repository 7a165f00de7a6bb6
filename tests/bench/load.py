"""Load: many concurrent Streamable HTTP clients against one server, one Jupyter Server.

Each client has its own kernel and its own notebook and makes a mix of calls: execute_code on
its kernel, read_notebook, insert_cell and read_cell on its notebook. Prints throughput, latency
per tool (p50/p99), the overhead of execute_code above the raw kernel round trip measured on the
same machine, errors (must be zero) and the server's peak RSS. Not a test: it measures.
Usage: tests/bench/run load [--clients 50] [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from execute_latency import raw_round_trips  # noqa: E402
from harness import peak_rss_mb, start_jupyter, stop_jupyter  # noqa: E402
from conftest import http_client, start_http_server  # noqa: E402


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


async def call_mix(client, mix: list, calls: int, latencies: dict, errors: list, who: str = "") -> None:
    """Makes `calls` calls cycling through `mix`, timing each by tool; every failure is an error."""
    for i in range(calls):
        tool, arguments = mix[i % len(mix)]
        started = time.perf_counter()
        try:
            r = await client.call_tool(tool, arguments)
        except Exception as e:  # noqa: BLE001 - every failure counts as an error
            errors.append(f"{who}{tool}: {e!r}")
            continue
        latencies.setdefault(tool, []).append(time.perf_counter() - started)
        if r.is_error:
            errors.append(f"{who}{tool}: {r.content[0].text[:200]}")


async def one_client(server, jupyter, index: int, calls: int, latencies: dict, errors: list) -> None:
    kernel = jupyter.start_kernel()
    name = f"load{index}"
    async with http_client(server, "legacy") as client:
        r = await client.call_tool("use_notebook", {"notebook_name": name, "notebook_path": f"{name}.ipynb",
                                                     "mode": "create", "kernel_id": kernel})
        if r.is_error:
            errors.append(f"use_notebook: {r.content}")
            return
        mix = [
            ("execute_code", {"code": "1 + 1", "kernel_id": kernel}),
            ("read_notebook", {"notebook_name": name, "response_format": "brief"}),
            ("insert_cell", {"notebook_name": name, "cell_index": -1, "cell_type": "code", "cell_source": "x = 1"}),
            ("read_cell", {"notebook_name": name, "cell_index": 0}),
        ]
        await call_mix(client, mix, calls, latencies, errors)


async def run(server, jupyter, clients: int, calls: int) -> tuple[dict, list, float]:
    latencies: dict[str, list[float]] = {}
    errors: list[str] = []
    started = time.perf_counter()
    await asyncio.gather(*(one_client(server, jupyter, i, calls, latencies, errors) for i in range(clients)))
    return latencies, errors, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--backend", default="live", choices=["live", "file"])
    opts = parser.parse_args()
    binary = os.environ["JUPYTER_MCP_SERVER_BIN"]
    os.environ["JUPYTER_MCP_SERVER_BIN"] = binary
    tmp = Path(tempfile.mkdtemp(prefix="jmcp-load-"))
    jupyter = start_jupyter(tmp)
    server = start_http_server(["start", "--jupyter-url", jupyter.url, "--jupyter-token", jupyter.token,
                                "--document-backend", opts.backend], env={"RUST_LOG": "warn"}, log_dir=tmp)
    try:
        floor = raw_round_trips(jupyter, 50, quickack=True)
        latencies, errors, elapsed = asyncio.run(run(server, jupyter, opts.clients, opts.calls))
        rss = peak_rss_mb(server.process.pid)
    finally:
        server.stop()
        stop_jupyter(jupyter)
        shutil.rmtree(tmp, ignore_errors=True)

    total = sum(len(v) for v in latencies.values())
    floor_p50 = statistics.median(floor)
    print(f"\nload: {opts.clients} clients x {opts.calls} calls over Streamable HTTP ({opts.backend} backend)")
    print(f"calls answered: {total}, errors: {len(errors)}, wall time {elapsed:.1f}s, "
          f"throughput {total / elapsed:.0f} calls/s, server peak RSS {rss:.0f} MB")
    print(f"{'tool':16} {'p50 ms':>8} {'p99 ms':>8}")
    for tool, samples in sorted(latencies.items()):
        print(f"{tool:16} {percentile(samples, 0.5) * 1e3:8.2f} {percentile(samples, 0.99) * 1e3:8.2f}")
    executes = latencies.get("execute_code", [])
    if executes:
        print(f"raw kernel round trip (one client, idle machine) p50 {floor_p50 * 1e3:.2f} ms; execute_code overhead "
              f"above it under load: p50 {(percentile(executes, 0.5) - floor_p50) * 1e3:.2f} ms, "
              f"p99 {(percentile(executes, 0.99) - floor_p50) * 1e3:.2f} ms")
    for error in errors[:10]:
        print("error:", error)


if __name__ == "__main__":
    main()
