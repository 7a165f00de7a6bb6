"""Hub mode under load: many users of one JupyterHub through one server of ours.

A real JupyterHub on loopback (its proxy from npm, the local-process spawner), N users each with
their own API token and their own single-user server (started through the Hub before the clock
runs; the spawn time is printed apart). Every user opens a notebook on their server and makes the
same mix of calls as `load.py` (execute_code, read_notebook, insert_cell, read_cell), all users at
once. Prints throughput, latency per tool (p50/p99), errors (must be zero), and our server's
memory: resident before any user, after every user's first call, after the load, per user.
Not a test: it measures. Usage: tests/bench/run hub [--users 20] [--calls 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import peak_rss_mb, start_hub, stop_hub  # noqa: E402
from conftest import start_http_server  # noqa: E402
from load import call_mix, percentile  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one_user(url: str, token: str, user: str, calls: int, ready: asyncio.Barrier,
                   latencies: dict, errors: list) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(300)) as hc:
        async with Client(streamable_http_client(url, http_client=hc), mode="legacy",
                          read_timeout_seconds=300) as client:
            name = "bench"
            r = await client.call_tool("use_notebook", {"notebook_name": name, "notebook_path": f"{name}.ipynb",
                                                         "mode": "create"})
            if r.is_error:
                errors.append(f"{user} use_notebook: {r.content[0].text[:200]}")
            await client.call_tool("execute_code", {"code": "1"})
            await ready.wait()
            mix = [
                ("execute_code", {"code": "1 + 1"}),
                ("read_notebook", {"notebook_name": name, "response_format": "brief"}),
                ("insert_cell", {"notebook_name": name, "cell_index": -1, "cell_type": "code",
                                 "cell_source": "x = 1"}),
                ("read_cell", {"notebook_name": name, "cell_index": 0}),
            ]
            await ready.wait()
            await call_mix(client, mix, calls, latencies, errors, who=f"{user} ")
            await ready.wait()


async def run(url: str, tokens: dict[str, str], calls: int, pid: int) -> dict:
    latencies: dict[str, list[float]] = {}
    errors: list[str] = []
    ready = asyncio.Barrier(len(tokens) + 1)
    users = [asyncio.create_task(one_user(url, token, user, calls, ready, latencies, errors))
             for user, token in tokens.items()]
    await ready.wait()  # every user has a notebook and a kernel
    warmed = rss_mb(pid)
    await ready.wait()  # go
    started, cpu = time.perf_counter(), cpu_seconds(pid)
    await ready.wait()  # every user is done
    elapsed, cpu = time.perf_counter() - started, cpu_seconds(pid) - cpu
    loaded = rss_mb(pid)
    await asyncio.gather(*users)
    return {"latencies": latencies, "errors": errors, "elapsed": elapsed, "warmed": warmed, "loaded": loaded,
            "cpu": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--calls", type=int, default=50)
    opts = parser.parse_args()
    proxy = os.environ["JUPYTER_MCP_HUB_PROXY"]
    tmp = Path(tempfile.mkdtemp(prefix="jmcp-hub-load-"))
    hub = start_hub(tmp / "hub", proxy)
    server = None
    try:
        users = [f"user{i:02d}" for i in range(opts.users)]
        tokens = {}
        for user in users:
            hub.add_user(user)
            tokens[user] = hub.new_token(user)[0]
        spawn_started = time.perf_counter()
        for user in users:
            hub.api("POST", f"/users/{user}/server")
        for user in users:
            hub.wait_server(user, ready=True, timeout=600)
        spawn = time.perf_counter() - spawn_started
        server = start_http_server(["start", "--jupyterhub-url", hub.url], env={"RUST_LOG": "warn"},
                                   log_dir=tmp, hub_mode=True)
        idle = rss_mb(server.process.pid)
        result = asyncio.run(run(server.mcp_url, tokens, opts.calls, server.process.pid))
        peak = peak_rss_mb(server.process.pid)
    finally:
        if server:
            server.stop()
        stop_hub(hub)
        shutil.rmtree(tmp, ignore_errors=True)

    latencies, errors, elapsed = result["latencies"], result["errors"], result["elapsed"]
    total = sum(len(v) for v in latencies.values())
    every = [s for samples in latencies.values() for s in samples]
    print(f"\nhub load: {opts.users} users x {opts.calls} calls through one server in Hub mode "
          f"(JupyterHub + configurable-http-proxy, each user on their own server; {os.cpu_count()} cores)")
    print(f"spawning {opts.users} single-user servers through the Hub beforehand: {spawn:.1f}s")
    print(f"calls answered: {total}, errors: {len(errors)}, wall time {elapsed:.1f}s, "
          f"throughput {total / elapsed:.0f} calls/s; all calls p50 {percentile(every, 0.5) * 1e3:.1f} ms, "
          f"p99 {percentile(every, 0.99) * 1e3:.1f} ms")
    print(f"{'tool':16} {'p50 ms':>8} {'p99 ms':>8}")
    for tool, samples in sorted(latencies.items()):
        print(f"{tool:16} {percentile(samples, 0.5) * 1e3:8.2f} {percentile(samples, 0.99) * 1e3:8.2f}")
    print(f"our server's CPU time during the load: {result['cpu']:.2f}s, {result['cpu'] / max(total, 1) * 1e3:.2f} ms "
          f"per call (the rest of the machine runs the Hub, its proxy, {opts.users} Jupyter Servers, their kernels "
          f"and the clients)")
    per_user = (result["loaded"] - idle) / opts.users
    print(f"server RSS: {idle:.1f} MB idle, {result['warmed']:.1f} MB once every user had a notebook and a "
          f"kernel, {result['loaded']:.1f} MB after the load (peak {peak:.1f} MB): {per_user:.2f} MB per user")
    for error in errors[:10]:
        print("error:", error)


if __name__ == "__main__":
    main()
