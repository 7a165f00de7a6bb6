"""Scale: what a server keeps as the work grows. Repeated big runs: execute_code printing
--lines lines (about 64 bytes each; 200,000 is 12.7 MB) --runs times in one session, the
server's RSS after each, ours beside the Python server 2.2.4 on the same Jupyter Server
(IOPub rate limits off, so the whole output reaches both). Ours runs with its defaults
(--execution-memory-mb 64) and once more with --state-dir none.

Bursty cell on the live backend: a notebook cell printing ~--burst-mb MB in bursts (a training
loop), run with insert_execute_code_cell while a sampler reads the server's RSS every 50 ms:
peak RSS beside the bound 80 MiB + 3x the output, and our CPU beside the Jupyter Server's
during the run (bound: at most 2x). The Python server runs the same cell beside.

The figure the bound is on: growth per run after the first few (the mean RSS step once the
ended runs' outputs fill ours's --execution-memory-mb, i.e. after the first 64 MiB / output + 1
runs), ≤ 2 MiB. Not a test: it asserts nothing; it measures.
Held sessions: --sessions Streamable HTTP sessions opened the way the official clients open them
(initialize, initialized, tools/list, and the GET stream for the server's messages) and held idle; the server's RSS growth per session right
after, and once rmcp's 60 s cache of completed responses has expired (the steady state),
against the bound of 100 KiB.

Notebook sizes: read_cell of the middle cell, a read_notebook page of 20 cells from the middle and
insert_cell in the middle of notebooks of
--sizes cells (each a few lines with a short output), median per call for each backend of ours
(and --previous, an earlier build, when given) beside the Python server, with the growth per
doubling of the cells; bound: read_cell at the largest size within 2x of the smallest.

Big file: a notebook of 1,000 cells holding ~--big-mb MB of outputs (images and long
streams, as a notebook that plotted and logged has them), on the file backend: the median time of
overwrite_cell_source and of insert_cell in the middle, against the bound of 300 ms, beside the
Python server.

Usage: tests/bench/run scale [--runs N] [--lines N] [--burst-mb MB] [--sessions N]
       [--sizes 100,1000,5000] [--size-calls N] [--big-mb MB]
       [--only runs|bursty|sessions|sizes|bigfile]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
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
    # The client spawns it as a direct child; anything it starts itself is not it.
    children = [p for p in psutil.Process().children()
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


BURSTY = ("import time\n"
          "for burst in range({bursts}):\n"
          "    for i in range(4000):\n"
          "        print(f'epoch {{burst:>4}} step {{i:>6}} loss {{1 / (i + 1):.6f}} ' + 'x' * 16)\n"
          "    time.sleep(0.05)")
LINE_BYTES = 62


async def bursty_cell(command: str, args: list[str], env: dict, jupyter_pid: int, bursts: int,
                      tag: str) -> dict[str, float]:
    params = StdioServerParameters(command=command, args=args, env=env)
    async with Client(params, mode="legacy", read_timeout_seconds=900) as client:
        server = server_process(command)
        jupyter = psutil.Process(jupyter_pid)
        result = await client.call_tool("use_notebook", {
            "notebook_name": tag, "notebook_path": f"bursty-{tag}.ipynb", "mode": "create"})
        assert not result.is_error, result
        await client.call_tool("insert_execute_code_cell", {"cell_index": -1, "cell_source": "1"})
        base_rss = server.memory_info().rss
        peak = [base_rss]
        running = True

        async def sample() -> None:
            while running:
                peak[0] = max(peak[0], server.memory_info().rss)
                await asyncio.sleep(0.05)

        sampler = asyncio.create_task(sample())
        ours_cpu, theirs_cpu = sum(server.cpu_times()[:2]), sum(jupyter.cpu_times()[:2])
        result = await client.call_tool("insert_execute_code_cell", {
            "cell_index": -1, "cell_source": BURSTY.format(bursts=bursts), "timeout": 600})
        ours_cpu, theirs_cpu = sum(server.cpu_times()[:2]) - ours_cpu, sum(jupyter.cpu_times()[:2]) - theirs_cpu
        await asyncio.sleep(5)
        after = server.memory_info().rss
        running = False
        await sampler
        assert not result.is_error, result
    return {"peak": peak[0] / 2**20, "base": base_rss / 2**20, "after": after / 2**20,
            "cpu": ours_cpu, "jupyter cpu": theirs_cpu}


async def held_sessions(ours: str, jupyter, count: int, settle: float) -> dict[str, float]:
    import httpx2
    from conftest import start_http_server

    os.environ["JUPYTER_MCP_SERVER_BIN"] = ours  # what start_http_server starts
    server = start_http_server(["start", *common.connect(jupyter)], {"RUST_LOG": "warn"})
    process = psutil.Process(server.process.pid)
    headers = {"Authorization": f"Bearer {server.token}", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    try:
        async with httpx2.AsyncClient(headers=headers, timeout=120,
                                      limits=httpx2.Limits(max_connections=count + 100)) as http, \
                contextlib.AsyncExitStack() as streams:
            async def open_session(i: int) -> str:
                reply = await http.post(server.mcp_url, json={
                    "jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": f"held-{i}", "version": "1"}}})
                session = reply.headers["mcp-session-id"]
                more = {"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
                await http.post(server.mcp_url, headers=more,
                                json={"jsonrpc": "2.0", "method": "notifications/initialized"})
                listed = await http.post(server.mcp_url, headers=more,
                                         json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
                assert "execute_code" in listed.text, listed.text[:200]
                # Held open, as a client listening for the server's own messages holds it.
                stream = await streams.enter_async_context(http.stream(
                    "GET", server.mcp_url, headers={**more, "Accept": "text/event-stream"}))
                assert stream.status_code == 200, stream.status_code
                return session

            await open_session(-1)
            await asyncio.sleep(1)
            before = process.memory_info().rss
            for start in range(0, count, 50):
                await asyncio.gather(*(open_session(i) for i in range(start, min(count, start + 50))))
            await asyncio.sleep(1)
            after = process.memory_info().rss
            await asyncio.sleep(settle)
            settled = process.memory_info().rss
    finally:
        server.stop()
    return {"right after": (after - before) / count / 1024, "settled": (settled - before) / count / 1024}


SIZE_BOUND = 2.0  # read_cell at 5,000 cells within 2x of 100 cells
SIZE_CALLS = ("read_cell", "read_notebook", "insert_cell")


def sized_notebook(path: Path, cells: int) -> None:
    """A notebook of `cells` code cells, each a few lines with a short output, as an analysis
    notebook has them."""
    nb = {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [
            {"cell_type": "code", "id": f"c{i:05d}", "metadata": {}, "execution_count": i + 1,
             "source": f"# step {i}\nvalue_{i} = compute({i})\nprint(value_{i})",
             "outputs": [{"output_type": "stream", "name": "stdout", "text": f"{i * 7}\n"}]}
            for i in range(cells)
        ],
    }
    path.write_text(json.dumps(nb, indent=1))


async def notebook_sizes(command: str, args: list[str], env: dict, root: Path, tag: str,
                         sizes: list[int], calls: int) -> dict[str, dict[int, float]]:
    """Median seconds of read_cell (the middle cell, with outputs) and insert_cell (in the
    middle) on notebooks of each size, one server session."""
    medians: dict[str, dict[int, float]] = {tool: {} for tool in SIZE_CALLS}
    params = StdioServerParameters(command=command, args=args, env=env)
    async with Client(params, mode="legacy", read_timeout_seconds=300) as client:
        async def call(tool: str, arguments: dict):
            r = await client.call_tool(tool, arguments)
            assert not r.is_error, f"{tag} {tool}: {r.content}"

        for size in sizes:
            name = f"sizes-{tag}-{size}"
            sized_notebook(root / f"{name}.ipynb", size)
            await call("use_notebook", {"notebook_name": name, "notebook_path": f"{name}.ipynb"})
            middle = size // 2
            for tool, arguments in (
                ("read_cell", {"cell_index": middle, "include_outputs": True}),
                ("read_notebook", {"notebook_name": name, "start_index": middle, "limit": 20}),
                ("insert_cell", {"cell_index": middle, "cell_type": "code", "cell_source": "y = 1"}),
            ):
                await call(tool, arguments)  # warm-up
                samples = []
                for _ in range(calls):
                    started = time.perf_counter()
                    await call(tool, arguments)
                    samples.append(time.perf_counter() - started)
                medians[tool][size] = statistics.median(samples)
            await call("unuse_notebook", {"notebook_name": name})
    return medians


def report_sizes(rows: dict[str, dict[str, dict[int, float]]], sizes: list[int]) -> None:
    if not rows:
        return
    first, last = sizes[0], sizes[-1]
    doublings = math.log2(last / first)
    print(f"\nnotebook sizes: median ms per call, read_cell of the middle cell (with outputs), read_notebook "
          f"of 20 cells from the middle (brief) and insert_cell in the middle; growth per doubling of the "
          f"cells ({first} -> {last})")
    print(f"{'call, server':32} " + " ".join(f"{n:>8}" for n in sizes) + f" {'per x2':>8} {f'{last}/{first}':>10}")
    for tool in SIZE_CALLS:
        for server, medians in rows.items():
            row = medians[tool]
            ratio = row[last] / row[first]
            print(f"{tool + ', ' + server:32} " + " ".join(f"{row[n] * 1000:8.1f}" for n in sizes)
                  + f" {ratio ** (1 / doublings):8.2f}x {ratio:9.2f}x")
    for server, medians in rows.items():
        if not server.startswith("ours"):
            continue
        row = medians["read_cell"]
        ratio = row[last] / row[first]
        verdict = "within" if ratio <= SIZE_BOUND else "OVER"
        print(f"read_cell, {server}: {last} cells {ratio:.2f}x of {first} cells, bound {SIZE_BOUND}x: {verdict}")


BIG_FILE_BOUND_MS = 300.0
BIG_CALLS = ("overwrite_cell_source", "insert_cell")


def big_notebook(path: Path, megabytes: float, cells: int = 1000) -> int:
    """A notebook of `cells` code cells holding ~`megabytes` MB of outputs: every other cell a
    PNG-sized image (incompressible base64), the others a long printed stream. Its size in bytes."""
    import base64
    import random

    per_cell = int(megabytes * 1e6 / cells)
    rng = random.Random(53)
    out = []
    for i in range(cells):
        if i % 2:
            data = base64.b64encode(rng.randbytes(per_cell * 3 // 4)).decode()
            output = {"output_type": "display_data", "metadata": {},
                      "data": {"image/png": data, "text/plain": "<Figure size 640x480 with 1 Axes>"}}
        else:
            lines = per_cell // 64 + 1
            output = {"output_type": "stream", "name": "stdout",
                      "text": [f"step {i:>5} line {j:>6} loss {1 / (j + 1):.6f} {'x' * 24}\n" for j in range(lines)]}
        out.append({"cell_type": "code", "id": f"b{i:05d}", "metadata": {}, "execution_count": i + 1,
                    "source": f"# step {i}\nplot(run_{i})", "outputs": [output]})
    nb = {"nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "cells": out}
    text = json.dumps(nb, indent=1)
    path.write_text(text)
    return len(text.encode())


async def big_file(command: str, args: list[str], env: dict, root: Path, tag: str, megabytes: float,
                   calls: int) -> dict[str, float] | str:
    """Median seconds of overwrite_cell_source and insert_cell in the middle of the big notebook,
    or what went wrong (the Python server may not open it)."""
    name = f"big-{tag}"
    big_notebook(root / f"{name}.ipynb", megabytes)
    medians: dict[str, float] = {}
    params = StdioServerParameters(command=command, args=args, env=env)
    async with Client(params, mode="legacy", read_timeout_seconds=300) as client:
        opened = await client.call_tool("use_notebook", {"notebook_name": name, "notebook_path": f"{name}.ipynb"})
        if opened.is_error:
            return f"use_notebook failed: {str(opened.content)[:120]}"
        for tool, arguments in (
            ("overwrite_cell_source", {"cell_index": 500, "cell_source": "# changed\nplot(run_500)"}),
            ("insert_cell", {"cell_index": 500, "cell_type": "code", "cell_source": "y = 1"}),
        ):
            samples = []
            for n in range(calls + 1):
                if tool == "overwrite_cell_source":  # a new source each time, so each call saves
                    arguments = dict(arguments, cell_source=f"# changed {n}\nplot(run_500)")
                started = time.perf_counter()
                result = await client.call_tool(tool, arguments)
                if result.is_error:
                    return f"{tool} failed: {str(result.content)[:120]}"
                if n:  # the first is a warm-up
                    samples.append(time.perf_counter() - started)
            medians[tool] = statistics.median(samples)
    return medians


def jupyter_floor(jupyter, name: str, calls: int) -> dict[str, float]:
    """What every client's edit of the big file pays Jupyter at least, whoever the client: the
    contents API's hash of the file (our check for other writers) and its save of the same bytes,
    median seconds, asked directly."""
    import httpx

    text = (jupyter.root / f"{name}.ipynb").read_text()
    body = json.dumps({"type": "file", "format": "text", "content": text})
    url = f"{jupyter.url}/api/contents/{name}.ipynb"
    times: dict[str, list[float]] = {"hash": [], "save": []}
    with httpx.Client(headers={"Authorization": f"token {jupyter.token}"}, timeout=120) as http:
        for _ in range(calls):
            started = time.perf_counter()
            http.get(url, params={"type": "file", "content": "0", "hash": "1"}).raise_for_status()
            times["hash"].append(time.perf_counter() - started)
            started = time.perf_counter()
            http.put(url, content=body, headers={"Content-Type": "application/json"}).raise_for_status()
            times["save"].append(time.perf_counter() - started)
    return {what: statistics.median(samples) for what, samples in times.items()}


def report_big_file(rows: dict[str, dict[str, float] | str], size: int, floor: dict[str, float]) -> None:
    if not rows:
        return
    print(f"\nbig file: 1,000 cells, {size / 1e6:.1f} MB of notebook (outputs), file backend; median ms per call")
    print(f"Jupyter alone, asked directly: the file's hash {floor['hash'] * 1000:.1f} ms, a save of its bytes "
          f"{floor['save'] * 1000:.1f} ms; an edit that checks and saves costs at least "
          f"{(floor['hash'] + floor['save']) * 1000:.1f} ms whoever asks")
    print(f"{'server':16} " + " ".join(f"{tool:>22}" for tool in BIG_CALLS))
    for server, row in rows.items():
        if isinstance(row, str):
            print(f"{server:16} {row}")
            continue
        print(f"{server:16} " + " ".join(f"{row[tool] * 1000:22.1f}" for tool in BIG_CALLS))
    for server, row in rows.items():
        if server.startswith("ours") and not isinstance(row, str):
            worst = max(row.values()) * 1000
            verdict = "within" if worst <= BIG_FILE_BOUND_MS else "OVER"
            above = worst - (floor["hash"] + floor["save"]) * 1000
            print(f"{server}: slowest edit {worst:.1f} ms, bound {BIG_FILE_BOUND_MS:.0f} ms: {verdict}; "
                  f"{above:+.1f} ms beside Jupyter's own hash and save")


def growth(rss: list[float], output_bytes: int) -> float:
    """The mean RSS step per run once the budget is full (at most the last half), MiB."""
    first_few = min(-(-BUDGET_BYTES // output_bytes) + 1, len(rss) // 2)
    tail = rss[first_few - 1:]
    return (tail[-1] - tail[0]) / max(len(tail) - 1, 1)


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--burst-mb", type=float, default=15.0)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--sizes", default="100,1000,5000", help="notebook sizes in cells, comma-separated")
    parser.add_argument("--size-calls", type=int, default=10, help="timed calls per size (Python server: half)")
    parser.add_argument("--big-mb", type=float, default=50.0, help="outputs in the big notebook, MB")
    parser.add_argument("--only", choices=["runs", "bursty", "sessions", "sizes", "bigfile"], default=None)
    opts = parser.parse_args()
    sizes = [int(n) for n in opts.sizes.split(",")]
    bursts = max(1, round(opts.burst_mb * 1e6 / (4000 * LINE_BYTES)))
    bursty: dict[str, dict[str, float]] = {}
    tmp = Path(tempfile.mkdtemp(prefix="jmcp-scalebench-"))
    jupyter = start_jupyter(tmp, extra=["--ZMQChannelsWebsocketConnection.iopub_data_rate_limit=0",
                                        "--ZMQChannelsWebsocketConnection.iopub_msg_rate_limit=0"])
    columns: dict[str, list[float]] = {}
    try:
        env = dict(os.environ, RUST_LOG="warn", JUPYTER_MCP_STATE_DIR=os.environ.get("BENCH_STATE_DIR", str(tmp / "state")))
        connect = common.connect(jupyter)
        sessions = None
        if opts.only in (None, "sessions"):
            sessions = asyncio.run(held_sessions(opts.ours, jupyter, opts.sessions, 65))
            print(f"\nheld HTTP sessions: {opts.sessions} opened (initialize, initialized, tools/list, GET stream) "
                  f"and held idle; server RSS per session: {sessions['right after']:.1f} KiB right after, "
                  f"{sessions['settled']:.1f} KiB after 65 s (bound 100 KiB: "
                  f"{'within' if sessions['settled'] <= 100 else 'OVER'})")
            if opts.only == "sessions":
                return
        if opts.only in (None, "sizes"):
            rows = {}
            for backend in ("file", "live"):
                rows[f"ours ({backend})"] = asyncio.run(notebook_sizes(
                    opts.ours, ["start", *connect, "--document-backend", backend], env, jupyter.root,
                    f"ours-{backend}", sizes, opts.size_calls))
                if opts.previous:
                    rows[f"previous ({backend})"] = asyncio.run(notebook_sizes(
                        opts.previous, ["start", *connect, "--document-backend", backend], env, jupyter.root,
                        f"previous-{backend}", sizes, opts.size_calls))
            if common.upstream(opts):
                rows["Python 2.2.4"] = asyncio.run(notebook_sizes(
                    opts.upstream, ["start", "--transport", "stdio", *connect], env, jupyter.root, "py", sizes,
                    max(3, opts.size_calls // 2)))
            report_sizes(rows, sizes)
            if opts.only == "sizes":
                return
        if opts.only in (None, "bigfile"):
            big: dict[str, dict[str, float] | str] = {}
            file_backend = ["--document-backend", "file"]
            big["ours"] = asyncio.run(big_file(opts.ours, ["start", *connect, *file_backend], env, jupyter.root,
                                               "ours", opts.big_mb, opts.size_calls))
            if opts.previous:
                big["previous"] = asyncio.run(big_file(opts.previous, ["start", *connect, *file_backend], env,
                                                       jupyter.root, "previous", opts.big_mb, opts.size_calls))
            if common.upstream(opts):
                big["Python 2.2.4"] = asyncio.run(big_file(
                    opts.upstream, ["start", "--transport", "stdio", *connect], env, jupyter.root, "py", opts.big_mb,
                    max(3, opts.size_calls // 2)))
            floor = jupyter_floor(jupyter, "big-ours", max(3, opts.size_calls))
            report_big_file(big, (jupyter.root / "big-ours.ipynb").stat().st_size, floor)
            if opts.only == "bigfile":
                return
        if opts.only in (None, "bursty"):
            bursty["ours (live)"] = asyncio.run(bursty_cell(
                opts.ours, ["start", *connect, "--document-backend", "live"], env, jupyter.process.pid, bursts, "ours"))
            if common.upstream(opts):
                bursty["Python 2.2.4"] = asyncio.run(bursty_cell(
                    opts.upstream, ["start", "--transport", "stdio", *connect], env, jupyter.process.pid, bursts,
                    "py"))
        if opts.only == "bursty":
            return report_bursty(bursty, bursts)
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

    report_bursty(bursty, bursts)
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


def report_bursty(bursty: dict[str, dict[str, float]], bursts: int) -> None:
    if not bursty:
        return
    output_mib = bursts * 4000 * LINE_BYTES / 2**20
    bound = 80 + 3 * output_mib
    print(f"\nbursty cell: {bursts} bursts of 4,000 lines (~{output_mib:.1f} MiB printed), "
          f"insert_execute_code_cell; server RSS MiB and CPU s during the run")
    print(f"{'server':16} {'before':>8} {'peak':>8} {'5 s after':>10} {'our CPU':>8} {'Jupyter CPU':>12}")
    for name, row in bursty.items():
        print(f"{name:16} {row['base']:8.1f} {row['peak']:8.1f} {row['after']:10.1f} {row['cpu']:8.2f} "
              f"{row['jupyter cpu']:12.2f}")
    ours = bursty.get("ours (live)")
    if ours:
        print(f"ours: peak {ours['peak']:.1f} MiB, bound {bound:.1f} (80 + 3x output): "
              f"{'within' if ours['peak'] <= bound else 'OVER'}; CPU {ours['cpu']:.2f} s vs Jupyter "
              f"{ours['jupyter cpu']:.2f} s, bound 2x: {'within' if ours['cpu'] <= 2 * ours['jupyter cpu'] else 'OVER'}")


if __name__ == "__main__":
    main()
