"""Durable executions (--state-dir): an execution's record outlives the server's process. A finished
one is answered after a restart with the same outputs; one still running when the server was
killed is followed again on its kernel (the Jupyter Server replays what the kernel sent meanwhile),
or reported lost with the reason when its kernel is gone; records past --execution-retention are
pruned; the state directory is private. Through the official client, a real Jupyter Server and our
server restarted as a process."""

from __future__ import annotations

import json
import os
import signal
import stat
import time
import urllib.request
import uuid

import anyio
import pytest

from conftest import call, http_client, joined, start_http_server

pytestmark = pytest.mark.anyio

ID_KEY = "io.jupyter-mcp/execution_id"
STATE_KEY = "io.jupyter-mcp/execution_state"


def server_args(jupyter, state_dir, *extra):
    return ["start", "--jupyter-url", jupyter.url, "--jupyter-token", jupyter.token,
            "--document-backend", "file", "--state-dir", str(state_dir), *extra]


async def get(client, execution_id, wait=0.0):
    result = await call(client, "get_execution", execution_id=execution_id, wait_seconds=wait)
    return result.meta[STATE_KEY], joined(result)


async def started(client, tool, **arguments) -> str:
    result = await call(client, tool, background=True, **arguments)
    return result.meta[ID_KEY]


async def newest_id(client) -> str:
    """The id of the newest execution list_executions shows (a foreground run names none)."""
    listed = joined(await call(client, "list_executions")).splitlines()[1:]
    return listed[-1].split("\t")[0]


async def until_shows(client, execution_id, text, within=60.0):
    deadline = time.monotonic() + within
    while True:
        state, shown = await get(client, execution_id)
        if text in shown:
            return
        assert state == "running" and time.monotonic() < deadline, shown
        await anyio.sleep(0.2)


def kernel_alive(jupyter, kernel_id) -> bool:
    request = urllib.request.Request(f"{jupyter.url}/api/kernels/{kernel_id}",
                                     headers={"Authorization": f"token {jupyter.token}"})
    try:
        with urllib.request.urlopen(request, timeout=10):
            return True
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return False
        raise


def delete_kernel(jupyter, kernel_id) -> None:
    request = urllib.request.Request(f"{jupyter.url}/api/kernels/{kernel_id}", method="DELETE",
                                     headers={"Authorization": f"token {jupyter.token}"})
    try:
        urllib.request.urlopen(request, timeout=30).close()
    except urllib.error.HTTPError as e:
        if e.code != 404:
            raise


def kernels(jupyter) -> set[str]:
    request = urllib.request.Request(f"{jupyter.url}/api/kernels",
                                     headers={"Authorization": f"token {jupyter.token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return {k["id"] for k in json.load(response)}


async def test_a_finished_execution_is_answered_after_a_restart(jupyter_server, tmp_path):
    state_dir = tmp_path / "state"
    args = server_args(jupyter_server, state_dir)
    server = start_http_server(args)
    try:
        async with http_client(server, "auto") as client:
            await call(client, "execute_code", code="print('kept', 6 * 7)")
            foreground = await newest_id(client)
            background = await started(client, "execute_code", code="counter = 1; print('background ran')",
                                       idempotency_key="once")
            state, _ = await get(client, background, wait=30)
            assert state == "finished"
            before = {i: joined(await call(client, "get_execution", execution_id=i)) for i in (foreground, background)}
    finally:
        server.stop()

    # The state directory and its database are this user's alone.
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    database = state_dir / "executions.redb"
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
    # Never the code, never a token.
    content = database.read_bytes()
    assert b"background ran" in content  # the outputs are kept
    assert b"counter = 1" not in content and jupyter_server.token.encode() not in content

    server = start_http_server(args)
    try:
        async with http_client(server, "auto") as client:
            for execution_id, text in before.items():
                again = await call(client, "get_execution", execution_id=execution_id)
                assert joined(again) == text, (joined(again), text)
                assert again.meta[STATE_KEY] == "finished"
            assert "kept 42" in before[foreground]
            listed = joined(await call(client, "list_executions"))
            assert foreground in listed and background in listed, listed

            # The idempotency key still names the first run: the code is not run again.
            repeated = await call(client, "execute_code", code="counter = 1; print('background ran')",
                                  idempotency_key="once", background=True)
            assert repeated.meta[ID_KEY] == background and "was not run again" in joined(repeated)

            unknown = await client.call_tool("get_execution", {"execution_id": "nope"})
            assert unknown.is_error and "No execution 'nope'" in joined(unknown), joined(unknown)
            assert "--execution-retention" in joined(unknown), joined(unknown)
    finally:
        server.stop()


async def test_a_run_the_server_was_killed_under_is_followed_again(jupyter_server, tmp_path):
    """SIGKILL: our server cannot stop its kernels, so the runs go on; the next process reopens
    each run's socket on its session, the Jupyter Server replays what the kernel sent meanwhile,
    and the run ends with every output."""
    state_dir = tmp_path / "state"
    args = server_args(jupyter_server, state_dir)
    path = f"durable-{uuid.uuid4().hex[:6]}.ipynb"
    server = start_http_server(args)
    left_kernels = set()
    before = kernels(jupyter_server)
    try:
        async with http_client(server, "auto") as client:
            code_run = await started(client, "execute_code", timeout=120,
                                     code="import time\nprint('before', flush=True)\ntime.sleep(6)\nprint('after')")
            await call(client, "use_notebook", notebook_name="nb", notebook_path=path, mode="create")
            cell_run = await started(client, "insert_execute_code_cell", cell_index=-1, timeout=120,
                                     cell_source="import time\nprint('cell before', flush=True)\ntime.sleep(6)\n"
                                                 "print('cell after')\n6 * 7")
            await until_shows(client, code_run, "before")
            await until_shows(client, cell_run, "cell before")
            await anyio.sleep(1.5)  # the outputs so far are written at most once a second
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=10)
        left_kernels = kernels(jupyter_server) - before

        server = start_http_server(args)
        async with http_client(server, "auto") as client:
            state, text = await get(client, code_run, wait=60)
            assert state == "finished", text
            assert "before" in text and "after" in text and "followed again" in text, text
            state, text = await get(client, cell_run, wait=60)
            assert state == "finished", text
            assert "cell before" in text and "cell after" in text and "42" in text, text
    finally:
        server.stop()
        for kernel_id in left_kernels:
            delete_kernel(jupyter_server, kernel_id)


async def test_a_run_whose_kernel_is_gone_is_reported_lost(jupyter_server, tmp_path):
    state_dir = tmp_path / "state"
    args = server_args(jupyter_server, state_dir)
    server = start_http_server(args)
    before = kernels(jupyter_server)
    try:
        async with http_client(server, "auto") as client:
            execution_id = await started(client, "execute_code", timeout=120,
                                         code="import time\nprint('started', flush=True)\ntime.sleep(60)")
            await until_shows(client, execution_id, "started")
            await anyio.sleep(1.5)
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=10)
        for kernel_id in kernels(jupyter_server) - before:
            delete_kernel(jupyter_server, kernel_id)

        server = start_http_server(args)
        async with http_client(server, "auto") as client:
            state, text = await get(client, execution_id, wait=10)
            assert state == "lost", text
            assert "the server restarted and the kernel" in text and "is gone" in text, text
            assert "started" in text, text  # the outputs it had are still shown
            listed = joined(await call(client, "list_executions"))
            assert f"{execution_id}\tlost\t" in listed, listed
    finally:
        server.stop()


async def test_a_graceful_stop_under_a_run_ends_it_with_a_reason(jupyter_server, tmp_path):
    """SIGTERM: our server stops the kernels it started, so the run cannot go on; after the
    restart it is never unknown: interrupted (stopped at exit), failed (the kernel went while it
    ran) or lost, with why."""
    state_dir = tmp_path / "state"
    args = server_args(jupyter_server, state_dir)
    server = start_http_server(args)
    try:
        async with http_client(server, "auto") as client:
            execution_id = await started(client, "execute_code", timeout=120, code="import time; time.sleep(60)")
            await anyio.sleep(1)
        server.stop()
        server = start_http_server(args)
        async with http_client(server, "auto") as client:
            state, text = await get(client, execution_id, wait=10)
            assert state in ("interrupted", "lost", "failed"), text
            assert f"Execution {execution_id}: {state} (" in text, text
    finally:
        server.stop()


async def test_records_past_the_retention_are_pruned(jupyter_server, tmp_path):
    state_dir = tmp_path / "state"
    args = server_args(jupyter_server, state_dir, "--execution-retention", "2s")
    server = start_http_server(args)
    try:
        async with http_client(server, "auto") as client:
            await call(client, "execute_code", code="print(1)")
            execution_id = await newest_id(client)
    finally:
        server.stop()
    await anyio.sleep(3)
    server = start_http_server(args)
    try:
        async with http_client(server, "auto") as client:
            unknown = await client.call_tool("get_execution", {"execution_id": execution_id})
            assert unknown.is_error and f"No execution '{execution_id}'" in joined(unknown), joined(unknown)
            assert "for 2s" in joined(unknown), joined(unknown)
    finally:
        server.stop()


async def test_no_state_dir_keeps_nothing_on_disk(jupyter_server, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    server = start_http_server(["start", "--jupyter-url", jupyter_server.url, "--jupyter-token",
                                jupyter_server.token, "--state-dir", "none"],
                               env={"HOME": str(home), "XDG_STATE_HOME": ""})
    try:
        async with http_client(server, "auto") as client:
            await call(client, "execute_code", code="print(1)")
            unknown = await client.call_tool("get_execution", {"execution_id": "nope"})
            assert "while the server runs" in joined(unknown), joined(unknown)
    finally:
        server.stop()
    assert not (home / ".local" / "state" / "jupyter-mcp-server").exists()


async def test_an_unreadable_store_is_moved_aside_not_emptied(jupyter_server, tmp_path):
    """A store file the server cannot read is kept whole beside a new one, the log says where, and
    recording goes on in the new store (answered after another restart)."""
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    damaged = b"half of a backup copied over the store " * 100
    (state_dir / "executions.redb").write_bytes(damaged)
    args = server_args(jupyter_server, state_dir)
    server = start_http_server(args)
    try:
        log = server.log.read_text(errors="replace")
        aside = [p for p in state_dir.iterdir() if ".unreadable-" in p.name]
        assert len(aside) == 1, list(state_dir.iterdir())
        assert aside[0].read_bytes() == damaged, "the unreadable store is kept whole"
        assert stat.S_IMODE(aside[0].stat().st_mode) == 0o600
        assert "could not be read" in log and str(aside[0]) in log and "nothing deleted" in log, log
        async with http_client(server, "auto") as client:
            await call(client, "execute_code", code="print('after the damage')")
            execution_id = await newest_id(client)
    finally:
        server.stop()
    server = start_http_server(args)
    try:
        async with http_client(server, "auto") as client:
            state, text = await get(client, execution_id)
            assert state == "finished" and "after the damage" in text, text
    finally:
        server.stop()


def drop_mid_call(server, body: dict, after: float) -> None:
    """A 2025-11-25 session that sends `body` and then drops its connection (no cancellation sent),
    as a client whose network went away does."""
    import http.client

    auth = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream"}
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    connection.request("POST", "/mcp", json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "dropped", "version": "1"}}}), auth)
    answer = connection.getresponse()
    session = answer.getheader("mcp-session-id")
    answer.read()
    headers = {**auth, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    connection.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                       headers)
    connection.getresponse().read()
    connection.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                                   "params": body}), headers)
    time.sleep(after)
    connection.sock.close()


async def test_a_client_dropped_mid_run_gets_the_run_when_it_retries_its_key(jupyter_server, tmp_path):
    """The connection drops while a foreground execute_code runs: the run goes on, and the client,
    reconnected in a new session, repeats its call with the same idempotency_key and gets that
    run's outputs; the code ran once."""
    server = start_http_server(server_args(jupyter_server, tmp_path / "state"))
    try:
        key = f"dropped-{uuid.uuid4().hex[:8]}"
        code = ("import time\nruns = globals().get('runs', 0) + 1\ntime.sleep(3)\n"
                "print('finished run', runs)")
        await anyio.to_thread.run_sync(drop_mid_call, server,
                                       {"name": "execute_code", "arguments": {"code": code, "idempotency_key": key}},
                                       1.0)
        async with http_client(server, "legacy") as client:
            again = await call(client, "execute_code", code=code, idempotency_key=key)
            assert "finished run 1" in joined(again), joined(again)
            counted = await call(client, "execute_code", code="print(runs)")
            assert joined(counted).strip() == "1", "the code ran once"
    finally:
        server.stop()


async def test_a_stdio_client_restarted_mid_run_gets_its_end_not_a_second_run(jupyter_server, tmp_path):
    """On stdio the server is the client's child: a client that goes mid-run takes the server (and
    the kernels it started) with it, after cancelling its call. Restarted on the same state dir,
    the client's retry with its idempotency_key gets how that run ended, and the code does not run
    again."""
    from conftest import client_for

    state = ["--document-backend", "file", "--state-dir", str(tmp_path / "state")]
    marks = tmp_path / "runs.txt"
    key = f"stdio-{uuid.uuid4().hex[:8]}"
    code = f"import time\nopen({str(marks)!r}, 'a').write('ran\\n')\ntime.sleep(60)"
    async with client_for(jupyter_server, "legacy", *state) as client:
        with anyio.move_on_after(3):
            await client.call_tool("execute_code", {"code": code, "idempotency_key": key, "timeout": 120})
    assert marks.read_text() == "ran\n"
    async with client_for(jupyter_server, "legacy", *state) as client:
        again = await client.call_tool("execute_code", {"code": code, "idempotency_key": key, "timeout": 120})
        text = joined(again)
        # The client's going cancelled the call (the kernel interrupted); the retry is told so.
        assert "interrupted" in text and "KeyboardInterrupt" in text, text
    assert marks.read_text() == "ran\n", "the code ran a second time"
