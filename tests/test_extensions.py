"""Extensions through the real binary and the official MCP client: the Rust `snapshot` example
(namespaced capability, tools built on granted host functions), the Python `stats` example (one
tool), capability gating, grants (ungranted and per-notebook), and a clash with a core tool."""

from __future__ import annotations

import json
import shutil
import time
import uuid

import anyio

import nbformat
import pytest

from conftest import (wait_for_log, GUESTS_READY, serve_guests, extension_entry, guest, http_client, joined, log_of, lose_kernel, notebook_with_kernel,
                      start_http_server, texts, write_config)

pytestmark = pytest.mark.anyio

CAPABILITIES = "io.jupyter-mcp/capabilities"
SNAPSHOT_GRANTS = ["read-cells", "insert-cell", "delete-cell"]
CELLS = [("code", "x = 1\ny = 2"), ("markdown", "# Title\n\nSome *text*."), ("raw", "raw text"),
         ("code", "print(x + y)"), ("markdown", "")]


async def ok(client, tool, **arguments):
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} failed: {joined(result)}"
    return result


async def tool_names(client) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


def cells_on_disk(jupyter_server, path):
    nb = nbformat.reads((jupyter_server.root / path).read_text(), as_version=4)
    return [(c.cell_type, c.source) for c in nb.cells]


async def test_examples_add_tools_and_capabilities(jupyter_server, tmp_path):
    again = tmp_path / "hello-again.wasm"
    shutil.copy(guest("hello"), again)
    body = (extension_entry(guest("snapshot"), grants=SNAPSHOT_GRANTS)
            # Scoped: the stats example may read the notebook in use as "nb", and no other.
            + extension_entry(guest("stats"), grants=["read-cells:nb"])
            + extension_entry(guest("declares"))
            # The guide's example (guests/README.md), built as written.
            + extension_entry(guest("hello"), grants=["read-cells"])
            + extension_entry(guest("greeter"))
            # The same extension twice: its name is taken, so the second copy is refused.
            + extension_entry(again, grants=["read-cells"]))
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        log = log_of(server)
        assert "snapshot.wasm (extension 'snapshot', 3 tools)" in log, log
        assert "stats.wasm (extension 'stats', 1 tool)" in log, log
        assert f"refused wasm guest {again}: extension name 'hello' is taken by" in log, log
        # A clash with a core tool is refused and logged; the core tool keeps its name.
        assert ("refused tool 'list_kernels' of extension 'declares': the name is taken by a core "
                "tool") in log, log
        async with http_client(server, "legacy") as client:
            names = await tool_names(client)
            assert {"snapshot_cells", "restore_cells", "list_snapshots", "notebook_stats"} <= names
            # Gated by declares.demo, which is off by default.
            assert "declares_echo" not in names
            gated = await client.call_tool("declares_echo", {})
            assert gated.is_error and "'declares.demo' capability, which is off" in joined(gated)
            kernels = await ok(client, "list_kernels")
            assert "declares" not in joined(kernels)

            # Capabilities with their extension as the source, in both places.
            block = json.loads((await client.read_resource("capabilities://")).contents[0].text)
            snap = next(c for c in block["declared"] if c["name"] == "snapshot.cells")
            assert snap["source"] == "snapshot" and snap["enabled"] is True, snap
            assert "snapshot.cells" in block["capabilities"]
            assert client.server_capabilities.extensions[CAPABILITIES] == block

            path = f"ext-{uuid.uuid4().hex[:8]}.ipynb"
            await ok(client, "use_notebook", notebook_name="nb", notebook_path=path, mode="create")
            existing = len(cells_on_disk(jupyter_server, path))
            for index, (kind, source) in enumerate(CELLS):
                await ok(client, "insert_cell", cell_index=existing + index, cell_type=kind,
                         cell_source=source)
            original = cells_on_disk(jupyter_server, path)
            assert original[existing:] == CELLS

            taken = await ok(client, "snapshot_cells", name="before")
            assert taken.structured_content == {"snapshot": "before", "cells": len(original)}

            # Edits of every kind with the core tools: overwrite, move, delete, insert.
            await ok(client, "overwrite_cell_source", cell_index=existing, cell_source="x = 100")
            await ok(client, "move_cell", source_index=existing + 3, target_index=existing)
            await ok(client, "delete_cell", cell_indices=[existing + 2])
            await ok(client, "insert_cell", cell_index=0, cell_type="raw", cell_source="intruder")
            assert cells_on_disk(jupyter_server, path) != original

            restored = await ok(client, "restore_cells", name="before")
            assert restored.structured_content == {"restored": "before", "cells": len(original)}
            # Types, sources and order, exactly.
            assert cells_on_disk(jupyter_server, path) == original

            listed = await ok(client, "list_snapshots")
            assert listed.structured_content == {"snapshots": {"before": len(original)}}
            missing = await client.call_tool("restore_cells", {"name": "nope"})
            assert missing.is_error and "there is no snapshot 'nope'" in joined(missing)

            stats = await ok(client, "notebook_stats")
            counted = stats.structured_content
            assert counted["cells"] == len(original), counted
            assert counted["by_kind"]["raw"] == 1 and counted["by_kind"]["markdown"] >= 2, counted

            # The stats grant covers "nb" only.
            other = f"ext-{uuid.uuid4().hex[:8]}.ipynb"
            await ok(client, "use_notebook", notebook_name="other", notebook_path=other, mode="create")
            refused = await client.call_tool("notebook_stats", {"notebook": "other"})
            assert refused.is_error
            assert "host function 'read-cells' on notebook 'other' is not granted to 'stats'" in \
                joined(refused), joined(refused)
            assert not (await client.call_tool("notebook_stats", {"notebook": "nb"})).is_error

            # The guide's extension; arguments are checked against its schema before it runs.
            hello = await ok(client, "hello", who="Ada")
            assert joined(hello).startswith("Hello, Ada! ("), joined(hello)
            wrong = await client.call_tool("hello", {"who": 3})
            assert wrong.is_error and "'who' must be of type string" in joined(wrong)
            greeted = await ok(client, "greet", who="Grace")
            assert joined(greeted) == "Hello, Grace!", joined(greeted)
        log = log_of(server)
        assert "refused a call to host function 'read-cells' on notebook 'other': not granted" in log
    finally:
        server.stop()


async def test_grants_and_capabilities_are_the_operators(jupyter_server, tmp_path):
    # No grants: the snapshot tools are listed but their host functions are refused.
    body = ('[capabilities]\n"declares.demo" = true\n'
            + extension_entry(guest("snapshot")) + extension_entry(guest("declares")))
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        async with http_client(server, "legacy") as client:
            names = await tool_names(client)
            assert "snapshot_cells" in names
            # Turned on by the operator: the gated tool is listed and runs.
            assert "declares_echo" in names
            echo = await ok(client, "declares_echo", said="hi")
            assert 'declares echo: {"said":"hi"}' in joined(echo)
            path = f"ext-{uuid.uuid4().hex[:8]}.ipynb"
            await ok(client, "use_notebook", notebook_name="nb", notebook_path=path, mode="create")
            refused = await client.call_tool("snapshot_cells", {})
            assert refused.is_error
            assert "host function 'read-cells' is not granted to 'snapshot'" in joined(refused)
        log = log_of(server)
        assert "refused a call to host function 'read-cells': not granted" in log, log
        assert 'add "read-cells" to grants' in log, log
    finally:
        server.stop()

    # execute-code goes through the kernel's execute path: the policy guest's hook still decides.
    body = (extension_entry(guest("policy"), {"deny": ["import subprocess"]})
            + extension_entry(guest("declares"), grants=["execute-code", "overwrite-cell", "move-cell"]))
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        async with http_client(server, "legacy") as client:
            path = f"ext-{uuid.uuid4().hex[:8]}.ipynb"
            await ok(client, "use_notebook", notebook_name="nb", notebook_path=path, mode="create")
            ran = await ok(client, "declares_run", code="print(6 * 7)")
            assert json.loads(joined(ran))[0]["text"] == "42\n", joined(ran)
            refused = await client.call_tool("declares_run", {"code": "import subprocess"})
            assert refused.is_error and "refused by hook handler 'policy'" in joined(refused), \
                joined(refused)

            # overwrite-cell and move-cell, by index, on the current notebook.
            start = len(cells_on_disk(jupyter_server, path))
            await ok(client, "insert_cell", cell_index=start, cell_type="code", cell_source="a = 1")
            await ok(client, "insert_cell", cell_index=start + 1, cell_type="markdown", cell_source="b")
            await ok(client, "declares_edit", op="overwrite", index=start, source="a = 2")
            await ok(client, "declares_edit", op="move", index=start + 1, to=start)
            assert cells_on_disk(jupyter_server, path)[start:] == [("markdown", "b"), ("code", "a = 2")]
            beyond = await client.call_tool("declares_edit", {"op": "move", "index": 99, "to": 0})
            # The domain's words, as move_cell gives them.
            assert beyond.is_error and "Source index 99 is out of range" in joined(beyond), joined(beyond)
    finally:
        server.stop()

    # The operator turns the extension's capability off: its tools are hidden and refused.
    body = ('[capabilities]\n"snapshot.cells" = false\n'
            + extension_entry(guest("snapshot"), grants=SNAPSHOT_GRANTS))
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        async with http_client(server, "legacy") as client:
            names = await tool_names(client)
            assert not {"snapshot_cells", "restore_cells", "list_snapshots"} & names, names
            refused = await client.call_tool("snapshot_cells", {})
            assert refused.is_error and "'snapshot.cells' capability, which is off" in joined(refused)
            block = json.loads((await client.read_resource("capabilities://")).contents[0].text)
            snap = next(c for c in block["declared"] if c["name"] == "snapshot.cells")
            assert snap["enabled"] is False and snap["source"] == "config", snap
    finally:
        server.stop()


async def test_snapshot_round_trip_on_the_live_backend(jupyter_server, tmp_path):
    """The default backend when the Jupyter Server has collaboration: host functions edit the
    collaboration room, and the restored cells reach the file when the room saves."""
    body = extension_entry(guest("snapshot"), grants=SNAPSHOT_GRANTS)
    server = start_http_server(["start", "--jupyter-url", jupyter_server.url, "--jupyter-token",
                                jupyter_server.token, "--config", str(write_config(tmp_path, body))])
    wait_for_log(server, GUESTS_READY, timeout=300)
    try:
        async with http_client(server, "legacy") as client:
            path = f"live-{uuid.uuid4().hex[:8]}.ipynb"
            used = await ok(client, "use_notebook", notebook_name="nb", notebook_path=path, mode="create")
            assert "live backend" in joined(used), joined(used)
            for index, (kind, source) in enumerate(CELLS):
                await ok(client, "insert_cell", cell_index=index, cell_type=kind, cell_source=source)
            taken = (await ok(client, "snapshot_cells", name="s")).structured_content
            await ok(client, "delete_cell", cell_indices=[0, 2])
            await ok(client, "insert_cell", cell_index=0, cell_type="raw", cell_source="intruder")
            restored = (await ok(client, "restore_cells", name="s")).structured_content
            assert restored == {"restored": "s", "cells": taken["cells"]}
            deadline = time.monotonic() + 15
            while True:
                try:
                    on_disk = cells_on_disk(jupyter_server, path)
                except nbformat.reader.NotJSONError:
                    on_disk = []  # read while Jupyter was writing it: look again
                if on_disk[:len(CELLS)] == CELLS and len(on_disk) == taken["cells"]:
                    break
                assert time.monotonic() < deadline, on_disk
                await anyio.sleep(0.25)
    finally:
        server.stop()


async def test_an_extension_declares_only_under_its_own_name(jupyter_server, tmp_path):
    # `declares` loads first and also claims `snapshot.cells` and `beta.on`: both refused, so the
    # real `snapshot` extension still owns its capability.
    body = extension_entry(guest("declares")) + extension_entry(guest("snapshot"), grants=SNAPSHOT_GRANTS)
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        log = log_of(server)
        for name in ("snapshot.cells", "beta.on"):
            assert (f"extension 'declares' cannot declare '{name}': an extension declares names under its "
                    f"own identity only ('declares.…')") in log, log
        async with http_client(server, "legacy") as client:
            block = json.loads((await client.read_resource("capabilities://")).contents[0].text)
            declared = {c["name"]: c["source"] for c in block["declared"]}
            assert declared.get("snapshot.cells") == "snapshot", declared
            assert declared.get("declares.demo") == "declares", declared
            assert "beta.on" not in declared and "beta.on" not in block["capabilities"]
    finally:
        server.stop()


# ---- guests get the domain's rules, exactly as tools do ----

# The guest that runs code through `execute-code`, per WIT version: (guest, tool, how it words a
# host error). 0.1.0's host-error is a string (declares answers its Debug form); the SDK's (0.3.0) is
# a typed variant (runs answers its case, then the message), and a gone kernel is a `kernel` error.
EXECUTE_CODE_GUESTS = [
    pytest.param("declares", "declares_run", None, id="wit-0.1.0"),
    pytest.param("runs", "runs_code", "kernel: ", id="wit-0.3.0"),
]


@pytest.mark.parametrize("auto_restart", [False, True])
@pytest.mark.parametrize(("name", "run_tool", "error_case"), EXECUTE_CODE_GUESTS)
async def test_guest_execute_code_follows_kernel_readiness_like_execute_cell(jupyter_server, tmp_path, auto_restart,
                                                                             name, run_tool, error_case):
    body = ('[capabilities]\n"kernel.auto-restart" = true\n' if auto_restart else "") \
        + extension_entry(guest(name), grants=["execute-code"])
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        async with http_client(server, "legacy") as client:
            kernel_id = await notebook_with_kernel(client, jupyter_server, "nb")
            await lose_kernel(jupyter_server, client, kernel_id, "deleted")
            ran = await client.call_tool(run_tool, {"code": "print(6 * 7)"})
            if not auto_restart:
                assert ran.is_error, joined(ran)
                tool = await client.call_tool("execute_cell", {"cell_index": 0})
                assert tool.is_error
                refusal = joined(tool).removeprefix("Error executing tool execute_cell: ")
                assert "The kernel of 'nb' is gone" in refusal and "restart_notebook" in refusal, refusal
                # The same domain message, its next step worded for a guest (which has no MCP
                # tools of its own to call).
                for_a_guest = refusal.replace("Call restart_notebook", "Call the agent's restart_notebook tool")
                assert for_a_guest != refusal, refusal
                assert for_a_guest in joined(ran), "the guest gets execute_cell's words, for a guest"
                if error_case:
                    # Under the prefix every failed tool's text gets, the guest's own words.
                    assert joined(ran) == f"Error executing tool {run_tool}: {error_case}{for_a_guest}", joined(ran)
                return
            assert not ran.is_error, joined(ran)
            outputs = json.loads(joined(ran))
            note = outputs[0]
            assert note["output_type"] == "stream" and note["name"] == "stderr", outputs
            assert note["text"].startswith("[KERNEL REPLACED: the kernel of 'nb'") and "new, empty kernel" in note["text"]
            assert outputs[1]["text"] == "42\n", outputs
            # The replacement is the notebook's kernel now, for tools as for guests.
            listed = joined(await ok(client, "list_notebooks"))
            new_id = next(line for line in listed.split("\n") if line.startswith("nb\t")).split("\t")[2]
            assert new_id != kernel_id and new_id in jupyter_server.kernel_ids()
            assert texts(await ok(client, "execute_cell", cell_index=0, stream=False)) == ["ran\n"]
    finally:
        server.stop()


async def test_a_guest_answer_is_bounded(jupyter_server, tmp_path):
    from harness import peak_rss_mb

    body = extension_entry(guest("declares"), memory_mb=512)
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)), "--max-output-chars", "1000")
    try:
        async with http_client(server, "legacy") as client:
            # 100 MiB of text and 8 MiB of structured content in one answer.
            result = await client.call_tool("declares_flood", {"text_mib": 100, "structured_mib": 8})
            assert not result.is_error, joined(result)[:300]
            text = joined(result)
            assert text.startswith("x" * 1000) and "x" * 1001 not in text
            assert "[OUTPUT TRUNCATED: " in text and "ask it for less" in text, text[1000:]
            assert "[structured result left out: 8388619 bytes, over the limit of 1 MiB]" in text, text[1000:]
            assert result.structured_content is None
            # A small answer keeps its structured content.
            small = await client.call_tool("declares_flood", {"text_mib": 0, "structured_mib": 0})
            assert small.structured_content == {"blob": ""}
        peak = peak_rss_mb(server.process.pid)
        print(f"peak RSS after a 100 MiB guest answer: {peak:.0f} MB")
    finally:
        server.stop()


async def test_guest_overwrite_of_a_cell_changed_since_it_read_it_is_a_conflict(jupyter_server, tmp_path):
    body = extension_entry(guest("declares"), grants=["read-cells", "execute-code", "overwrite-cell"])
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        async with http_client(server, "legacy") as client:
            path = f"race-{uuid.uuid4().hex[:8]}.ipynb"
            await ok(client, "use_notebook", notebook_name="nb", notebook_path=path, mode="create")
            await ok(client, "insert_cell", cell_index=0, cell_type="code", cell_source="x = 1")
            # A person saves the notebook between the guest's read and its overwrite (here the
            # kernel writes the file, as a second editor would).
            person = (f"import json\np = {str(jupyter_server.root / path)!r}\nnb = json.load(open(p))\n"
                      "nb['cells'][0]['source'] = 'x = 2  # a person'\njson.dump(nb, open(p, 'w'))")
            raced = await client.call_tool("declares_race", {"index": 0, "source": "x = 3", "between": person})
            assert raced.is_error, joined(raced)
            # The words a tool's edit gets when it meets someone else's change (DocumentError::Conflict).
            assert ("changed or disappeared while this edit was being saved (someone else edited the "
                    "notebook); read it again and retry") in joined(raced), joined(raced)
            assert cells_on_disk(jupyter_server, path)[0] == ("code", "x = 2  # a person"), "the person's edit stays"
            # With nothing changed between the read and the write, the same overwrite lands.
            await ok(client, "declares_race", index=0, source="x = 3", between="pass")
            assert cells_on_disk(jupyter_server, path)[0] == ("code", "x = 3")
    finally:
        server.stop()
