"""The C and Go SDKs (guests/c, guests/go) through the real binary and the official MCP client,
each language the same way: the guide's example built exactly as guests/README.md writes it,
its tool on a real notebook with the grant and refused without it, its error path, its resource
and prompt, and the hook handler seeing events with its context carried from before to after."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import textwrap
import uuid
from pathlib import Path

import nbformat
import pytest

from conftest import (extension_entry, guest, http_client, joined, log_of, serve_guests,
                      wait_for_log, write_config)
from sdk_examples import check_pip_install_asks_the_person

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


# Reads JSON from stdin and writes the tree back with the writer, or prints the reader's error.
JSON_ECHO = r"""
#include <stdio.h>
#include <stdlib.h>
#include "jmcp_json.h"

static void echo(jmcp_writer *w, const jmcp_json *x) {
  switch (x->kind) {
    case JMCP_JSON_NULL: jmcp_w_null(w); break;
    case JMCP_JSON_BOOL: jmcp_w_bool(w, x->boolean); break;
    case JMCP_JSON_NUMBER: jmcp_w_number(w, x->number); break;
    case JMCP_JSON_STRING: jmcp_w_string_n(w, x->string, x->length); break;
    case JMCP_JSON_ARRAY:
      jmcp_w_array(w);
      for (size_t i = 0; i < x->length; i++) echo(w, &x->items[i]);
      jmcp_w_end_array(w);
      break;
    case JMCP_JSON_OBJECT:
      jmcp_w_object(w);
      for (size_t i = 0; i < x->length; i++) {
        jmcp_w_key(w, x->keys[i]);
        echo(w, &x->items[i]);
      }
      jmcp_w_end_object(w);
      break;
  }
}

int main(void) {
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof text, stdin);
  char *why = NULL;
  jmcp_json *value = jmcp_json_parse(text, n, &why);
  if (!value) {
    printf("error: %s", why);
    free(why);
    return 0;
  }
  jmcp_writer w = {0};
  echo(&w, value);
  char *out = jmcp_w_finish(&w);
  fputs(out ? out : "(writer failed)", stdout);
  free(out);
  jmcp_json_free(value);
  return 0;
}
"""


def test_c_json_helper_round_trips_and_refuses_bad_input(tmp_path):
    """The C SDK's JSON reader and writer, natively under AddressSanitizer and UBSan: what it
    reads it writes back as the same JSON; bad input is an error naming the byte, never a crash
    or a leak."""
    compiler = shutil.which("gcc") or shutil.which("clang")
    if not compiler:
        pytest.skip("no C compiler on this machine (apt-get install gcc)")
    sdk = ROOT / "guests" / "c" / "sdk"
    (tmp_path / "echo.c").write_text(JSON_ECHO)
    binary = tmp_path / "echo"
    subprocess.run([compiler, "-std=c11", "-g", "-Wall", "-Wextra", "-Werror",
                    "-fsanitize=address,undefined", "-fno-sanitize-recover=all", f"-I{sdk}",
                    "-o", str(binary), str(tmp_path / "echo.c"), str(sdk / "jmcp_json.c"), "-lm"],
                   check=True, timeout=120)

    def run(text: str) -> str:
        done = subprocess.run([str(binary)], input=text.encode(), capture_output=True, timeout=60)
        assert done.returncode == 0 and not done.stderr, done.stderr.decode(errors="replace")
        return done.stdout.decode()

    samples = [{"a": [1, 2.5, -300.0, True, False, None], "": {}, "nested": [[[{"x": []}]]]},
               "quote \" backslash \\ newline \n tab \t control \u0001 é 😀",
               [], 0, 1e300, -0.5, "", {"dup": 1, "dup2": "two"}]
    for sample in samples:
        text = json.dumps(sample)
        assert json.loads(run(text)) == sample, text
        # Escapes the reader must decode: \u with a surrogate pair, and \/.
        assert json.loads(run(json.dumps(sample, ensure_ascii=True))) == sample
    assert json.loads(run('"\\/ \\ud83d\\ude00"')) == "/ 😀"
    for bad in ["", "[", '{"a" 1}', '{"k": "v",}', "[1,]", '"unterminated', "tru", "1 2",
                '"\\x"', "{1: 2}", "[" * 100 + "]" * 100, '"\x01"', "nul\x00"]:
        out = run(bad)
        assert out.startswith("error: invalid JSON: "), (bad, out)
    # A lone surrogate cannot be UTF-8: it reads as U+FFFD rather than failing.
    assert json.loads(run('"\\ud800x"')) == "\ufffdx"


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
        assert f"audit-{language}.wasm (critical hook handler)" in log_of(server), log_of(server)
        async with http_client(server, "legacy") as client:
            listed = await client.call_tool("list_kernels", {})
            assert not listed.is_error, joined(listed)
        wait_for_log(server, f"{language}-audit: before_tool_call list_kernels")
        # The tool's name reached after_tool_call through the context the handler set.
        wait_for_log(server, f"{language}-audit: after_tool_call list_kernels ok")


async def test_hook_handler_asks_before_a_pip_install(language, jupyter_server, tmp_path):
    await check_pip_install_asks_the_person(jupyter_server, tmp_path, language)
