"""Co-editing race: a person (a second collaboration peer) edits random cells while the agent
reads a cell, thinks for a moment and overwrites it. A *silent overwrite* is an overwrite reported
done that replaced text the agent never read (the person's edit, gone without a word); it is
counted from the overwrite's own diff (its old side is what it replaced).

Three agents, one run, the same Jupyter Server (with jupyter-collaboration) and the same peer
behaviour: ours passing `expected_version` (the version it read; target: 0 silent overwrites,
the stale writes refused instead), ours without it, and the Python server 2.2.4 (which has no
such argument). Not a test: it measures. Usage: tests/bench/run coedit [--rounds N]
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import common  # noqa: E402
from harness import start_jupyter, stop_jupyter  # noqa: E402
from jupyter_nbmodel_client import NbModelClient, get_jupyter_notebook_websocket_url  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

CELLS = 6


def write_notebook(path: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"start_{i} = {i}") for i in range(CELLS)]
    path.write_text(nbformat.writes(nb))


def texts(result) -> list[str]:
    return [c.text for c in result.content if getattr(c, "type", None) == "text"]


def replaced_source(report: str) -> str | None:
    """The old side of an overwrite's diff (sources here are one line)."""
    for line in report.splitlines():
        if line.startswith("-") and not line.startswith("---"):
            return line[1:]
    return None


async def person(peer: NbModelClient, stop: asyncio.Event, rng: random.Random, edits: list[int]) -> None:
    """Edits a random cell every 40-120 ms until told to stop."""
    n = 0
    while not stop.is_set():
        await asyncio.sleep(rng.uniform(0.04, 0.12))
        n += 1
        peer.set_cell_source(rng.randrange(CELLS), f"person_{n} = {n}")
        edits[0] += 1


async def race(command: str, args: list[str], jupyter, path: str, rounds: int, with_version: bool,
               seed: int) -> dict:
    rng = random.Random(seed)
    url = get_jupyter_notebook_websocket_url(jupyter.url, path, jupyter.token)
    peer = NbModelClient(url, path=path, username="person")
    await peer.start()
    await peer.wait_until_synced()
    counts = {"rounds": rounds, "done": 0, "refused": 0, "silent": 0, "person edits": 0}
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ, RUST_LOG="warn"))
    try:
        async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
            used = await client.call_tool("use_notebook", {"notebook_name": "race", "notebook_path": path})
            assert not used.is_error, texts(used)
            stop, edits = asyncio.Event(), [0]
            editing = asyncio.create_task(person(peer, stop, rng, edits))
            try:
                for n in range(rounds):
                    index = rng.randrange(CELLS)
                    read = await client.call_tool("read_cell", {"cell_index": index, "include_outputs": False})
                    assert not read.is_error, texts(read)
                    seen = texts(read)[1]
                    arguments = {"cell_index": index, "cell_source": f"agent_{n} = {n}"}
                    if with_version:
                        arguments["expected_version"] = read.meta["io.jupyter-mcp/cell_version"]
                    await asyncio.sleep(rng.uniform(0.05, 0.25))  # the agent thinks
                    wrote = await client.call_tool("overwrite_cell_source", arguments)
                    report = "\n".join(texts(wrote))
                    if wrote.is_error:
                        assert "changed since you read it" in report, report
                        counts["refused"] += 1
                        continue
                    counts["done"] += 1
                    if replaced_source(report) not in (None, seen):
                        counts["silent"] += 1
            finally:
                stop.set()
                await editing
            counts["person edits"] = edits[0]
    finally:
        await peer.stop()
    return counts


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    opts = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="jmcp-coedit-"))
    jupyter = start_jupyter(tmp)
    try:
        connect = common.connect(jupyter)
        agents = [
            ("ours, expected_version", opts.ours, ["start", *connect, "--document-backend", "live"], True),
            ("ours, no version", opts.ours, ["start", *connect, "--document-backend", "live"], False),
        ]
        if common.upstream(opts):
            agents.append(("Python server 2.2.4", opts.upstream, ["start", "--transport", "stdio", *connect], False))
        else:
            print("Python server not found (UPSTREAM_JUPYTER_MCP_SERVER); its row is left out", file=sys.stderr)
        rows = []
        for i, (label, command, args, with_version) in enumerate(agents):
            path = f"race-{i}.ipynb"
            write_notebook(jupyter.root / path)
            started = time.monotonic()
            counts = asyncio.run(race(command, args, jupyter, path, opts.rounds, with_version, opts.seed))
            rows.append((label, counts, time.monotonic() - started))
        print(f"\nco-editing race: {opts.rounds} rounds (read a random cell, think 50-250 ms, overwrite it) "
              f"while a person edits a random one of {CELLS} cells every 40-120 ms")
        print(f"{'agent':<26}{'overwrites done':>16}{'refused':>9}{'silent overwrites':>19}{'person edits':>14}{'secs':>7}")
        for label, c, secs in rows:
            print(f"{label:<26}{c['done']:>16}{c['refused']:>9}{c['silent']:>19}{c['person edits']:>14}{secs:>7.1f}")
    finally:
        stop_jupyter(jupyter)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
