"""Latency of execute_code("i+1"): our server vs. the raw kernel round trip vs. the Python server;
and what durable execution records cost: execute_code with records kept (on disk, --state-dir, the
default; and in a Redis on loopback, --state-store, when redis-server is installed) beside the same
server with none (--state-dir none), interleaved, and get_execution's latency answered from memory
and, after a restart, from the store.

All three run against one Jupyter Server started here, in one run, and the figures are printed side
by side with ratios (absolute times alone mean little on a shared machine). Not a test: it asserts
nothing; it measures. Usage: tests/bench/run [--calls N] [--upstream-calls N]
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

import common  # noqa: E402
from harness import Redis, start_jupyter  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from raw_kernel import RawKernelClient  # noqa: E402


def summary(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return statistics.median(ordered), p90


def raw_round_trips(jupyter, calls: int, quickack: bool) -> list[float]:
    kernel_id = jupyter.start_kernel()
    try:
        client = RawKernelClient(jupyter.url, jupyter.token, kernel_id, quickack=quickack)
        for i in range(5):
            client.execute(f"{i}+1")
        samples = []
        for i in range(calls):
            started = time.perf_counter()
            client.execute(f"{i}+1")
            samples.append(time.perf_counter() - started)
        client.close()
        return samples
    finally:
        jupyter.request("DELETE", f"/api/kernels/{kernel_id}")


async def mcp_round_trips(command: str, args: list[str], calls: int, env: dict[str, str]) -> list[float]:
    params = StdioServerParameters(command=command, args=args, env=env)
    async with Client(params, mode="legacy", read_timeout_seconds=300) as client:
        for i in range(3):
            result = await client.call_tool("execute_code", {"code": f"{i}+1"})
            text = " ".join(getattr(c, "text", "") for c in result.content)
            assert str(i + 1) in text, f"warm-up gave {text!r}"
        samples = []
        for i in range(calls):
            started = time.perf_counter()
            await client.call_tool("execute_code", {"code": f"{i}+1"})
            samples.append(time.perf_counter() - started)
        return samples


async def floor_and_ours(jupyter, command: str, args: list[str], calls: int,
                         env: dict[str, str]) -> tuple[list[float], list[float]]:
    """The raw kernel round trip (quick-ack) and ours through MCP, alternating call by call, so
    the difference is not load that changed between two separate runs."""
    kernel_id = jupyter.start_kernel()
    raw = RawKernelClient(jupyter.url, jupyter.token, kernel_id, quickack=True)
    try:
        params = StdioServerParameters(command=command, args=args, env=env)
        async with Client(params, mode="legacy", read_timeout_seconds=300) as client:
            for i in range(5):
                raw.execute(f"{i}+1")
                await client.call_tool("execute_code", {"code": f"{i}+1"})
            floor, ours = [], []
            for i in range(calls):
                started = time.perf_counter()
                raw.execute(f"{i}+1")
                floor.append(time.perf_counter() - started)
                started = time.perf_counter()
                await client.call_tool("execute_code", {"code": f"{i}+1"})
                ours.append(time.perf_counter() - started)
        return floor, ours
    finally:
        raw.close()
        jupyter.request("DELETE", f"/api/kernels/{kernel_id}")


ID_KEY = "io.jupyter-mcp/execution_id"


async def recording_cost(command: str, connect: list[str], store: list[str], calls: int,
                         env: dict[str, str]) -> dict[str, list[float]]:
    """execute_code through two servers at once, one recording to the store `store` names
    (--state-dir DIR, or --state-store URL) and one recording nothing, alternating call by call
    (so both see the same load); then get_execution of the last run, from memory, and from the
    store of a restarted server (for Redis: what another replica's get_execution costs)."""
    recording = StdioServerParameters(command=command, env=env, args=["start", *connect, *store])
    bare = StdioServerParameters(command=command, env=env, args=["start", *connect, "--state-dir", "none"])
    rows: dict[str, list[float]] = {"records kept": [], "no records": [],
                                    "get_execution, in memory": [], "get_execution, from the store": []}
    async with Client(recording, mode="legacy", read_timeout_seconds=300) as on, \
            Client(bare, mode="legacy", read_timeout_seconds=300) as off:
        for client in (on, off):
            for i in range(3):
                await client.call_tool("execute_code", {"code": f"{i}+1"})
        for i in range(calls):
            for name, client in (("records kept", on), ("no records", off)):
                started = time.perf_counter()
                await client.call_tool("execute_code", {"code": f"{i}+1"})
                rows[name].append(time.perf_counter() - started)
        # A run to read back: a background one names its id in _meta.
        begun = await on.call_tool("execute_code", {"code": "41+1", "background": True})
        last = (begun.meta or {}).get(ID_KEY)
        assert last, f"execute_code gave no execution id: {begun}"
        await on.call_tool("get_execution", {"execution_id": last, "wait_seconds": 30})
        for _ in range(calls):
            started = time.perf_counter()
            await on.call_tool("get_execution", {"execution_id": last})
            rows["get_execution, in memory"].append(time.perf_counter() - started)
    async with Client(recording, mode="legacy", read_timeout_seconds=300) as restarted:
        for _ in range(calls):
            started = time.perf_counter()
            result = await restarted.call_tool("get_execution", {"execution_id": last})
            rows["get_execution, from the store"].append(time.perf_counter() - started)
            assert not result.is_error, result
    return rows


def redis_binary() -> str | None:
    """Debian's redis-server (tests/bench/run finds or installs it through tests/ensure-redis)."""
    for candidate in (os.environ.get("JUPYTER_MCP_REDIS_BIN"), "/usr/bin/redis-server"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--upstream-calls", type=int, default=10)
    opts = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="jmcp-bench-"))
    jupyter = start_jupyter(tmp)
    rows = []
    try:
        env = dict(os.environ, RUST_LOG="warn")
        connect = common.connect(jupyter)
        floor, ours = asyncio.run(floor_and_ours(jupyter, opts.ours, ["start", *connect], opts.calls, env))
        rows.append(("raw kernel websocket, quick-ack (floor)", floor))
        plain = raw_round_trips(jupyter, max(10, opts.calls // 4), quickack=False)
        rows.append(("raw kernel websocket, plain client", plain))
        rows.append(("jupyter-mcp-server (Rust), MCP stdio", ours))
        previous = None
        if opts.previous:
            previous = asyncio.run(floor_and_ours(jupyter, opts.previous, ["start", *connect], opts.calls, env))
        stores = {"embedded store (--state-dir)": asyncio.run(recording_cost(
            opts.ours, connect, ["--state-dir", str(tmp / "state")], opts.calls, env))}
        binary = redis_binary()
        if binary:
            redis = Redis(binary, tmp / "redis")
            try:
                stores["Redis on loopback (--state-store)"] = asyncio.run(recording_cost(
                    opts.ours, connect, ["--state-store", redis.url()], opts.calls, env))
            finally:
                redis.stop()
        else:
            print("(no redis-server: the Redis rows are left out; install it with apt-get install redis-server)")
        if common.upstream(opts):
            upstream = asyncio.run(mcp_round_trips(
                opts.upstream, ["start", "--transport", "stdio", *connect], opts.upstream_calls, env))
            rows.append(("jupyter-mcp-server 2.2.4 (Python), MCP stdio", upstream))
        else:
            print("(Python server not given: set UPSTREAM_JUPYTER_MCP_SERVER or use tests/bench/run)")
    finally:
        jupyter.process.terminate()
        jupyter.process.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)

    floor_median = summary(floor)[0]
    print(f"\nexecute_code('i+1') round trip, {opts.calls} calls, ours alternating with the floor "
          f"(Python server: {opts.upstream_calls})")
    print(f"{'path':48} {'median ms':>10} {'p90 ms':>10} {'x floor':>8}")
    for name, samples in rows:
        median, p90 = summary(samples)
        print(f"{name:48} {median * 1e3:10.2f} {p90 * 1e3:10.2f} {median / floor_median:8.2f}")
    ours_median = summary(ours)[0]
    print(f"\nours - floor at the median (interleaved): {(ours_median - floor_median) * 1e3:+.2f} ms "
          "(target: <= +2 ms)")
    if previous:
        p_floor, p_ours = (summary(samples)[0] for samples in previous)
        print(f"previous build ({opts.previous}) - floor, its own interleaved run: "
              f"{(p_ours - p_floor) * 1e3:+.2f} ms ({p_ours * 1e3:.2f} vs {p_floor * 1e3:.2f})")
    if len(rows) == 4:
        print(f"Python server / ours at the median: {summary(rows[3][1])[0] / ours_median:.0f}x")

    for store, durable in stores.items():
        print(f"\ndurable execution records, {store}, {opts.calls} calls each, interleaved")
        print(f"{'path':48} {'median ms':>10} {'p90 ms':>10}")
        for name, samples in durable.items():
            median, p90 = summary(samples)
            print(f"{name:48} {median * 1e3:10.2f} {p90 * 1e3:10.2f}")
        cost = summary(durable["records kept"])[0] - summary(durable["no records"])[0]
        print(f"recording on execute_code's round trip at the median: {cost * 1e3:+.2f} ms"
              + (" (target: <= 1 ms)" if "embedded" in store else ""))


if __name__ == "__main__":
    main()
