"""Protocol features beyond plain calls: our log lines sent to the client that asked, at its level,
and the execution tools run as tasks (create, poll, inlined result, cancel → kernel interrupt).

Modern (2026-07-28) requests are sent raw where the official client cannot say what is tested
(a per-request log level, the tasks extension)."""

from __future__ import annotations

import time
import uuid

import pytest

from conftest import MODES, answer, client_for, eventually, joined, modern, texts

pytestmark = pytest.mark.anyio

TASKS = "io.modelcontextprotocol/tasks"


def log_lines(messages: list[dict]) -> list[dict]:
    return [m["params"] for m in messages if m.get("method") == "notifications/message"]


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_log_lines_go_to_a_session_at_the_level_it_set(jupyter_server, transport):
    # logging/setLevel belongs to 2025-11-25 sessions.
    lines = []

    async def collect(params):
        lines.append(params)

    def opened(name):
        return [p for p in lines if f"'{name}'" in str(p.data)]

    async with client_for(jupyter_server, "legacy", "--document-backend", "file", transport=transport,
                          logging_callback=collect) as client:
        tag = uuid.uuid4().hex[:6]
        result = await client.call_tool("use_notebook", {"notebook_name": f"quiet-{tag}",
                                                         "notebook_path": f"quiet-{tag}.ipynb", "mode": "create"})
        assert not result.is_error, joined(result)
        assert lines == [], "no level asked for: no log notifications"

        await client.set_logging_level("info")
        result = await client.call_tool("use_notebook", {"notebook_name": f"told-{tag}",
                                                         "notebook_path": f"told-{tag}.ipynb", "mode": "create"})
        assert not result.is_error, joined(result)
        # The client hands notifications to its callback beside the call's result, so under load
        # the line may land just after the result does.
        told = await eventually(lambda: opened(f"told-{tag}"), 10, f"the told-{tag} line: {lines}")
        assert len(told) == 1, lines
        assert told[0].level == "info" and told[0].logger.startswith("jupyter_mcp_server")
        assert "is in use" in told[0].data
        assert all(p.level != "debug" for p in lines), "nothing below the level"

        await client.set_logging_level("error")
        before = len(lines)
        await client.call_tool("use_notebook", {"notebook_name": f"loud-{tag}",
                                                "notebook_path": f"loud-{tag}.ipynb", "mode": "create"})
        assert lines[before:] == [], "info lines are below error"


def test_a_modern_request_gets_log_lines_only_at_its_own_level(file_http_server):
    tag = uuid.uuid4().hex[:6]
    call = {"name": "use_notebook", "arguments": {"notebook_name": f"a-{tag}", "notebook_path": f"a-{tag}.ipynb",
                                                  "mode": "create"}}
    silent = modern(file_http_server, "tools/call", call)
    assert "result" in answer(silent) and log_lines(silent) == []

    call["arguments"].update(notebook_name=f"b-{tag}", notebook_path=f"b-{tag}.ipynb")
    told = modern(file_http_server, "tools/call", call, log_level="debug")
    lines = log_lines(told)
    assert any(f"'b-{tag}'" in p["data"] and p["level"] == "info" for p in lines), told
    assert any(p["level"] == "debug" for p in lines), "debug asked for: debug lines too"
    assert told.index(answer(told)) == len(told) - 1, "log lines come before the response"

    call["arguments"].update(notebook_name=f"c-{tag}", notebook_path=f"c-{tag}.ipynb")
    assert log_lines(modern(file_http_server, "tools/call", call, log_level="warning")) == []


def poll(server, task_id: str, until, seconds: float = 60) -> dict:
    deadline = time.monotonic() + seconds
    while True:
        task = answer(modern(server, "tasks/get", {"taskId": task_id}, capabilities=WITH_TASKS))["result"]
        if until(task) or time.monotonic() > deadline:
            return task
        time.sleep(min(task.get("pollIntervalMs", 200), 200) / 1000)


WITH_TASKS = {"extensions": {TASKS: {}}}


def test_executions_run_as_tasks_for_clients_that_declared_them(file_http_server):
    discover = answer(modern(file_http_server, "server/discover", {}))["result"]
    assert TASKS in discover["capabilities"]["extensions"]

    created = answer(modern(file_http_server, "tools/call", {"name": "execute_code", "arguments": {"code": "print(6 * 7)"}},
                            capabilities=WITH_TASKS))["result"]
    assert created["resultType"] == "task" and created["status"] == "working", created
    assert isinstance(created["ttlMs"], int) and created["ttlMs"] > 60_000
    task = poll(file_http_server, created["taskId"], lambda t: t["status"] != "working")
    assert task["status"] == "completed", task
    assert [c["text"] for c in task["result"]["content"]] == ["42\n"]

    # Without the extension: the ordinary answer, as before.
    plain = answer(modern(file_http_server, "tools/call", {"name": "execute_code", "arguments": {"code": "print(6 * 7)"}}))
    assert plain["result"]["resultType"] == "complete" and "taskId" not in plain["result"]
    assert [c["text"] for c in plain["result"]["content"]] == ["42\n"]
    # A tool that is not an execution answers directly even to a client that declared tasks.
    listed = answer(modern(file_http_server, "tools/call", {"name": "list_kernels", "arguments": {}},
                           capabilities=WITH_TASKS))["result"]
    assert listed["resultType"] == "complete" and "content" in listed

    unknown = answer(modern(file_http_server, "tasks/get", {"taskId": "no-such-task"}, capabilities=WITH_TASKS))
    assert unknown["error"]["code"] == -32602
    undeclared = answer(modern(file_http_server, "tasks/get", {"taskId": created["taskId"]}))
    assert undeclared["error"]["code"] == -32021


def test_cancelling_an_execution_task_interrupts_the_kernel(file_http_server, jupyter_server):
    kernel_id = jupyter_server.start_kernel()
    try:
        run = lambda code, **extra: {"name": "execute_code",  # noqa: E731
                                     "arguments": {"code": code, "kernel_id": kernel_id, **extra}}
        assert "result" in answer(modern(file_http_server, "tools/call", run("marker = 'kept'")))
        created = answer(modern(file_http_server, "tools/call",
                                run("import time\nprint('started', flush=True)\nwhile True: time.sleep(0.05)",
                                    timeout=300, progress_interval=0.5), capabilities=WITH_TASKS))["result"]
        assert created["resultType"] == "task"
        # Progress shows as the task's status message (the call carried no progress token).
        running = poll(file_http_server, created["taskId"],
                       lambda t: "Execution in progress" in (t.get("statusMessage") or ""))
        assert running["status"] == "working" and "1 outputs" in running["statusMessage"], running
        assert kernel_busy(jupyter_server, kernel_id)
        ack = answer(modern(file_http_server, "tasks/cancel", {"taskId": created["taskId"]}, capabilities=WITH_TASKS))
        assert ack["result"] == {"resultType": "complete"} or ack["result"].get("resultType") == "complete", ack
        task = poll(file_http_server, created["taskId"], lambda t: t["status"] not in ("working", "input_required"))
        assert task["status"] == "cancelled", task
        started = time.monotonic()
        after = answer(modern(file_http_server, "tools/call", run("print(marker)")))["result"]
        assert [c["text"] for c in after["content"]] == ["kept\n"], after
        assert time.monotonic() - started < 20, "the kernel was interrupted, not left running"
    finally:
        jupyter_server.request("DELETE", f"/api/kernels/{kernel_id}")


def kernel_busy(jupyter_server, kernel_id: str) -> bool:
    _, model = jupyter_server.request("GET", f"/api/kernels/{kernel_id}")
    return model.get("execution_state") == "busy"


def test_clients_without_tasks_see_no_change(jupyter_server):
    # The official client (legacy and auto) never declares tasks: execute_code answers directly.
    import anyio

    async def main():
        for mode in MODES:
            async with client_for(jupyter_server, mode) as client:
                result = await client.call_tool("execute_code", {"code": "print('direct')"})
                assert texts(result) == ["direct\n"], joined(result)

    anyio.run(main)


def test_the_guidance_is_served_as_instructions_and_as_a_skill(jupyter_server, http_server):
    """How to work with notebooks here, written once beside the tools: the initialize
    instructions say it briefly, the "working-with-notebooks" skill (MCP Skills extension) in
    depth, on stdio and on Streamable HTTP."""
    import hashlib

    from conftest import RawStdio, server_env

    uri = "skill://working-with-notebooks/SKILL.md"
    raw = RawStdio(["--jupyter-url", jupyter_server.url], env=server_env({"JUPYTER_TOKEN": jupyter_server.token}))
    try:
        result = raw.reply("init")["result"]
        assert "io.modelcontextprotocol/skills" in result["capabilities"]["extensions"], result["capabilities"]
        said = result["instructions"]
        for point in ("Never edit .ipynb files as text", "expected_version", "background: true",
                      "notebook://NAME", "get_notebook_changes", "wait_seconds", uri):
            assert point in said, said
        listed = raw.request(2, "skills/list", {})["result"]["skills"]
        assert [s["uri"] for s in listed] == [uri]
        skill = raw.request(3, "skills/get", {"uri": uri})["result"]["skill"]
        assert skill["frontmatter"]["name"] == "working-with-notebooks" and skill["frontmatter"]["description"]
        read = raw.request(4, "resources/read", {"uri": uri})["result"]["contents"][0]
        text = read["text"]
        assert read["mimeType"] == "text/markdown" and text.startswith("---\nname: working-with-notebooks\n")
        (file,) = skill["resources"]
        assert file["uri"] == uri and file["size"] == len(text.encode())
        assert file["digest"] == "sha256:" + hashlib.sha256(text.encode()).hexdigest(), "the manifest fits the file"
        for point in ("Never edit `.ipynb` files as text", "expected_version", "background: true", "get_execution",
                      "get_notebook_changes", "wait_seconds"):
            assert point in text, point
        unknown = raw.request(5, "skills/get", {"uri": "skill://other/SKILL.md"})
        assert "error" in unknown and uri in unknown["error"]["message"], unknown
    finally:
        raw.proc.kill()
        raw.proc.wait()
    # The same over Streamable HTTP (a stateless modern request).
    listed = answer(modern(http_server, "skills/list", {}))["result"]["skills"]
    assert [s["uri"] for s in listed] == [uri]
    read = answer(modern(http_server, "resources/read", {"uri": uri}))["result"]["contents"][0]
    assert read["text"] == text
