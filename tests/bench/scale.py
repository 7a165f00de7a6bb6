"""Scale: what a server keeps as the work grows. Repeated big runs: execute_code printing
--lines lines (about 64 bytes each; 200,000 is 12.7 MB) --runs times in one session, the
server's RSS after each, ours beside the Python server 2.2.4 on the same Jupyter Server
(IOPub rate limits off, so the whole output reaches both). Ours runs with its defaults
(--execution-memory-mb 64) and once more with --state-dir none.

The figure the bound is on: growth per run after the first few (the mean RSS step once the
ended runs' outputs fill ours's --execution-memory-mb, i.e. after the first 64 MiB / output + 1
runs), ≤ 2 MiB. Not a test: it asserts nothing; it measures.
Usage: tests/bench/run scale [--runs N] [--lines N]
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import common  # noqa: E402
from harness import start_jupyter  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

GROWTH_BOUND_MIB = 2.0


def server_process(command: str) -> psutil.Process:
    """The server the client just spawned: our newest child running `command`."""
    name = Path(command).name
    children = [p for p in psutil.Process().children(recursive=True)
                if name in " ".join(p.cmdline()[:2])]
    return max(children, key=lambda p: p.create_time())


async def repeated_runs(command: str, args: list[str], env: dict, runs: int, lines: int) -> list[float]:
    code = f"for i in range({lines}):\n    print(f'line {{i:>8}} ' + 'x' * 50)"
    rss = []
    params = StdioServerParameters(command=command, args=args, env=env)
    async with Client(params, mode="legacy", read_timeout_seconds=900) as client:
        server = server_process(command)
        await client.call_tool("execute_code", {"code": "1", "timeout": 120})
        for _ in range(runs):
            result = await client.call_tool("execute_code", {"code": code, "timeout": 600})
            assert not result.is_error, result
            await asyncio.sleep(0.5)
            rss.append(server.memory_info().rss / 2**20)
    return rss


BUDGET_BYTES = 64 << 20  # ours's --execution-memory-mb default


def growth(rss: list[float], output_bytes: int) -> float:
    """The mean RSS step per run once the budget is full (at most the last half), MiB."""
    first_few = min(-(-BUDGET_BYTES // output_bytes) + 1, len(rss) // 2)
    tail = rss[first_few - 1:]
    return (tail[-1] - tail[0]) / max(len(tail) - 1, 1)


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--lines", type=int, default=200_000)
    opts = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="jmcp-scalebench-"))
    jupyter = start_jupyter(tmp, extra=["--ZMQChannelsWebsocketConnection.iopub_data_rate_limit=0",
                                        "--ZMQChannelsWebsocketConnection.iopub_msg_rate_limit=0"])
    columns: dict[str, list[float]] = {}
    try:
        env = dict(os.environ, RUST_LOG="warn", JUPYTER_MCP_STATE_DIR=str(tmp / "state"))
        connect = common.connect(jupyter)
        columns["ours"] = asyncio.run(repeated_runs(opts.ours, ["start", *connect], env, opts.runs, opts.lines))
        columns["ours, no store"] = asyncio.run(repeated_runs(
            opts.ours, ["start", *connect], dict(env, JUPYTER_MCP_STATE_DIR="none"), opts.runs, opts.lines))
        if common.upstream(opts):
            columns["Python 2.2.4"] = asyncio.run(repeated_runs(
                opts.upstream, ["start", "--transport", "stdio", *connect], env, opts.runs, opts.lines))
        else:
            print("(Python server not given: set UPSTREAM_JUPYTER_MCP_SERVER or use tests/bench/run)")
    finally:
        jupyter.process.terminate()
        jupyter.process.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)

    megabytes = opts.lines * 64 / 1e6
    print(f"\nrepeated runs: execute_code printing {opts.lines} lines (~{megabytes:.1f} MB) each; "
          f"server RSS after each run, MiB")
    print(f"{'run':>4} " + " ".join(f"{name:>16}" for name in columns))
    for i in range(opts.runs):
        print(f"{i + 1:>4} " + " ".join(f"{rss[i]:16.1f}" for rss in columns.values()))
    size = opts.lines * 64
    print("MiB per run after the first few: "
          + ", ".join(f"{name} {growth(rss, size):+.2f}" for name, rss in columns.items()))
    for name in ("ours", "ours, no store"):
        step = growth(columns[name], size)
        verdict = "within" if step <= GROWTH_BOUND_MIB else "OVER"
        print(f"{name}: growth per run after the first few {step:+.2f} MiB, "
              f"bound +{GROWTH_BOUND_MIB} MiB: {verdict}; peak {max(columns[name]):.1f} MiB")


if __name__ == "__main__":
    main()
