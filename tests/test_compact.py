"""`output.compact` on real kernel output: each rule, the whole output reachable from the resource
a note names, images decoded and within bounds, and the capability off giving whole outputs."""

from __future__ import annotations

import base64
import io
import json
import re
import uuid

import pytest
from PIL import Image

from conftest import call, client_for, joined, texts

pytestmark = pytest.mark.anyio

LOOP = "for i in range(5000):\n    print(f'epoch {i} loss {1 / (i + 1):.6f}')"
RECURSION = "def f(n):\n    return f(n + 1)\nf(0)"
WARNINGS = "import warnings\nfor i in range(200):\n    warnings.warn(f'warning number {i}')"
TABLE = (
    "import numpy as np, pandas as pd\npd.set_option('display.max_rows', 1000)\n"
    "pd.DataFrame(np.arange(1200).reshape(300, 4), columns=list('abcd'))"
)
SCATTER = (
    "import matplotlib.pyplot as plt, numpy as np\n"
    "fig = plt.figure(figsize=(16, 10), dpi=200)\n"
    "plt.scatter(np.random.rand(2000), np.random.rand(2000), c=np.random.rand(2000))\nplt.show()"
)
SIX_PLOTS = (
    "import matplotlib.pyplot as plt\n"
    "for i in range(6):\n    plt.figure(figsize=(2, 2))\n    plt.plot([0, i])\n    plt.show()"
)


def file_client(jupyter_server, *extra):
    return client_for(jupyter_server, "legacy", "--document-backend", "file", *extra)


async def run_cell(client, source: str):
    result = await client.call_tool("insert_execute_code_cell", {"cell_index": -1, "cell_source": source, "timeout": 120})
    assert not result.is_error, joined(result)
    return result


def named_uri(text: str) -> str:
    found = re.search(r"((?:notebook|execution)://\S+?/outputs/\d+)", text)
    assert found, f"no resource named in {text[:2000]!r}"
    return found.group(1)


async def whole(client, uri: str) -> str:
    read = await client.read_resource(uri)
    return read.contents[0].text


async def test_each_rule_on_real_kernel_output(jupyter_server):
    path = f"compact-{uuid.uuid4().hex[:6]}.ipynb"
    async with file_client(jupyter_server) as client:
        capabilities = json.loads((await client.read_resource("capabilities://")).contents[0].text)
        assert "output.compact" in capabilities["capabilities"], "on by default"
        declared = {c["name"]: c for c in capabilities["declared"]}
        assert declared["output.compact"]["description"] and declared["output.compact"]["source"] == "default"

        await client.call_tool("use_notebook", {"notebook_name": "nb", "notebook_path": path, "mode": "create"})

        # A long stream: first and last lines kept, the repeats counted, the whole in the notebook.
        loop = joined(await run_cell(client, LOOP))
        assert "epoch 0 loss 1.000000" in loop and "epoch 4999 loss 0.000200" in loop, loop
        assert "repeated 4998 more time(s), differing only in numbers" in loop
        assert len(loop) < 1_000, len(loop)
        # A short result is untouched.
        assert texts(await run_cell(client, "print(6 * 7)"))[0] == "42\n"

        # A recursion: no terminal codes, frames collapsed, the exception itself kept.
        recursion = joined(await run_cell(client, RECURSION))
        assert "\x1b" not in recursion
        assert "RecursionError: maximum recursion depth exceeded" in recursion, recursion[-500:]
        assert re.search(r"the (\d+ )?frames? above repeated \d+ more time", recursion), recursion[:3000]
        assert len(recursion) < 5_000, len(recursion)

        # 200 warnings: two lines each, collapsed as a block with the first and the last kept.
        warned = joined(await run_cell(client, WARNINGS))
        assert "warning number 0" in warned and "warning number 199" in warned, warned
        assert "the 2 lines above repeated 198 more time(s)" in warned, warned

        # A table printed whole by pandas: head and tail rows, its shape kept.
        table = texts(await run_cell(client, TABLE))[0]
        assert table.rstrip().endswith("[300 rows x 4 columns]") and "1199" in table, table
        assert len(table.splitlines()) < 20, table

        # A big figure: scaled within both bounds, re-encoded, said in a line.
        figure = await run_cell(client, SCATTER)
        images = [c for c in figure.content if c.type == "image"]
        assert len(images) == 1
        decoded = Image.open(io.BytesIO(base64.b64decode(images[0].data)))
        decoded.load()
        assert max(decoded.size) <= 1568 and decoded.size[0] * decoded.size[1] <= 1.15e6, decoded.size
        assert decoded.format == {"image/png": "PNG", "image/jpeg": "JPEG"}[images[0].mime_type]
        note = next(t for t in texts(figure) if t.startswith("[Image scaled from"))
        original = await client.read_resource(named_uri(note))
        big = Image.open(io.BytesIO(base64.b64decode(original.contents[0].blob)))
        assert big.size[0] * big.size[1] > 2e6, "the original is kept whole in the notebook"

        # More images than --max-images: the rest named in a line.
        six = await run_cell(client, SIX_PLOTS)
        assert len([c for c in six.content if c.type == "image"]) == 4
        assert any(t.startswith("[2 more image(s) not shown") for t in texts(six)), texts(six)

        # The whole stream is where the note says, in the cell's output resource.
        cell = await client.call_tool("read_cell", {"cell_index": 0})
        text = joined(cell)
        assert "epoch 4999" in text and "repeated 4998 more time(s)" in text
        assert named_uri(loop) == f"notebook://nb/cells/{cell.meta['io.jupyter-mcp/cell_id']}/outputs/0"
        full = await whole(client, named_uri(loop))
        assert full.count("\n") == 5000 and "epoch 2500 loss" in full

        # Nothing silent: ran without output, and never ran, each said so.
        await run_cell(client, "x = 1")
        ran = texts(await client.call_tool("read_cell", {"cell_index": 7}))
        assert any(t.startswith("[Ran (execution count") for t in ran), ran
        await client.call_tool("insert_cell", {"cell_index": -1, "cell_type": "code", "cell_source": "y = 2"})
        never = texts(await client.call_tool("read_cell", {"cell_index": 8}))
        assert any(t.startswith("[Not run yet") for t in never), never


async def test_execute_code_keeps_the_whole_output_for_its_note(jupyter_server):
    async with file_client(jupyter_server) as client:
        long_lines = "for i in range(300):\n    print(str(i) * 40 + chr(65 + i % 26) * (i % 7))"
        result = joined(await client.call_tool("execute_code", {"code": long_lines}))
        uri = named_uri(result)
        assert uri.startswith("execution://"), result
        full = await whole(client, uri)
        assert full.count("\n") == 300 and full.startswith("0" * 40)
        assert "299" * 40 in result, "the last line is kept"
        with pytest.raises(Exception, match="has 1 output"):
            await client.read_resource(uri.replace("/outputs/0", "/outputs/7"))


async def test_capability_off_gives_whole_outputs(jupyter_server):
    path = f"full-{uuid.uuid4().hex[:6]}.ipynb"
    async with file_client(jupyter_server, "--capability", "output.compact=off") as client:
        await client.call_tool("use_notebook", {"notebook_name": "nb", "notebook_path": path, "mode": "create"})
        loop = joined(await run_cell(client, LOOP))
        assert "repeated" not in loop and "epoch 1234 loss" in loop
        assert "[OUTPUT TRUNCATED:" in loop, "still bounded by --max-output-chars"
        figure = await run_cell(client, SCATTER)
        image = next(c for c in figure.content if c.type == "image")
        assert Image.open(io.BytesIO(base64.b64decode(image.data))).size[0] > 2000, "the image as the kernel drew it"
        cell = texts(await client.call_tool("read_cell", {"cell_index": 0, "include_outputs": True}))
        assert not any(t.startswith("[Ran") or t.startswith("[Not run") for t in cell)


PRINT_600K = "print('y' * 600_000)"


@pytest.mark.parametrize("store", ["none", "dir"])
async def test_ended_runs_outputs_stay_within_the_memory_budget(jupyter_server, store, tmp_path):
    """--execution-memory-mb bounds the outputs ended records hold in memory: past it the oldest
    runs' outputs leave memory, read back whole from the execution store when there is one, else
    replaced by a note that says so and where the output is (nowhere, for execute_code)."""
    env = {"JUPYTER_MCP_STATE_DIR": "none" if store == "none" else str(tmp_path / "state")}
    async with client_for(jupyter_server, "legacy", "--document-backend", "file",
                          "--execution-memory-mb", "1", env=env) as client:
        uris = [named_uri(joined(await client.call_tool("execute_code", {"code": PRINT_600K})))
                for _ in range(3)]
        ids = [uri.removeprefix("execution://").split("/")[0] for uri in uris]
        assert len(set(ids)) == 3, uris
        # The newest run keeps its output whole in memory.
        assert (await whole(client, uris[2])).strip() == "y" * 600_000
        oldest = joined(await call(client, "get_execution", execution_id=ids[0]))
        if store == "none":
            assert "left the server's memory" in oldest and "--execution-memory-mb" in oldest, oldest
            assert "no store keeps them" in oldest, oldest
            with pytest.raises(Exception, match="left the server's memory"):
                await client.read_resource(uris[0])
        else:
            assert "left the server's memory" not in oldest, oldest
            assert (await whole(client, uris[0])).strip() == "y" * 600_000, "read back from the store"


async def test_images_linked_decode_to_the_image_inline_results_carry(jupyter_server):
    """`--images link`: results carry each image as a resource_link with its size in pixels
    and bytes, and a line counting them; resources/read of the link gives the image the inline
    result carries (the same bytes: within the bounds, re-encoded alike). execute_code's images
    link to its execution record."""
    path = f"linked-{uuid.uuid4().hex[:6]}.ipynb"
    async with file_client(jupyter_server) as inline:
        await inline.call_tool("use_notebook", {"notebook_name": "nb", "notebook_path": path, "mode": "create"})
        shown = await run_cell(inline, SCATTER)
        (image,) = [c for c in shown.content if c.type == "image"]
        ran = await inline.call_tool("read_notebook", {"notebook_name": "nb"})
        (cell_id,) = ran.meta["io.jupyter-mcp/cell_ids"]
        await inline.call_tool("unuse_notebook", {"notebook_name": "nb"})
    async with file_client(jupyter_server, "--images", "link") as client:
        await client.call_tool("use_notebook", {"notebook_name": "nb", "notebook_path": path})
        for rerun in (False, True):
            result = await (client.call_tool("execute_cell", {"cell_index": 0, "timeout": 120}) if rerun
                            else client.call_tool("read_cell", {"cell_index": 0}))
            assert not result.is_error, joined(result)
            assert not [c for c in result.content if c.type == "image"], "no image inline"
            (link,) = [c for c in result.content if c.type == "resource_link"]
            assert str(link.uri) == f"notebook://nb/cells/{cell_id}/outputs/0/image", link
            assert "[1 image(s) linked, not included (--images link)" in joined(result), joined(result)
            read = (await client.read_resource(str(link.uri))).contents[0]
            data = base64.b64decode(read.blob)
            decoded = Image.open(io.BytesIO(data))
            width, height = decoded.size
            assert link.description == f"{width}×{height} px, {len(data)} bytes", (link.description, decoded.size)
            assert link.size == len(data) and read.mime_type == link.mime_type
            if not rerun:  # (a rerun draws new random points)
                assert read.blob == image.data, "the linked image is the one an inline result carries"
        coded = await client.call_tool("execute_code", {"code": SCATTER, "timeout": 120})
        (link,) = [c for c in coded.content if c.type == "resource_link"]
        assert re.fullmatch(r"execution://[\w-]+/outputs/0/image", str(link.uri)), link.uri
        read = (await client.read_resource(str(link.uri))).contents[0]
        assert Image.open(io.BytesIO(base64.b64decode(read.blob))).size[0] <= 1568
