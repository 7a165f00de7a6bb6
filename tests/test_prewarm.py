"""kernel.prewarm: spare kernels kept ready, handed out fresh, replaced, checked, and stopped."""

from __future__ import annotations

import json
import re
import time
import uuid

import anyio
import pytest

from conftest import client_for, joined, write_config

pytestmark = pytest.mark.anyio

MARK = "[kernel.prewarm]"


def prewarm_client(jupyter_server, *args, env=None):
    return client_for(jupyter_server, "legacy", "--document-backend", "file", *args, env=env)


async def spare_ids(client) -> list[str]:
    listing = joined(await client.call_tool("list_kernels", {}))
    if MARK not in listing:
        return []
    return [k.strip() for k in listing.split(MARK, 1)[1].split(":", 1)[1].split(",") if k.strip()]


async def wait_for_spare(client, other_than: set[str] = frozenset(), timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while True:
        fresh = [k for k in await spare_ids(client) if k not in other_than]
        if fresh:
            return fresh[0]
        assert time.monotonic() < deadline, f"no spare kernel within {timeout}s"
        await anyio.sleep(0.05)


async def capability(client) -> dict:
    resource = await client.read_resource("capabilities://", cache_mode="bypass")
    block = json.loads(resource.contents[0].text)
    return next(c for c in block["declared"] if c["name"] == "kernel.prewarm")


async def test_declared_off_by_default_and_switched_from_every_source(jupyter_server, tmp_path):
    async with prewarm_client(jupyter_server) as client:
        declared = await capability(client)
        assert (declared["enabled"], declared["source"]) == (False, "default")
        assert "spare" in declared["description"] and "list_kernels" in declared["description"]
    async with prewarm_client(jupyter_server, "--capability", "kernel.prewarm") as client:
        assert (await capability(client))["source"] == "cli"
    async with prewarm_client(jupyter_server, env={"JUPYTER_MCP_CAPABILITIES": "kernel.prewarm"}) as client:
        assert (await capability(client))["source"] == "env"
    config = write_config(tmp_path, 'prewarm_max = 1\n[capabilities]\n"kernel.prewarm" = true\n')
    async with prewarm_client(jupyter_server, "--config", str(config)) as client:
        declared = await capability(client)
        assert (declared["enabled"], declared["source"]) == (True, "config")


async def test_a_new_notebook_gets_a_fresh_spare_started_before_the_call(jupyter_server):
    path = f"warm-{uuid.uuid4().hex[:6]}.ipynb"
    async with prewarm_client(jupyter_server, "--capability", "kernel.prewarm") as client:
        spare = await wait_for_spare(client)
        assert spare in jupyter_server.kernel_ids(), "the spare was started before use_notebook was called"
        used = joined(await client.call_tool("use_notebook", {"notebook_name": "w", "notebook_path": path,
                                                               "mode": "create"}))
        assert f"'{spare}'" in used, used
        ran = await client.call_tool("insert_execute_code_cell", {"cell_index": -1, "cell_source": "%who"})
        assert "Interactive namespace is empty" in joined(ran), "a spare carries no one's state"
        saved = json.loads((jupyter_server.root / path).read_text())
        assert saved["cells"][0]["execution_count"] == 1, "nothing ran in the spare before it was handed out"
        # The next spare is started in the background.
        replacement = await wait_for_spare(client, other_than={spare})
        assert replacement != spare
        assert spare not in await spare_ids(client), "a handed-out kernel is never a spare again"
        # execute_code's default kernel (no notebook in use) takes the spare too.
        await client.call_tool("unuse_notebook", {"notebook_name": "w"})
        out = joined(await client.call_tool("execute_code", {"code": "%who"}))
        assert "Interactive namespace is empty" in out
        assert replacement not in await spare_ids(client)


async def test_a_spare_killed_behind_our_back_is_never_handed_out(jupyter_server):
    async with prewarm_client(jupyter_server, "--capability", "kernel.prewarm") as client:
        spare = await wait_for_spare(client)
        status, _ = jupyter_server.request("DELETE", f"/api/kernels/{spare}")
        assert status == 204
        used = joined(await client.call_tool("use_notebook", {
            "notebook_name": "k", "notebook_path": f"killed-{uuid.uuid4().hex[:6]}.ipynb", "mode": "create"}))
        assert spare not in used, used
        kernel = re.search(r"kernel '([0-9a-f-]{36})'", used).group(1)
        assert kernel in jupyter_server.kernel_ids()
        ran = joined(await client.call_tool("insert_execute_code_cell", {"cell_index": -1, "cell_source": "6 * 7"}))
        assert "42" in ran


async def test_nothing_left_running_at_exit(jupyter_server):
    before = jupyter_server.kernel_ids()
    async with prewarm_client(jupyter_server, "--capability", "kernel.prewarm") as client:
        await wait_for_spare(client)
        await client.call_tool("use_notebook", {
            "notebook_name": "x", "notebook_path": f"exit-{uuid.uuid4().hex[:6]}.ipynb", "mode": "create"})
        await wait_for_spare(client, other_than=set())
        assert len(jupyter_server.kernel_ids() - before) >= 2
    deadline = time.monotonic() + 30
    while jupyter_server.kernel_ids() - before:
        assert time.monotonic() < deadline, f"left running: {jupyter_server.kernel_ids() - before}"
        await anyio.sleep(0.1)


async def test_without_the_capability_no_spare_is_started(jupyter_server):
    before = jupyter_server.kernel_ids()
    async with prewarm_client(jupyter_server) as client:
        # A spare would be started right after start-up; watch for one over a bounded window.
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert await spare_ids(client) == []
            assert jupyter_server.kernel_ids() - before == set(), "no kernel is started behind the client's back"
            await anyio.sleep(0.2)
