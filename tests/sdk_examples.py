"""The word-count example (the same in every language: guests/README.md) and the audit hook handler
each guest SDK ships, driven through the real binary and the official MCP client. Each language's
test file calls these with its suffix (`js`, `py`, `c`, `go`): the guests are
`wordcount-<suffix>.wasm` and `audit-<suffix>.wasm`, loaded as `wordcount-<suffix>` (the
example's name comes from its config), the JS and Python audit handlers' log lines start
`audit-<suffix>: `. Every audit handler asks the person (a hook reply's `confirm`) before code
that installs packages with pip runs: `check_pip_install_asks_the_person` is the same for all
four."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import nbformat


from conftest import (Person, extension_entry, guest, http_client, joined, log_of, serve_guests, wait_for_log,
                      write_config)

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "guests" / "README.md"
CELLS = [("markdown", "# Word count\n\nA short introduction to the notebook."),
         ("code", "total = sum(range(10))\nprint(total)"),
         ("markdown", "Three more words."),
         ("raw", "raw cells are not counted")]


def on_disk(jupyter_server, path: str) -> list:
    return nbformat.reads((jupyter_server.root / path).read_text(), as_version=4).cells


def counts_of(cells) -> dict:
    """What word_count must answer: markdown and code cells, raw ones left out."""
    per_cell = [{"id": c.id, "index": i, "kind": c.cell_type, "words": len(c.source.split())}
                for i, c in enumerate(cells) if c.cell_type != "raw"]
    total = {kind: sum(c["words"] for c in per_cell if c["kind"] == kind) for kind in ("markdown", "code")}
    return {**total, "total": total["markdown"] + total["code"], "cells": per_cell}


async def ok(client, tool: str, **arguments):
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} failed: {joined(result)}"
    return result


async def check_word_count(jupyter_server, tmp_path, lang: str) -> None:
    """The example extension on a real notebook, with its grants (read scoped to one notebook):
    counts, an edit by cell id that meets someone else's change as a conflict, errors thrown by
    the guest arriving as messages, resources, a template and a prompt, its own hook (execution)
    and the audit handler seeing every call."""
    name = f"wordcount-{lang}"
    body = (extension_entry(guest(name), config={"name": name}, grants=["read-cells:nb", "overwrite-cell"])
            + extension_entry(guest(f"audit-{lang}")))
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        log = log_of(server)
        assert re.search(rf"loaded wasm guest \S*{name}\.wasm .*\(extension '{name}', 2 tools\)", log), log
        assert f"audit-{lang}.wasm (critical hook handler)" in log, log
        async with http_client(server, "legacy") as client:
            assert {"word_count", "replace_word"} <= {t.name for t in (await client.list_tools()).tools}
            path = f"wc-{lang}-{uuid.uuid4().hex[:8]}.ipynb"
            await ok(client, "use_notebook", notebook_name="nb", notebook_path=path, mode="create")
            existing = len(on_disk(jupyter_server, path))
            for index, (kind, source) in enumerate(CELLS):
                await ok(client, "insert_cell", cell_index=existing + index, cell_type=kind, cell_source=source)
            expected = counts_of(on_disk(jupyter_server, path))

            counted = await ok(client, "word_count")
            assert counted.structured_content == expected, counted.structured_content
            assert json.loads(joined(counted)) == expected

            # An edit of one cell by id, whole words only.
            target = on_disk(jupyter_server, path)[existing + 2]
            replaced = await ok(client, "replace_word", cell_id=target.id, word="more", replacement="fewer")
            assert joined(replaced) == f"replaced 1 occurrence(s) of 'more' in cell {target.id}", joined(replaced)
            assert on_disk(jupyter_server, path)[existing + 2].source == "Three fewer words."
            # Someone else's change since the caller read the cell is refused, never overwritten.
            stale = await client.call_tool("replace_word", {"cell_id": target.id, "word": "Three",
                                                            "replacement": "3", "expected_source": "Three more words."})
            assert stale.is_error and "changed" in joined(stale).lower(), joined(stale)
            assert on_disk(jupyter_server, path)[existing + 2].source == "Three fewer words."

            # Thrown inside the guest (an Error in JS, an exception in Python): the caller gets the
            # guest's message, not a trap, and the next call works.
            empty = await client.call_tool("replace_word", {"cell_id": target.id, "word": " ", "replacement": "x"})
            assert empty.is_error and "'word' is empty; name the word to replace" in joined(empty), joined(empty)
            missing = await client.call_tool("replace_word", {"cell_id": "no-such-cell", "word": "a", "replacement": "b"})
            assert missing.is_error and "no-such-cell" in joined(missing), joined(missing)
            expected = counts_of(on_disk(jupyter_server, path))
            assert (await ok(client, "word_count")).structured_content == expected

            # The read grant covers "nb" only: the host's refusal reaches the caller as the guest passed it on.
            other = f"wc-{lang}-{uuid.uuid4().hex[:8]}.ipynb"
            await ok(client, "use_notebook", notebook_name="other", notebook_path=other, mode="create")
            refused = await client.call_tool("word_count", {"notebook": "other"})
            assert refused.is_error
            assert f"host function 'read-cells' on notebook 'other' is not granted to '{name}'" in \
                joined(refused), joined(refused)
            await ok(client, "use_notebook", notebook_name="nb", notebook_path=path)

            # Resources, a resource template and a prompt, listed and served with the core ones.
            resources = {str(r.uri): r for r in (await client.list_resources()).resources}
            assert resources["wordcount://current"].mime_type == "application/json", resources
            read = await client.read_resource("wordcount://current")
            assert json.loads(read.contents[0].text) == expected
            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
            assert "wordcount://notebooks/{name}" in templates, templates
            read = await client.read_resource("wordcount://notebooks/nb")
            assert json.loads(read.contents[0].text) == expected

            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            assert [(a.name, a.required) for a in prompts["word_budget"].arguments] == [
                ("budget", True), ("notebook", False)]
            got = await client.get_prompt("word_budget", {"budget": "3"})
            assert got.messages[0].role == "user"
            assert got.messages[0].content.text == (
                f"The notebook's markdown has {expected['markdown']} words (code: {expected['code']}); the "
                f"budget is 3. Cut {expected['markdown'] - 3} words. Keep every code cell as it is.")

            # Its own hook: the words of code each execution sends to a kernel.
            ran = await ok(client, "execute_code", code="print(6 * 7)")
            assert "42" in joined(ran)

        log = wait_for_log(server, f"{len('print(6 * 7)'.split())} words of code sent to kernel ")
        # The audit handler saw every call, before and after, with the pair's shared context.
        log = wait_for_log(server, f"audit-{lang}: tool replace_word failed: ")
        assert f"audit-{lang}: tool word_count called with {{" in log, log
        assert f"audit-{lang}: tool word_count succeeded (paired)" in log, log
        assert f"audit-{lang}: tool insert_cell succeeded (paired)" in log, log
        assert not re.search(r"trap|wasm backtrace", log), log
    finally:
        server.stop()


async def defined(client, name: str) -> bool:
    """Whether the default kernel holds `name` (code without pip runs unasked)."""
    result = await ok(client, "execute_code", code=f"print({name!r} in globals())")
    return joined(result).strip() == "True"


async def check_pip_install_asks_the_person(jupyter_server, tmp_path, lang: str) -> None:
    """The audit handler answers a `%pip install` (or `!pip install`) with a confirmation: the host
    asks the person through the official client's elicitation callback, the code runs on a yes
    (checked in the kernel), and on a no, or with a client that cannot ask, nothing runs and the
    error says who refused. Other code runs without a question."""
    handler = f"audit-{lang}"
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, extension_entry(guest(handler)))))
    # Installs nothing and needs no network; the line before it shows whether the cell ran.
    pip = "%pip install --no-index --find-links . no-such-package-here"
    try:
        assert f"{handler}.wasm (critical hook handler)" in log_of(server), log_of(server)
        person = Person()
        async with http_client(server, "legacy", elicitation_callback=person) as client:
            assert await defined(client, "nothing_here") is False
            assert person.questions == [], person.questions

            ran = await client.call_tool("execute_code", {"code": f"accepted_{lang} = 42\n{pip}"})
            assert not ran.is_error, joined(ran)
            (question,) = person.questions
            assert question.startswith("Run this code in kernel "), question
            assert f"(Asked by hook handler '{handler}': the code installs packages with pip.)" in question, question
            assert pip in question, question
            assert await defined(client, f"accepted_{lang}")

            for answer, said in (("decline", "the person declined"), ("cancel", "the person cancelled the question")):
                person.next = answer
                refused = await client.call_tool("execute_code", {"code": f"{answer}d_{lang} = 1\n!pip install x"})
                assert refused.is_error, joined(refused)
                text = joined(refused)
                assert f"refused by hook handler '{handler}': Nothing ran in kernel " in text, text
                assert f"{said} (hook handler '{handler}' asked them first)" in text, text
                person.next = "accept"
                assert not await defined(client, f"{answer}d_{lang}"), f"the {answer}d code ran"
            assert len(person.questions) == 3, person.questions

        # A client without elicitation: nobody can say yes, so nothing runs, and the error says why.
        async with http_client(server, "legacy") as client:
            refused = await client.call_tool("execute_code", {"code": f"unasked_{lang} = 1\n{pip}"})
            assert refused.is_error, joined(refused)
            text = joined(refused)
            assert f"hook handler '{handler}' needs a person's yes before code runs" in text, text
            assert "elicitation" in text, text
            assert not await defined(client, f"unasked_{lang}")
        assert not re.search(r"trap|wasm backtrace", log_of(server)), log_of(server)
    finally:
        server.stop()


async def check_refused_without_grant(jupyter_server, tmp_path, lang: str) -> None:
    """No grant at all: the tool is listed, and its call says which grant the operator lacks."""
    body = extension_entry(guest(f"wordcount-{lang}"), config={"name": f"wordcount-{lang}"})
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        async with http_client(server, "legacy") as client:
            path = f"wc-{lang}-{uuid.uuid4().hex[:8]}.ipynb"
            await ok(client, "use_notebook", notebook_name="nb", notebook_path=path, mode="create")
            refused = await client.call_tool("word_count", {})
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
