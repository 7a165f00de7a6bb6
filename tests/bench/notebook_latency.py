"""Notebook tool latency: ours (file and live backends) beside the Python server 2.2.4, same
Jupyter Server.

Measures insert_cell (append to a small notebook), read_notebook (a 200-cell notebook, detailed,
all cells) and execute_cell (a one-line cell), median and p90, through the official MCP client
over stdio. The Jupyter Server runs jupyter-collaboration, which the Python server needs (it edits
only through collaboration rooms). Not a test: it measures. Usage: tests/bench/run notebooks
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from execute_latency import summary  # noqa: E402
from harness import start_jupyter  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402


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


async def measure(command: str, args: list[str], env: dict, calls: int, tag: str) -> dict[str, list[float]]:
    params = StdioServerParameters(command=command, args=args, env=env)
    results: dict[str, list[float]] = {}
    async with Client(params, mode="legacy", read_timeout_seconds=300) as client:
        async def timed(name: str, tool: str, arguments: dict, n: int) -> None:
            for _ in range(2):  # warm-up
                r = await client.call_tool(tool, arguments)
                assert not r.is_error, f"{tag} {tool}: {r.content}"
            samples = []
            for _ in range(n):
                started = time.perf_counter()
                r = await client.call_tool(tool, arguments)
                samples.append(time.perf_counter() - started)
                assert not r.is_error, f"{tag} {tool}: {r.content}"
            results[name] = samples

        r = await client.call_tool("use_notebook", {"notebook_name": "big", "notebook_path": f"big-{tag}.ipynb"})
        assert not r.is_error, r.content
        await timed("read_notebook (200 cells, detailed)", "read_notebook",
                    {"notebook_name": "big", "response_format": "detailed", "start_index": 0, "limit": 0}, calls)
        r = await client.call_tool("use_notebook", {"notebook_name": "small", "notebook_path": f"small-{tag}.ipynb"})
        assert not r.is_error, r.content
        await timed("insert_cell", "insert_cell",
                    {"cell_index": -1, "cell_type": "code", "cell_source": "y = 1"}, calls)
        await timed("execute_cell (one line)", "execute_cell",
                    {"cell_index": 0, "stream": False}, max(3, calls // 3))
    return results


def contents_api_floor(jupyter, path: str, calls: int) -> list[float]:
    """What one file-backend edit cannot avoid: a hash check and a save through the contents
    API, raw HTTP on a kept-alive connection, no MCP and no notebook work."""
    import http.client
    from urllib.parse import urlparse

    url = urlparse(jupyter.url)
    conn = http.client.HTTPConnection(url.hostname, url.port)
    headers = {"Authorization": f"token {jupyter.token}", "Content-Type": "application/json"}
    text = (jupyter.root / path).read_text()
    body = json.dumps({"type": "file", "format": "text", "content": text})
    samples = []
    for i in range(calls + 2):
        started = time.perf_counter()
        conn.request("GET", f"/api/contents/{path}?content=0&hash=1", headers=headers)
        conn.getresponse().read()
        conn.request("PUT", f"/api/contents/{path}", body=body, headers=headers)
        conn.getresponse().read()
        if i >= 2:
            samples.append(time.perf_counter() - started)
    conn.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--upstream-calls", type=int, default=10)
    parser.add_argument("--ours", default=os.environ.get("JUPYTER_MCP_SERVER_BIN"))
    parser.add_argument("--upstream", default=os.environ.get("UPSTREAM_JUPYTER_MCP_SERVER"))
    opts = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="jmcp-nbbench-"))
    jupyter = start_jupyter(tmp)
    try:
        for tag in ("file", "live", "py"):
            big = [f"# cell {i}\nvalue_{i} = {i} * 2\nprint(value_{i})" for i in range(200)]
            write_notebook(jupyter.root / f"big-{tag}.ipynb", big)
            write_notebook(jupyter.root / f"small-{tag}.ipynb", ["1 + 1"])
        env = dict(os.environ, RUST_LOG="warn")
        connect = ["--jupyter-url", jupyter.url, "--jupyter-token", jupyter.token]
        ours = {
            backend: asyncio.run(measure(opts.ours, ["start", *connect, "--document-backend", backend], env,
                                         opts.calls, backend))
            for backend in ("file", "live")
        }
        floor = contents_api_floor(jupyter, "small-file.ipynb", opts.calls)
        theirs = None
        if opts.upstream and Path(opts.upstream).exists():
            theirs = asyncio.run(measure(opts.upstream, ["start", "--transport", "stdio", *connect], env,
                                         opts.upstream_calls, "py"))
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
        f_median, _ = summary(ours["file"][name])
        l_median, l_p90 = summary(ours["live"][name])
        line = f"{name:38} {f_median * 1e3:9.2f} {l_median * 1e3:9.2f} {l_p90 * 1e3:9.2f}"
        if theirs and name in theirs:
            t_median, t_p90 = summary(theirs[name])
            line += f" {t_median * 1e3:9.2f} {t_p90 * 1e3:9.2f} {t_median / f_median:8.1f} {t_median / l_median:8.1f}"
        print(line + "   (ms)")
    floor_median, floor_p90 = summary(floor)
    print(f"{'contents API floor (GET hash + PUT)':38} {floor_median * 1e3:9.2f}"
          f"   (ms, p90 {floor_p90 * 1e3:.2f}: the least any file-backend edit costs)")

if __name__ == "__main__":
    main()
