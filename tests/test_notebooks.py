"""Notebook tools on the file backend against a real Jupyter Server, through the official client."""

from __future__ import annotations

import json
import re
import uuid

import anyio
import nbformat
import pytest

from conftest import MODES, call, cell_id_of, client_for, joined, texts
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="


def notebook_client(jupyter_server, transport="stdio", mode="legacy", **client_kwargs):
    return client_for(jupyter_server, mode, "--document-backend", "file", transport=transport, **client_kwargs)


def on_disk(jupyter_server, path):
    text = (jupyter_server.root / path).read_text()
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    return nb, text


async def test_whole_workflow(jupyter_server, transport):
    path = f"flow-{uuid.uuid4().hex[:6]}.ipynb"
    async with notebook_client(jupyter_server, transport) as client:
        created = joined(await call(client, "use_notebook", notebook_name="nb", notebook_path=path, mode="create"))
        assert "Successfully activate notebook 'nb'" in created and "Notebook has 0 cells." in created
        nb, text = on_disk(jupyter_server, path)
        assert nb.nbformat_minor == 5 and text.endswith("}\n")

        inserted = await call(client, "insert_cell", cell_index=-1, cell_type="markdown", cell_source="# Title")
        assert joined(inserted).startswith("Cell inserted successfully at index 0 (markdown)!")
        code = await call(client, "insert_cell", cell_index=-1, cell_type="code", cell_source="x = 21\nprint(x * 2)")
        code_id = cell_id_of(code)
        await call(client, "insert_cell", cell_index=1, cell_type="raw", cell_source="raw text")

        brief = joined(await call(client, "read_notebook", notebook_name="nb"))
        assert re.match(r"Notebook nb has 3 cells \(revision: \w{6}-\d+\)\.\n\nIndex\tType\tCount\tFirst Line\n", brief), brief
        assert "0\tmarkdown\tN/A\t# Title" in brief and "2\tcode\tN/A\tx = 21...(1 lines hidden)" in brief
        detailed = joined(await call(client, "read_notebook", notebook_name="nb", response_format="detailed"))
        # The Python server's banner, with the cell's version before its closing mark.
        assert re.search(r"=====Cell 2 \| type: code \| execution count: N/A \| version: [0-9a-f]{8}=====\n\nx = 21\nprint\(x \* 2\)", detailed), detailed

        executed = await call(client, "execute_cell", cell_id=code_id)
        assert texts(executed)[0] == "42\n" and texts(executed)[-1].startswith("[COMPLETED in ")
        nb, _ = on_disk(jupyter_server, path)
        cell = next(c for c in nb.cells if c.id == code_id)
        assert cell.execution_count >= 1 and cell.outputs[0]["text"] == "42\n"

        edited = joined(await call(client, "edit_cell_source", cell_id=code_id, old_string="21", new_string="50"))
        assert edited.startswith("Cell 2 edited successfully!") and "-x = 21\n+x = 50" in edited
        overwritten = joined(await call(client, "overwrite_cell_source", cell_index=1, cell_source="raw, rewritten"))
        assert "Cell 1 overwritten successfully!" in overwritten and "```diff" in overwritten

        moved = joined(await call(client, "move_cell", source_cell_id=code_id, target_index=0))
        assert moved.startswith("Cell moved successfully from index 2 to 0 (code).")
        read = await call(client, "read_cell", cell_index=0)
        assert texts(read)[0].startswith("=====Cell 0 | type: code | execution count: ")
        assert texts(read)[1] == "x = 50\nprint(x * 2)" and texts(read)[2] == "42\n"
        assert cell_id_of(read) == code_id and read.structured_content["result"] == texts(read)

        image = await call(
            client, "insert_execute_code_cell", cell_index=-1,
            cell_source=f"import base64\nfrom IPython.display import Image, display\ndisplay(Image(data=base64.b64decode('{PNG}')))",
        )
        assert any(c.type == "image" for c in image.content)
        error = await call(client, "insert_execute_code_cell", cell_index=-1, cell_source="1/0", stream=False)
        assert "ZeroDivisionError" in joined(error)
        nb, _ = on_disk(jupyter_server, path)
        assert "image/png" in nb.cells[-2].outputs[0]["data"]
        assert nb.cells[-1].outputs[0]["output_type"] == "error"

        cleared = joined(await call(client, "clear_cell_output", cell_id=code_id))
        assert cleared == "Cell 0 output cleared successfully (1 output(s) removed)."
        assert joined(await call(client, "clear_cell_output", cell_id=code_id)) == "Cell 0 had no output to clear."
        nb, _ = on_disk(jupyter_server, path)
        assert nb.cells[0].outputs == [] and nb.cells[0].execution_count is None

        deleted = await call(client, "delete_cell", cell_indices=[3, 1])
        assert joined(deleted).startswith("Cell 3 (code) deleted successfully.\ndeleted cell source:\n")
        nb, _ = on_disk(jupyter_server, path)
        assert [c.cell_type for c in nb.cells] == ["code", "raw", "code"]
        by_id = await call(client, "delete_cell", cell_ids_to_delete=[nb.cells[1].id], include_source=False)
        assert joined(by_id) == "Cell 1 (raw) deleted successfully."

        listed = joined(await call(client, "list_notebooks"))
        assert listed.startswith("Name\tPath\tKernel_ID\tKernel_Status\tActivate\tBackend\nnb\t" + path)
        assert "✓" in listed

        await call(client, "execute_cell", cell_index=0)
        kept = await call(client, "execute_code", code="print(x)")
        assert texts(kept) == ["50\n"], "execute_code runs in the current notebook's kernel"
        restarted = joined(await call(client, "restart_notebook", notebook_name="nb"))
        assert "restarted successfully" in restarted
        after = await client.call_tool("execute_code", {"code": "print('x' in globals())"})
        assert texts(after) == ["False\n"]

        kernel_id = listed.split("\n")[1].split("\t")[2]
        unused = joined(await call(client, "unuse_notebook", notebook_name="nb"))
        assert unused.startswith("Notebook 'nb' unused successfully.") and "No notebooks remaining." in unused
        await anyio.sleep(0.5)
        assert kernel_id not in jupyter_server.kernel_ids(), "the kernel we started is stopped"
        on_disk(jupyter_server, path)


async def test_concurrent_save_is_kept(jupyter_server):
    path = f"race-{uuid.uuid4().hex[:6]}.ipynb"
    async with notebook_client(jupyter_server) as client:
        await call(client, "use_notebook", notebook_name="r", notebook_path=path, mode="create")
        await call(client, "insert_cell", cell_index=-1, cell_type="code", cell_source="ours_first = 1")
        # Someone else saves the notebook through the contents API after our last read.
        status, model = jupyter_server.request("GET", f"/api/contents/{path}")
        nb = model["content"]
        nb["cells"].append({"cell_type": "markdown", "id": "theirs01", "metadata": {}, "source": "their edit"})
        status, _ = jupyter_server.request("PUT", f"/api/contents/{path}", {"type": "notebook", "format": "json", "content": nb})
        assert status == 200
        await call(client, "insert_cell", cell_index=0, cell_type="code", cell_source="ours_second = 2")
        nb, _ = on_disk(jupyter_server, path)
        sources = [c.source for c in nb.cells]
        assert sources == ["ours_second = 2", "ours_first = 1", "their edit"], sources

        # Their save removes the cell we are about to edit: our edit is refused, theirs is intact.
        # (Once our insert is proven on disk: within its settle time an unproven edit of ours that
        # vanished from the file is taken for an overwritten save and put back, by design.)
        await anyio.sleep(1.0)
        first = nb.cells[1].id
        status, model = jupyter_server.request("GET", f"/api/contents/{path}")
        content = model["content"]
        content["cells"] = [c for c in content["cells"] if c["id"] != first]
        jupyter_server.request("PUT", f"/api/contents/{path}", {"type": "notebook", "format": "json", "content": content})
        refused = await client.call_tool("overwrite_cell_source", {"cell_id": first, "cell_source": "lost?"})
        assert refused.is_error and f"No cell '{first}'" in joined(refused)
        nb, _ = on_disk(jupyter_server, path)
        assert [c.source for c in nb.cells] == ["ours_second = 2", "their edit"]


async def test_kernel_binding(jupyter_server):
    path = f"bind-{uuid.uuid4().hex[:6]}.ipynb"
    (jupyter_server.root / path).write_text(json.dumps(nbformat.v4.new_notebook()))
    # A person has the notebook open: a session exists before use_notebook.
    status, session = jupyter_server.request(
        "POST", "/api/sessions", {"path": path, "name": path, "type": "notebook", "kernel": {"name": "python3"}})
    assert status == 201
    theirs = session["kernel"]["id"]
    async with notebook_client(jupyter_server) as client:
        text = joined(await call(client, "use_notebook", notebook_name="b", notebook_path=path))
        assert f"kernel '{theirs}'" in text and "left alone" in text
        ours = joined(await call(client, "list_notebooks")).split("\n")[1].split("\t")[2]
        assert ours != theirs
        await call(client, "unuse_notebook", notebook_name="b")

        given = jupyter_server.start_kernel()
        text = joined(await call(client, "use_notebook", notebook_name="g", notebook_path=path, kernel_id=given))
        assert f"Connected to kernel '{given}'" in text
        await call(client, "execute_code", code="marker = 'given'")
        released = joined(await call(client, "unuse_notebook", notebook_name="g"))
        assert "keeps running" in released
    await anyio.sleep(0.5)
    ids = jupyter_server.kernel_ids()
    assert theirs in ids and given in ids, "kernels we did not start are never stopped"
    jupyter_server.request("DELETE", f"/api/sessions/{session['id']}")
    jupyter_server.request("DELETE", f"/api/kernels/{given}")


async def test_bad_input_is_named(jupyter_server):
    path = f"bad-{uuid.uuid4().hex[:6]}.ipynb"
    async with notebook_client(jupyter_server) as client:
        none_yet = await client.call_tool("read_cell", {"cell_index": 0})
        assert none_yet.is_error and "use_notebook" in joined(none_yet)
        missing = await client.call_tool("use_notebook", {"notebook_name": "m", "notebook_path": "nope.ipynb"})
        assert missing.is_error and "'nope.ipynb' not found" in joined(missing)
        await call(client, "use_notebook", notebook_name="x", notebook_path=path, mode="create")
        again = await client.call_tool("use_notebook", {"notebook_name": "y", "notebook_path": path, "mode": "create"})
        assert again.is_error and "already exists" in joined(again)
        await call(client, "insert_cell", cell_index=0, cell_type="code", cell_source="a")
        out_of_range = await client.call_tool("read_cell", {"cell_index": 5})
        assert out_of_range.is_error and "Cell index 5 is out of range. Notebook has 1 cells." in joined(out_of_range)
        bad_insert = await client.call_tool("insert_cell", {"cell_index": 7, "cell_type": "code", "cell_source": ""})
        assert bad_insert.is_error and "outside valid range [-1, 1]" in joined(bad_insert)
        unknown_id = await client.call_tool("execute_cell", {"cell_id": "zzz"})
        assert unknown_id.is_error and "No cell 'zzz'" in joined(unknown_id)
        unknown_name = await client.call_tool("read_notebook", {"notebook_name": "other"})
        assert unknown_name.is_error and "Notebook 'other' is not connected" in joined(unknown_name) and "connected notebooks: ['x']" in joined(unknown_name)
        # The domain's next steps worded as this face's tools.
        assert "Call use_notebook to open it, or list_notebooks to see what is open." in joined(unknown_name)
        not_unique = await call(client, "insert_cell", cell_index=-1, cell_type="code", cell_source="a + a")
        ambiguous = await client.call_tool(
            "edit_cell_source", {"cell_id": cell_id_of(not_unique), "old_string": "a", "new_string": "b"})
        assert ambiguous.is_error and "not unique" in joined(ambiguous) and "replace_all" in joined(ambiguous)
        dupes = await client.call_tool("delete_cell", {"cell_indices": [0, 0]})
        assert dupes.is_error and "duplicate" in joined(dupes)
        markdown = await call(client, "insert_cell", cell_index=-1, cell_type="markdown", cell_source="m")
        not_code = await client.call_tool("execute_cell", {"cell_id": cell_id_of(markdown)})
        assert not_code.is_error and "only code cells" in joined(not_code)
        not_json = jupyter_server.root / "broken.ipynb"
        not_json.write_text("{ not json")
        broken = await client.call_tool("use_notebook", {"notebook_name": "z", "notebook_path": "broken.ipynb"})
        assert broken.is_error and "cannot be read as a notebook" in joined(broken)
        nb, _ = on_disk(jupyter_server, path)
        assert len(nb.cells) == 3


async def test_notebook_kernel_loss_is_reported_until_restart(jupyter_server):
    path = f"loss-{uuid.uuid4().hex[:6]}.ipynb"
    async with notebook_client(jupyter_server) as client:
        await call(client, "use_notebook", notebook_name="l", notebook_path=path, mode="create")
        listed = joined(await call(client, "list_notebooks"))
        kernel_id = listed.split("\n")[1].split("\t")[2]
        jupyter_server.request("DELETE", f"/api/kernels/{kernel_id}")
        await anyio.sleep(0.5)
        await call(client, "insert_cell", cell_index=0, cell_type="code", cell_source="1 + 1")
        for _ in range(2):
            gone = await client.call_tool("execute_cell", {"cell_index": 0})
            assert gone.is_error and "The kernel of 'l' is gone" in joined(gone) and "restart_notebook" in joined(gone)
        assert "dead" in joined(await call(client, "list_notebooks"))
        await call(client, "restart_notebook", notebook_name="l")
        result = await call(client, "execute_cell", cell_index=0)
        assert texts(result)[0] == "2"


@pytest.mark.parametrize("mode", MODES)
async def test_resources_prompt_and_subscriptions(jupyter_server, transport, mode):
    path = f"res-{uuid.uuid4().hex[:6]}.ipynb"
    updates = []

    async def on_message(message):
        params = getattr(getattr(message, "root", message), "params", None)
        uri = getattr(params, "uri", None)
        if uri:
            updates.append(uri)

    async with notebook_client(jupyter_server, transport, mode, message_handler=on_message) as client:
        await call(client, "use_notebook", notebook_name="r", notebook_path=path, mode="create")
        await call(client, "insert_cell", cell_index=-1, cell_type="markdown", cell_source="# Heading")
        ran = await call(client, "insert_execute_code_cell", cell_index=-1, cell_source="print(6 * 7)")
        cell_id = cell_id_of(ran)

        listed = [str(r.uri) for r in (await client.list_resources(cache_mode="bypass")).resources]
        assert "notebook://r" in listed
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        assert "notebook://{name}/cells/{cell_id}/outputs/{index}" in templates

        whole = (await client.read_resource("notebook://r", cache_mode="bypass")).contents[0]
        assert whole.mime_type == "application/x-ipynb+json"
        nbformat.validate(nbformat.reads(whole.text, as_version=4))
        cell = json.loads((await client.read_resource(f"notebook://r/cells/{cell_id}", cache_mode="bypass")).contents[0].text)
        assert cell["index"] == 1 and cell["cell_type"] == "code" and cell["source"] == ["print(6 * 7)"]
        output_uri = cell["outputs"][0]["uri"]
        assert output_uri == f"notebook://r/cells/{cell_id}/outputs/0"
        assert (await client.read_resource(output_uri, cache_mode="bypass")).contents[0].text == "42\n"
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("notebook://nope", cache_mode="bypass")
        assert "use_notebook" in unknown.value.error.message

        # The prompt cites the notebook as it is now, not the last saved file.
        await call(client, "overwrite_cell_source", cell_index=0, cell_source="# Heading, edited")
        prompt = await client.get_prompt("jupyter_cite", {"prompt": "Explain", "cell_indices": "0-", "notebook_name": "r"})
        text = prompt.messages[0].content.text
        assert text.startswith("USER Cite cells [0, 1] from notebook r, here are the cells:")
        assert "=====Cell 0 | type: markdown | execution count: N/A=====\n# Heading, edited" in text
        assert text.endswith("=====End of Cited Cells=====\nUSER's Instruction are follow: Explain")
        with pytest.raises(MCPError):
            await client.get_prompt("jupyter_cite", {"prompt": "x", "cell_indices": "5", "notebook_name": "r"})

        uri = f"notebook://r/cells/{cell_id}"
        if mode == "legacy":
            await client.subscribe_resource(uri)
            await call(client, "insert_cell", cell_index=0, cell_type="code", cell_source="pass")
            with anyio.fail_after(10):
                while uri not in updates:
                    await anyio.sleep(0.05)
        else:
            async with client.listen(resource_subscriptions=[uri]) as subscription:
                await call(client, "insert_cell", cell_index=0, cell_type="code", cell_source="pass")
                with anyio.fail_after(10):
                    event = await subscription.__anext__()
                assert uri in str(event)


async def test_notebooks_on_another_server_than_the_kernels(jupyter_server, tmp_path):
    """--document-url: the notebook lives on one Jupyter Server, its kernel runs on another."""
    from harness import start_jupyter

    documents = start_jupyter(tmp_path / "documents")
    try:
        path = f"remote-{uuid.uuid4().hex[:6]}.ipynb"
        args = ("--document-url", documents.url, "--document-token", documents.token)
        async with client_for(jupyter_server, "legacy", "--document-backend", "file", *args) as client:
            await call(client, "use_notebook", notebook_name="far", notebook_path=path, mode="create")
            ran = await call(client, "insert_execute_code_cell", cell_index=-1, cell_source="print('split')")
            assert texts(ran)[0] == "split\n"
            kernel_id = joined(await call(client, "list_notebooks")).split("\n")[1].split("\t")[2]
            assert kernel_id in jupyter_server.kernel_ids(), "the kernel runs on the --jupyter-url server"
            assert kernel_id not in documents.kernel_ids()
        assert not (jupyter_server.root / path).exists()
        nb, _ = on_disk(documents, path)
        assert nb.cells[0].outputs[0]["text"] == "split\n"
    finally:
        documents.process.terminate()
        documents.process.wait(timeout=30)
