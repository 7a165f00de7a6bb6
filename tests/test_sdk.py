"""WIT 0.3.0 guests built with the Rust SDK (`guests/sdk`), through the real binary and the official
MCP client: the word-count example (a tool with a derived schema and structured output, a cell
edit by id that meets someone else's change as a conflict, a resource, a resource template and a
prompt served through the core paths on every transport and protocol era, list_changed as it
loads, its hook handler), the policy hook handler ported to the SDK, a guest newer than the host
refused, and resource/prompt clashes refused."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import anyio
import nbformat
import pytest
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged

from conftest import (MODERN, MODES, TRANSPORTS, client_for, extension_entry, guest, http_client, joined, log_of,
                      serve_guests, toml_str, wait_for_log, write_config)

pytestmark = pytest.mark.anyio

WORDCOUNT_GRANTS = ["read-cells", "overwrite-cell"]
# What a 2026-07-28 subscription yields, by the notification that carried it.
LISTENED = {ResourcesListChanged: "notifications/resources/list_changed",
            PromptsListChanged: "notifications/prompts/list_changed"}
MARKDOWN = "# Counting words\n\nThree more words."
CODE = "total = 1 + 2\nprint(total)"


async def ok(client, tool, **arguments):
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} failed: {joined(result)}"
    return result


def source_on_disk(jupyter_server, path, index):
    nb = nbformat.reads((jupyter_server.root / path).read_text(), as_version=4)
    return nb.cells[index].source


async def notebook_with_prose(client, name="wc"):
    path = f"wc-{uuid.uuid4().hex[:8]}.ipynb"
    await ok(client, "use_notebook", notebook_name=name, notebook_path=path, mode="create")
    await ok(client, "insert_cell", cell_index=0, cell_type="markdown", cell_source=MARKDOWN)
    await ok(client, "insert_cell", cell_index=1, cell_type="code", cell_source=CODE)
    await ok(client, "insert_cell", cell_index=2, cell_type="raw", cell_source="not counted at all")
    return path


def expected_counts():
    markdown, code = len(MARKDOWN.split()), len(CODE.split())
    return markdown, code, markdown + code


async def test_wordcount_example_counts_edits_by_id_and_handles_hooks(jupyter_server, tmp_path):
    body = (extension_entry(guest("wordcount"), grants=WORDCOUNT_GRANTS)
            + extension_entry(guest("policy"), config={"deny": ["import subprocess"]}))
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        log = log_of(server)
        assert "wordcount.wasm (optional hook handler) (extension 'wordcount', 2 tools)" in log, log
        assert "policy.wasm (critical hook handler)" in log, log
        # The guest read the host's API version through host-info.
        assert "wordcount runs on jupyter-mcp API 0.3.0" in log, log
        async with http_client(server, "legacy") as client:
            path = await notebook_with_prose(client)
            tools = {t.name: t for t in (await client.list_tools()).tools}
            # The input schema is derived from the Rust type (doc comments included).
            schema = tools["replace_word"].input_schema
            assert schema["type"] == "object" and schema["required"] == ["cell_id", "word", "replacement"]
            assert "someone changed the cell since" in schema["properties"]["expected_source"]["description"]
            assert tools["word_count"].output_schema["type"] == "object"

            counted = await ok(client, "word_count")
            counts = counted.structured_content
            markdown, code, total = expected_counts()
            assert (counts["markdown"], counts["code"], counts["total"]) == (markdown, code, total), counts
            assert [c["kind"] for c in counts["cells"]] == ["markdown", "code"], "raw cells are not counted"
            code_id = counts["cells"][1]["id"]
            assert counts["cells"][1]["index"] == 1

            # An edit by cell id, whatever index the cell has now.
            await ok(client, "insert_cell", cell_index=0, cell_type="markdown", cell_source="Moved down.")
            replaced = await ok(client, "replace_word", cell_id=code_id, word="total", replacement="sum")
            assert "replaced 2 occurrence(s) of 'total'" in joined(replaced), joined(replaced)
            assert source_on_disk(jupyter_server, path, 2) == "sum = 1 + 2\nprint(sum)"

            # Someone else changes the cell after the caller read it: the guest's overwrite with
            # the source the caller saw is a conflict (the tool's words), and nothing is lost.
            seen = "sum = 1 + 2\nprint(sum)"
            await ok(client, "overwrite_cell_source", cell_index=2, cell_source="sum = 40 + 2  # a person\nprint(sum)")
            raced = await client.call_tool("replace_word", {"cell_id": code_id, "word": "sum", "replacement": "s",
                                                            "expected_source": seen})
            assert raced.is_error, joined(raced)
            assert ("changed or disappeared while this edit was being saved (someone else edited the "
                    "notebook); read it again and retry") in joined(raced), joined(raced)
            assert source_on_disk(jupyter_server, path, 2) == "sum = 40 + 2  # a person\nprint(sum)"
            # With the source as it is now, the same edit lands.
            await ok(client, "replace_word", cell_id=code_id, word="sum", replacement="s",
                     expected_source="sum = 40 + 2  # a person\nprint(sum)")
            assert source_on_disk(jupyter_server, path, 2) == "s = 40 + 2  # a person\nprint(s)"

            # A host error passed on with `?`: an unknown id is named.
            missing = await client.call_tool("replace_word", {"cell_id": "no-such-cell", "word": "a", "replacement": "b"})
            assert missing.is_error and "No cell 'no-such-cell' in this notebook" in joined(missing), joined(missing)
            # Arguments that do not fit the derived schema are refused before the guest runs.
            wrong = await client.call_tool("replace_word", {"cell_id": code_id, "word": 3, "replacement": "b"})
            assert wrong.is_error and "'word' must be of type string" in joined(wrong), joined(wrong)

            # The hook handler sees executions; the ported policy still refuses denied code.
            ran = await ok(client, "execute_code", code="x = 2")
            wait_for_log(server, "3 words of code sent to kernel")
            denied = await client.call_tool("execute_code", {"code": "import subprocess"})
            assert denied.is_error and "does not allow code containing \"import subprocess\"" in joined(denied), \
                joined(denied)
            assert ran is not None
    finally:
        server.stop()


async def test_wordcount_calls_are_refused_without_their_grants(jupyter_server, tmp_path):
    # read-cells only: the edit's overwrite is refused with the grant named.
    body = extension_entry(guest("wordcount"), grants=["read-cells"])
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        async with http_client(server, "legacy") as client:
            await notebook_with_prose(client)
            code_id = (await ok(client, "word_count")).structured_content["cells"][1]["id"]
            refused = await client.call_tool("replace_word", {"cell_id": code_id, "word": "total", "replacement": "t"})
            assert refused.is_error and "host function 'overwrite-cell' is not granted to 'wordcount'" in joined(refused)
    finally:
        server.stop()
    # overwrite-cell only: read-cell needs read-cells, as read-cells does.
    body = extension_entry(guest("wordcount"), grants=["overwrite-cell"])
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        async with http_client(server, "legacy") as client:
            await notebook_with_prose(client)
            for tool, arguments in (("word_count", {}),
                                    ("replace_word", {"cell_id": "any", "word": "a", "replacement": "b"})):
                refused = await client.call_tool(tool, arguments)
                assert refused.is_error and "host function 'read-cells' is not granted to 'wordcount'" \
                    in joined(refused), joined(refused)
    finally:
        server.stop()


def test_a_guests_prompt_needs_what_its_code_may_touch(jupyter_server, tmp_path):
    """Behind a grant (here the Jupyter extension's scopes header; OAuth scopes are the same view):
    the core prompt needs notebooks:read, a guest's prompt, which runs guest code, notebooks:write,
    and cancelling a task, which interrupts a kernel, code:execute."""
    import urllib.error
    import urllib.request

    body = extension_entry(guest("wordcount"), grants=WORDCOUNT_GRANTS)
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))

    def ask(method: str, params: dict, scopes: str) -> tuple[int, str]:
        meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}}
        request = urllib.request.Request(server.mcp_url, data=json.dumps({
            "jsonrpc": "2.0", "id": 5, "method": method, "params": {**params, "_meta": meta}}).encode(), headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {server.token}", "MCP-Protocol-Version": MODERN, "Mcp-Method": method,
            **({"Mcp-Name": params["name"]} if "name" in params else {}), "X-Jupyter-MCP-Scopes": scopes})
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    try:
        guest_prompt = ("prompts/get", {"name": "word_budget", "arguments": {"budget": "2"}})
        status, text = ask(*guest_prompt, "notebooks:read")
        assert status == 403 and "'write on contents'" in text and "notebooks:write" in text, text
        status, text = ask(*guest_prompt, "notebooks:read notebooks:write")
        assert status == 200, text
        core_prompt = ("prompts/get", {"name": "jupyter_cite", "arguments": {"prompt": "x", "cell_indices": "0"}})
        status, text = ask(*core_prompt, "code:execute")
        assert status == 403 and "'read on contents'" in text, text
        status, text = ask("tasks/cancel", {"taskId": "none"}, "notebooks:read notebooks:write")
        assert status == 403 and "'execute on kernels'" in text, text
    finally:
        server.stop()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_guest_resources_and_prompts_through_the_core_paths(jupyter_server, tmp_path, transport, mode):
    config = write_config(tmp_path, extension_entry(guest("wordcount"), grants=WORDCOUNT_GRANTS))
    async with client_for(jupyter_server, mode, "--document-backend", "file", "--config", str(config),
                          transport=transport) as client:
        await notebook_with_prose(client, name="prose")
        # The guest may still be compiling on a cold cache: its entries join when it is ready.
        with anyio.fail_after(300):
            while "wordcount://current" not in [str(r.uri) for r in
                                                (await client.list_resources(cache_mode="bypass")).resources]:
                await anyio.sleep(0.1)
        listed = {str(r.uri): r for r in (await client.list_resources(cache_mode="bypass")).resources}
        assert "capabilities://" in listed and "notebook://prose" in listed, "the core's stay"
        assert listed["wordcount://current"].mime_type == "application/json"
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        assert "wordcount://notebooks/{name}" in templates and "notebook://{name}" in templates

        markdown, code, total = expected_counts()
        current = (await client.read_resource("wordcount://current", cache_mode="bypass")).contents[0]
        assert current.mime_type == "application/json"
        assert json.loads(current.text)["total"] == total
        # A URI of the template, served by the guest.
        named = (await client.read_resource("wordcount://notebooks/prose", cache_mode="bypass")).contents[0]
        assert str(named.uri) == "wordcount://notebooks/prose"
        assert json.loads(named.text)["markdown"] == markdown
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("wordcount://notebooks/nope", cache_mode="bypass")
        assert "Notebook 'nope' is not connected" in unknown.value.error.message
        # A guest cannot open a notebook: its message names the step as the agent's tool.
        assert "Call the agent's use_notebook tool to open it" in unknown.value.error.message

        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert "jupyter_cite" in prompts, "the core's prompt stays"
        budget = prompts["word_budget"]
        assert [(a.name, a.required) for a in budget.arguments] == [("budget", True), ("notebook", False)]
        got = await client.get_prompt("word_budget", {"budget": "2"})
        assert got.description == "Bring the notebook's prose within its word budget"
        text = got.messages[0].content.text
        assert got.messages[0].role == "user"
        assert f"markdown has {markdown} words (code: {code}); the budget is 2. Cut {markdown - 2} words." in text
        with pytest.raises(MCPError) as bad:
            await client.get_prompt("word_budget", {"budget": "many"})
        assert "'budget' must be a whole number of words" in bad.value.error.message
        with pytest.raises(MCPError):
            await client.get_prompt("no_such_prompt", {})


@pytest.mark.parametrize("mode", MODES)
async def test_resources_and_prompts_joining_are_announced(jupyter_server, tmp_path, mode):
    """A cold compile cache: the session starts before the guest is ready, so its resources,
    template and prompt join later; a 2025-11-25 session hears resources/list_changed and
    prompts/list_changed, a 2026-07-28 one when it listens for them."""
    config = tmp_path / "cold.toml"
    config.write_text(f"cache_dir = {toml_str(tmp_path / 'cold-cache')}\n"
                      + extension_entry(guest("wordcount"), grants=WORDCOUNT_GRANTS))
    wanted = {"notifications/resources/list_changed", "notifications/prompts/list_changed"}
    heard: list[str] = []

    async def on_message(message):
        method = getattr(getattr(message, "root", message), "method", None)
        if method:
            heard.append(method)

    async def not_listed_yet(client):
        first = [str(r.uri) for r in (await client.list_resources(cache_mode="bypass")).resources]
        assert "wordcount://current" not in first, "the guest was ready before the session listened"

    async with client_for(jupyter_server, mode, "--config", str(config), message_handler=on_message) as client:
        if mode == "legacy":
            assert client.server_capabilities.resources.list_changed is True
            assert client.server_capabilities.prompts.list_changed is True
            # The session's watchers started with it (notifications/initialized).
            await not_listed_yet(client)
            with anyio.fail_after(300):
                while not wanted <= set(heard):
                    await anyio.sleep(0.05)
        else:
            async with client.listen(resources_list_changed=True, prompts_list_changed=True) as subscription:
                await not_listed_yet(client)
                with anyio.fail_after(300):
                    while not wanted <= set(heard):
                        event = await subscription.__anext__()
                        heard.append(LISTENED.get(type(event), repr(event)))
        assert "wordcount://current" in [str(r.uri) for r in
                                         (await client.list_resources(cache_mode="bypass")).resources]
        assert "wordcount://notebooks/{name}" in [t.uri_template for t in
                                                  (await client.list_resource_templates()).resource_templates]
        assert "word_budget" in [p.name for p in (await client.list_prompts()).prompts]


def test_a_guest_newer_than_the_host_is_refused_with_both_versions(jupyter_server, tmp_path):
    body = extension_entry(guest("too-new")) + extension_entry(guest("wordcount"), grants=WORDCOUNT_GRANTS)
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        log = log_of(server)
        assert ("too-new.wasm: it was built against WIT jupyter-mcp:extension@0.4.0, newer than this "
                "server's API version 0.3.0") in log, log
        assert "upgrade jupyter-mcp-server to a release that implements 0.4.0, or rebuild the guest against " \
               "wit/v0.3.0" in log, log
        # The others load and the server serves.
        assert "(extension 'wordcount', 2 tools)" in log, log
    finally:
        server.stop()


async def test_resource_and_prompt_clashes_are_refused(jupyter_server, tmp_path):
    """The same extension under another name claims the same URIs and prompt: the first keeps
    them, the second's are refused at load with the holder named."""
    again = tmp_path / "wordcount-again.wasm"
    shutil.copy(guest("wordcount"), again)
    body = (extension_entry(guest("wordcount"), grants=WORDCOUNT_GRANTS)
            + extension_entry(again, config={"name": "wordcount2"}))
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        log = log_of(server)
        for what in ("resource 'wordcount://current'", "resource template 'wordcount://notebooks/{name}'",
                     "prompt 'word_budget'"):
            assert f"refused {what} of extension 'wordcount2': it is taken by extension 'wordcount'" in log, log
        assert "refused tool 'word_count' of extension 'wordcount2': the name is taken by extension 'wordcount'" in log
        async with http_client(server, "legacy") as client:
            listed = [str(r.uri) for r in (await client.list_resources()).resources]
            assert listed.count("wordcount://current") == 1
            # A core URI scheme or prompt name can never be an extension's.
            assert "capabilities://" in listed
    finally:
        server.stop()


def test_the_guides_rust_example_is_the_one_built_and_tested():
    root = guest("wordcount").parent  # only to fail clearly without built guests
    assert root.exists()
    repo = Path(__file__).resolve().parent.parent
    section = (repo / "guests" / "README.md").read_text().split("\n## Rust\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```rust\n", 1)[1].split("```", 1)[0]
    # The guide indents the code under its list item.
    code = "\n".join(line[3:] if line.startswith("   ") else line for line in block.splitlines())
    assert code.strip() == (repo / "guests" / "wordcount" / "src" / "lib.rs").read_text().strip()
