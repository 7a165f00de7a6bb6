"""Faults found by probing as users would (a kernel killed, a file gone, a huge cell): each is
injected for real and the answer must say what happened, never a transport error or a false
success."""

from __future__ import annotations

import json
import os
import signal
import uuid

import anyio
import nbformat
import pytest

from conftest import client_for, http_client, joined, modern, start_http_server

pytestmark = pytest.mark.anyio

# The official client refuses a single Server-sent event over 1 MiB.
SSE_EVENT_LIMIT = 1 << 20


@pytest.mark.parametrize("backend", ["file", "live"])
async def test_a_ten_megabyte_line_never_makes_an_answer_too_big(jupyter_server, backend):
    path = f"huge-line-{uuid.uuid4().hex[:6]}.ipynb"
    huge = "data = '" + "x" * 10_000_000 + "'"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(huge),
                                               nbformat.v4.new_code_cell("print('after')")])
    nbformat.write(notebook, jupyter_server.root / path)
    server = start_http_server(["--jupyter-url", jupyter_server.url, "--document-backend", backend],
                               env={"JUPYTER_TOKEN": jupyter_server.token})
    try:
        async with http_client(server, "legacy") as client:
            answers = {}
            for tool, arguments in (
                ("use_notebook", {"notebook_name": "huge", "notebook_path": path}),
                ("read_notebook", {"notebook_name": "huge"}),
                ("read_notebook", {"notebook_name": "huge", "response_format": "detailed"}),
                ("read_cell", {"cell_index": 0}),
                ("read_cell", {"cell_index": 1}),
            ):
                result = await client.call_tool(tool, arguments)
                assert not result.is_error, f"{tool}: {joined(result)[:500]}"
                size = len(json.dumps(result.model_dump(mode="json", by_alias=True)))
                assert size < SSE_EVENT_LIMIT // 4, (tool, size)
                answers[f"{tool} {arguments.get('response_format', arguments.get('cell_index', ''))}"] = joined(result)
            assert "(+" in answers["use_notebook "] and "characters)" in answers["use_notebook "]
            detailed = answers["read_notebook detailed"]
            assert "[Source cut: 50000 of 10000009 characters shown" in detailed, detailed[-600:]
            assert "notebook://huge/cells/" in detailed and "Read on with start_index=1" in detailed
            assert "[Source cut:" in answers["read_cell 0"] and "notebook://huge/cells/" in answers["read_cell 0"]
            assert "print('after')" in answers["read_cell 1"]
            # The whole source is still there, through the resource the note names (read raw: the
            # official client takes no event over 1 MiB, whatever it holds).
            uri = next(w for w in answers["read_cell 0"].split() if w.startswith("notebook://huge/cells/"))
            uri = uri.rstrip("].")
            [whole] = modern(server, "resources/read", {"uri": uri})
            assert huge in whole["result"]["contents"][0]["text"]
            # An edit's diff is bounded too.
            edited = await client.call_tool("overwrite_cell_source", {"cell_index": 0, "cell_source": "data = 1"})
            assert not edited.is_error and "[Diff cut:" in joined(edited)
            assert len(joined(edited)) < 120_000
    finally:
        server.stop()


async def kill_kernel_process(client) -> int:
    """SIGKILLs the notebook's kernel process from inside (as the OOM killer would)."""
    ran = await client.call_tool("execute_code", {"code": "import os; print(os.getpid())"})
    pid = int(joined(ran).split()[0])
    os.kill(pid, signal.SIGKILL)
    return pid


@pytest.mark.parametrize("auto_restart", [True, False])
async def test_a_killed_kernel_is_replaced_or_restarted_every_time(jupyter_server, auto_restart):
    """F1 (kernel.auto-restart on: the next call gets a replacement, every time, even while
    Jupyter's own restarter is at work) and F2 (off: restart_notebook, as our error says, works
    right after the death), each four times in a row."""
    path = f"killed-{uuid.uuid4().hex[:6]}.ipynb"
    extra = ["--capability", "kernel.auto-restart"] if auto_restart else []
    async with client_for(jupyter_server, "legacy", "--document-backend", "file", *extra) as client:
        used = await client.call_tool("use_notebook", {"notebook_name": "k", "notebook_path": path, "mode": "create"})
        assert not used.is_error, joined(used)
        for attempt in range(4):
            await client.call_tool("execute_code", {"code": f"marker = {attempt}"})
            pid = await kill_kernel_process(client)
            if auto_restart:
                # Once the server has seen it go (as Jupyter's restarter is still at work).
                for _ in range(300):
                    if "\tdead\t" in joined(await client.call_tool("list_notebooks", {})):
                        break
                    await anyio.sleep(0.05)
                ran = await client.call_tool("execute_code", {"code": "print(os.getpid() if 'os' in dir() else 'fresh')"})
                text = joined(ran)
                assert not ran.is_error, f"attempt {attempt}: {text}"
                assert "KERNEL REPLACED" in text and "fresh" in text, f"attempt {attempt}: {text}"
                assert "enable the 'kernel.auto-restart'" not in text
            else:
                gone = await client.call_tool("execute_code", {"code": "print(marker)"})
                assert gone.is_error and "is gone" in joined(gone), joined(gone)
                restarted = await client.call_tool("restart_notebook", {"notebook_name": "k"})
                assert not restarted.is_error, f"attempt {attempt}: {joined(restarted)}"
                ran = await client.call_tool("execute_code", {"code": "import os; print(os.getpid())"})
                assert not ran.is_error and int(joined(ran).split()[0]) != pid, joined(ran)


async def test_live_edits_whose_save_cannot_land_say_so(jupyter_server):
    """F3: the notebook file deleted while the live backend edits it. Edits then say they are
    NOT saved (with why), and unuse_notebook writes the file again from the room, or says it
    could not; never "successfully" for edits that are in no file."""
    path = f"vanishing-{uuid.uuid4().hex[:6]}.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), jupyter_server.root / path)
    async with client_for(jupyter_server, "legacy", "--document-backend", "live") as client:
        used = await client.call_tool("use_notebook", {"notebook_name": "v", "notebook_path": path})
        assert not used.is_error, joined(used)
        first = await client.call_tool("insert_cell", {"cell_index": -1, "cell_type": "code", "cell_source": "y = 2"})
        assert not first.is_error
        # The room saves it; then the file goes.
        for _ in range(100):
            if "y = 2" in (jupyter_server.root / path).read_text():
                break
            await anyio.sleep(0.1)
        (jupyter_server.root / path).unlink()
        await client.call_tool("insert_cell", {"cell_index": -1, "cell_type": "code", "cell_source": "z = 3"})
        await anyio.sleep(8)
        later = await client.call_tool("insert_cell", {"cell_index": -1, "cell_type": "code", "cell_source": "w = 4"})
        text = joined(later)
        assert not (jupyter_server.root / path).exists(), "the room does not bring the file back"
        assert later.meta["io.jupyter-mcp/persisted"] is False, later.meta
        assert "NOT saved" in text and "gone from disk" in text, text
        unused = await client.call_tool("unuse_notebook", {"notebook_name": "v"})
        said = joined(unused)
        assert not unused.is_error, said
    # Leaving, the file is written again from the room, whole, and only then "successfully".
    saved = (jupyter_server.root / path).read_text()
    assert all(s in saved for s in ("x = 1", "y = 2", "z = 3", "w = 4")), saved
    assert "unused successfully" in said and unused.meta["io.jupyter-mcp/persisted"] is True, said


async def test_live_edits_to_a_file_that_cannot_be_written_say_so(jupyter_server):
    """F3: the notebook file made immutable (`chattr +i`: root writes through a read-only mode)
    while the live backend edits it: later edits and unuse_notebook say NOT saved with the
    reason, never "successfully"; writable again, leaving saves it whole."""
    import shutil
    import subprocess

    if os.geteuid() != 0 or not shutil.which("chattr"):
        pytest.skip("chattr +i needs root")
    path = f"frozen-{uuid.uuid4().hex[:6]}.ipynb"
    file = jupyter_server.root / path
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), file)
    try:
        async with client_for(jupyter_server, "legacy", "--document-backend", "live") as client:
            used = await client.call_tool("use_notebook", {"notebook_name": "f", "notebook_path": path})
            assert not used.is_error, joined(used)
            await client.call_tool("insert_cell", {"cell_index": -1, "cell_type": "code", "cell_source": "y = 2"})
            for _ in range(100):
                if "y = 2" in file.read_text():
                    break
                await anyio.sleep(0.1)
            subprocess.run(["chattr", "+i", str(file)], check=True)
            await client.call_tool("insert_cell", {"cell_index": -1, "cell_type": "code", "cell_source": "z = 3"})
            await anyio.sleep(8)
            later = await client.call_tool("insert_cell", {"cell_index": -1, "cell_type": "code", "cell_source": "w = 4"})
            text = joined(later)
            assert later.meta["io.jupyter-mcp/persisted"] is False, later.meta
            assert "NOT saved" in text and "has not written the file" in text, text
            unused = await client.call_tool("unuse_notebook", {"notebook_name": "f"})
            said = joined(unused)
            assert "successfully" not in said and unused.meta["io.jupyter-mcp/persisted"] is False, said
            assert "z = 3" not in file.read_text()
    finally:
        subprocess.run(["chattr", "-i", str(file)], check=False)
