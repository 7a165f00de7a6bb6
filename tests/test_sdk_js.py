"""The JavaScript SDK (guests/js): its word-count example and audit hook handler, built from
source by guests/build, in the real server; its typings are jco's, fresh from the WIT; the guide's
JavaScript section shows the example and the build commands as they are run."""

from __future__ import annotations

import filecmp
import shutil
import subprocess
from pathlib import Path

import mcp.types as types
import pytest

from conftest import extension_entry, guest, http_client, joined, serve_guests, write_config
from sdk_examples import (ROOT, check_guide_shows, check_pip_install_asks_the_person, check_refused_without_grant,
                          check_word_count)

pytestmark = pytest.mark.anyio
JS = ROOT / "guests" / "js"


def toolchain() -> Path:
    """The pinned toolchain (guests/build installed it; this is a no-op then)."""
    if shutil.which("node") is None:
        pytest.fail("node is required for the JavaScript SDK (tests/run puts it on PATH)")
    subprocess.run([JS / "ensure-toolchain"], check=True, capture_output=True)
    return JS / "node_modules"


async def test_word_count_and_audit_in_javascript(jupyter_server, tmp_path):
    await check_word_count(jupyter_server, tmp_path, "js")


async def test_the_javascript_audit_handler_asks_before_a_pip_install(jupyter_server, tmp_path):
    await check_pip_install_asks_the_person(jupyter_server, tmp_path, "js")


async def test_javascript_word_count_is_refused_without_its_grant(jupyter_server, tmp_path):
    await check_refused_without_grant(jupyter_server, tmp_path, "js")


async def test_javascript_guest_asks_the_person_and_the_model_through_the_client(jupyter_server, tmp_path):
    """The SDK's elicit and sample (guests/tests/ask-js) answered by the official client's
    callbacks, and the same calls from a client without them: the typed `unsupported-by-client`
    error, handled by the guest with its fallback."""
    asked, sampled = [], []

    async def person(context, params) -> types.ElicitResult:
        asked.append((params.message, params.requested_schema))
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def model(context, params) -> types.CreateMessageResult:
        sampled.append(params)
        return types.CreateMessageResult(role="assistant", model="test-model", stop_reason="endTurn",
                                         content=types.TextContent(type="text", text="four"))

    body = extension_entry(guest("ask-js"), grants=["elicit", "sample"])
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))
    try:
        async with http_client(server, "legacy", elicitation_callback=person, sampling_callback=model) as client:
            named = await client.call_tool("ask_name", {})
            assert not named.is_error and joined(named) == "hello, Ada", joined(named)
            ((message, schema),) = asked
            assert message == "What is your name?" and schema["required"] == ["name"], (message, schema)
            answered = await client.call_tool("ask_model", {"question": "2 + 2?"})
            assert not answered.is_error and joined(answered) == "test-model said: four", joined(answered)
            (params,) = sampled
            assert params.max_tokens == 50 and params.messages[0].content.text == "2 + 2?", params
        async with http_client(server, "legacy") as client:
            for tool, arguments, what in (("ask_name", {}, "elicitation"), ("ask_model", {"question": "?"}, "sampling")):
                fallback = await client.call_tool(tool, arguments)
                assert not fallback.is_error, joined(fallback)
                assert joined(fallback).startswith("this client cannot answer: "), joined(fallback)
                assert what in joined(fallback), joined(fallback)
    finally:
        server.stop()


def test_sdk_unit_tests_under_node():
    """The SDK and the examples under plain Node with the host stubbed (guests/js/test): every
    kind of thrown value, defaults, resources, prompts, hooks, logging."""
    toolchain()
    ran = subprocess.run(["node", "--import", "./test/register.mjs", "--test", "test/sdk.test.mjs"], cwd=JS,
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "# pass 6" in ran.stdout and "# fail 0" in ran.stdout, ran.stdout


def test_typings_are_generated_from_the_wit(tmp_path):
    toolchain()
    subprocess.run(["node", "bin/jupyter-mcp-js.mjs", "types", str(tmp_path / "types")], cwd=JS, check=True,
                   capture_output=True)
    compared = filecmp.dircmp(JS / "types", tmp_path / "types")

    def differences(c) -> list[str]:
        found = c.left_only + c.right_only + c.diff_files + c.funny_files
        return found + [d for sub in c.subdirs.values() for d in differences(sub)]

    assert differences(compared) == [], "guests/js/types is stale: node bin/jupyter-mcp-js.mjs types types"


def test_examples_type_check_against_the_typings():
    """The SDK's typings and the WIT's describe the examples (a typo in a field name fails)."""
    modules = toolchain()
    tsc = modules / "typescript-compiler-api" / "bin" / "tsc"
    checked = subprocess.run(
        ["node", str(tsc), "--noEmit", "--strict", "--noImplicitAny", "false", "--allowJs", "--checkJs",
         "--target", "es2022", "--module", "nodenext", "--moduleResolution", "nodenext",
         "examples/wordcount/app.js", "examples/audit/app.js"], cwd=JS, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_guide_shows_the_javascript_example_as_built():
    check_guide_shows("JavaScript", "js", [JS / "examples" / name / "app.js" for name in ("wordcount", "audit")],
                      JS / "build")


def test_the_package_carries_the_wit_it_builds_against():
    """npm packs no symlink: the package holds a copy of wit/v0.3.0, which must stay the same."""
    assert (JS / "wit" / "extension.wit").read_text() == (ROOT / "wit" / "v0.3.0" / "extension.wit").read_text(), \
        "guests/js/wit is stale: cp wit/v0.3.0/extension.wit guests/js/wit/"
