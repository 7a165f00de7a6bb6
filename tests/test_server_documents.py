"""jupyter-server-documents 0.3.3 (jupyter-ai-contrib's server-side engine for live notebooks, in a
venv of its own: tests/ensure-server-documents) in place of jupyter-collaboration. Its rooms are
named through its file id index, not a collaboration session; its kernel websocket hands a new
kernel's own "starting" straight through; with its outputs service on, the room holds
placeholders where the file holds outputs. The agent edits live through its rooms, a person in
JupyterLab sees the agent's cells and outputs, no kernel is taken for restarted, and kept outputs
are read."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import nbformat
import pytest

from conftest import call, client_for, eventually, joined, open_lab_page
from harness import start_jupyter, stop_jupyter

pytestmark = pytest.mark.anyio

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


def start_server_documents(tmp: Path, *traitlets: str):
    venv = os.environ.get("JUPYTER_MCP_SERVER_DOCUMENTS_VENV")
    assert venv, "JUPYTER_MCP_SERVER_DOCUMENTS_VENV is not set; run the suite through tests/run"
    env = dict(os.environ, PATH=f"{Path(venv) / 'bin'}:{os.environ['PATH']}")
    return start_jupyter(tmp, jupyter=str(Path(venv) / "bin" / "jupyter"), extra=list(traitlets), env=env)


@pytest.fixture
def documents(tmp_path):
    server = start_server_documents(tmp_path)
    try:
        yield server
    finally:
        stop_jupyter(server)


def write_notebook(root: Path, path: str, cells: list) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = cells
    (root / path).write_text(nbformat.writes(nb))


def saved(root: Path, path: str):
    try:
        return nbformat.reads((root / path).read_text(), as_version=4)
    except (nbformat.reader.NotJSONError, FileNotFoundError):
        return None


async def test_the_agent_edits_and_runs_live_through_its_rooms(documents):
    async with client_for(documents, "legacy") as client:
        used = joined(await call(client, "use_notebook", notebook_name="n", notebook_path="live.ipynb",
                                 mode="create"))
        assert "(live backend)" in used, used
        inserted = joined(await call(client, "insert_cell", cell_index=0, cell_type="code",
                                     cell_source="x = 6 * 7\nprint('printed', x)"))
        # Until the room is seen to save, the figure is this engine's own shortest interval.
        assert "jupyter-server-documents's default" in inserted, inserted
        ran = joined(await call(client, "execute_cell", cell_index=0))
        assert "printed 42" in ran, ran
        assert "restarted" not in ran
        # The default kernel is this notebook's: it knows x.
        assert "43" in joined(await call(client, "execute_code", code="x + 1"))
        read = joined(await call(client, "read_cell", cell_index=0))
        assert "printed 42" in read and "execution count: 1" in read, read
        left = joined(await call(client, "unuse_notebook", notebook_name="n"))
        assert "successfully" in left, left
    # unuse_notebook returned once the file held the edits: the cell, its output and its count.
    nb = saved(documents.root, "live.ipynb")
    assert nb is not None and [c.source for c in nb.cells] == ["x = 6 * 7\nprint('printed', x)"]
    assert nb.cells[0].execution_count == 1
    assert [o.get("text") for o in nb.cells[0].outputs] == ["printed 42\n"]
    log = (documents.root.parent / "jupyter.log").read_text()
    # No save request was sent to rooms that do not take one.
    assert "Ignoring an unrecognized message" not in log


async def test_no_kernel_is_taken_for_restarted(documents):
    """Its kernel websocket passes a kernel's own first "starting" status through: on our first
    socket to a kernel just started that is its birth, not a restart (seen before as "restarted
    outside this server" the moment the default kernel or a notebook's kernel was attached, on
    either backend)."""
    for attempt, backend in enumerate(["live", "live", "file"]):
        async with client_for(documents, "legacy", "--document-backend", backend) as client:
            ran = joined(await call(client, "execute_code", code="6 * 7"))
            assert ran.strip().endswith("42"), f"attempt {attempt}: {ran}"
            path = f"k{attempt}.ipynb"
            await call(client, "use_notebook", notebook_name="k", notebook_path=path, mode="create")
            await call(client, "insert_cell", cell_index=0, cell_type="code", cell_source="import os\nos.getpid()")
            first = joined(await call(client, "execute_cell", cell_index=0))
            second = joined(await call(client, "execute_cell", cell_index=0))
            assert "restarted" not in first + second, f"attempt {attempt}: {first} / {second}"
            # The same process both times: nothing restarted it.
            assert first.split("|")[0].strip() == second.split("|")[0].strip(), (first, second)
            await call(client, "unuse_notebook", notebook_name="k")


async def test_a_notebook_a_person_runs_is_attached_without_a_restart(documents):
    """JupyterLab opens a notebook by creating a session: the engine attaches the kernel to the
    room. Our agent then uses that kernel, whose state is the person's."""
    write_notebook(documents.root, "shared.ipynb", [nbformat.v4.new_code_cell("shared = 'from the person'")])
    status, session = documents.request("POST", "/api/sessions", {
        "path": "shared.ipynb", "name": "shared.ipynb", "type": "notebook", "kernel": {"name": "python3"}})
    assert status == 201, session
    kernel = session["kernel"]["id"]
    async with client_for(documents, "legacy") as client:
        used = joined(await call(client, "use_notebook", notebook_name="s", notebook_path="shared.ipynb"))
        assert kernel in used, used
        await call(client, "execute_cell", cell_index=0)
        shown = joined(await call(client, "execute_code", code="shared"))
        assert "from the person" in shown and "restarted" not in shown, shown


async def test_outputs_kept_by_its_outputs_service_are_read(tmp_path):
    """With `OutputProcessor.use_outputs_service`, the engine moves each output out of the room
    into its service, leaving a placeholder naming it; reads fetch them, as JupyterLab does."""
    server = start_server_documents(tmp_path, "--OutputProcessor.use_outputs_service=True")
    try:
        cell = nbformat.v4.new_code_cell("print('kept')\n7", execution_count=3, outputs=[
            nbformat.v4.new_output("stream", name="stdout", text="kept outside the room\n"),
            nbformat.v4.new_output("execute_result", data={"text/plain": "7"}, execution_count=3),
        ])
        write_notebook(server.root, "kept.ipynb", [cell])
        async with client_for(server, "legacy") as client:
            used = joined(await call(client, "use_notebook", notebook_name="k", notebook_path="kept.ipynb"))
            assert "(live backend)" in used, used
            read = joined(await call(client, "read_cell", cell_index=0))
            assert "kept outside the room" in read and "7" in read, read
            assert "Unknown output type" not in read and "keys=[]" not in read, read
            # An edit elsewhere leaves the placeholders as they are: the file keeps its outputs.
            await call(client, "insert_cell", cell_index=1, cell_type="markdown", cell_source="# added")
            await call(client, "unuse_notebook", notebook_name="k")
        nb = saved(server.root, "kept.ipynb")
        assert [c.source for c in nb.cells] == ["print('kept')\n7", "# added"]
        assert nb.cells[0].outputs[0]["text"] == "kept outside the room\n"
        assert nb.cells[0].outputs[1]["data"]["text/plain"] == "7"
    finally:
        stop_jupyter(server)


async def test_a_person_in_jupyterlab_sees_the_agents_cell_and_output(tmp_path):
    lab = start_server_documents(tmp_path)
    page = None
    try:
        path = f"shown-{uuid.uuid4().hex[:6]}.ipynb"
        write_notebook(lab.root, path, [nbformat.v4.new_markdown_cell("# Opened by a person")])
        screenshot = ARTIFACTS / "jupyterlab-server-documents-agent-cell.png"
        page = open_lab_page(lab, path, screenshot)
        assert page.stdout.readline().strip() == "ready", "JupyterLab did not show the notebook"
        source = "answer = 6 * 7\nprint('the agent says', answer)"
        async with client_for(lab, "legacy") as client:
            used = joined(await call(client, "use_notebook", notebook_name="shown", notebook_path=path))
            assert "(live backend)" in used, used
            ran = joined(await call(client, "insert_execute_code_cell", cell_index=-1, cell_source=source))
            assert "the agent says 42" in ran and "restarted" not in ran, ran
            page.stdin.write(json.dumps({"source": "answer = 6 * 7", "output": "the agent says 42"}) + "\n")
            page.stdin.flush()
            verdict = page.stdout.readline().strip()
            assert verdict == "seen", f"the page did not show the agent's cell and output ({verdict}); see {screenshot}"
        assert page.wait(timeout=30) == 0
        await eventually(lambda: (nb := saved(lab.root, path)) is not None and len(nb.cells) == 2, 10,
                         "the room saved the agent's cell")
    finally:
        if page is not None:
            try:
                page.wait(timeout=30)
            except subprocess.TimeoutExpired:
                page.kill()
        stop_jupyter(lab)
