"""The tools agents ask for that the Python server lacks: interrupt, run all, inspect variables,
kernelspecs, plain files and toolsets, through the official client against a real Jupyter."""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import anyio
import pytest

from conftest import call, client_for, joined, lose_kernel, refused, server_binary, server_env, start_http_server
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio


def notebook_client(jupyter_server, *args, transport="stdio", **kwargs):
    return client_for(jupyter_server, "auto", "--document-backend", "file", *args, transport=transport, **kwargs)


def on_disk(jupyter_server, path) -> dict:
    return json.loads((jupyter_server.root / path).read_text())


def stream_text(output) -> str:
    text = output["text"]
    return "".join(text) if isinstance(text, list) else text


async def interrupt_when_running(client, **arguments) -> str:
    """Calls interrupt_kernel until it finds the execution running (it may not have started)."""
    deadline = time.monotonic() + 60
    while True:
        text = joined(await call(client, "interrupt_kernel", **arguments))
        if text.startswith("Interrupted"):
            return text
        assert "is idle" in text, text
        assert time.monotonic() < deadline, "the execution never started"
        await anyio.sleep(0.1)


# ---- interrupt_kernel ----

async def test_interrupt_stops_a_long_sleep_and_the_kernel_lives_on(jupyter_server, transport):
    async with notebook_client(jupyter_server, transport=transport) as client:
        nothing = joined(await call(client, "interrupt_kernel"))
        assert nothing.startswith("Nothing to interrupt") and "not been started" in nothing

        # The default kernel of execute_code, with no notebook in use.
        await call(client, "execute_code", code="kept = 41")
        assert "is idle. No interrupt was sent." in joined(await call(client, "interrupt_kernel"))
        slept = {}

        async def sleep(key, tool, arguments):
            slept[key] = await client.call_tool(tool, arguments)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(sleep, "default", "execute_code", {"code": "import time; time.sleep(60)",
                                                                 "timeout": 120})
            text = await interrupt_when_running(client)
        assert "the default kernel" in text and "import time; time.sleep(60)" in text, text
        assert "The execution stopped" in text, text
        assert "KeyboardInterrupt" in joined(slept["default"])
        assert "42" in joined(await call(client, "execute_code", code="print(kept + 1)"))

        # A notebook's kernel, by name; the sleeping cell's outputs are saved as they are.
        path = f"interrupt-{uuid.uuid4().hex[:6]}.ipynb"
        await call(client, "use_notebook", notebook_name="nb", notebook_path=path, mode="create")
        await call(client, "insert_execute_code_cell", cell_index=-1, cell_source="value = 7")
        await call(client, "insert_cell", cell_index=-1, cell_type="code",
                   cell_source="print('going to sleep', flush=True)\nimport time\ntime.sleep(60)")
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(sleep, "cell", "execute_cell", {"cell_index": 1, "timeout": 120})
            text = await interrupt_when_running(client, notebook_name="nb")
        assert text.startswith("Interrupted the kernel of notebook 'nb'"), text
        cell = joined(slept["cell"])
        assert "going to sleep" in cell and "KeyboardInterrupt" in cell, cell
        saved = on_disk(jupyter_server, path)["cells"][1]
        assert any(o.get("ename") == "KeyboardInterrupt" for o in saved["outputs"]), saved
        assert "7" in joined(await call(client, "execute_code", code="print(value)"))
        assert "is idle" in joined(await call(client, "interrupt_kernel", notebook_name="nb"))
        unknown = await refused(client, "interrupt_kernel", notebook_name="nope")
        assert "'nope' is not connected" in unknown and "'nb'" in unknown


# ---- run_all_cells ----

async def test_run_all_stops_at_the_error_in_cell_3_and_can_run_past_it(jupyter_server, transport):
    path = f"runall-{uuid.uuid4().hex[:6]}.ipynb"
    async with notebook_client(jupyter_server, transport=transport) as client:
        await call(client, "use_notebook", notebook_name="all", notebook_path=path, mode="create")
        sources = [("markdown", "# Title"), ("code", "a = 1\nprint('first')"), ("code", "b = a + 1\nb"),
                   ("code", "1 / 0"), ("code", "print('after', a + b)")]
        for kind, source in sources:
            await call(client, "insert_cell", cell_index=-1, cell_type=kind, cell_source=source)
        updates = []

        async def on_progress(progress, total, message):
            updates.append((progress, total, message))

        result = await client.call_tool("run_all_cells", {}, progress_callback=on_progress)
        assert not result.is_error, joined(result)
        text = joined(result)
        assert "Ran 3 of 4 code cells of 'all'; stopped at cell 3" in text and "1 cells were not run" in text, text
        rows = result.structured_content["cells"]
        assert [(r["index"], r["status"]) for r in rows] == [(1, "ok"), (2, "ok"), (3, "error"), (4, "not run")]
        assert rows[0]["output"] == "first" and rows[1]["output"] == "2"
        assert rows[2]["output"].startswith("ZeroDivisionError")
        assert [r["execution_count"] for r in rows] == [1, 2, 3, None]
        assert [u[0] for u in updates if u[1] == 4] == [1, 2, 3], updates
        cells = on_disk(jupyter_server, path)["cells"]
        assert stream_text(cells[1]["outputs"][0]) == "first\n" and cells[2]["execution_count"] == 2
        assert cells[3]["outputs"][0]["ename"] == "ZeroDivisionError"
        assert cells[4]["outputs"] == [] and cells[4]["execution_count"] is None

        past = await call(client, "run_all_cells", notebook_name="all", stop_on_error=False)
        statuses = [r["status"] for r in past.structured_content["cells"]]
        assert statuses == ["ok", "ok", "error", "ok"], joined(past)
        assert "cell 3" in joined(past) and "status 'error'" in joined(past)
        assert stream_text(on_disk(jupyter_server, path)["cells"][4]["outputs"][0]) == "after 3\n"


# ---- inspect_variables ----

async def test_inspect_a_dataframe_and_a_large_list_without_moving_the_count(jupyter_server):
    path = f"inspect-{uuid.uuid4().hex[:6]}.ipynb"
    async with notebook_client(jupyter_server) as client:
        await call(client, "use_notebook", notebook_name="vars", notebook_path=path, mode="create")
        await call(client, "insert_execute_code_cell", cell_index=-1, cell_source=(
            "import pandas as pd\n"
            "df = pd.DataFrame({'city': ['Oslo', 'Lima', 'Pune'], 'temp': [3.5, 19.0, 27.25]})\n"
            "big = list(range(1_000_000))\n"
            "def helper(): pass\n"
            "label = 'x' * 5000"))
        before = on_disk(jupyter_server, path)
        inspected = await call(client, "inspect_variables")
        text = joined(inspected)
        found = {v["name"]: v for v in inspected.structured_content["variables"]}
        assert set(found) == {"df", "big", "label"}, text  # no modules, functions, IPython names
        assert found["df"]["type"] == "pandas.DataFrame" and found["df"]["shape"] == [3, 2]
        # pandas 3 names string columns "str", pandas 2 "object".
        assert found["df"]["columns"]["temp"] == "float64" and found["df"]["columns"]["city"] in ("object", "str")
        assert found["big"]["type"] == "list" and found["big"]["length"] == 1_000_000
        assert found["big"]["repr"].startswith("[0, 1, 2") and len(found["big"]["repr"]) < 300
        assert found["label"]["length"] == 5000 and len(found["label"]["repr"]) < 300
        assert "df\tpandas.DataFrame\tshape (3, 2)" in text and ("columns: city: object, temp: float64" in text or "columns: city: str, temp: float64" in text)

        some = await call(client, "inspect_variables", names=["big", "pd", "missing"])
        assert [v["name"] for v in some.structured_content["variables"]] == ["big", "pd"]
        assert "Not defined in the kernel: missing." in joined(some)

        # Nothing moved: the notebook, the execution count, the history, the namespace.
        assert on_disk(jupyter_server, path) == before
        after = await call(client, "insert_execute_code_cell", cell_index=-1, cell_source=(
            "print(len(In), sorted(k for k in globals() if not k.startswith('_') and k not in "
            "('In', 'Out', 'get_ipython', 'exit', 'quit', 'open')))"))
        assert "3 ['big', 'df', 'helper', 'label', 'pd']" in joined(after), joined(after)
        assert on_disk(jupyter_server, path)["cells"][1]["execution_count"] == 2


async def test_inspect_refuses_a_busy_kernel_and_names_what_runs(jupyter_server):
    path = f"busy-{uuid.uuid4().hex[:6]}.ipynb"
    async with notebook_client(jupyter_server) as client:
        await call(client, "use_notebook", notebook_name="busy", notebook_path=path, mode="create")
        await call(client, "insert_cell", cell_index=-1, cell_type="code", cell_source="import time; time.sleep(60)")
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(client.call_tool, "execute_cell", {"cell_index": 0, "timeout": 120})
            deadline = time.monotonic() + 60
            while True:
                result = await client.call_tool("inspect_variables", {})
                if result.is_error:
                    break
                assert time.monotonic() < deadline
                await anyio.sleep(0.1)
            assert "is busy running code" in joined(result) and "interrupt_kernel" in joined(result)
            await interrupt_when_running(client)


# ---- kernelspecs ----

@pytest.fixture
def second_kernelspec(jupyter_server):
    """A second Python kernelspec, 'py2', in the test Jupyter's data directory."""
    kernels = jupyter_server.root.parent / "data" / "kernels"
    # And one that says it runs another language (an ipykernel all the same).
    for name, display, language in [("py2", "Python (second spec)", "python"), ("notpy", "Not Python", "R")]:
        (kernels / name).mkdir(parents=True, exist_ok=True)
        (kernels / name / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": display, "language": language}))
    yield "py2"
    for name in ("py2", "notpy"):
        shutil.rmtree(kernels / name, ignore_errors=True)


def kernel_names(jupyter_server) -> dict[str, str]:
    status, kernels = jupyter_server.request("GET", "/api/kernels")
    assert status == 200
    return {k["id"]: k["name"] for k in kernels}


async def notebook_kernel(client, name) -> str:
    listed = joined(await call(client, "list_notebooks"))
    return next(line for line in listed.split("\n") if line.startswith(name + "\t")).split("\t")[2]


async def test_a_notebook_on_a_second_kernelspec(jupyter_server, second_kernelspec):
    path = f"spec-{uuid.uuid4().hex[:6]}.ipynb"
    async with notebook_client(jupyter_server) as client:
        specs = joined(await call(client, "list_kernelspecs"))
        assert specs.startswith("Name\tDisplay_Name\tLanguage\tDefault")
        assert "py2\tPython (second spec)\tpython\t" in specs and "python3\t" in specs and "✓" in specs

        await call(client, "use_notebook", notebook_name="two", notebook_path=path, mode="create",
                   kernel_name="py2")
        kernel = await notebook_kernel(client, "two")
        assert kernel_names(jupyter_server)[kernel] == "py2"
        assert on_disk(jupyter_server, path)["metadata"]["kernelspec"]["name"] == "py2"
        await call(client, "insert_execute_code_cell", cell_index=-1, cell_source="answer = 6 * 7")

        # Back to the default spec on restart, and over to py2 again.
        restarted = joined(await call(client, "restart_notebook", notebook_name="two", kernel_name="python3"))
        assert "python3" in restarted, restarted
        moved = await notebook_kernel(client, "two")
        assert moved != kernel and kernel_names(jupyter_server)[moved] == "python3"
        assert kernel not in kernel_names(jupyter_server), "the py2 kernel we started was left running"
        assert on_disk(jupyter_server, path)["metadata"]["kernelspec"]["name"] == "python3"
        assert "NameError" in joined(await call(client, "execute_code", code="answer"))

        # Connecting to an existing notebook on a chosen spec.
        await call(client, "unuse_notebook", notebook_name="two")
        await call(client, "use_notebook", notebook_name="again", notebook_path=path, kernel_name="py2")
        again = await notebook_kernel(client, "again")
        assert kernel_names(jupyter_server)[again] == "py2"
        assert "3" in joined(await call(client, "execute_code", code="print(1 + 2)"))
        # A deleted kernel is replaced by one of the same kernelspec.
        await lose_kernel(jupyter_server, client, again, "deleted")
        await call(client, "restart_notebook", notebook_name="again")
        replaced = await notebook_kernel(client, "again")
        assert replaced != again and kernel_names(jupyter_server)[replaced] == "py2"

        unknown = await refused(client, "use_notebook", notebook_name="bad", notebook_path="bad.ipynb",
                                mode="create", kernel_name="cobol")
        assert "'cobol'" in unknown and "py2" in unknown and "python3" in unknown, unknown
        assert not (jupyter_server.root / "bad.ipynb").exists()
        both = await refused(client, "use_notebook", notebook_name="b", notebook_path=path,
                             kernel_name="py2", kernel_id="abc")
        assert "kernel_id or kernel_name" in both

        # inspect_variables answers clearly for a kernel of another language.
        await call(client, "use_notebook", notebook_name="other", notebook_path=f"r-{path}", mode="create",
                   kernel_name="notpy")
        assert on_disk(jupyter_server, f"r-{path}")["metadata"]["language_info"]["name"] == "R"
        other = await refused(client, "inspect_variables")
        assert "reads Python kernels" in other and "runs R" in other, other


# ---- read_file / write_file ----

async def test_files_round_trip_binary_and_text_and_refuse_what_they_must(jupyter_server):
    folder = f"files-{uuid.uuid4().hex[:6]}"
    blob = bytes(range(256)) * 4
    async with notebook_client(jupyter_server, "--max-file-bytes", "2048") as client:
        written = joined(await call(client, "write_file", path=f"{folder}/deep/blob.bin",
                                    content=base64.b64encode(blob).decode(), encoding="base64"))
        assert written == (f"Created '{folder}/deep/blob.bin' (1024 bytes). Created the directories "
                           f"'{folder}', '{folder}/deep'.")
        assert (jupyter_server.root / folder / "deep" / "blob.bin").read_bytes() == blob
        read = await call(client, "read_file", path=f"{folder}/deep/blob.bin")
        assert read.structured_content["encoding"] == "base64"
        assert base64.b64decode(read.structured_content["content"]) == blob
        assert "binary file of 1024 bytes" in joined(read)
        part = await call(client, "read_file", path=f"{folder}/deep/blob.bin", offset=10, limit=5)
        assert base64.b64decode(part.structured_content["content"]) == bytes(range(10, 15))

        text = "line 0\nline 1\nline 2\nünïcode 3\n"
        await call(client, "write_file", path=f"{folder}/notes.txt", content=text)
        assert joined(await call(client, "read_file", path=f"{folder}/notes.txt")) == text
        lines = joined(await call(client, "read_file", path=f"{folder}/notes.txt", offset=1, limit=2))
        assert lines.startswith("line 1\nline 2\n[read_file: lines 1-3 of 4") and "offset=3" in lines

        exists = await refused(client, "write_file", path=f"{folder}/notes.txt", content="new")
        assert "already exists" in exists and "overwrite=true" in exists
        replaced = joined(await call(client, "write_file", path=f"{folder}/notes.txt", content="new", overwrite=True))
        assert replaced.startswith("Replaced")
        assert (jupyter_server.root / folder / "notes.txt").read_text() == "new"

        # The size limit, with the size and the limit, both ways; nothing written.
        too_big = await refused(client, "write_file", path=f"{folder}/big.bin",
                                content=base64.b64encode(b"\0" * 3000).decode(), encoding="base64")
        assert "3000 bytes" in too_big and "2048-byte limit" in too_big
        assert not (jupyter_server.root / folder / "big.bin").exists()
        (jupyter_server.root / folder / "big.txt").write_text("y" * 5000)
        too_big = await refused(client, "read_file", path=f"{folder}/big.txt")
        assert "5000 bytes" in too_big and "2048-byte limit" in too_big

        outside = await refused(client, "read_file", path="../etc/passwd")
        assert "cannot leave it" in outside and "root:" not in outside
        assert "cannot leave" in await refused(client, "write_file", path=f"{folder}/../../x.txt", content="x")
        missing = await refused(client, "read_file", path=f"{folder}/nothing.txt")
        assert "not found in the Jupyter root" in missing and "list_files" in missing
        notebook = await refused(client, "write_file", path=f"{folder}/n.ipynb", content="{}")
        assert "is a notebook" in notebook and "use_notebook" in notebook
        assert "is a notebook" in await refused(client, "read_file", path="x.IPYNB")
        assert "is a directory" in await refused(client, "read_file", path=folder)
        bad = await refused(client, "write_file", path=f"{folder}/b.bin", content="!!", encoding="base64")
        assert "not valid base64" in bad


# ---- toolsets ----

def hello_extension(tmp_path) -> list[str]:
    """The example guest whose extension tool is 'hello', allowed to read cells; compiled ahead
    (`extension compile`, as a deploy would), so a start lists its tool at once."""
    from conftest import extension_entry, guest, server_binary, server_env, write_config
    config = str(write_config(tmp_path, extension_entry(guest("hello"), grants=["read-cells"])))
    subprocess.run([server_binary(), "extension", "compile", "--config", config], env=server_env(),
                   check=True, capture_output=True, timeout=300)
    return ["--config", config]


async def listed(client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


async def test_toolset_flags_choose_what_is_exposed(jupyter_server, transport, tmp_path):
    async with notebook_client(jupyter_server, "--tools", "list_files,read_file", transport=transport) as client:
        assert await listed(client) == {"list_files", "read_file"}
        with pytest.raises(MCPError) as hidden:
            await client.call_tool("execute_code", {"code": "1"})
        assert "Unknown tool 'execute_code'" in str(hidden.value) and "list_files, read_file" in str(hidden.value)

    env = {"JUPYTER_MCP_TOOLS": "notebooks", "JUPYTER_MCP_EXCLUDE_TOOLS": "execute_code, write_file"}
    async with notebook_client(jupyter_server, *hello_extension(tmp_path), transport=transport, env=env) as client:
        names = await listed(client)
        assert {"use_notebook", "read_file", "interrupt_kernel", "list_kernelspecs"} <= names
        assert not names & {"execute_code", "write_file", "hello"}, "excluded and extension tools are out"

    # Extension tools take part: by name, and left out of the core toolset.
    async with notebook_client(jupyter_server, *hello_extension(tmp_path), "--exclude-tools", "notebooks",
                               transport=transport) as client:
        assert await listed(client) == {"hello"}
        # The guest ran (it reads the current notebook's cells, and none is in use).
        assert "No notebook is in use" in await refused(client, "hello", who="toolsets")


@pytest.mark.parametrize("where", ["cli", "env"])
def test_unknown_tool_names_stop_the_server(jupyter_server, where):
    args = [server_binary(), "start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token]
    env = server_env()
    if where == "cli":
        args += ["--tools", "notebooks,list_filez"]
    else:
        env["JUPYTER_MCP_EXCLUDE_TOOLS"] = "execute_codes"
    out = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert out.returncode != 0
    wrong = "'list_filez'" if where == "cli" else "'execute_codes'"
    assert wrong in out.stderr and "list_files, list_kernels" in out.stderr, out.stderr
    assert ("--tools" if where == "cli" else "JUPYTER_MCP_EXCLUDE_TOOLS") in out.stderr
    assert "'notebooks'" in out.stderr

    emptied = subprocess.run(args[:6] + ["--tools", "list_files", "--exclude-tools", "list_files"],
                             capture_output=True, text=True, timeout=60, env=server_env(), stdin=subprocess.DEVNULL)
    assert emptied.returncode != 0 and "leave no tool" in emptied.stderr


@contextlib.asynccontextmanager
async def client_at(server, query: str):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {server.token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120)) as hc:
        async with Client(streamable_http_client(server.mcp_url + query, http_client=hc),
                          read_timeout_seconds=120) as client:
            yield client


async def test_only_query_narrows_one_clients_view(jupyter_server, tmp_path):
    server = start_http_server(["start", "--jupyter-url", jupyter_server.url, "--jupyter-token",
                                jupyter_server.token, *hello_extension(tmp_path)])
    try:
        async with client_at(server, "?only=notebooks") as core, client_at(server, "?only=list_files,hello") as two, \
                client_at(server, "") as everything:
            core_names, two_names, all_names = await listed(core), await listed(two), await listed(everything)
            assert "hello" in all_names and "hello" not in core_names and "use_notebook" in core_names
            assert core_names == all_names - {"hello"}
            assert two_names == {"list_files", "hello"}
            with pytest.raises(MCPError) as hidden:
                await two.call_tool("list_kernels", {})
            assert "Unknown tool 'list_kernels'" in str(hidden.value) and "hello, list_files" in str(hidden.value)
            assert "No notebook is in use" in await refused(two, "hello")
            await call(everything, "list_files")

        request = urllib.request.Request(
            server.mcp_url + "?only=notebooks,nope", method="POST",
            data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode(),
            headers={"Authorization": f"Bearer {server.token}", "Content-Type": "application/json",
                     "Accept": "application/json, text/event-stream"})
        with pytest.raises(urllib.error.HTTPError) as refused_view:
            urllib.request.urlopen(request, timeout=30)
        assert refused_view.value.code == 400
        error = json.loads(refused_view.value.read())["error"]
        assert "'nope'" in error and "list_files" in error and "'notebooks'" in error
    finally:
        server.stop()


async def test_live_backend_records_the_kernelspec_and_runs_all(jupyter_server, second_kernelspec):
    """The same tools on a collaboration room: metadata and outputs reach the file."""
    path = f"live-spec-{uuid.uuid4().hex[:6]}.ipynb"
    (jupyter_server.root / path).write_text(json.dumps({
        "nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
            {"cell_type": "code", "id": "c1", "metadata": {}, "source": "x = 20", "outputs": [],
             "execution_count": None},
            {"cell_type": "code", "id": "c2", "metadata": {}, "source": "print(x + 22)", "outputs": [],
             "execution_count": None}]}))
    async with client_for(jupyter_server, "auto", "--document-backend", "live") as client:
        used = joined(await call(client, "use_notebook", notebook_name="live", notebook_path=path,
                                 kernel_name="py2"))
        assert "(live backend)" in used and "kernelspec 'py2'" in used, used
        ran = await call(client, "run_all_cells")
        assert [r["status"] for r in ran.structured_content["cells"]] == ["ok", "ok"], joined(ran)
        assert ran.structured_content["cells"][1]["output"] == "42"
        await call(client, "unuse_notebook", notebook_name="live")
    saved = on_disk(jupyter_server, path)
    assert saved["metadata"]["kernelspec"]["name"] == "py2", saved["metadata"]
    assert stream_text(saved["cells"][1]["outputs"][0]) == "42\n"
