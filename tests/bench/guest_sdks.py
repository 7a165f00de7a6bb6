"""The same word-count extension in every guest language (guests/README.md's table): lines of the
example's source, component size, cold compile time and per-call cost, through the real binary.

- lines: non-blank lines of the example's source, comments included (they are part of what an
  author writes).
- cold compile: from spawning the server, with an empty compile cache and only that guest
  configured, to its "loaded wasm guest" line (the compile dominates; a later start loads the
  cached artifact).
- per call: median of `word_count` on a 20-cell notebook through the official MCP client
  over stdio (file backend), beside the core tool `read_notebook` on the same notebook, whose
  median is the floor every call pays (MCP round trip, reading the notebook from Jupyter).

Every `wordcount*.wasm` in the built guests is measured (`wordcount.wasm` is the Rust one), so a new SDK's example appears by
being built. Not a test: it measures. Usage: tests/bench/run guest-sdks [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
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
from notebook_latency import timed_calls, write_notebook  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# The example's source per language suffix (a new SDK adds its line).
SOURCES = {
    "wordcount": "guests/wordcount/src/lib.rs",
    "wordcount-js": "guests/js/examples/wordcount/app.js",
    "wordcount-py": "guests/python/examples/wordcount/app.py",
}


def lines_of(example: str) -> str:
    source = SOURCES.get(example)
    if not source or not (ROOT / source).exists():
        return "?"
    return str(sum(1 for line in (ROOT / source).read_text().splitlines() if line.strip()))


def cold_compile(binary: str, component: Path, tmp: Path) -> float:
    """Seconds from spawn to the guest's "loaded" line, with an empty compile cache."""
    cache = tmp / f"cache-{component.stem}"
    shutil.rmtree(cache, ignore_errors=True)
    config = tmp / f"cold-{component.stem}.toml"
    config.write_text(f'cache_dir = "{cache}"\n[[extension]]\npath = "{component}"\n')
    log = tmp / f"cold-{component.stem}.log"
    started = time.monotonic()
    with open(log, "wb") as err:
        proc = subprocess.Popen([binary, "start", "--jupyter-url", "http://127.0.0.1:9", "--document-backend",
                                 "file", "--config", str(config)], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=err,
                                env={**os.environ, "RUST_LOG": "jupyter_mcp_server=info"})
        try:
            deadline = started + 900
            while time.monotonic() < deadline:
                text = log.read_text(errors="replace")
                if re.search(rf"loaded wasm guest \S*{re.escape(component.name)}", text):
                    return time.monotonic() - started
                if "every wasm guest has loaded" in text or proc.poll() is not None:
                    raise RuntimeError(f"{component.name} did not load:\n{text[-2000:]}")
                time.sleep(0.01)
            raise RuntimeError(f"{component.name} did not load in 900 s")
        finally:
            proc.stdin.close()
            proc.wait(timeout=30)


async def per_call(binary: str, jupyter, component: Path, calls: int, tmp: Path) -> tuple[list, list]:
    """Samples (s) of the guest's tool and of read_notebook, on the same notebook."""
    config = tmp / f"calls-{component.stem}.toml"
    config.write_text(f'cache_dir = "{tmp / "warm-cache"}"\n[[extension]]\npath = "{component}"\n'
                      'grants = ["read-cells"]\n')
    params = StdioServerParameters(command=binary, args=[
        "start", "--jupyter-url", jupyter.url, "--jupyter-token", jupyter.token, "--document-backend", "file",
        "--config", str(config)], env=dict(os.environ, RUST_LOG="warn"))
    async with Client(params, mode="legacy", read_timeout_seconds=900) as client:
        tool = "word_count"
        deadline = time.monotonic() + 900
        while tool not in {t.name for t in (await client.list_tools()).tools}:
            assert time.monotonic() < deadline, f"{tool} never appeared"
            await asyncio.sleep(0.1)
        r = await client.call_tool("use_notebook", {"notebook_name": "wc", "notebook_path": "wc.ipynb"})
        assert not r.is_error, r.content

        async def timed(name: str, arguments: dict) -> list[float]:
            return await timed_calls(client, name, arguments, calls, warm_up=3, label=name)

        return await timed(tool, {}), await timed("read_notebook", {"notebook_name": "wc"})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    opts, _ = parser.parse_known_args()
    binary = os.environ["JUPYTER_MCP_SERVER_BIN"]
    guests = Path(os.environ["JUPYTER_MCP_GUESTS_DIR"])
    found = sorted(guests.glob("wordcount*.wasm"))
    if not found:
        sys.exit(f"no wordcount*.wasm in {guests}")
    tmp = Path(tempfile.mkdtemp(prefix="jmcp-sdkbench-"))
    jupyter = start_jupyter(tmp / "jupyter")
    rows = []
    try:
        write_notebook(jupyter.root / "wc.ipynb", [f"# cell {i}\nwords = 'one two three four {i}'" for i in range(20)])
        for component in found:
            cold = cold_compile(binary, component, tmp)
            tool, floor = asyncio.run(per_call(binary, jupyter, component, opts.calls, tmp))
            rows.append((component.stem, lines_of(component.stem), component.stat().st_size / 1e6, cold, summary(tool), summary(floor)))
    finally:
        jupyter.process.terminate()
        jupyter.process.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nword-count example per guest language ({opts.calls} calls each, 20-cell notebook, stdio)")
    print(f"{'example':14} {'lines':>6} {'size MB':>8} {'cold compile s':>15} {'call med ms':>12} {'call p90 ms':>12}"
          f" {'read_notebook med ms':>21}")
    for example, lines, size, cold, (t_med, t_p90), (f_med, _) in rows:
        print(f"{example:14} {lines:>6} {size:8.1f} {cold:15.1f} {t_med * 1e3:12.2f} {t_p90 * 1e3:12.2f} {f_med * 1e3:21.2f}")


if __name__ == "__main__":
    main()
