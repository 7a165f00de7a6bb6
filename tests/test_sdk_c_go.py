"""The C and Go SDKs (guests/c, guests/go) through the real binary and the official MCP client,
each language the same way: the guide's example built exactly as guests/README.md writes it,
its tool on a real notebook with the grant and refused without it, its error path, its resource
and prompt, and the hook handler seeing events with its context carried from before to after."""

from __future__ import annotations

import contextlib
import re
import subprocess
import textwrap
import uuid
from pathlib import Path

import nbformat
import pytest

from conftest import (extension_entry, guest, http_client, joined, log_of, serve_guests,
                      wait_for_log, write_config)

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "guests" / "README.md"
# language: (its section in the guide, the example's code-block tag, the example's file)
LANGUAGES = {"c": ("C", "c", ROOT / "guests" / "c" / "wordcount" / "wordcount.c"),
             "go": ("Go", "go", ROOT / "guests" / "go" / "wordcount" / "wordcount.go")}
CELLS = [("code", "x = 1 + 2\nprint(x)"), ("markdown", "# Counting\n\nSome words, then more words."),
         ("raw", "raw text here"), ("code", "")]


def guide_section(title: str) -> str:
    text = GUIDE.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def code_blocks(section: str, language: str) -> list[str]:
    return [textwrap.dedent(block) for block in
            re.findall(rf"^ *```{language}\n(.*?)^ *```", section, re.S | re.M)]


@pytest.fixture(params=sorted(LANGUAGES))
def language(request) -> str:
    return request.param


def test_the_guide_shows_the_example_that_is_built(language):
    title, tag, example = LANGUAGES[language]
    (shown,) = code_blocks(guide_section(title), tag)
    assert shown == example.read_text(), f"guests/README.md's {title} example and {example} differ"


BUILT: dict[str, Path] = {}


@pytest.fixture
def built_as_written(language, tmp_path_factory) -> Path:
    """The guide's example and build command, run as written in a folder of their own (once per
    language and session)."""
    if language not in BUILT:
        title, tag, example = LANGUAGES[language]
        section = guide_section(title)
        (source,) = code_blocks(section, tag)
        (commands,) = code_blocks(section, "sh")
        work = tmp_path_factory.mktemp(f"{language}-guide")
        (work / example.name).write_text(source)
        for command in commands.strip().splitlines():
            assert command.startswith(f"guests/{language}/"), command
            subprocess.run(str(ROOT) + "/" + command, shell=True, cwd=work, check=True, timeout=900)
        BUILT[language] = work / "wordcount.wasm"
    return BUILT[language]


@contextlib.contextmanager
def served(jupyter_server, tmp_path, body: str):
    """Our server with these [[extension]] entries, once its guests have loaded."""
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        yield server
    finally:
        server.stop()


def words_on_disk(jupyter_server, path, kind=None):
    nb = nbformat.reads((jupyter_server.root / path).read_text(), as_version=4)
    return [{"id": c.id, "words": len(c.source.split())} for c in nb.cells
            if kind is None or c.cell_type == kind]


async def test_word_count_on_a_real_notebook(language, jupyter_server, tmp_path, built_as_written):
    # Scoped grant: the notebook in use as "nb" may be read, no other.
    body = extension_entry(built_as_written, grants=["read-cells:nb"])
    with served(jupyter_server, tmp_path, body) as server:
        assert f"(extension 'wordcount-{language}'" in log_of(server), log_of(server)
        async with http_client(server, "legacy") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tools["word_count"].annotations.read_only_hint is True

            path = f"wc-{uuid.uuid4().hex[:8]}.ipynb"
            await client.call_tool("use_notebook", {"notebook_name": "nb", "notebook_path": path,
                                                    "mode": "create"})
            for kind, source in CELLS:
                inserted = await client.call_tool("insert_cell", {"cell_index": -1, "cell_type": kind,
                                                                  "cell_source": source})
                assert not inserted.is_error, joined(inserted)

            counted = await client.call_tool("word_count", {})
            assert not counted.is_error, joined(counted)
            cells = words_on_disk(jupyter_server, path)
            total = sum(c["words"] for c in cells)
            assert total >= 14
            assert joined(counted) == f"{total} words in {len(cells)} cells"
            assert counted.structured_content == {"cells": cells, "words": total}

            code = await client.call_tool("word_count", {"notebook": "nb", "kind": "code"})
            code_cells = words_on_disk(jupyter_server, path, "code")
            assert code.structured_content["cells"] == code_cells, code.structured_content

            # A host error passed on by the guest: a clean message, and the server keeps serving.
            missing = await client.call_tool("word_count", {"notebook": "nope"})
            assert missing.is_error
            message = joined(missing)
            assert "nope" in message and "wasm backtrace" not in message and "trap" not in message, message

            # Not granted: the scoped grant covers "nb" only.
            other = f"wc-{uuid.uuid4().hex[:8]}.ipynb"
            await client.call_tool("use_notebook", {"notebook_name": "other", "notebook_path": other,
                                                    "mode": "create"})
            refused = await client.call_tool("word_count", {"notebook": "other"})
            assert refused.is_error
            assert "read-cells" in joined(refused) and "not granted" in joined(refused), joined(refused)
            again = await client.call_tool("word_count", {"notebook": "nb"})
            assert not again.is_error and again.structured_content["words"] == total

            # The schema is the guest's, checked by the host before the guest runs.
            wrong = await client.call_tool("word_count", {"kind": "prose"})
            assert wrong.is_error

            # The resource and the prompt, through the core MCP paths.
            resources = {str(r.uri): r for r in (await client.list_resources()).resources}
            assert f"wordcount-{language}://rules" in resources, resources
            read = await client.read_resource(f"wordcount-{language}://rules")
            assert read.contents[0].text.startswith("A word is a run of characters"), read
            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            assert [a.name for a in prompts["trim_to_words"].arguments] == ["limit"]
            prompt = await client.get_prompt("trim_to_words", {"limit": "120"})
            assert "at most 120 words" in prompt.messages[0].content.text, prompt


async def test_word_count_without_the_grant(language, jupyter_server, tmp_path):
    body = extension_entry(guest(f"wordcount-{language}"))
    with served(jupyter_server, tmp_path, body) as server:
        async with http_client(server, "legacy") as client:
            await client.call_tool("use_notebook", {"notebook_name": "nb", "mode": "create",
                                                    "notebook_path": f"wc-{uuid.uuid4().hex[:8]}.ipynb"})
            refused = await client.call_tool("word_count", {})
            assert refused.is_error
            assert "read-cells" in joined(refused) and "not granted" in joined(refused), joined(refused)
        wait_for_log(server, "not granted")


async def test_hook_handler_sees_events(language, jupyter_server, tmp_path):
    body = extension_entry(guest(f"audit-{language}"))
    with served(jupyter_server, tmp_path, body) as server:
        assert f"audit-{language}.wasm (optional hook handler)" in log_of(server), log_of(server)
        async with http_client(server, "legacy") as client:
            listed = await client.call_tool("list_kernels", {})
            assert not listed.is_error, joined(listed)
        wait_for_log(server, f"{language}-audit: before_tool_call list_kernels")
        # The tool's name reached after_tool_call through the context the handler set.
        wait_for_log(server, f"{language}-audit: after_tool_call list_kernels ok")
