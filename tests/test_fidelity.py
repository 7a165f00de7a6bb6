"""Notebooks of every shape survive an edit on both backends. Each notebook is opened, read, has a
cell inserted and deleted, one cell overwritten, and is released; the file is then compared with
the same notebook given the same edit by Jupyter itself: through the contents API for the file
backend, through the collaboration room (jupyter-nbmodel-client, as a person's JupyterLab) for the
live one, which is what writes the file there. Nothing may differ but the edit, and, for notebooks
older than nbformat 4.5, the cell ids the upgrade adds."""

from __future__ import annotations

import asyncio
import copy
import json
import time
import uuid

import pytest
from jupyter_nbmodel_client import NbModelClient, get_jupyter_notebook_websocket_url

from conftest import client_for, joined

pytestmark = pytest.mark.anyio

EDITED = "# edited by the test ✓\nvalue = 1"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def code(source, outputs=(), count=None, metadata=None, cell_id=None):
    cell = {"cell_type": "code", "execution_count": count, "metadata": metadata or {},
            "outputs": list(outputs), "source": source}
    if cell_id:
        cell["id"] = cell_id
    return cell


def markdown(source, cell_id=None, **fields):
    cell = {"cell_type": "markdown", "metadata": {}, "source": source, **fields}
    if cell_id:
        cell["id"] = cell_id
    return cell


def rich_cells(with_ids: bool) -> list[dict]:
    """Cells with what real notebooks carry: attachments, vendor MIME types, widget views, ANSI
    tracebacks, non-ASCII text, execution timings."""
    ids = iter(["a1", "b2", "c3", "d4", "e5"]) if with_ids else iter([None] * 5)
    timing = {"execution": {"iopub.execute_input": "2024-05-01T10:00:00.123456Z",
                            "iopub.status.busy": "2024-05-01T10:00:00.120000Z",
                            "shell.execute_reply": "2024-05-01T10:00:01.5Z"},
              "tags": ["parameters"], "scrolled": True}
    return [
        code("x = 1\nprint('héllo, 世界 🎉')\r\n", [
            {"name": "stdout", "output_type": "stream", "text": "héllo, 世界 🎉\nline\u2028two\n"},
        ], count=1, metadata=timing, cell_id=next(ids)),
        markdown("# Title\n![plot](attachment:plot.png)\n\nτέλος", cell_id=next(ids),
                 attachments={"plot.png": {"image/png": PNG, "text/plain": ["a plot\n", "of things"]}}),
        code("import plotly", [
            {"output_type": "display_data", "metadata": {"application/vnd.vendor.meta": {"w": 0.5}},
             "data": {"application/vnd.plotly.v1+json": {"data": [{"y": [1, 2.5, 1e-05, 3.0]}], "layout": {}},
                      "application/vnd.jupyter.widget-view+json": {"model_id": "m1", "version_major": 2,
                                                                    "version_minor": 0},
                      "text/html": "<div>\n<b>plot</b>\n</div>", "image/svg+xml": "<svg>\n</svg>",
                      "text/x-vendor": "vendor\ntext", "text/plain": "Figure()"}},
            {"output_type": "execute_result", "execution_count": 2, "metadata": {},
             "data": {"application/json": {"k": [1, {"n": None}]}, "text/plain": "{'k': ...}"}},
        ], count=2, cell_id=next(ids)),
        code("1/0", [
            {"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero",
             "traceback": ["\u001b[0;31m---------------------------------------------------------------------------\u001b[0m",
                           "\u001b[0;31mZeroDivisionError\u001b[0m: division by zero"]},
            {"name": "stderr", "output_type": "stream", "text": "warn\n"},
        ], count=3, cell_id=next(ids)),
        {"cell_type": "raw", "metadata": {"raw_mimetype": "text/restructuredtext"}, "source": "raw\ntext",
         **({"id": next(ids)} if with_ids else {})},
    ]


def notebook(minor: int, cells: list[dict], **top) -> dict:
    return {"nbformat": 4, "nbformat_minor": minor, "cells": cells, **top, "metadata": {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python", "version": "3.12.1"},
        "widgets": {"application/vnd.jupyter.widget-state+json": {
            "state": {"m1": {"model_name": "FloatSliderModel", "state": {"value": 0.1, "step": 1e-05}}},
            "version_major": 2, "version_minor": 0}},
    }}


def future_notebook(minor: int) -> dict:
    """A newer minor version than anyone knows: a new cell type, new fields everywhere."""
    cells = rich_cells(True)
    cells.insert(1, {"cell_type": "future cell", "id": "f0", "metadata": {}, "source": ["from\n", "the future"],
                     "future_field": {"nested": [1, 2.5]}, "outputs": "kept as it is"})
    cells[0]["future_cell_field"] = True
    return notebook(minor, cells, future_top_field={"a": 1})


def far_future_notebook() -> dict:
    """As nbformat's own 4.99 test notebook has it: a cell of an unknown type with no source (only
    the metadata Jupyter insists on), and an output of an unknown type between known ones."""
    cells = rich_cells(True)
    cells.insert(1, {"cell_type": "future cell", "id": "f9", "metadata": {}, "key": "value"})
    cells.append(code("future_output()", [
        {"name": "stdout", "output_type": "stream", "text": "hello\n"},
        {"output_type": "future output", "some key": ["some data"]},
        {"name": "stdout", "output_type": "stream", "text": "hello again\n", "extra": "yes"},
    ], count=99, cell_id="f10"))
    return notebook(99, cells)


def nbformat3() -> dict:
    return {"nbformat": 3, "nbformat_minor": 0, "metadata": {"name": "old"}, "worksheets": [{"metadata": {}, "cells": [
        {"cell_type": "heading", "level": 1, "metadata": {}, "source": "Old notebook"},
        {"cell_type": "code", "collapsed": False, "input": "print('é')", "language": "python", "metadata": {},
         "prompt_number": 1, "outputs": [
             {"output_type": "stream", "stream": "stdout", "text": "é\n"},
             {"output_type": "pyout", "prompt_number": 1, "metadata": {}, "text": "2", "png": PNG}]},
        {"cell_type": "markdown", "metadata": {}, "source": "some *text*"},
    ]}]}


# Shapes the collaboration room itself cannot load (jupyter_ydoc needs a source in every cell),
# so no live backend can edit them; the file backend must keep them exactly.
ROOM_CANNOT_OPEN = {"minor-99-future-bare"}

# name -> (notebook, index of the cell to overwrite, whether ids are added by an upgrade)
SHAPES = {
    **{f"minor-{m}": (notebook(m, rich_cells(False)), 0, True) for m in range(1, 5)},
    "minor-5": (notebook(5, rich_cells(True)), 0, False),
    "minor-6-future": (future_notebook(6), 2, False),
    "minor-9-future": (future_notebook(9), 2, False),
    "minor-99-future-bare": (far_future_notebook(), 2, False),
    "nbformat-3": (nbformat3(), 1, True),
}


def layout(nb: dict, name: str) -> str:
    """Files as other tools write them: some in Jupyter's own layout, some not."""
    if name.endswith("5") or name == "nbformat-3":
        return json.dumps(nb, indent=2, ensure_ascii=True)
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def comparable(text: str, upgraded: bool) -> str:
    if not upgraded:
        return text
    nb = json.loads(text)
    nb.pop("nbformat_minor", None)
    for cell in nb.get("cells", []):
        cell.pop("id", None)
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False)


def saved_by_jupyter(jupyter, path: str, index: int) -> str:
    """The notebook read and saved once by Jupyter through the contents API, with our edit."""
    status, model = jupyter.request("GET", f"/api/contents/{path}?type=notebook&content=1")
    assert status == 200, model
    content = copy.deepcopy(model["content"])
    content["cells"][index]["source"] = EDITED
    status, saved = jupyter.request("PUT", f"/api/contents/{path}", {"type": "notebook", "content": content})
    assert status == 200, saved
    return (jupyter.root / path).read_text()


async def saved_by_room(jupyter, path: str, index: int) -> str:
    """The notebook given our edit through its collaboration room by another client, and saved
    by the room, as for a person in JupyterLab."""
    peer = NbModelClient(get_jupyter_notebook_websocket_url(jupyter.url, path, jupyter.token), path=path,
                         username="reference")
    await peer.start()
    try:
        await peer.wait_until_synced()
        peer.set_cell_source(index, EDITED)
        return await settled_file(jupyter, path)
    finally:
        await peer.stop()


async def settled_file(jupyter, path: str, timeout: float = 30) -> str:
    """The file once it holds the edit and has not changed for a while (the room saves ~1 s
    after a change)."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        text = (jupyter.root / path).read_text()
        if text != last:
            last, since = text, time.monotonic()
        elif "edited by the test" in text and time.monotonic() - since > 1.5:
            return text
        await asyncio.sleep(0.1)
    raise AssertionError(f"{path} did not settle with the edit within {timeout}s")


async def edit_through_us(client, jupyter, path: str, name: str, index: int, kernel_id: str) -> None:
    async def call(tool, **arguments):
        result = await client.call_tool(tool, arguments)
        assert not result.is_error, f"{name}: {tool} failed: {joined(result)}"
        return joined(result)

    await call("use_notebook", notebook_name=name, notebook_path=path, kernel_id=kernel_id)
    shown = await call("read_notebook", notebook_name=name, response_format="detailed")
    assert "Cell 0" in shown or "=====Cell 0" in shown, shown
    await call("insert_cell", cell_index=1, cell_type="markdown", cell_source="a cell that goes again")
    await call("delete_cell", cell_indices=[1])
    await call("overwrite_cell_source", cell_index=index, cell_source=EDITED)
    await call("unuse_notebook", notebook_name=name)


@pytest.mark.parametrize("backend", ["file", "live"])
async def test_every_shape_survives_an_edit(jupyter_server, backend):
    jupyter = jupyter_server
    kernel_id = jupyter.start_kernel()
    tag = uuid.uuid4().hex[:6]
    differences = {}
    try:
        async with client_for(jupyter, "legacy", "--document-backend", backend) as client:
            for name, (nb, index, upgraded) in SHAPES.items():
                if backend == "live" and name in ROOM_CANNOT_OPEN:
                    continue
                ours, theirs = f"fid-{tag}-{backend}-{name}.ipynb", f"fid-{tag}-{backend}-{name}-jupyter.ipynb"
                for path in (ours, theirs):
                    (jupyter.root / path).write_text(layout(nb, name))
                await edit_through_us(client, jupyter, ours, f"{name}-{backend}", index, kernel_id)
                if backend == "file":
                    expected = saved_by_jupyter(jupyter, theirs, index)
                    got = (jupyter.root / ours).read_text()
                else:
                    expected = await saved_by_room(jupyter, theirs, index)
                    got = await settled_file(jupyter, ours)
                assert "edited by the test" in expected, expected
                if comparable(got, upgraded) != comparable(expected, upgraded):
                    differences[name] = (got, expected)
                elif backend == "file" and name.endswith("-future"):
                    # Jupyter keeps what it does not know; so must we.
                    for kept in ("future cell", "future_field", "kept as it is", "future_top_field",
                                 "future_cell_field", f'"nbformat_minor": {nb["nbformat_minor"]}'):
                        assert kept in got, f"{name}: {kept!r} was dropped"
    finally:
        jupyter.request("DELETE", f"/api/kernels/{kernel_id}")
    for name, (got, expected) in differences.items():
        import difflib
        print(f"--- {name} ({backend}): ours vs Jupyter's")
        print("\n".join(difflib.unified_diff(expected.splitlines(), got.splitlines(), "jupyter", "ours",
                                             lineterm="", n=2)))
    assert not differences, f"differ from Jupyter's own save: {sorted(differences)}"


@pytest.mark.parametrize("backend", ["file", "live"])
async def test_a_really_malformed_notebook_is_refused_clearly(jupyter_server, backend):
    """Both backends give the file's own reason (the room alone says only "Error initializing")."""
    jupyter = jupyter_server
    cases = {
        "not-json": ("{\"cells\": [", "cannot be read as a notebook"),
        "truncated": (json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
            {"cell_type": "code", "id": "a", "metadata": {}, "outputs": [], "execution_count": None,
             "source": "x = 1"}]}, indent=1)[:-30], "EOF while parsing"),
        "nbformat-5": (json.dumps({"nbformat": 5, "nbformat_minor": 0, "cells": []}), "not an nbformat 4 notebook"),
        "cell-without-type": (json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                          "cells": [{"source": "x", "metadata": {}}]}), "cell 0 is malformed"),
    }
    async with client_for(jupyter, "legacy", "--document-backend", backend) as client:
        latin = f"bad-{uuid.uuid4().hex[:6]}-latin1.ipynb"
        (jupyter.root / latin).write_bytes(b'{"cells": [], "metadata": {"caf\xe9": 1}, "nbformat": 4, "nbformat_minor": 5}')
        result = await client.call_tool("use_notebook", {"notebook_name": "latin1", "notebook_path": latin})
        assert result.is_error and "UTF-8" in joined(result), joined(result)
        for name, (text, says) in cases.items():
            path = f"bad-{uuid.uuid4().hex[:6]}-{name}.ipynb"
            (jupyter.root / path).write_text(text)
            result = await client.call_tool("use_notebook", {"notebook_name": name, "notebook_path": path})
            assert result.is_error and says in joined(result), f"{name}: {joined(result)}"
            assert (jupyter.root / path).read_text() == text, "a refused notebook is left as it was"
