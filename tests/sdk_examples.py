"""The word-count example and audit hook handler every guest SDK ships (guests/README.md), driven
through the real binary and the official MCP client. Each language's test file calls these with
its suffix (`js`, `py`, ...): the guests are `wordcount-<suffix>.wasm` and `audit-<suffix>.wasm`,
their tool `word_count_<suffix>`, resources `wordcount-<suffix>://...`, prompt
`tighten_prose_<suffix>`, log lines `audit-<suffix>: ...`."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import nbformat

from conftest import extension_entry, guest, http_client, joined, log_of, serve_guests, wait_for_log, write_config

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "guests" / "README.md"
CELLS = [("markdown", "# Word count\n\nA short introduction to the notebook."),
         ("code", "total = sum(range(10))\nprint(total)"),
         ("markdown", "Three more words."),
         ("raw", "")]


def on_disk(jupyter_server, path: str) -> list[dict]:
    nb = nbformat.reads((jupyter_server.root / path).read_text(), as_version=4)
    return [{"id": c.id, "kind": c.cell_type, "words": len(c.source.split())} for c in nb.cells]


async def ok(client, tool: str, **arguments):
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} failed: {joined(result)}"
    return result


async def check_word_count(jupyter_server, tmp_path, lang: str) -> None:
    """The example extension on a real notebook, with its grant (scoped to one notebook), its
    resources and prompt, an error thrown by the guest, and the hook handler seeing the calls."""
    tool, scheme, prompt = f"word_count_{lang}", f"wordcount-{lang}", f"tighten_prose_{lang}"
    body = (extension_entry(guest(f"wordcount-{lang}"), grants=["read-cells:nb"])
            + extension_entry(guest(f"audit-{lang}")))
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        log = log_of(server)
        assert f"wordcount-{lang}.wasm (extension '{scheme}'" in log, log
        assert f"audit-{lang}.wasm (optional hook handler)" in log, log
        async with http_client(server, "legacy") as client:
            assert tool in {t.name for t in (await client.list_tools()).tools}
            path = f"wc-{lang}-{uuid.uuid4().hex[:8]}.ipynb"
            await ok(client, "use_notebook", notebook_name="nb", notebook_path=path, mode="create")
            existing = len(on_disk(jupyter_server, path))
            for index, (kind, source) in enumerate(CELLS):
                await ok(client, "insert_cell", cell_index=existing + index, cell_type=kind, cell_source=source)
            cells = on_disk(jupyter_server, path)
            expected = {"cells": len(cells), "words": sum(c["words"] for c in cells), "per_cell": cells}

            counted = await ok(client, tool)
            assert counted.structured_content == expected, counted.structured_content
            assert json.loads(joined(counted)) == expected
            second = cells[existing + 1]
            one = await ok(client, tool, cell_id=second["id"], notebook="nb")
            assert one.structured_content == {"cells": 1, "words": second["words"], "per_cell": [second]}

            # Thrown inside the guest: the caller gets the guest's message, not a trap.
            missing = await client.call_tool(tool, {"cell_id": "no-such-cell"})
            assert missing.is_error
            assert "no cell has the id 'no-such-cell'; read_notebook lists them" in joined(missing), joined(missing)
            # The instance lives on: the next call works.
            assert (await ok(client, tool)).structured_content == expected

            # The grant covers "nb" only: the host's refusal reaches the caller as the guest passed it on.
            other = f"wc-{lang}-{uuid.uuid4().hex[:8]}.ipynb"
            await ok(client, "use_notebook", notebook_name="other", notebook_path=other, mode="create")
            refused = await client.call_tool(tool, {"notebook": "other"})
            assert refused.is_error
            assert f"host function 'read-cells' on notebook 'other' is not granted to '{scheme}'" in \
                joined(refused), joined(refused)
            await ok(client, "use_notebook", notebook_name="nb", notebook_path=path)

            # Resources, a resource template and a prompt, listed and served with the core ones.
            resources = {str(r.uri): r for r in (await client.list_resources()).resources}
            assert f"{scheme}://current" in resources, resources
            assert resources[f"{scheme}://current"].mime_type == "application/json"
            read = await client.read_resource(f"{scheme}://current")
            assert json.loads(read.contents[0].text) == expected
            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
            assert f"{scheme}://cell/{{id}}" in templates, templates
            read = await client.read_resource(f"{scheme}://cell/{second['id']}")
            assert json.loads(read.contents[0].text)["per_cell"] == [second]

            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            assert [(a.name, a.required) for a in prompts[prompt].arguments] == [("limit", True)]
            longest = max((c for c in cells if c["kind"] == "markdown"), key=lambda c: c["words"])
            got = await client.get_prompt(prompt, {"limit": "5"})
            assert got.messages[0].role == "user"
            assert got.messages[0].content.text == (
                f"Rewrite markdown cell {longest['id']} ({longest['words']} words) in at most 5 words.")

        # The hook handler saw every call, before and after, with the pair's shared context.
        log = wait_for_log(server, f"audit-{lang}: tool {tool} failed: ")
        assert f"audit-{lang}: tool {tool} called with {{" in log, log
        assert f"audit-{lang}: tool {tool} succeeded (paired)" in log, log
        assert f"audit-{lang}: tool insert_cell succeeded (paired)" in log, log
        assert not re.search(r"trap|wasm backtrace", log), log
    finally:
        server.stop()


async def check_refused_without_grant(jupyter_server, tmp_path, lang: str) -> None:
    """No grant at all: the tool is listed, and its call says which grant the operator lacks."""
    body = extension_entry(guest(f"wordcount-{lang}"))
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        async with http_client(server, "legacy") as client:
            path = f"wc-{lang}-{uuid.uuid4().hex[:8]}.ipynb"
            await ok(client, "use_notebook", notebook_name="nb", notebook_path=path, mode="create")
            refused = await client.call_tool(f"word_count_{lang}", {})
            assert refused.is_error
            message = joined(refused)
            assert f"host function 'read-cells' is not granted to 'wordcount-{lang}'" in message, message
            assert 'the operator can add "read-cells" to this guest\'s grants' in message, message
        wait_for_log(server, "refused a call to host function 'read-cells'")
    finally:
        server.stop()


def guide_section(heading: str) -> str:
    """The text of guests/README.md under `## <heading>`, up to the next `## ` heading."""
    text = GUIDE.read_text()
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"guests/README.md has no section '## {heading}'"
    return match.group(1)


def code_blocks(section: str, language: str) -> list[str]:
    return [m.group(1) for m in re.finditer(rf"^ *```{language}\n(.*?)^ *```", section, re.S | re.M)]


def dedent_block(block: str) -> str:
    lines = block.split("\n")
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return "\n".join(line[indent:] for line in lines)


def check_guide_shows(heading: str, language: str, examples: list[Path], build_script: Path) -> None:
    """The guide's section shows the examples' sources exactly, and the commands the build script
    runs (so the tests load what the guide tells a reader to write and run)."""
    section = guide_section(heading)
    blocks = [dedent_block(b) for b in code_blocks(section, language)]
    for example in examples:
        assert example.read_text() in blocks, f"guests/README.md '{heading}' does not show {example} as it is"
    commands = [line.strip() for line in build_script.read_text().splitlines()
                if line.strip().startswith(("node bin/", "componentize-py "))]
    assert commands, build_script
    shell = "\n".join(dedent_block(b) for b in code_blocks(section, "sh"))
    for command in commands:
        # The script writes into its cache; the guide into the current directory.
        shown = re.sub(r'"\$cache/([^"]+)"', r"\1", command)
        assert shown in shell, f"guests/README.md '{heading}' does not give the command {shown!r}"
