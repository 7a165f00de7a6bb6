"""Grant prompts (`extensions.grant-prompts`): a guest's use of something it was not granted is put
to the person through the official client's elicitation callback, naming the extension, the grant
and the tool call; granted for the call or the session (or, when the operator allows it, for good,
written to the config file), declined and refused. Real compiled guests: `talks` (Rust, the SDK)
and `ask-js` (JavaScript, the SDK). Never asked: with the capability off, for a grant the operator
forbids, or of a client without elicitation."""

from __future__ import annotations

import mcp.types as types
import pytest

from conftest import (extension_entry, guest, http_client, joined, log_of, notebook_with_kernel, route,
                      serve_guests, write_config)

pytestmark = pytest.mark.anyio

PROMPTS_ON = ["--capability", "extensions.grant-prompts"]
ASKED_FOR_A_GRANT = "for a permission the operator did not give it"


class Person:
    """The elicitation callback: answers grant prompts with `grant` ("call", "session", "always",
    or "decline"/"cancel"), and a guest's own question with a name."""

    def __init__(self, grant: str = "call") -> None:
        self.grant = grant
        self.prompts: list[types.ElicitRequestParams] = []
        self.questions: list[types.ElicitRequestParams] = []

    async def __call__(self, context, params) -> types.ElicitResult:
        if ASKED_FOR_A_GRANT in params.message:
            self.prompts.append(params)
            if self.grant in ("decline", "cancel"):
                return types.ElicitResult(action=self.grant)
            return types.ElicitResult(action="accept", content={"grant": self.grant})
        self.questions.append(params)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    def granted(self) -> list[str]:
        """The grants asked for, in order (the quoted name in each question)."""
        return [p.message.split('"')[1] for p in self.prompts]


class Model:
    async def __call__(self, context, params) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", model="canned-model", stop_reason="endTurn",
                                         content=types.TextContent(type="text", text="forty-two"))


def prompting_server(jupyter_server, tmp_path, *args: str, grants=None, extra: str = "", name="talks"):
    body = extension_entry(guest(name), grants=grants or [], wall_ms_per_call=60000) + extra
    return serve_guests(jupyter_server, "--config", str(write_config(tmp_path, body)), *args)


async def text_of(client, tool, **arguments) -> str:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} failed: {joined(result)}"
    return joined(result)


async def test_a_missing_grant_is_asked_for_and_holds_for_the_call_or_the_session(jupyter_server, tmp_path):
    server = prompting_server(jupyter_server, tmp_path, *PROMPTS_ON)
    try:
        person = Person("call")
        async with http_client(server, "legacy", elicitation_callback=person, sampling_callback=Model()) as c:
            assert await text_of(c, "talk_model", prompt="Six times seven?") == "the model said: forty-two"
            (asked,) = person.prompts
            assert "The extension 'talks' asked during the call of tool 'talk_model'" in asked.message, asked
            assert '"sample"' in asked.message and "your client's model" in asked.message, asked
            choices = asked.requested_schema["properties"]["grant"]["oneOf"]
            assert [c_["const"] for c_ in choices] == ["call", "session"], choices
            # Granted for that call only: the next call is asked again; then for the session.
            person.grant = "session"
            assert await text_of(c, "talk_model", prompt="Again?") == "the model said: forty-two"
            assert await text_of(c, "talk_model", prompt="Once more?") == "the model said: forty-two"
            assert person.granted() == ["sample", "sample"], person.granted()
            # Shown by `policy`, never in the config's grants.
            status, shown = route(server, "GET", "/api/extensions/talks/policy")
            assert status == 200 and shown["grants"] == [], shown
            (held,) = shown["granted_when_asked"]
            assert held["grant"] == "sample" and held["for"] == "session", shown
            # Declined: refused, saying so; not asked again in that call.
            person.grant = "decline"
            answer = await text_of(c, "talk_ask", question="Your name?")
            assert answer.startswith("not-granted: ") and "the person declined to grant it when asked" in answer, answer
            assert person.questions == [], "the guest's own question never went out"
            # Revoked by the operator: asked again.
            status, revoked = route(server, "POST", "/api/extensions/talks/policy/revoke", {"grant": "sample"})
            assert status == 200 and revoked["granted_when_asked"] == [], revoked
            person.grant = "call"
            assert await text_of(c, "talk_model", prompt="After the revoke?") == "the model said: forty-two"
            assert person.granted() == ["sample", "sample", "elicit", "sample"], person.granted()
        # A new session holds nothing of the last one's.
        person = Person("call")
        async with http_client(server, "legacy", elicitation_callback=person, sampling_callback=Model()) as c:
            assert await text_of(c, "talk_model", prompt="New session?") == "the model said: forty-two"
            assert person.granted() == ["sample"], person.granted()
            # Granted elicit for the call: the guest's own question then reaches the person.
            assert await text_of(c, "talk_ask", question="Your name?") == 'accepted: {"name":"Ada"}'
            assert [q.message for q in person.questions] == ["Your name?"], person.questions
        log = log_of(server)
        assert 'the person granted "sample" for this session when asked (in a call of tool \'talk_model\')' in log, log
        assert 'the person declined to grant "elicit" when asked' in log, log
        assert "revoked sample, which the person had granted when asked" in log, log
    finally:
        server.stop()


async def test_host_functions_are_asked_for_on_the_notebook_they_are_used_on(jupyter_server, tmp_path):
    server = prompting_server(jupyter_server, tmp_path, *PROMPTS_ON)
    try:
        person = Person("session")
        async with http_client(server, "legacy", elicitation_callback=person) as c:
            await notebook_with_kernel(c, jupyter_server, "nb")
            await c.call_tool("insert_cell", {"cell_index": 0, "cell_type": "code", "cell_source": "first = 1"})
            answer = await text_of(c, "talk_versions")
            assert answer.startswith("read "), answer
            assert person.granted() == ["read-cells:nb", "overwrite-cell:nb", "insert-cell:nb"], person.granted()
            assert "read the cells of the notebook 'nb'" in person.prompts[0].message, person.prompts[0].message
            cells = joined(await c.call_tool("read_notebook", {"notebook_name": "nb", "response_format": "detailed"}))
            assert "rewritten = 1" in cells and "inserted = 1" in cells, cells
            # Held for the session: the second run asks nothing.
            await text_of(c, "talk_versions")
            assert len(person.prompts) == 3, person.granted()
    finally:
        server.stop()


async def test_nothing_is_asked_when_off_forbidden_or_unaskable_and_always_only_when_allowed(jupyter_server, tmp_path):
    # Off (the default): refused as ever, and the log says how the person could be asked.
    server = prompting_server(jupyter_server, tmp_path)
    try:
        person = Person("session")
        async with http_client(server, "legacy", elicitation_callback=person, sampling_callback=Model()) as c:
            answer = await text_of(c, "talk_model", prompt="Hi")
            assert answer.startswith("not-granted: ") and '"sample"' in answer, answer
            assert person.prompts == []
        assert "turn on the capability extensions.grant-prompts" in log_of(server)
    finally:
        server.stop()
    # On, with secrets never asked for and "always" allowed.
    extra = '[grant_prompts]\nnever = ["secret:*"]\nallow_always = true\n'
    server = prompting_server(jupyter_server, tmp_path, *PROMPTS_ON, extra=extra)
    try:
        person = Person("always")
        async with http_client(server, "legacy", elicitation_callback=person, sampling_callback=Model()) as c:
            answer = await text_of(c, "talk_secret", name="API_KEY")
            assert answer.startswith("not-granted: ") and "forbids asking the person for \"secret:API_KEY\"" in answer, answer
            assert person.prompts == []
            assert await text_of(c, "talk_model", prompt="Hi") == "the model said: forty-two"
            choices = person.prompts[0].requested_schema["properties"]["grant"]["oneOf"]
            assert [c_["const"] for c_ in choices] == ["call", "session", "always"], choices
        # "Always" is the operator's grant: written to the entry, so it holds in a new session.
        config = (tmp_path / "server.toml").read_text()
        assert 'grants = ["sample"]' in config, config
        status, shown = route(server, "GET", "/api/extensions/talks/policy")
        assert status == 200 and shown["grants"] == ["sample"], shown
        async with http_client(server, "legacy", sampling_callback=Model()) as c:
            assert await text_of(c, "talk_model", prompt="Hi") == "the model said: forty-two"
            # A client without elicitation cannot be asked: refused, saying why.
            answer = await text_of(c, "talk_ask", question="Anyone?")
            assert answer.startswith("not-granted: ") and "the person could not be asked" in answer, answer
            assert "'elicitation'" in answer, answer
    finally:
        server.stop()


async def test_a_javascript_guest_is_asked_for_too(jupyter_server, tmp_path):
    server = prompting_server(jupyter_server, tmp_path, *PROMPTS_ON, name="ask-js")
    try:
        person = Person("call")
        async with http_client(server, "legacy", elicitation_callback=person) as c:
            assert await text_of(c, "ask_name") == "hello, Ada"
            assert person.granted() == ["elicit"], person.granted()
            assert "'ask-js'" in person.prompts[0].message and "'ask_name'" in person.prompts[0].message
            person.grant = "cancel"
            named = await c.call_tool("ask_name", {})
            assert named.is_error and "the person declined to grant it when asked" in joined(named), joined(named)
    finally:
        server.stop()
