"""What an agent's context pays: text characters and image bytes per call of one short
data-analysis session, ours (output.compact on) beside the Python server 2.2.4, same Jupyter
Server and kernel (pandas and matplotlib from the test venv).

The session: a textbook-like chapter notebook read whole, a 300x12 DataFrame and its describe(),
a matplotlib scatter drawn 16x10 in at 200 dpi, a loop printing 5,000 lines, an infinite
recursion, 200 warnings. Then a check that the facts an agent needs are still in our text (the
last printed line, the RecursionError's message, the table's shape, the last warning) and that
every image we sent is within --max-image-px and --max-image-megapixels. Targets: at most 20 % of
the Python server's text and 35 % of its image bytes. Not a test: it measures.
Usage: tests/bench/run output-size
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import common  # noqa: E402
from harness import start_jupyter  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from PIL import Image  # noqa: E402

MAX_PX, MAX_MEGAPIXELS = 1568, 1.15

SESSION = [
    ("DataFrame 300x12", "import numpy as np, pandas as pd\nnp.random.seed(0)\n"
     "df = pd.DataFrame(np.random.rand(300, 12), columns=[f'feature_{i}' for i in range(12)])\ndf"),
    ("describe()", "df.describe()"),
    ("scatter 16x10 in, 200 dpi", "import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(16, 10), dpi=200)\n"
     "plt.scatter(df['feature_0'], df['feature_1'], c=df['feature_2'], s=40)\nplt.title('features')\nplt.show()"),
    ("loop printing 5,000 lines", "for i in range(5000):\n    print(f'epoch {i} loss {1 / (i + 1):.6f}')"),
    ("infinite recursion", "def f(n):\n    return f(n + 1)\nf(0)"),
    ("200 warnings", "import warnings\nfor i in range(200):\n    warnings.warn(f'warning number {i}')"),
]

# The facts each call's answer must still carry (ours is checked; theirs is shown).
FACTS = {
    "DataFrame 300x12": ["[300 rows x 12 columns]"],
    "describe()": ["count", "mean", "max"],
    "loop printing 5,000 lines": ["epoch 0 loss", "epoch 4999 loss"],
    "infinite recursion": ["RecursionError", "maximum recursion depth exceeded"],
    "200 warnings": ["warning number 0", "warning number 199"],
}


def chapter(path: Path) -> None:
    """A textbook chapter's shape: prose between short examples."""
    cells = []
    for i in range(30):
        prose = (f"## {i + 1}. Section {i + 1}\n\nThis section explains step {i + 1} of the analysis: what the data "
                 "holds, which transformation applies, and how to read the result. " * 3)
        cells.append({"cell_type": "markdown", "id": f"m{i:03d}", "metadata": {}, "source": prose})
        cells.append({"cell_type": "code", "id": f"c{i:03d}", "metadata": {}, "execution_count": None,
                      "outputs": [], "source": f"values_{i} = [x ** {i % 4} for x in range(10)]\nsum(values_{i})"})
    nb = {"nbformat": 4, "nbformat_minor": 5, "cells": cells,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}}
    path.write_text(json.dumps(nb, indent=1))


def measure_result(result) -> tuple[str, list[bytes]]:
    text = "\n".join(c.text for c in result.content if c.type == "text")
    images = [base64.b64decode(c.data) for c in result.content if c.type == "image"]
    return text, images


async def session(command: str, args: list[str], env: dict, tag: str) -> list[tuple[str, str, list[bytes]]]:
    params = StdioServerParameters(command=command, args=args, env=env)
    calls = []
    async with Client(params, mode="legacy", read_timeout_seconds=600) as client:
        async def call(label: str, tool: str, arguments: dict) -> None:
            result = await client.call_tool(tool, arguments)
            text, images = measure_result(result)
            calls.append((label, text, images))

        await call("use_notebook (chapter)", "use_notebook",
                   {"notebook_name": "chapter", "notebook_path": f"chapter-{tag}.ipynb", "mode": "connect"})
        await call("read_notebook (detailed)", "read_notebook",
                   {"notebook_name": "chapter", "response_format": "detailed", "start_index": 0, "limit": 0})
        for label, source in SESSION:
            await call(label, "insert_execute_code_cell", {"cell_index": -1, "cell_source": source, "timeout": 300})
    return calls


def main() -> None:
    parser = common.parser(__doc__)
    opts = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="jmcp-sizebench-"))
    jupyter = start_jupyter(tmp)
    try:
        for tag in ("ours", "full", "py"):
            chapter(jupyter.root / f"chapter-{tag}.ipynb")
        env = dict(os.environ, RUST_LOG="warn")
        connect = common.connect(jupyter)
        ours = asyncio.run(session(opts.ours, ["start", *connect], env, "ours"))
        full = asyncio.run(session(opts.ours, ["start", *connect, "--capability", "output.compact=off"], env, "full"))
        theirs = None
        if common.upstream(opts):
            theirs = asyncio.run(session(opts.upstream, ["start", "--transport", "stdio", *connect], env, "py"))
        else:
            print("(Python server not given: set UPSTREAM_JUPYTER_MCP_SERVER or use tests/bench/run)")
    finally:
        jupyter.process.terminate()
        jupyter.process.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)

    print("\nwhat each call costs an agent's context: text characters, image bytes")
    print(f"{'call':28} {'ours chars':>10} {'ours img':>9} {'off chars':>10} {'off img':>9}"
          f" {'py chars':>9} {'py img':>9}")
    totals = [0] * 6
    for i, (label, text, images) in enumerate(ours):
        row = [len(text), sum(map(len, images)), len(full[i][1]), sum(map(len, full[i][2]))]
        row += [len(theirs[i][1]), sum(map(len, theirs[i][2]))] if theirs else [0, 0]
        totals = [a + b for a, b in zip(totals, row)]
        print(f"{label:28} {row[0]:10} {row[1]:9} {row[2]:10} {row[3]:9}"
              + (f" {row[4]:9} {row[5]:9}" if theirs else ""))
    print(f"{'total':28} {totals[0]:10} {totals[1]:9} {totals[2]:10} {totals[3]:9}"
          + (f" {totals[4]:9} {totals[5]:9}" if theirs else ""))
    if theirs:
        text_share, image_share = totals[0] / max(totals[4], 1), totals[1] / max(totals[5], 1)
        print(f"ours / Python server: text {text_share:.1%} (target <= 20 %), images {image_share:.1%}"
              f" (target <= 35 %)")

    missing = [f"{label}: {fact!r}" for label, text, _ in ours for fact in FACTS.get(label, []) if fact not in text]
    print("facts kept in our text: " + ("all" if not missing else "MISSING " + "; ".join(missing)))
    for label, _, images in ours:
        for data in images:
            image = Image.open(io.BytesIO(data))
            image.load()
            w, h = image.size
            within = max(w, h) <= MAX_PX and w * h <= MAX_MEGAPIXELS * 1e6
            print(f"image of {label!r}: {w}x{h} {image.format}, {len(data)} bytes, "
                  + ("within both bounds" if within else "OUT OF BOUNDS"))
    if missing:
        sys.exit(1)


if __name__ == "__main__":
    main()
