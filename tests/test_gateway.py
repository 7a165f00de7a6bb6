"""Kernels on a cluster: a real Jupyter Enterprise Gateway and a real Jupyter Kernel Gateway on
loopback (`tests/ensure-gateways`), in both topologies operators use: a Jupyter Server that hands
its kernels to the gateway (`--GatewayClient.url`), and our `--code-sandbox-url` straight at the
gateway with the notebooks on a Jupyter Server."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from conftest import client_for, joined, server_binary, server_env
from gateways import gateway_venvs, start_enterprise_gateway, start_jupyter_on_gateway, start_kernel_gateway
from harness import free_port, stop_jupyter

pytestmark = pytest.mark.anyio

# A lost first execution used to hang until its timeout: far below it, an answer is an answer.
FIRST_TIMEOUT = 45


@pytest.fixture(scope="module")
def gateway_tmp():
    tmp = Path(tempfile.mkdtemp(prefix="jmcp-gateway-"))
    yield tmp
    shutil.rmtree(tmp, ignore_errors=True)


SLOW_SECONDS = 5
START_SECONDS = 5
SLOW_START_PROXY = '''
import asyncio
from enterprise_gateway.services.processproxies.processproxy import LocalProcessProxy


class SlowStartProxy(LocalProcessProxy):
    """A local kernel launched only after a delay, as a pod is once scheduled."""

    async def launch_process(self, kernel_cmd, **kwargs):
        await asyncio.sleep(float(self.proxy_config.get("delay", 5)))
        return await super().launch_process(kernel_cmd, **kwargs)
'''


@pytest.fixture(scope="module")
def enterprise_gateway(gateway_tmp):
    # 'slow': a kernel that answers only after SLOW_SECONDS, as one in a pod being scheduled.
    slow = gateway_tmp / "eg" / "data" / "kernels" / "slow"
    slow.mkdir(parents=True)
    # The gateway's own python by its path: a start relayed by a Jupyter Server brings an
    # environment of its own, without the gateway's PATH.
    python = gateway_venvs()[0] / "bin" / "python"
    (slow / "kernel.json").write_text(json.dumps({
        "argv": ["sh", "-c", f"sleep {SLOW_SECONDS}; exec {python} -m ipykernel_launcher -f {{connection_file}}"],
        "display_name": "Slow", "language": "python"}))
    # 'slowstart': a start request the gateway answers only after START_SECONDS, as Enterprise
    # Gateway does for a kernel whose pod is being scheduled (its process proxy waits there).
    proxies = gateway_tmp / "eg" / "proxies"
    proxies.mkdir(parents=True)
    (proxies / "slowstart.py").write_text(SLOW_START_PROXY)
    slowstart = gateway_tmp / "eg" / "data" / "kernels" / "slowstart"
    slowstart.mkdir(parents=True)
    (slowstart / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Slow to start", "language": "python",
        "metadata": {"process_proxy": {"class_name": "slowstart.SlowStartProxy",
                                       "config": {"delay": START_SECONDS}}}}))
    gateway = start_enterprise_gateway(gateway_tmp / "eg", data_dir=gateway_tmp / "eg" / "data",
                                       env={"PYTHONPATH": str(proxies)})
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def kernel_gateway(gateway_tmp):
    gateway = start_kernel_gateway(gateway_tmp / "kg")
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def jupyter_on_gateway(gateway_tmp, enterprise_gateway):
    server = start_jupyter_on_gateway(gateway_tmp / "js", enterprise_gateway)
    yield server
    stop_jupyter(server)


def through_jupyter(jupyter_on_gateway, *args, env=None):
    """Topology 1: our server at a Jupyter Server whose kernels live on the gateway."""
    return client_for(jupyter_on_gateway, "legacy", *args, env=env)


def straight_at(gateway, jupyter_server, *args, env=None):
    """Topology 2: kernels straight on the gateway, notebooks on the session's Jupyter Server."""
    return client_for(jupyter_server, "legacy", "--code-sandbox-url", gateway.url, *args,
                      env={"CODE_SANDBOX_TOKEN": gateway.token, **(env or {})})


async def first_execution_answers(client) -> None:
    result = await client.call_tool("execute_code", {"code": "print('first'); 6 * 7", "timeout": FIRST_TIMEOUT})
    text = joined(result)
    assert not result.is_error and "first" in text and "42" in text and "TIMEOUT" not in text, text


async def first_cell_answers(client) -> None:
    path = f"gw-{uuid.uuid4().hex[:6]}.ipynb"
    await client.call_tool("use_notebook", {"notebook_name": "gw", "notebook_path": path, "mode": "create"})
    result = await client.call_tool("insert_execute_code_cell", {
        "cell_index": -1, "cell_source": "print('cell one'); 2 + 3", "timeout": FIRST_TIMEOUT,
    })
    text = joined(result)
    assert not result.is_error and "cell one" in text and "5" in text and "TIMEOUT" not in text, text


def start_kernel_on(server, name: str) -> str:
    status, model = server.request("POST", "/api/kernels", {"name": name})
    assert status == 201, model
    return model["id"]


# ---- item 1: the first execution on a new kernel is never lost ----

async def test_first_execution_through_a_jupyter_server_on_enterprise_gateway(jupyter_on_gateway,
                                                                               enterprise_gateway):
    before = enterprise_gateway.kernel_ids()
    async with through_jupyter(jupyter_on_gateway) as client:
        await first_execution_answers(client)
        # The kernel really runs on the gateway.
        assert enterprise_gateway.kernel_ids() - before
        await first_cell_answers(client)
    assert enterprise_gateway.kernel_ids() == before, "the kernels we started were stopped at exit"


async def test_first_execution_straight_at_enterprise_gateway(enterprise_gateway, jupyter_server):
    async with straight_at(enterprise_gateway, jupyter_server) as client:
        await first_execution_answers(client)
        await first_cell_answers(client)
        listed = joined(await client.call_tool("list_notebooks", {}))
        kernel_id = next(line for line in listed.split("\n") if line.startswith("gw\t")).split("\t")[2]
        assert kernel_id in enterprise_gateway.kernel_ids()


async def test_first_execution_with_kernel_gateway_as_the_code_sandbox(kernel_gateway, jupyter_server, tmp_path):
    # Tokens in the environment, as the start log asks (a token flag is a warning).
    args = ["start", "--jupyter-url", jupyter_server.url, "--code-sandbox-url", kernel_gateway.url]
    params = StdioServerParameters(command=server_binary(), args=args, env=server_env({
        "JUPYTER_TOKEN": jupyter_server.token, "CODE_SANDBOX_TOKEN": kernel_gateway.token}))
    errlog = tmp_path / "server.log"
    with open(errlog, "w") as err:
        async with Client(stdio_client(params, errlog=err), mode="legacy", read_timeout_seconds=120) as client:
            await first_execution_answers(client)
            assert kernel_gateway.kernel_ids()
            await first_cell_answers(client)
    # A gateway has no /api/status: its readiness is asked another way, with no warning at start.
    logged = errlog.read_text()
    assert "serving MCP on stdio" in logged and " WARN " not in logged, logged


# ---- item 2: a refusal carries its reason, and who gave it ----

@pytest.fixture(scope="module")
def refusing_gateway(gateway_tmp):
    """Enterprise Gateway as it ships: refusing root (its default `unauthorized_users`); with a
    kernelspec whose kernel cannot launch."""
    data = gateway_tmp / "eg-refusing" / "data"
    broken = data / "kernels" / "broken"
    broken.mkdir(parents=True)
    (broken / "kernel.json").write_text(
        '{"argv": ["/nonexistent/python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],'
        ' "display_name": "Broken", "language": "python"}')
    gateway = start_enterprise_gateway(gateway_tmp / "eg-refusing", refuse_root=True, data_dir=data)
    yield gateway
    gateway.stop()


async def test_a_gateway_refusing_the_user_is_reported_with_its_reason(refusing_gateway, jupyter_server):
    async with straight_at(refusing_gateway, jupyter_server) as client:
        result = await client.call_tool("execute_code", {"code": "1", "timeout": 30})
        text = joined(result)
        assert result.is_error, text
        assert "Enterprise Gateway at http://127.0.0.1:" in text, text
        assert "User 'root' is not authorized" in text and "--kernel-env" in text, text
        assert "token" not in text.lower(), text
    # Told who the kernel's user is (KERNEL_USERNAME, read from our environment: a bare key),
    # the gateway starts it.
    async with straight_at(refusing_gateway, jupyter_server, "--kernel-env", "KERNEL_USERNAME",
                           env={"KERNEL_USERNAME": "alice"}) as client:
        result = await client.call_tool("execute_code", {"code": "import os; os.environ['KERNEL_USERNAME']",
                                                         "timeout": FIRST_TIMEOUT})
        assert not result.is_error and "alice" in joined(result), joined(result)


async def test_a_refusal_relayed_by_a_jupyter_server_names_the_gateway(refusing_gateway, gateway_tmp):
    server = start_jupyter_on_gateway(gateway_tmp / "js-refusing", refusing_gateway)
    try:
        async with through_jupyter(server) as client:
            result = await client.call_tool("execute_code", {"code": "1", "timeout": 30})
            text = joined(result)
            assert result.is_error, text
            assert "the gateway behind the Jupyter Server at" in text and "log" in text, text
            assert "Check --jupyter-token" not in text, text
    finally:
        stop_jupyter(server)


async def test_a_kernel_that_cannot_launch_is_reported_with_the_gateway_s_reason(refusing_gateway,
                                                                                 jupyter_server):
    async with straight_at(refusing_gateway, jupyter_server, "--kernel-env", "KERNEL_USERNAME=alice") as client:
        path = f"broken-{uuid.uuid4().hex[:6]}.ipynb"
        result = await client.call_tool("use_notebook", {"notebook_name": "b", "notebook_path": path,
                                                         "mode": "create", "kernel_name": "broken"})
        text = joined(result)
        assert result.is_error, text
        assert "Enterprise Gateway at http://127.0.0.1:" in text and "HTTP 500" in text, text
        assert "/nonexistent/python" in text or "No such file" in text, text
        assert "token" not in text.lower(), text


# ---- item 3: cluster realities ----

async def test_kernel_env_reaches_the_gateway_s_kernel_and_secrets_stay_off_argv(enterprise_gateway,
                                                                                 jupyter_server):
    secret = uuid.uuid4().hex
    async with straight_at(enterprise_gateway, jupyter_server, "--kernel-env", "KERNEL_NAMESPACE=team-a",
                           "--kernel-env", "KERNEL_TEAM_SECRET", env={"KERNEL_TEAM_SECRET": secret}) as client:
        result = await client.call_tool("execute_code", {
            "code": "import os; print(os.environ['KERNEL_NAMESPACE'], os.environ['KERNEL_TEAM_SECRET'])",
            "timeout": FIRST_TIMEOUT})
        assert f"team-a {secret}" in joined(result), joined(result)
    # Nothing on any command line names the secret.
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                assert secret.encode() not in (entry / "cmdline").read_bytes()
            except OSError:
                continue


async def test_a_kernel_culled_by_the_gateway_is_reported_gone(gateway_tmp, jupyter_server):
    culling = start_enterprise_gateway(
        gateway_tmp / "eg-culling", "--RemoteMappingKernelManager.cull_idle_timeout=3",
        "--RemoteMappingKernelManager.cull_interval=1", "--RemoteMappingKernelManager.cull_connected=True")
    try:
        async with straight_at(culling, jupyter_server) as client:
            await first_cell_answers(client)
            listed = joined(await client.call_tool("list_notebooks", {}))
            kernel_id = next(line for line in listed.split("\n") if line.startswith("gw\t")).split("\t")[2]
            deadline = time.monotonic() + 60
            while kernel_id in culling.kernel_ids():
                assert time.monotonic() < deadline, "the gateway never culled the idle kernel"
                await anyio.sleep(0.5)
            deadline = time.monotonic() + 30
            while True:
                result = await client.call_tool("execute_cell", {"cell_index": 0, "timeout": 30})
                if result.is_error:
                    break
                assert time.monotonic() < deadline, "the culled kernel was never seen gone"
                await anyio.sleep(0.2)
            text = joined(result)
            assert "is gone" in text and "restart_notebook" in text, text
            restarted = await client.call_tool("restart_notebook", {"notebook_name": "gw"})
            assert not restarted.is_error, joined(restarted)
            again = await client.call_tool("execute_cell", {"cell_index": 0, "timeout": FIRST_TIMEOUT})
            assert "cell one" in joined(again), joined(again)
    finally:
        culling.stop()


async def test_a_gateway_restarted_under_us_is_never_a_hang(gateway_tmp, jupyter_server):
    port = free_port()
    token = uuid.uuid4().hex
    gateway = start_enterprise_gateway(gateway_tmp / "eg-restarted", port=port, token=token)
    try:
        async with straight_at(gateway, jupyter_server) as client:
            await first_execution_answers(client)
            await client.call_tool("execute_code", {"code": "kept = 1"})
            gateway.stop()
            gateway = start_enterprise_gateway(gateway_tmp / "eg-restarted", port=port, token=token)
            started = time.monotonic()
            result = await client.call_tool("execute_code", {"code": "print(kept)", "timeout": 60})
            text = joined(result)
            assert time.monotonic() - started < 45, "the lost kernel was waited on"
            assert result.is_error and "lost" in text, text
            # The loss was reported once; the next call gets a fresh kernel on the new gateway.
            fresh = await client.call_tool("execute_code", {"code": "print('fresh')", "timeout": FIRST_TIMEOUT})
            assert "fresh" in joined(fresh), joined(fresh)
    finally:
        gateway.stop()


async def test_a_slow_kernel_is_waited_for_and_refused_past_the_start_timeout(enterprise_gateway,
                                                                              jupyter_server):
    """A kernel whose process takes seconds before it answers, as one in a pod being scheduled.
    Enterprise Gateway answers the socket's upgrade only once the kernel answers."""
    async with straight_at(enterprise_gateway, jupyter_server, "--kernel-start-timeout", "120") as client:
        slow = enterprise_gateway.start_kernel("slow")
        try:
            result = await client.call_tool("execute_code", {"code": "print('answered')", "kernel_id": slow,
                                                             "timeout": 5})
            # The execution's own 5 s started once the kernel answered.
            assert not result.is_error and "answered" in joined(result), joined(result)
        finally:
            enterprise_gateway.request("DELETE", f"/api/kernels/{slow}")

    async with straight_at(enterprise_gateway, jupyter_server, "--kernel-start-timeout", "1") as client:
        slow = enterprise_gateway.start_kernel("slow")
        try:
            result = await client.call_tool("execute_code", {"code": "1", "kernel_id": slow, "timeout": 30})
            text = joined(result)
            assert result.is_error and "did not answer within 1 s (--kernel-start-timeout)" in text, text
        finally:
            enterprise_gateway.request("DELETE", f"/api/kernels/{slow}")


# ---- item 4: prewarm, auto-restart, interrupt and cancellation through a gateway ----

async def test_spares_come_from_the_gateway_and_answer_at_once(enterprise_gateway, jupyter_server):
    async with straight_at(enterprise_gateway, jupyter_server, "--capability", "kernel.prewarm") as client:
        deadline = time.monotonic() + 90
        while "[kernel.prewarm]" not in joined(await client.call_tool("list_kernels", {})):
            assert time.monotonic() < deadline, "no spare kernel on the gateway"
            await anyio.sleep(0.2)
        listing = joined(await client.call_tool("list_kernels", {}))
        spare = listing.split("[kernel.prewarm]", 1)[1].split(":", 1)[1].split(",")[0].strip()
        assert spare in enterprise_gateway.kernel_ids()
        await first_execution_answers(client)


async def test_auto_restart_replaces_a_kernel_deleted_on_the_gateway(enterprise_gateway, jupyter_server):
    async with straight_at(enterprise_gateway, jupyter_server, "--capability", "kernel.auto-restart") as client:
        await first_cell_answers(client)
        listed = joined(await client.call_tool("list_notebooks", {}))
        kernel_id = next(line for line in listed.split("\n") if line.startswith("gw\t")).split("\t")[2]
        status, _ = enterprise_gateway.request("DELETE", f"/api/kernels/{kernel_id}")
        assert status == 204
        deadline = time.monotonic() + 30
        while f"\t{kernel_id}\tdead\t" not in joined(await client.call_tool("list_notebooks", {})):
            assert time.monotonic() < deadline, "the deleted kernel was never seen lost"
            await anyio.sleep(0.1)
        result = await client.call_tool("execute_cell", {"cell_index": 0, "timeout": FIRST_TIMEOUT})
        text = joined(result)
        assert "KERNEL REPLACED" in text and "cell one" in text, text


async def test_interrupt_and_cancellation_through_a_jupyter_server_on_the_gateway(jupyter_on_gateway):
    async with through_jupyter(jupyter_on_gateway) as client:
        await client.call_tool("execute_code", {"code": "marker = 'kept'", "timeout": FIRST_TIMEOUT})
        slept = {}

        async def sleep():
            slept["result"] = await client.call_tool("execute_code", {"code": "import time; time.sleep(60)",
                                                                      "timeout": 120})

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(sleep)
            deadline = time.monotonic() + 60
            while not joined(await client.call_tool("interrupt_kernel", {})).startswith("Interrupted"):
                assert time.monotonic() < deadline, "the sleep never started"
                await anyio.sleep(0.1)
        assert "KeyboardInterrupt" in joined(slept["result"]), joined(slept["result"])

        with anyio.move_on_after(2) as scope:
            await client.call_tool("execute_code", {"code": "import time\nwhile True: time.sleep(0.05)",
                                                    "timeout": 120})
        assert scope.cancelled_caught
        started = time.monotonic()
        result = await client.call_tool("execute_code", {"code": "print(marker)", "timeout": 30})
        assert "kept" in joined(result), joined(result)
        assert time.monotonic() - started < 20, "the cancelled execution was not interrupted"


async def test_a_kernel_start_the_gateway_answers_late_is_reported_and_bounded(enterprise_gateway,
                                                                             jupyter_server):
    """The start request itself pending for seconds (a pod being scheduled): the caller hears
    what is awaited while it waits, and past --kernel-start-timeout the call fails saying so."""
    async with straight_at(enterprise_gateway, jupyter_server, "--kernel-start-timeout", "120") as client:
        heard = []

        async def on_progress(progress, total, message):
            heard.append(message or "")

        result = await client.call_tool("use_notebook", {
            "notebook_name": "late", "notebook_path": f"late-{uuid.uuid4().hex[:6]}.ipynb", "mode": "create",
            "kernel_name": "slowstart"}, progress_callback=on_progress)
        assert not result.is_error, joined(result)
        assert any("Waiting for the kernel to start" in m and "--kernel-start-timeout" in m for m in heard), heard
        # The notebook's kernel is the late one, and it runs code.
        ran = await client.call_tool("execute_code", {"code": "print('late but here')", "timeout": FIRST_TIMEOUT})
        assert "late but here" in joined(ran), joined(ran)

    before = enterprise_gateway.kernel_ids()
    async with straight_at(enterprise_gateway, jupyter_server, "--kernel-start-timeout", "2") as client:
        started = time.monotonic()
        result = await client.call_tool("use_notebook", {
            "notebook_name": "late", "notebook_path": f"late-{uuid.uuid4().hex[:6]}.ipynb", "mode": "create",
            "kernel_name": "slowstart"})
        text = joined(result)
        assert result.is_error and "within 2 s (--kernel-start-timeout)" in text, text
        assert time.monotonic() - started < START_SECONDS + 3, "the start was not cut at its timeout"
    # The gateway finishes the start it was asked for; nothing of ours holds that kernel.
    time.sleep(START_SECONDS)
    for kernel_id in enterprise_gateway.kernel_ids() - before:
        enterprise_gateway.request("DELETE", f"/api/kernels/{kernel_id}")


async def test_a_slow_kernel_through_a_jupyter_server_on_the_gateway(jupyter_on_gateway, enterprise_gateway):
    """The same slow kernel, started through the Jupyter Server that hands it to the gateway."""
    async with through_jupyter(jupyter_on_gateway, "--kernel-start-timeout", "120") as client:
        slow = start_kernel_on(jupyter_on_gateway, "slow")
        try:
            result = await client.call_tool("execute_code", {"code": "print('answered')", "kernel_id": slow,
                                                             "timeout": 5})
            assert not result.is_error and "answered" in joined(result), joined(result)
        finally:
            jupyter_on_gateway.request("DELETE", f"/api/kernels/{slow}")
