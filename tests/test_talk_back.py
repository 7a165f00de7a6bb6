"""WIT 0.3.0 guests talk back to the client of the call they run in: the `talks` test guest (Rust,
the SDK) asks the person through the official client's elicitation callback, asks the client's
model through its sampling callback (a canned model answer: the real client API), reports
progress the client hears, and as a critical hook handler asks the person before code containing
`%pip install` runs (checked in the kernel). Without the grant, or with a client that lacks the
capability, the guest gets the typed error and reports it. A 0.2.0 guest keeps loading beside it."""

from __future__ import annotations

import mcp.types as types
import pytest

from conftest import (extension_entry, guest, http_client, joined, log_of, notebook_with_kernel, serve_guests,
                      wait_for_log, write_config)

pytestmark = pytest.mark.anyio

TALK_GRANTS = ["elicit", "sample", "secret:API_KEY"]


class Person:
    """The elicitation callback: answers what `next` says (with `content` on accept)."""

    def __init__(self) -> None:
        self.next = "accept"
        self.content = {"name": "Ada"}
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(self, context, params) -> types.ElicitResult:
        self.asked.append(params)
        if self.next == "accept":
            return types.ElicitResult(action="accept", content=self.content)
        return types.ElicitResult(action=self.next)


class Model:
    """The sampling callback: a canned model answer, remembering each request."""

    def __init__(self) -> None:
        self.requests: list[types.CreateMessageRequestParams] = []

    async def __call__(self, context, params) -> types.CreateMessageResult:
        self.requests.append(params)
        return types.CreateMessageResult(role="assistant", model="canned-model", stop_reason="endTurn",
                                         content=types.TextContent(type="text", text="forty-two"))


def talks_server(jupyter_server, tmp_path, grants=TALK_GRANTS, extra: str = ""):
    body = extension_entry(guest("talks"), grants=grants, wall_ms_per_call=60000) + extra
    return serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)))


async def text_of(client, tool, **arguments) -> str:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} failed: {joined(result)}"
    return joined(result)


async def defined(client, name: str) -> bool:
    result = await client.call_tool("execute_code", {"code": f"print({name!r} in globals())"})
    assert not result.is_error, joined(result)
    return joined(result).strip() == "True"


async def test_elicit_accepted_declined_and_a_client_without_elicitation(jupyter_server, tmp_path):
    server = talks_server(jupyter_server, tmp_path)
    try:
        person = Person()
        async with http_client(server, "legacy", elicitation_callback=person) as c:
            assert await text_of(c, "talk_version") == "0.3.0"
            answer = await text_of(c, "talk_ask", question="What is your name?")
            assert answer == 'accepted: {"name":"Ada"}', answer
            asked = person.asked[-1]
            assert asked.message == "What is your name?", asked
            assert "name" in asked.requested_schema["properties"], asked.requested_schema
            person.next = "decline"
            assert await text_of(c, "talk_ask", question="Again?") == "declined"
            person.next = "cancel"
            assert await text_of(c, "talk_ask", question="Once more?") == "cancelled"
        # A client that declared no elicitation: the typed error reaches the guest.
        async with http_client(server, "legacy") as c:
            answer = await text_of(c, "talk_ask", question="Anyone?")
            assert answer.startswith("unsupported-by-client: "), answer
            assert "'elicitation'" in answer, answer
        log = log_of(server)
        assert "talks.wasm (critical hook handler) (extension 'talks', 6 tools)" in log, log
    finally:
        server.stop()


async def test_sample_through_the_clients_model_and_progress_reaches_the_client(jupyter_server, tmp_path):
    server = talks_server(jupyter_server, tmp_path)
    try:
        model = Model()
        async with http_client(server, "legacy", sampling_callback=model) as c:
            answer = await text_of(c, "talk_model", prompt="What is six times seven?")
            assert answer == "the model said: forty-two", answer
            request = model.requests[-1]
            assert request.max_tokens == 50, request
            assert request.messages[0].content.text == "What is six times seven?", request

            updates = []

            async def on_progress(progress, total, message):
                updates.append((progress, total, message))

            result = await c.call_tool("talk_count", {"steps": 3}, progress_callback=on_progress)
            assert not result.is_error and joined(result) == "counted to 3", joined(result)
            assert [u for u in updates if u[2] and u[2].startswith("step")] == [
                (1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")], updates
        async with http_client(server, "legacy") as c:
            answer = await text_of(c, "talk_model", prompt="Anyone?")
            assert answer.startswith("unsupported-by-client: ") and "'sampling'" in answer, answer
    finally:
        server.stop()


async def test_a_missing_grant_is_refused_with_the_grant_named(jupyter_server, tmp_path):
    server = talks_server(jupyter_server, tmp_path, grants=[])
    try:
        person, model = Person(), Model()
        async with http_client(server, "legacy", elicitation_callback=person, sampling_callback=model) as c:
            answer = await text_of(c, "talk_ask", question="Name?")
            assert answer.startswith("not-granted: ") and "'elicit' is not granted to 'talks'" in answer, answer
            assert "\"elicit\"" in answer, answer
            answer = await text_of(c, "talk_model", prompt="Hi")
            assert answer.startswith("not-granted: ") and "\"sample\"" in answer, answer
            answer = await text_of(c, "talk_secret", name="API_KEY")
            assert answer.startswith("not-granted: ") and "\"secret:API_KEY\"" in answer, answer
            assert person.asked == [] and model.requests == [], "nothing reached the client"
        log = log_of(server)
        assert "refused a call to client function 'elicit': not granted" in log, log
    finally:
        server.stop()


async def test_a_granted_secret_is_read_from_the_operators_store_and_never_shown(jupyter_server, tmp_path):
    """`secret set` (value on stdin) while the server runs: the guest's next call reads it, and the
    value reaches neither the log (the guest logs it: redacted) nor the answer."""
    import subprocess

    from conftest import server_binary, server_env

    secrets_file = tmp_path / "secrets" / "secrets.json"
    value = "tok-8c1e-secret-value"
    env = {"JUPYTER_MCP_SECRETS_FILE": str(secrets_file)}
    body = extension_entry(guest("talks"), grants=TALK_GRANTS, wall_ms_per_call=60000)
    server = serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)), env=env)
    try:
        async with http_client(server, "legacy") as c:
            answer = await text_of(c, "talk_secret", name="API_KEY")
            assert answer.startswith("not-found: ") and "secret set API_KEY" in answer, answer
            set_it = subprocess.run([server_binary(), "secret", "set", "API_KEY"], input=value, text=True,
                                    capture_output=True, env=server_env(env), timeout=30)
            assert set_it.returncode == 0, set_it.stderr
            answer = await text_of(c, "talk_secret", name="API_KEY")
            assert answer == f"read a secret of {len(value)} characters", answer
            assert value not in answer
        log = wait_for_log(server, "talks read the secret: [redacted]")
        assert value not in log, "the secret's value reached the log"
    finally:
        server.stop()


async def test_edits_with_versions_are_checked_as_the_tools_check_them(jupyter_server, tmp_path):
    server = talks_server(jupyter_server, tmp_path,
                          grants=["read-cells", "overwrite-cell", "insert-cell"])
    try:
        async with http_client(server, "legacy") as c:
            await notebook_with_kernel(c, jupyter_server, "nb")
            await c.call_tool("insert_cell", {"cell_index": 0, "cell_type": "code", "cell_source": "first = 1"})
            answer = await text_of(c, "talk_versions")
            lines = answer.splitlines()
            read_version, written = lines[0].removeprefix("read ").split(", wrote ")
            assert read_version and written and written != read_version, answer
            # The stale version is refused with the tools' conflict message, nothing changed.
            assert lines[1].startswith("stale cell: conflict: "), answer
            assert f"you expected version {read_version}, it is now version {written}" in answer, answer
            assert "\nstale notebook: conflict: The notebook's cells changed since you read it" in answer, answer
            assert "expected_notebook_version" in answer, answer
            cells = joined(await c.call_tool("read_notebook", {"notebook_name": "nb", "response_format": "detailed"}))
            assert "rewritten = 1" in cells and "inserted = 1" in cells, cells
            assert "again = 1" not in cells and "late = 1" not in cells, cells
    finally:
        server.stop()


async def test_a_guest_hook_handlers_confirm_holds_pip_install_until_the_person_answers(jupyter_server, tmp_path):
    # A 0.2.0 guest (the C SDK's example) loads beside the 0.3.0 one.
    extra = extension_entry(guest("wordcount-c"), grants=["read-cells", "overwrite-cell"])
    server = talks_server(jupyter_server, tmp_path, extra=extra)
    try:
        person = Person()
        async with http_client(server, "legacy", elicitation_callback=person) as c:
            await notebook_with_kernel(c, jupyter_server, "nb")
            # Code without %pip install runs unasked.
            ran = await c.call_tool("execute_code", {"code": "plain_here = 1\nprint('plain')"})
            assert not ran.is_error and joined(ran).strip() == "plain", joined(ran)
            assert person.asked == []

            code = "# %pip install nothing-at-all\naccepted_here = 1\nprint('ran')"
            ran = await c.call_tool("execute_code", {"code": code})
            assert not ran.is_error and "ran" in joined(ran), joined(ran)
            question = person.asked[-1].message
            assert "talks" in question and "%pip install" in question, question

            person.next = "decline"
            refused = await c.call_tool("execute_code", {"code": "# %pip install x\ndeclined_here = 1"})
            assert refused.is_error, joined(refused)
            assert "declined" in joined(refused) and "hook handler 'talks'" in joined(refused), joined(refused)
            person.next = "accept"
            assert await defined(c, "accepted_here") and not await defined(c, "declined_here")
            tools = {t.name for t in (await c.list_tools()).tools}
            assert "word_count" in tools, tools
        log = log_of(server)
        assert "wordcount-c.wasm" in log and "refused wasm guest" not in log, log
    finally:
        server.stop()
