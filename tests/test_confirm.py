"""`execution.confirm`: code runs only once the person says yes, asked through the official
client's elicitation callback; declined, cancelled or unaskable, nothing runs (checked in the
kernel itself) and the result says so."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
import uuid

import pytest

from conftest import (Person, answer, client_for, extension_entry, guest, http_client, joined, log_of, modern,
                      notebook_with_kernel, serve, serve_guests, write_config)
from test_dropin import post, sse_json

pytestmark = pytest.mark.anyio

ON = ("--capability", "execution.confirm")


def client(jupyter_server, *args, person=None, transport="stdio", mode="legacy"):
    extra = {"elicitation_callback": person} if person else {}
    return client_for(jupyter_server, mode, "--document-backend", "file", *args, transport=transport, **extra)


async def declared(client) -> dict:
    block = json.loads((await client.read_resource("capabilities://")).contents[0].text)
    return next(c for c in block["declared"] if c["name"] == "execution.confirm")


async def defined(client, name: str) -> bool:
    """Whether the kernel holds `name`; asked by a call the person lets through."""
    result = await client.call_tool("execute_code", {"code": f"print({name!r} in globals())"})
    assert not result.is_error, joined(result)
    return joined(result).strip() == "True"


async def test_accept_runs_and_decline_or_cancel_run_nothing(jupyter_server):
    person = Person()
    async with client(jupyter_server, *ON, person=person) as c:
        shown = await declared(c)
        assert shown["enabled"] is True and shown["source"] == "cli", shown
        ran = await c.call_tool("execute_code", {"code": "accepted_here = 6 * 7\nprint(accepted_here)"})
        assert not ran.is_error and joined(ran).strip() == "42", joined(ran)
        question = person.questions[-1]
        assert "accepted_here = 6 * 7" in question and "the default kernel" in question, question
        assert "execution.confirm" in question, question

        for answer in ("decline", "cancel"):
            person.next = answer
            asked = len(person.questions)
            refused = await c.call_tool("execute_code", {"code": f"{answer}d_here = 1"})
            assert refused.is_error, joined(refused)
            text = joined(refused)
            assert "Nothing ran in the default kernel" in text, text
            assert ("declined" if answer == "decline" else "cancelled the question") in text, text
            assert len(person.questions) == asked + 1
            person.next = "accept"
            assert not await defined(c, f"{answer}d_here"), f"the {answer}d code ran"
        assert await defined(c, "accepted_here")

        # A cell: where it runs is shown.
        path = f"confirm-{uuid.uuid4().hex[:6]}.ipynb"
        await c.call_tool("use_notebook", {"notebook_name": "nb", "notebook_path": path, "mode": "create"})
        await c.call_tool("insert_cell", {"cell_index": 0, "cell_type": "code", "cell_source": "cell_here = 1"})
        await c.call_tool("insert_cell", {"cell_index": 1, "cell_type": "code", "cell_source": "print('second')"})
        person.next = "decline"
        refused = await c.call_tool("execute_cell", {"cell_index": 0})
        assert refused.is_error and "declined" in joined(refused), joined(refused)
        assert f"cell 0 of notebook 'nb' ({path})" in person.questions[-1], person.questions[-1]
        person.next = "accept"
        assert not await defined(c, "cell_here")

        # run_all_cells asks once for the whole run, showing every cell.
        asked = len(person.questions)
        ran = await c.call_tool("run_all_cells", {})
        assert not ran.is_error, joined(ran)
        assert len(person.questions) == asked + 1
        question = person.questions[-1]
        assert "cell_here = 1" in question and "print('second')" in question and "cells 0, 1" in question, question
        assert await defined(c, "cell_here")
        person.next = "decline"
        refused = await c.call_tool("run_all_cells", {})
        assert refused.is_error and "Nothing ran in notebook 'nb'" in joined(refused), joined(refused)

        # insert_execute_code_cell: the cell is inserted, its code not run.
        refused = await c.call_tool("insert_execute_code_cell", {"cell_index": 2, "cell_source": "inserted_here = 1"})
        assert refused.is_error and "declined" in joined(refused), joined(refused)
        person.next = "accept"
        assert not await defined(c, "inserted_here")


async def test_a_client_without_elicitation_is_refused_naming_the_capability(jupyter_server):
    async with client(jupyter_server, *ON) as c:
        refused = await c.call_tool("execute_code", {"code": "unasked_here = 1"})
        assert refused.is_error, joined(refused)
        text = joined(refused)
        assert "'execution.confirm' capability" in text and "elicitation" in text, text
        assert "--capability execution.confirm=off" in text, text


async def test_long_code_is_shown_cut(jupyter_server):
    person = Person()
    async with client(jupyter_server, *ON, person=person) as c:
        code = "\n".join(f"line_{i} = {i}" for i in range(100))
        ran = await c.call_tool("execute_code", {"code": code})
        assert not ran.is_error, joined(ran)
        question = person.questions[-1]
        assert "line_39 = 39" in question and "line_40 = 40" not in question, question
        assert "not shown: 60 more lines" in question, question
        assert await defined(c, "line_99"), "the whole code ran"


async def test_matching_rules_ask_only_for_what_matches(jupyter_server, tmp_path):
    config = write_config(tmp_path, '[execution_confirm]\nask = "matching"\n')
    person = Person()
    person.next = "decline"
    async with client(jupyter_server, *ON, "--config", str(config), person=person) as c:
        ran = await c.call_tool("execute_code", {"code": "harmless_here = 2 + 2\nprint(harmless_here)"})
        assert not ran.is_error and joined(ran).strip() == "4", joined(ran)
        assert person.questions == [], "harmless code runs unasked"
        for code in ("%pip --version", "!ls", "import subprocess\nshelled_here = 1"):
            refused = await c.call_tool("execute_code", {"code": code})
            assert refused.is_error and "declined" in joined(refused), (code, joined(refused))
            assert code in person.questions[-1] and "the code contains" in person.questions[-1]
        assert len(person.questions) == 3
        assert not await defined(c, "shelled_here")


async def test_capability_off_asks_nothing(jupyter_server):
    person = Person()
    person.next = "decline"
    async with client(jupyter_server, person=person) as c:
        shown = await declared(c)
        assert shown["enabled"] is False and shown["source"] == "default", shown
        assert "elicitation" in shown["description"] and "not a sandbox" in shown["description"], shown
        ran = await c.call_tool("execute_code", {"code": "print('unasked')"})
        assert not ran.is_error and joined(ran).strip() == "unasked", joined(ran)
        assert person.questions == []


async def test_streamable_http_asks_for_tools_and_for_a_guests_execute_code(jupyter_server, tmp_path):
    """One server on HTTP: a 2025-11-25 session is asked (a tool, and a guest's execute-code host
    call through the domain); a stateless 2026-07-28 request is asked through its answer
    (input_required), the client's retry carrying the person's answer."""
    body = extension_entry(guest("runs"), grants=["execute-code"])
    server = serve_guests(jupyter_server, *ON, "--config", str(write_config(tmp_path, body)))
    try:
        person = Person()
        async with http_client(server, "legacy", elicitation_callback=person) as c:
            await notebook_with_kernel(c, jupyter_server, "nb")
            ran = await c.call_tool("execute_code", {"code": "over_http = 6 * 7\nprint(over_http)"})
            assert not ran.is_error and joined(ran).strip() == "42", joined(ran)
            assert "over_http = 6 * 7" in person.questions[-1] and "notebook 'nb'" in person.questions[-1]

            ran = await c.call_tool("runs_code", {"code": "guest_ran = 1\nprint('from the guest')"})
            assert not ran.is_error and "from the guest" in joined(ran), joined(ran)
            assert "guest_ran = 1" in person.questions[-1], person.questions
            person.next = "decline"
            refused = await c.call_tool("runs_code", {"code": "guest_declined = 1"})
            assert refused.is_error and "declined" in joined(refused), joined(refused)
            person.next = "accept"
            assert await defined(c, "guest_ran") and not await defined(c, "guest_declined")
        # Each question rode its own request's stream, the guest's included.
        assert "falling back to standalone stream" not in log_of(server)

        # A stateless 2026-07-28 request has no stream to ask on: the question goes back with the
        # answer (input_required), and the official client's retry carries the person's answer.
        async with http_client(server, "auto", elicitation_callback=person) as c:
            asked = len(person.questions)
            ran = await c.call_tool("execute_code", {"code": "stateless_here = 6 * 7\nprint(stateless_here)"})
            assert not ran.is_error and joined(ran).strip() == "42", joined(ran)
            assert len(person.questions) == asked + 1 and "stateless_here = 6 * 7" in person.questions[-1]
            person.next = "decline"
            refused = await c.call_tool("execute_code", {"code": "stateless_declined = 1"})
            assert refused.is_error and "declined" in joined(refused), joined(refused)
            assert len(person.questions) == asked + 2
            # The cell inserted before the question is inserted once, whatever the rounds.
            person.next = "accept"
            ran = await c.call_tool("insert_execute_code_cell", {"cell_index": 0, "cell_source": "stateless_cell = 1"})
            assert not ran.is_error, joined(ran)
            assert len(person.questions) == asked + 3
            cells = joined(await c.call_tool("read_notebook", {"notebook_name": "nb", "response_format": "detailed"}))
            assert cells.count("stateless_cell = 1") == 1, cells
            assert await defined(c, "stateless_here") and await defined(c, "stateless_cell")
            assert not await defined(c, "stateless_declined")
        # Without elicitation declared, it is refused naming the capability, and asks nothing.
        async with http_client(server, "auto") as c:
            refused = await c.call_tool("execute_code", {"code": "stateless_unasked = 1"})
            assert refused.is_error, joined(refused)
            text = joined(refused)
            assert "'execution.confirm' capability" in text and "'elicitation'" in text, text
    finally:
        server.stop()


def test_a_stateless_answer_counts_once_and_cannot_come_before_its_question(jupyter_server):
    """The input request key of a deferred question is a nonce the server issued for it: an
    accept written under a key guessed from the question, or an answer sent again, runs nothing;
    the question is put again under a new key."""
    import hashlib

    server = serve(jupyter_server, *ON)
    elicits = {"elicitation": {"form": {}}}
    code = "import builtins\nbuiltins.counted = getattr(builtins, 'counted', 0) + 1\nprint('runs', builtins.counted)"

    def call(responses=None):
        params = {"name": "execute_code", "arguments": {"code": code}}
        if responses is not None:
            params["inputResponses"] = responses
        return answer(modern(server, "tools/call", params, capabilities=elicits))["result"]

    def asked(result):
        assert result.get("resultType") == "input_required", result
        (key, request), = result["inputRequests"].items()
        return key, request["params"]["message"]

    try:
        key, message = asked(call())
        assert "builtins.counted" in message
        # The key the question's text would give (the old scheme): an accept there is no answer.
        guessed = "confirm-" + hashlib.sha256(message.encode()).hexdigest()[:16]
        again, _ = asked(call({guessed: {"action": "accept"}}))
        assert again not in (key, guessed), "each putting of the question has a key of its own"
        ran = call({again: {"action": "accept"}})
        assert ran.get("resultType") != "input_required" and not ran.get("isError"), ran
        assert "runs 1" in json.dumps(ran), ran
        # The same answer sent again is spent: asked anew, nothing ran.
        fresh, _ = asked(call({again: {"action": "accept"}}))
        assert fresh != again
        # Another question's key does not answer this one.
        other = answer(modern(server, "tools/call", {"name": "execute_code", "arguments": {"code": "print(2)"}},
                              capabilities=elicits))["result"]
        other_key, _ = asked(other)
        asked(call({other_key: {"action": "accept"}}))
        ran = call({fresh: {"action": "accept"}})
        assert "runs 2" in json.dumps(ran), ran
    finally:
        server.stop()


def listen(url: str, headers: dict, messages: list, opened: threading.Event) -> None:
    """A 2025-11-25 session's standalone stream (GET), each JSON-RPC message kept as it comes."""
    request = urllib.request.Request(url, method="GET", headers={"Accept": "text/event-stream", **headers})
    with urllib.request.urlopen(request, timeout=120) as response:
        opened.set()
        for raw in response:
            line = raw.decode().strip()
            if line.startswith("data:") and line[5:].strip():
                messages.append(json.loads(line[5:]))


async def test_a_tasks_question_reaches_its_2025_11_25_session_on_the_sessions_stream(jupyter_server):
    """A call run as a task answers its request with the task's handle; its question then goes
    out on the session's standalone stream, and the answer posted back lets the code run."""
    server = serve(jupyter_server, *ON)
    auth = {"Authorization": f"Bearer {server.token}"}
    try:
        capabilities = {"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
        status, headers, text = post(server.mcp_url, {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": capabilities,
                       "clientInfo": {"name": "raw-session", "version": "1"}}}, auth)
        assert status == 200, (status, text)
        session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
        in_session = {**auth, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
        status, _, _ = post(server.mcp_url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, in_session)
        assert status == 202
        messages: list[dict] = []
        opened = threading.Event()
        threading.Thread(target=listen, args=(server.mcp_url, in_session, messages, opened), daemon=True).start()
        assert opened.wait(30), "the session's stream did not open"

        status, _, text = post(server.mcp_url, {
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "execute_code", "arguments": {"code": "task_asked = 6 * 7\nprint(task_asked)"},
                       "task": {"ttl": 120000}}}, in_session)
        assert status == 200, (status, text)
        created = sse_json(text)["result"]
        task_id = created.get("task", created)["taskId"]

        deadline = time.monotonic() + 60
        while not any(m.get("method") == "elicitation/create" for m in messages):
            assert time.monotonic() < deadline, f"no question on the session's stream: {messages}"
            time.sleep(0.1)
        question = next(m for m in messages if m.get("method") == "elicitation/create")
        assert "task_asked = 6 * 7" in question["params"]["message"], question
        status, _, text = post(server.mcp_url, {"jsonrpc": "2.0", "id": question["id"],
                                                "result": {"action": "accept"}}, in_session)
        assert status in (200, 202), (status, text)

        deadline = time.monotonic() + 60
        while True:
            status, _, text = post(server.mcp_url, {"jsonrpc": "2.0", "id": 3, "method": "tasks/get",
                                                    "params": {"taskId": task_id}}, in_session)
            assert status == 200, (status, text)
            task = sse_json(text)["result"]
            if task["status"] not in ("working", "input_required"):
                break
            assert time.monotonic() < deadline, f"the task did not end: {task}"
            time.sleep(0.2)
        assert task["status"] == "completed", task
        # The result comes inline with the task (this server answers tasks/get with it).
        assert [c["text"] for c in task["result"]["content"]] == ["42\n"], task
    finally:
        server.stop()
