"""Notebook tool latency: ours (file and live backends) beside the Python server 2.2.4, same
Jupyter Server.

Measures insert_cell (append to a small notebook), overwrite_cell_source, read_notebook (a
200-cell notebook, detailed, all cells) and execute_cell (a one-line cell), median and p90, through
the official MCP client over stdio; each file-backend edit beside the contents-API save floor
(GET hash + PUT of a same-size file, raw HTTP), sampled right after it; then an agent's whole session (create a notebook, 20 inserts, 20 executions) with
kernel.prewarm on and off, beside the Python server's. The Jupyter Server runs jupyter-collaboration, which the Python server needs (it edits
only through collaboration rooms). Not a test: it measures. Usage: tests/bench/run notebooks
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from execute_latency import summary  # noqa: E402
import common  # noqa: E402
from harness import start_jupyter  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402


FLOOR = "contents-API save floor"
# The official client's own CPU time per edit call (it runs on the critical path: it builds the
# request before sending and parses and validates the answer after): most of edit - floor.
CLIENT_CPU = "client CPU"
# An edit on the file backend may cost at most this much more than the floor (median).
EDIT_OVER_FLOOR_MS = 1.5


def write_notebook(path: Path, sources: list[str]) -> None:
    nb = {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [
            {"cell_type": "code", "id": f"c{i:04d}", "metadata": {}, "execution_count": None, "outputs": [],
             "source": source}
            for i, source in enumerate(sources)
        ],
    }
    path.write_text(json.dumps(nb, indent=1))


def arguments_of(arguments) -> Callable[[int], dict]:
    """A tool's arguments for call i: the same each time, or (a function) new each time."""
    return arguments if callable(arguments) else (lambda _: arguments)


async def timed_calls(client, tool: str, arguments, calls: int, warm_up: int, label: str) -> list[float]:
    """Seconds per call of `tool`, after `warm_up` untimed calls; every call must succeed."""
    args_for = arguments_of(arguments)
    for i in range(warm_up):
        r = await client.call_tool(tool, args_for(i))
        assert not r.is_error, f"{label}: {r.content}"
    samples = []
    for i in range(warm_up, warm_up + calls):
        started = time.perf_counter()
        r = await client.call_tool(tool, args_for(i))
        samples.append(time.perf_counter() - started)
        assert not r.is_error, f"{label}: {r.content}"
    return samples


class ContentsFloor:
    """What one file-backend edit cannot avoid: a hash check and a save through the contents
    API, raw HTTP on a kept-alive connection, no MCP and no notebook work. It saves a file of its
    own (a copy of the notebook being edited, at its current size), so our server never sees it
    as another writer."""

    def __init__(self, jupyter, edited: str, copy: str):
        import http.client
        from urllib.parse import urlparse

        url = urlparse(jupyter.url)
        self.jupyter, self.edited, self.copy = jupyter, edited, copy
        self.conn = http.client.HTTPConnection(url.hostname, url.port)
        self.headers = {"Authorization": f"token {jupyter.token}", "Content-Type": "application/json"}
        (jupyter.root / copy).write_text((jupyter.root / edited).read_text())

    def sample(self) -> float:
        text = (self.jupyter.root / self.edited).read_text()
        body = json.dumps({"type": "file", "format": "text", "content": text}).encode()
        started = time.perf_counter()
        self.conn.request("GET", f"/api/contents/{self.copy}?type=file&content=0&hash=1", headers=self.headers)
        self.conn.getresponse().read()
        self.conn.request("PUT", f"/api/contents/{self.copy}", body=body, headers=self.headers)
        self.conn.getresponse().read()
        return time.perf_counter() - started

    def close(self) -> None:
        self.conn.close()


async def measure(command: str, args: list[str], env: dict, calls: int, tag: str,
                  floor: ContentsFloor | None = None) -> dict[str, list[float]]:
    """Median-ready samples per tool. With `floor`, each edit is followed by one sample of the
    contents-API floor, so that the two are measured interleaved, under the same load."""
    params = StdioServerParameters(command=command, args=args, env=env)
    results: dict[str, list[float]] = {}
    async with Client(params, mode="legacy", read_timeout_seconds=300) as client:
        async def timed(name: str, tool: str, arguments, n: int) -> None:
            results[name] = await timed_calls(client, tool, arguments, n, warm_up=2, label=f"{tag} {tool}")

        async def timed_edit(name: str, tool: str, arguments, n: int) -> None:
            if floor is None:
                await timed(name, tool, arguments, n)
                return
            args_for = arguments_of(arguments)
            samples, floors, client_cpu = [], [], []
            for i in range(n + 2):
                started, cpu = time.perf_counter(), time.process_time()
                r = await client.call_tool(tool, args_for(i))
                took, cpu = time.perf_counter() - started, time.process_time() - cpu
                assert not r.is_error, f"{tag} {tool}: {r.content}"
                below = floor.sample()
                if i >= 2:
                    samples.append(took)
                    floors.append(below)
                    client_cpu.append(cpu)
            results[name] = samples
            results[f"{FLOOR} beside {tool}"] = floors
            results[f"{CLIENT_CPU} in {tool}"] = client_cpu

        r = await client.call_tool("use_notebook", {"notebook_name": "big", "notebook_path": f"big-{tag}.ipynb"})
        assert not r.is_error, r.content
        await timed("read_notebook (200 cells, detailed)", "read_notebook",
                    {"notebook_name": "big", "response_format": "detailed", "start_index": 0, "limit": 0}, calls)
        r = await client.call_tool("use_notebook", {"notebook_name": "small", "notebook_path": f"small-{tag}.ipynb"})
        assert not r.is_error, r.content
        await timed_edit("insert_cell", "insert_cell",
                         {"cell_index": -1, "cell_type": "code", "cell_source": "y = 1"}, calls)
        # A new source each call: an overwrite with the source the cell already has saves nothing.
        await timed_edit("overwrite_cell_source", "overwrite_cell_source",
                         lambda i: {"cell_index": 0, "cell_source": f"1 + {i % 2 + 2}"}, calls)
        await timed("execute_cell (one line)", "execute_cell",
                    {"cell_index": 0, "stream": False}, max(3, calls // 3))
    return results


async def measure_agent_session(command: str, args: list[str], env: dict, runs: int, tag: str,
                                wait_for_spare: bool) -> tuple[list[float], list[float]]:
    """An agent's notebook session: use_notebook (create), 20 inserts, 20 executions. Returns the
    create times and the whole-session times. With `wait_for_spare`, each run starts once a spare
    kernel (kernel.prewarm) is ready, as it is for an agent that does not start sessions back to
    back."""
    params = StdioServerParameters(command=command, args=args, env=env)
    creates, sessions = [], []
    async with Client(params, mode="legacy", read_timeout_seconds=300) as client:
        async def call(tool: str, arguments: dict):
            r = await client.call_tool(tool, arguments)
            assert not r.is_error, f"{tag} {tool}: {r.content}"
            return r

        for run in range(runs):
            if wait_for_spare:
                deadline = time.monotonic() + 60
                while "[kernel.prewarm]" not in "".join(c.text for c in (await call("list_kernels", {})).content):
                    assert time.monotonic() < deadline, "no spare kernel within 60 s"
                    await asyncio.sleep(0.05)
            started = time.perf_counter()
            created = await call("use_notebook", {"notebook_name": f"s{run}",
                                                  "notebook_path": f"session-{tag}-{run}.ipynb", "mode": "create"})
            creates.append(time.perf_counter() - started)
            # The Python server starts a new notebook with a markdown cell; ours starts it empty.
            first = int(re.search(r"Notebook has (\d+) cells", "".join(c.text for c in created.content)).group(1))
            for i in range(20):
                await call("insert_cell", {"cell_index": -1, "cell_type": "code", "cell_source": f"v{i} = {i}"})
            for i in range(20):
                await call("execute_cell", {"cell_index": first + i, "stream": False})
            sessions.append(time.perf_counter() - started)
            await call("unuse_notebook", {"notebook_name": f"s{run}"})
    return creates, sessions


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--upstream-calls", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=5, help="agent sessions per configuration")
    opts = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="jmcp-nbbench-"))
    jupyter = start_jupyter(tmp)
    try:
        for tag in ("file", "live", "py", "previous"):
            big = [f"# cell {i}\nvalue_{i} = {i} * 2\nprint(value_{i})" for i in range(200)]
            write_notebook(jupyter.root / f"big-{tag}.ipynb", big)
            write_notebook(jupyter.root / f"small-{tag}.ipynb", ["1 + 1"])
        env = dict(os.environ, RUST_LOG="warn")
        connect = common.connect(jupyter)
        floor = ContentsFloor(jupyter, "small-file.ipynb", "floor-copy.ipynb")
        ours = {
            backend: asyncio.run(measure(opts.ours, ["start", *connect, "--document-backend", backend], env,
                                         opts.calls, backend, floor if backend == "file" else None))
            for backend in ("file", "live")
        }
        if opts.previous:
            ours["previous build, file"] = asyncio.run(measure(
                opts.previous, ["start", *connect, "--document-backend", "file"], env, opts.calls, "previous", floor))
        floor.close()
        sessions = {
            "ours, kernel.prewarm on": asyncio.run(measure_agent_session(
                opts.ours, ["start", *connect, "--capability", "kernel.prewarm"], env, opts.sessions, "warm", True)),
            "ours, kernel.prewarm off": asyncio.run(measure_agent_session(
                opts.ours, ["start", *connect], env, opts.sessions, "cold", False)),
        }
        theirs = None
        if common.upstream(opts):
            theirs = asyncio.run(measure(opts.upstream, ["start", "--transport", "stdio", *connect], env,
                                         opts.upstream_calls, "py"))
            sessions["Python server 2.2.4"] = asyncio.run(measure_agent_session(
                opts.upstream, ["start", "--transport", "stdio", *connect], env,
                max(2, opts.sessions // 2), "py", False))
        else:
            print("(Python server not given: set UPSTREAM_JUPYTER_MCP_SERVER or use tests/bench/run)")
    finally:
        jupyter.process.terminate()
        jupyter.process.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nnotebook tools, ours {opts.calls} calls each per backend, Python server {opts.upstream_calls}")
    print(f"{'tool':38} {'file med':>9} {'live med':>9} {'live p90':>9} {'py med':>9} {'py p90':>9}"
          f" {'py/file':>8} {'py/live':>8}")
    for name in ours["file"]:
        if name.startswith((FLOOR, CLIENT_CPU)):
            continue
        f_median, _ = summary(ours["file"][name])
        line = f"{name:38} {f_median * 1e3:9.2f}"
        if name in ours["live"]:
            l_median, l_p90 = summary(ours["live"][name])
            line += f" {l_median * 1e3:9.2f} {l_p90 * 1e3:9.2f}"
        else:
            l_median = None
            line += f" {'':9} {'':9}"
        if theirs and name in theirs:
            t_median, t_p90 = summary(theirs[name])
            line += f" {t_median * 1e3:9.2f} {t_p90 * 1e3:9.2f} {t_median / f_median:8.1f}"
            line += f" {t_median / l_median:8.1f}" if l_median else ""
        print(line + "   (ms)")

    print(f"\nfile backend edits beside the {FLOOR} (GET hash + PUT of a same-size file), interleaved:")
    print(f"{'edit':24} {'edit med':>9} {'floor med':>10} {'edit - floor':>13} {'bound':>7}"
          f" {'client CPU':>11}")
    for build in ("file", "previous build, file"):
        if build not in ours:
            continue
        if build != "file":
            print(f"previous build ({opts.previous}), same run:")
        for name in ours[build]:
            beside = ours[build].get(f"{FLOOR} beside {name}")
            if beside is None:
                continue
            e_median, _ = summary(ours[build][name])
            f_median, _ = summary(beside)
            over = (e_median - f_median) * 1e3
            verdict = "within" if over <= EDIT_OVER_FLOOR_MS else "OVER"
            cpu_median, _ = summary(ours[build][f"{CLIENT_CPU} in {name}"])
            print(f"{name:24} {e_median * 1e3:9.2f} {f_median * 1e3:10.2f} {over:+13.2f} "
                  f"{EDIT_OVER_FLOOR_MS:+7.1f} {cpu_median * 1e3:11.2f}   (ms, {verdict} the bound)")
    print(f"(client CPU: the official MCP client's own CPU per edit call, spent before sending and "
          f"after the answer, so inside edit - floor)")

    print("\nagent session: use_notebook (create), then 20 insert_cell + 20 execute_cell (auto backend)")
    print(f"{'configuration':28} {'create med':>11} {'create max':>11} {'session med':>12} {'session max':>12}")
    for name, (creates, totals) in sessions.items():
        c_median, _ = summary(creates)
        t_median, _ = summary(totals)
        print(f"{name:28} {c_median * 1e3:11.1f} {max(creates) * 1e3:11.1f} {t_median * 1e3:12.1f}"
              f" {max(totals) * 1e3:12.1f}   (ms)")

if __name__ == "__main__":
    main()
