"""Several replicas, one truth (--state-store redis://): two processes of our server on one Jupyter
Server and one Redis answer for each other's executions. A background run started on one is read
on the other, running and then ended; an idempotency key sent to both runs its code once; a
replica killed mid-run is noticed by the other, which follows the run again on its kernel, or
reports it lost when the kernel is gone; the records in Redis hold no code; the store's password
comes only from the environment and is never logged, and a URL carrying one, a wrong or missing
password and an unreachable store each stop the start with a clear message. Through the official
client, a real Jupyter Server and Debian's redis-server on loopback (tests/ensure-redis)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import anyio
import pytest
from harness import Redis, free_port

from conftest import (answer, call, http_client, joined, log_of, modern, server_binary, server_env,
                      start_http_server)
from test_durable import ID_KEY, delete_kernel, get, kernels, started, until_shows
from test_protocol import WITH_TASKS

pytestmark = pytest.mark.anyio

PREFIX = b"jupyter-mcp:"


# ---- a real Redis on loopback (harness.Redis) ----

def redis_binary() -> str:
    binary = os.environ.get("JUPYTER_MCP_REDIS_BIN")
    if not binary:
        pytest.skip("no Redis for the replica tests: install it with `sudo apt-get install redis-server` "
                    "(tests/ensure-redis does it as root)")
    return binary


@pytest.fixture
def redis(tmp_path):
    server = Redis(redis_binary(), tmp_path / "redis")
    try:
        yield server
    finally:
        server.stop()


# ---- replicas ----

def replica_args(jupyter, state_dir: Path, *extra: str) -> list[str]:
    return ["start", "--jupyter-url", jupyter.url, "--jupyter-token", jupyter.token,
            "--document-backend", "file", "--state-dir", str(state_dir), *extra]


def replica(jupyter, tmp_path: Path, name: str, store: str | None, env: dict[str, str] | None = None):
    """One replica on a free port: its own --state-dir, the shared store by --state-store (or,
    with `store` None, through `env`)."""
    store_args = ["--state-store", store] if store else []
    return start_http_server(replica_args(jupyter, tmp_path / f"state-{name}", *store_args), env,
                             log_dir=tmp_path)


def killed(server) -> None:
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=10)


async def showing(client, execution_id, text, within: float):
    """The first answer whose outputs show `text`: (state, text)."""
    await until_shows(client, execution_id, text, within=within)
    return await get(client, execution_id)


async def until_ended(client, execution_id, within: float):
    """get_execution waiting, again and again, until the run has ended or `within` has passed."""
    deadline = time.monotonic() + within
    while True:
        left = deadline - time.monotonic()
        state, text = await get(client, execution_id, wait=max(0.0, min(left, 10.0)))
        if state != "running" or time.monotonic() >= deadline:
            return state, text


async def begun_on_a_seen_on_b(a, b, code: str, shown: str) -> str:
    """A background execute_code started through A, once B shows its output `shown` (so the
    store holds it): its execution id."""
    async with http_client(a, "auto") as client_a:
        execution_id = await started(client_a, "execute_code", timeout=120, code=code)
        async with http_client(b, "auto") as client_b:
            await until_shows(client_b, execution_id, shown, within=30)
    return execution_id


def refused_start(jupyter, tmp_path: Path, *extra: str, env: dict[str, str] | None = None,
                  within: float = 60) -> str:
    """A start that must end on its own, non-zero, before serving; its stderr."""
    args = [server_binary(), *replica_args(jupyter, tmp_path / "state-refused", *extra),
            "--transport", "streamable-http", "--port", str(free_port()), "--mcp-token", "test-token"]
    try:
        done = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=server_env(env), timeout=within)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"the server was still running after {within:.0f}s: "
                             f"{(e.stderr or b'').decode(errors='replace')[-4000:]}") from None
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode != 0, f"the start should have been refused:\n{stderr}"
    return stderr


# ---- the tests ----

async def test_a_background_run_started_on_one_replica_is_followed_on_another(jupyter_server, tmp_path, redis):
    """A starts the run; B, started afterwards on the same store (by the environment variable this
    time), shows it running with its first output, lists it, and waits for its end; A agrees."""
    a = replica(jupyter_server, tmp_path, "a", redis.url())
    b = None
    try:
        async with http_client(a, "auto") as client_a:
            execution_id = await started(client_a, "execute_code", timeout=120,
                                         code="import time\nprint('line-one', flush=True)\ntime.sleep(8)\nprint('line-two')")
            b = replica(jupyter_server, tmp_path, "b", None, env={"JUPYTER_MCP_STATE_STORE": redis.url()})
            async with http_client(b, "legacy") as client_b:
                state, text = await showing(client_b, execution_id, "line-one", within=30)
                assert state == "running" and "line-two" not in text, text
                listed = joined(await call(client_b, "list_executions"))
                assert f"{execution_id}\trunning\t" in listed, listed

                state, text = await until_ended(client_b, execution_id, within=60)
                assert state == "finished", text
                assert "line-one" in text and "line-two" in text, text
                assert text.index("line-one") < text.index("line-two"), text
                listed = joined(await call(client_b, "list_executions"))
                assert f"{execution_id}\tfinished\t" in listed, listed
            state, text = await get(client_a, execution_id)
            assert state == "finished" and "line-two" in text, text
    finally:
        if b:
            b.stop()
        a.stop()


async def test_an_idempotency_key_sent_to_both_replicas_runs_the_code_once(jupyter_server, tmp_path, redis):
    """The key sent to A, then to B, then to A again: one execution id, one run."""
    a = replica(jupyter_server, tmp_path, "a", redis.url())
    b = replica(jupyter_server, tmp_path, "b", redis.url())
    marks = tmp_path / "runs.txt"
    key = f"replicas-{uuid.uuid4().hex[:8]}"
    code = f"import time\nopen({str(marks)!r}, 'a').write('ran\\n')\ntime.sleep(2)\nprint('run-done')"
    try:
        async with http_client(a, "auto") as client_a, http_client(b, "auto") as client_b:
            first = await started(client_a, "execute_code", code=code, idempotency_key=key, timeout=120)
            again = await call(client_b, "execute_code", code=code, idempotency_key=key, timeout=120,
                               background=True)
            assert again.meta[ID_KEY] == first, (first, joined(again))
            assert "was not run again" in joined(again), joined(again)
            state, text = await until_ended(client_b, first, within=60)
            assert state == "finished" and "run-done" in text, text
            third = await call(client_a, "execute_code", code=code, idempotency_key=key, timeout=120,
                               background=True)
            assert third.meta[ID_KEY] == first, joined(third)
        assert marks.read_text() == "ran\n", "the code ran more than once"
    finally:
        b.stop()
        a.stop()


async def test_an_idempotency_key_sent_to_both_replicas_at_once_runs_the_code_once(jupyter_server, tmp_path,
                                                                                    redis):
    """The same key reaching A and B at the same moment (a client retrying through the load
    balancer): both answer one execution id, and the code runs once."""
    a = replica(jupyter_server, tmp_path, "a", redis.url())
    b = replica(jupyter_server, tmp_path, "b", redis.url())
    marks = tmp_path / "runs.txt"
    key = f"race-{uuid.uuid4().hex[:8]}"
    code = f"open({str(marks)!r}, 'a').write('ran\\n')\nprint('run-done')"
    try:
        async with http_client(a, "auto") as client_a, http_client(b, "auto") as client_b:
            ids = {}

            async def send(name, client):
                ids[name] = await started(client, "execute_code", code=code, idempotency_key=key, timeout=120)

            async with anyio.create_task_group() as group:
                group.start_soon(send, "a", client_a)
                group.start_soon(send, "b", client_b)
            assert ids["a"] == ids["b"], ids
            for client in (client_a, client_b):
                state, text = await until_ended(client, ids["a"], within=60)
                assert state == "finished" and "run-done" in text, text
        assert marks.read_text() == "ran\n", "the code ran more than once"
    finally:
        b.stop()
        a.stop()


async def test_a_replica_killed_mid_run_is_noticed_and_its_run_followed_again(jupyter_server, tmp_path, redis):
    """SIGKILL on A: its kernel runs on; B notices A is gone (within about 10-15 s), reopens the
    run on the kernel, and the run ends with every output."""
    before = kernels(jupyter_server)
    a = replica(jupyter_server, tmp_path, "a", redis.url())
    b = replica(jupyter_server, tmp_path, "b", redis.url())
    try:
        execution_id = await begun_on_a_seen_on_b(
            a, b, "import time\nprint('line-before', flush=True)\ntime.sleep(6)\nprint('line-after')", "line-before")
        killed(a)
        async with http_client(b, "auto") as client_b:
            state, text = await until_ended(client_b, execution_id, within=45)
            assert state == "finished", text
            assert "line-before" in text and "line-after" in text, text
            listed = joined(await call(client_b, "list_executions"))
            assert f"{execution_id}\tfinished\t" in listed, listed
    finally:
        b.stop()
        a.stop()
        for kernel_id in kernels(jupyter_server) - before:
            delete_kernel(jupyter_server, kernel_id)


async def test_a_cell_run_of_a_killed_replica_ends_with_its_outputs_in_the_cell(jupyter_server, tmp_path, redis):
    """execute_cell in the background on A (file backend), A killed mid-run: B follows the run
    again and writes its outputs into the cell by its id, as A would have at the run's end."""
    before = kernels(jupyter_server)
    name = f"replicated-{uuid.uuid4().hex[:8]}"
    path = f"{name}.ipynb"
    a = replica(jupyter_server, tmp_path, "a", redis.url())
    b = replica(jupyter_server, tmp_path, "b", redis.url())
    try:
        async with http_client(a, "auto") as client_a:
            await call(client_a, "use_notebook", notebook_name=name, notebook_path=path, mode="create")
            await call(client_a, "insert_cell", cell_index=-1, cell_type="markdown", cell_source="# above")
            await call(client_a, "insert_cell", cell_index=-1, cell_type="code",
                       cell_source="import time\nprint('cell-before', flush=True)\ntime.sleep(6)\nprint('cell-after')")
            execution_id = await started(client_a, "execute_cell", cell_index=1, timeout=120)
            async with http_client(b, "auto") as client_b:
                await until_shows(client_b, execution_id, "cell-before", within=30)
        killed(a)
        async with http_client(b, "auto") as client_b:
            state, text = await until_ended(client_b, execution_id, within=45)
            assert state == "finished", text
            assert "cell-after" in text, text
        notebook = json.loads((jupyter_server.root / path).read_text())
        assert [c["cell_type"] for c in notebook["cells"]] == ["markdown", "code"], notebook["cells"]
        cell = notebook["cells"][1]
        shown = "".join("".join(o.get("text", "")) for o in cell["outputs"])
        assert "cell-before" in shown and "cell-after" in shown, cell
        assert shown.index("cell-before") < shown.index("cell-after"), cell
        assert isinstance(cell["execution_count"], int), cell
    finally:
        b.stop()
        a.stop()
        for kernel_id in kernels(jupyter_server) - before:
            delete_kernel(jupyter_server, kernel_id)


async def test_a_run_of_a_killed_replica_whose_kernel_is_gone_is_reported_lost(jupyter_server, tmp_path, redis):
    before = kernels(jupyter_server)
    a = replica(jupyter_server, tmp_path, "a", redis.url())
    b = replica(jupyter_server, tmp_path, "b", redis.url())
    try:
        execution_id = await begun_on_a_seen_on_b(
            a, b, "import time\nprint('line-started', flush=True)\ntime.sleep(60)", "line-started")
        run_kernels = kernels(jupyter_server) - before
        assert run_kernels, "the run's kernel is not among the Jupyter Server's kernels"
        killed(a)
        for kernel_id in run_kernels:
            delete_kernel(jupyter_server, kernel_id)
        async with http_client(b, "auto") as client_b:
            state, text = await until_ended(client_b, execution_id, within=45)
            assert state == "lost", text
            assert f"Execution {execution_id}: lost (" in text, text  # with the reason
            assert "line-started" in text, text  # the outputs it had are still shown
            listed = joined(await call(client_b, "list_executions"))
            assert f"{execution_id}\tlost\t" in listed, listed
    finally:
        b.stop()
        a.stop()
        for kernel_id in kernels(jupyter_server) - before:
            delete_kernel(jupyter_server, kernel_id)


def task_on(server, task_id: str) -> dict:
    """tasks/get for `task_id`, sent to `server` as a stateless 2026-07-28 request; the JSON-RPC answer."""
    return answer(modern(server, "tasks/get", {"taskId": task_id}, capabilities=WITH_TASKS))


def task_until(server, task_id: str, until, within: float) -> dict:
    deadline = time.monotonic() + within
    while True:
        reply = task_on(server, task_id)
        assert "result" in reply, reply
        if until(reply["result"]) or time.monotonic() >= deadline:
            return reply["result"]
        time.sleep(0.2)


async def test_a_task_started_on_one_replica_is_answered_by_the_other(jupyter_server, tmp_path, redis):
    """A stateless client (2026-07-28, tasks declared) runs execute_code as a task on A; its
    tasks/get reaching B, as any request may behind a load balancer, is answered from the shared
    record: working while the code runs, then completed with the run's outputs, as A says too."""
    a = replica(jupyter_server, tmp_path, "a", redis.url())
    b = replica(jupyter_server, tmp_path, "b", redis.url())
    try:
        code = "import time\nprint('task-begun', flush=True)\ntime.sleep(4)\nprint(6 * 7)"
        created = answer(modern(a, "tools/call", {"name": "execute_code", "arguments": {"code": code, "timeout": 120}},
                                capabilities=WITH_TASKS))["result"]
        assert created["resultType"] == "task", created
        task_id = created["taskId"]
        # The record reaches the store as the run begins, a moment after A answered with the task.
        deadline = time.monotonic() + 5
        while "result" not in (reply := task_on(b, task_id)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "result" in reply, f"B does not know A's task: {reply}"
        assert reply["result"]["status"] == "working", reply
        assert reply["result"]["taskId"] == task_id, reply

        done = task_until(b, task_id, lambda t: t["status"] != "working", within=60)
        assert done["status"] == "completed", done
        text = "".join(c.get("text", "") for c in done["result"]["content"])
        assert "task-begun" in text and "42" in text, done
        on_a = task_until(a, task_id, lambda t: t["status"] != "working", within=30)
        assert on_a["status"] == "completed", on_a
        assert "42" in "".join(c.get("text", "") for c in on_a["result"]["content"]), on_a

        # An id no replica handed out is still refused, by both.
        for server in (a, b):
            assert task_on(server, "no-such-task")["error"]["code"] == -32602
    finally:
        b.stop()
        a.stop()


async def test_the_records_in_redis_hold_outputs_but_never_the_code(jupyter_server, tmp_path, redis):
    """On database 5 of the URL: every key under `jupyter-mcp:`, none on database 0; the run's
    output is there (a check that the values are read as kept), the code's secret nowhere, nor
    the Jupyter token."""
    secret = f"code-secret-{uuid.uuid4().hex}"
    shown = secret[::-1]  # what the run prints: in the outputs, never in the code
    a = replica(jupyter_server, tmp_path, "a", redis.url(5))
    b = replica(jupyter_server, tmp_path, "b", redis.url(5))
    try:
        async with http_client(a, "auto") as client_a, http_client(b, "auto") as client_b:
            execution_id = await started(client_a, "execute_code", timeout=120,
                                         idempotency_key=f"key-{uuid.uuid4().hex[:8]}",
                                         code=f"hidden = {secret!r}\nprint(hidden[::-1])")
            state, text = await until_ended(client_b, execution_id, within=60)
            assert state == "finished" and shown in text, text
            await call(client_b, "execute_code", code=f"print({secret!r}[::-1], 'foreground')")
        contents = redis.contents(db=5)
        assert contents, "no keys in the store's database"
        outside = [key for key in contents if not key.startswith(PREFIX)]
        assert not outside, f"keys outside the {PREFIX.decode()} prefix: {outside}"
        assert not redis.contents(db=0), "keys written to database 0, not the URL's"
        everything = b"\n".join(key + b"\n" + b"\n".join(parts) for key, parts in contents.items())
        assert shown.encode() in everything, "the run's output is not in the store as kept"
        assert secret.encode() not in everything, "the code is in the store"
        assert jupyter_server.token.encode() not in everything, "the Jupyter token is in the store"
    finally:
        b.stop()
        a.stop()


@pytest.mark.parametrize("username", [None, "replica"], ids=["default-user", "acl-user"])
async def test_the_store_password_comes_from_the_environment_and_is_never_logged(jupyter_server, tmp_path,
                                                                                 username):
    """A Redis that requires a password (and, with a username, an ACL user of its own whose
    password differs from the default user's): the server given it in
    JUPYTER_MCP_STATE_STORE_PASSWORD (and _USERNAME) keeps its records there, never writing the
    password to its log, its argv or the store."""
    default_password = f"default-{uuid.uuid4().hex}"
    user_password = f"user-{uuid.uuid4().hex}"
    password = user_password if username else default_password
    store = Redis(redis_binary(), tmp_path / "redis", password=default_password,
                  users={username: user_password} if username else None)
    env = {"JUPYTER_MCP_STATE_STORE_PASSWORD": password}
    if username:
        env["JUPYTER_MCP_STATE_STORE_USERNAME"] = username
    a = b = None
    try:
        a = replica(jupyter_server, tmp_path, "a", store.url(), env=env)
        b = replica(jupyter_server, tmp_path, "b", store.url(), env=env)
        async with http_client(a, "auto") as client_a, http_client(b, "auto") as client_b:
            execution_id = await started(client_a, "execute_code", code="print('behind a password')")
            state, text = await until_ended(client_b, execution_id, within=60)
            assert state == "finished" and "behind a password" in text, text
        assert any(key.startswith(PREFIX) for key in store.contents()), "nothing in the store"
        everything = b"\n".join(b"\n".join(parts) for parts in store.contents().values())
        assert password.encode() not in everything
        for server in (a, b):
            assert password.encode() not in Path(f"/proc/{server.process.pid}/cmdline").read_bytes()
            assert password not in log_of(server), "the store's password is in the server's log"
    finally:
        for server in (b, a):
            if server:
                server.stop()
        store.stop()


async def test_a_store_over_tls_is_used_with_the_ca_the_operator_trusts(jupyter_server, tmp_path):
    """rediss://: a Redis speaking TLS only, its certificate from a private CA. Two replicas
    trusting that CA (SSL_CERT_FILE, as for any program using the system's roots) share their
    records over TLS; a replica that does not trust it is refused at start, saying so."""
    store = Redis(redis_binary(), tmp_path / "redis", tls=True)
    a = b = None
    try:
        assert store.url().startswith("rediss://")
        trusting = {"SSL_CERT_FILE": str(store.ca)}
        stderr = refused_start(jupyter_server, tmp_path, "--state-store", store.url())
        assert "state store" in stderr.lower() and store.host in stderr, stderr
        assert "SSL_CERT_FILE" in stderr, stderr
        assert not store.contents(), "a refused start wrote to the store"

        a = replica(jupyter_server, tmp_path, "a", store.url(), env=trusting)
        b = replica(jupyter_server, tmp_path, "b", store.url(), env=trusting)
        async with http_client(a, "auto") as client_a, http_client(b, "auto") as client_b:
            execution_id = await started(client_a, "execute_code", code="print('over tls')")
            state, text = await until_ended(client_b, execution_id, within=60)
            assert state == "finished" and "over tls" in text, text
        assert any(key.startswith(PREFIX) for key in store.contents()), "nothing in the store"
    finally:
        for server in (b, a):
            if server:
                server.stop()
        store.stop()


async def test_a_wrong_or_missing_store_password_stops_the_start_clearly(jupyter_server, tmp_path):
    password = f"right-{uuid.uuid4().hex}"
    store = Redis(redis_binary(), tmp_path / "redis", password=password)
    try:
        wrong = f"wrong-{uuid.uuid4().hex}"
        for env in ({"JUPYTER_MCP_STATE_STORE_PASSWORD": wrong}, {}):
            stderr = refused_start(jupyter_server, tmp_path, "--state-store", store.url(), env=env)
            lowered = stderr.lower()
            assert "password" in lowered or "authentication" in lowered, stderr
            assert store.host in stderr, stderr
            assert wrong not in stderr and password not in stderr, stderr
    finally:
        store.stop()


async def test_a_store_url_carrying_a_password_is_refused(jupyter_server, tmp_path, redis):
    secret = f"in-url-{uuid.uuid4().hex}"
    for url in (f"redis://:{secret}@{redis.host}", f"redis://someone:{secret}@{redis.host}/0"):
        stderr = refused_start(jupyter_server, tmp_path, "--state-store", url)
        assert "JUPYTER_MCP_STATE_STORE_PASSWORD" in stderr, stderr
        assert secret not in stderr, stderr
        # The same URL through the environment variable is refused alike.
        stderr = refused_start(jupyter_server, tmp_path, env={"JUPYTER_MCP_STATE_STORE": url})
        assert "JUPYTER_MCP_STATE_STORE_PASSWORD" in stderr and secret not in stderr, stderr
    assert not redis.contents(), "a refused start wrote to the store"


async def test_an_unreachable_store_stops_the_start_clearly(jupyter_server, tmp_path):
    port = free_port()  # closed: nothing listens on it
    password = f"never-{uuid.uuid4().hex}"
    stderr = refused_start(jupyter_server, tmp_path, "--state-store", f"redis://127.0.0.1:{port}",
                           env={"JUPYTER_MCP_STATE_STORE_PASSWORD": password})
    assert "Redis" in stderr and f"127.0.0.1:{port}" in stderr, stderr
    assert "state store" in stderr.lower(), stderr
    assert password not in stderr, stderr


async def test_in_hub_mode_a_users_run_on_a_killed_replica_is_followed_by_the_other(tmp_path, redis):
    """Two replicas in Hub mode (a real JupyterHub, each user on their own server) on one Redis:
    a user's background run started through A is read through B; A killed, B, which the user
    reaches next, follows the run again on the user's server and it ends with every output.
    Another user's calls see nothing of it."""
    from harness import start_hub, stop_hub
    from test_hub import hub_client, proxy_bin

    hub = start_hub(tmp_path / "hub", proxy_bin())
    a = b = None
    try:
        for user in ("frank", "grace"):
            hub.add_user(user)
        frank, _ = hub.new_token("frank")
        grace, _ = hub.new_token("grace")
        args = ["start", "--jupyterhub-url", hub.url, "--state-store", redis.url()]
        a = start_http_server(args, hub_mode=True, log_dir=tmp_path)
        b = start_http_server(args, hub_mode=True, log_dir=tmp_path)
        async with hub_client(a.mcp_url, frank) as client_a:
            execution_id = await started(client_a, "execute_code", timeout=120,
                                         code="import time\nprint('hub-before', flush=True)\ntime.sleep(8)\nprint('hub-after')")
            async with hub_client(b.mcp_url, frank) as client_b:
                await until_shows(client_b, execution_id, "hub-before", within=60)
        killed(a)
        async with hub_client(b.mcp_url, frank) as client_b:
            state, text = await until_ended(client_b, execution_id, within=60)
            assert state == "finished", text
            assert "hub-before" in text and "hub-after" in text, text
        async with hub_client(b.mcp_url, grace) as client_grace:
            theirs = await client_grace.call_tool("get_execution", {"execution_id": execution_id})
            assert theirs.is_error, joined(theirs)
            assert "hub-" not in joined(theirs), joined(theirs)
            assert execution_id not in joined(await call(client_grace, "list_executions"))
    finally:
        for server in (b, a):
            if server:
                server.stop()
        stop_hub(hub)


async def test_records_and_key_claims_made_while_redis_is_away_are_replayed(jupyter_server, tmp_path, redis):
    """Redis paused (SIGSTOP) for a while: both replicas keep answering, /api/healthz says the
    store is failing, and once Redis answers again what each recorded meanwhile reaches it (the
    other replica reads it); one idempotency key run on both during the outage is reported as a
    conflict on the replica that claimed it second."""
    import urllib.request

    a = replica(jupyter_server, tmp_path, "a", redis.url())
    b = replica(jupyter_server, tmp_path, "b", redis.url())
    key = f"outage-{uuid.uuid4().hex[:8]}"
    try:
        async with http_client(a, "auto") as client_a, http_client(b, "auto") as client_b:
            os.kill(redis.process.pid, signal.SIGSTOP)
            try:
                on_a = await started(client_a, "execute_code", code="print('ran on a while redis was away')",
                                     timeout=60)
                keyed_a = await started(client_a, "execute_code", code="print('keyed on a')",
                                        idempotency_key=key, timeout=60)
                keyed_b = await started(client_b, "execute_code", code="print('keyed on b')",
                                        idempotency_key=key, timeout=60)
                assert keyed_a != keyed_b, "neither could know of the other's run"
                for client, execution_id in ((client_a, on_a), (client_a, keyed_a), (client_b, keyed_b)):
                    await until_ended(client, execution_id, within=60)
                with urllib.request.urlopen(a.base + "/api/healthz", timeout=30) as response:
                    shown = json.load(response)
                assert shown["status"] == "degraded" and shown["state_store"]["status"] == "failing", shown
            finally:
                os.kill(redis.process.pid, signal.SIGCONT)
            # Replayed: B reads what A ran while Redis was away.
            deadline = time.monotonic() + 60
            text = ""
            while time.monotonic() < deadline:
                # Unknown to B until A's writer has replayed it.
                text = joined(await client_b.call_tool("get_execution", {"execution_id": on_a}))
                if "ran on a while redis was away" in text:
                    break
                await anyio.sleep(1)
            assert "ran on a while redis was away" in text, text
            # The key: one replica claimed it on replay, the other reports the conflict.
            conflicts = []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not conflicts:
                for client, execution_id in ((client_a, keyed_a), (client_b, keyed_b)):
                    _, shown_text = await get(client, execution_id)
                    if "[KEY CONFLICT" in shown_text:
                        conflicts.append((execution_id, shown_text))
                await anyio.sleep(1)
            assert len(conflicts) == 1, conflicts
            (loser, said), = conflicts
            winner = keyed_b if loser == keyed_a else keyed_a
            assert f"as execution {winner}" in said and "ran twice" in said, said
            assert "the state store (Redis at" in log_of(a) and "answers again" in log_of(a)
    finally:
        b.stop()
        a.stop()
