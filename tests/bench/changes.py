"""What changed since I looked, against looking again: on a 1,000-cell notebook a person (a second
collaboration peer) changes one cell, and the agent learns of it either with get_notebook_changes
(since the revision of its last read) or by re-reading the notebook whole (read_notebook
detailed, as an agent without it must, then comparing by itself). Prints both side by side in one
run: the answer's text characters (what lands in the model's context) and the call's time, for
the live backend (the person in the room) and the file backend (another program saving the file).
Target: the changes answer is at most 5 % of the re-read's characters. Not a test: it measures.
Usage: tests/bench/run changes [--cells N] [--runs N]
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
import nbformat  # noqa: E402
from harness import start_jupyter, stop_jupyter  # noqa: E402
from jupyter_nbmodel_client import NbModelClient, get_jupyter_notebook_websocket_url  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402


def write_notebook(path: Path, cells: int) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(f"# step {i}\nvalue_{i} = compute({i}, scale=0.5)\nprint(value_{i})")
        if i % 4 else nbformat.v4.new_markdown_cell(f"## Part {i // 4}\nWhat step {i} does, in a sentence or two.")
        for i in range(cells)
    ]
    path.write_text(nbformat.writes(nb))


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


async def measure(command: str, jupyter, path: str, backend: str, runs: int) -> dict:
    args = ["start", *common.connect(jupyter), "--document-backend", backend]
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ, RUST_LOG="warn"))
    peer = None
    if backend == "live":
        url = get_jupyter_notebook_websocket_url(jupyter.url, path, jupyter.token)
        peer = NbModelClient(url, path=path, username="person")
        await peer.start()
        await peer.wait_until_synced()
    figures = {"changes chars": [], "changes ms": [], "reread chars": [], "reread ms": []}
    try:
        async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
            await client.call_tool("use_notebook", {"notebook_name": "big", "notebook_path": path})
            read = await client.call_tool("read_notebook", {"notebook_name": "big", "response_format": "brief"})
            since = read.meta["io.jupyter-mcp/revision"]
            for run in range(runs):
                index = 1 + 4 * (run % 200)
                source = f"# step {index}\nvalue_{index} = compute({index}, scale={run + 2})\nprint(value_{index})"
                if peer is not None:
                    peer.set_cell_source(index, source)
                else:
                    nb = nbformat.reads((jupyter.root / path).read_text(), as_version=4)
                    nb.cells[index].source = source
                    (jupyter.root / path).write_text(nbformat.writes(nb))
                # The edit has landed before either call (a room hears it at once; a file is
                # looked at every second), so both time their own work, not the wait.
                await asyncio.sleep(0.3 if peer is not None else 1.5)
                started = time.perf_counter()
                told = await client.call_tool("get_notebook_changes", {
                    "notebook_name": "big", "since": since, "wait_seconds": 30})
                took = time.perf_counter() - started
                assert told.meta["io.jupyter-mcp/changed_by_others"], text_of(told)
                assert source.splitlines()[1] in text_of(told), text_of(told)
                since = told.meta["io.jupyter-mcp/revision"]
                figures["changes chars"].append(len(text_of(told)))
                figures["changes ms"].append(took * 1000)
                started = time.perf_counter()
                reread = await client.call_tool("read_notebook", {
                    "notebook_name": "big", "response_format": "detailed", "limit": 0})
                figures["reread ms"].append((time.perf_counter() - started) * 1000)
                assert source.splitlines()[1] in text_of(reread)
                figures["reread chars"].append(len(text_of(reread)))
    finally:
        if peer is not None:
            await peer.stop()
    return figures


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--cells", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=10)
    opts = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="jmcp-changes-"))
    jupyter = start_jupyter(tmp)
    try:
        rows = []
        for backend in ("live", "file"):
            path = f"big-{backend}.ipynb"
            write_notebook(jupyter.root / path, opts.cells)
            rows.append((backend, asyncio.run(measure(opts.ours, jupyter, path, backend, opts.runs))))
        print(f"\nlearning of one person's edit in a {opts.cells}-cell notebook, median of {opts.runs} runs: "
              "get_notebook_changes (since the last revision) vs read_notebook detailed (the whole notebook)")
        print(f"{'backend':<9}{'changes chars':>15}{'re-read chars':>15}{'ratio':>9}{'bound 5%':>10}"
              f"{'changes ms':>12}{'re-read ms':>12}")
        for backend, f in rows:
            changes_chars = statistics.median(f["changes chars"])
            reread_chars = statistics.median(f["reread chars"])
            ratio = changes_chars / reread_chars
            verdict = "within" if ratio <= 0.05 else "OVER"
            print(f"{backend:<9}{changes_chars:>15.0f}{reread_chars:>15.0f}{ratio:>9.2%}{verdict:>10}"
                  f"{statistics.median(f['changes ms']):>12.1f}{statistics.median(f['reread ms']):>12.1f}")
    finally:
        stop_jupyter(jupyter)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
