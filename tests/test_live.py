"""The live backend: notebooks edited and run through Jupyter's collaboration room, shared with a
second peer (jupyter-nbmodel-client, as a person's JupyterLab would be), through cut sockets and a
restarted Jupyter Server."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import nbformat
import pytest
import websockets
from pycrdt import Awareness, Doc, read_message
from jupyter_nbmodel_client import get_jupyter_notebook_websocket_url

from conftest import call, cell_id_of, client_for, disk_sources, eventually, joined, peer_for, peer_sources, texts, write_notebook
from harness import TcpProxy, restart_jupyter, start_jupyter, stop_jupyter

pytestmark = pytest.mark.anyio


def new_path(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}.ipynb"


async def sources_of(client, name: str) -> list[str]:
    detailed = joined(await call(client, "read_notebook", notebook_name=name, response_format="detailed"))
    blocks = detailed.split("=====Cell ")[1:]
    return [block.split("=====\n\n", 1)[1].rstrip("\n") if "=====\n\n" in block else "" for block in blocks]


async def test_agent_and_peer_share_a_live_notebook(jupyter_server):
    path = new_path("live")
    write_notebook(jupyter_server, path, ["a = 1"])
    peer = await peer_for(jupyter_server, path)
    watcher = await AwarenessWatcher.start(jupyter_server, path)
    try:
        async with client_for(jupyter_server, "legacy") as client:
            used = joined(await call(client, "use_notebook", notebook_name="nb", notebook_path=path))
            assert "(live backend)" in used
            listed = joined(await call(client, "list_notebooks"))
            assert listed.splitlines()[0].endswith("\tBackend") and listed.splitlines()[1].endswith("\tlive")

            # JupyterLab lists the agent among the collaborators.
            await eventually(lambda: AGENT in watcher.names(), 5, "the room announces the agent")

            # The peer's unsaved cell is visible to the agent.
            peer.add_code_cell("peer_value = 20")
            read = await eventually_async(lambda: sources_of(client, "nb"), lambda s: "peer_value = 20" in s, 5)
            assert read == ["a = 1", "peer_value = 20"]

            # The agent's cell reaches the peer within a second.
            started = time.monotonic()
            await call(client, "insert_cell", cell_index=-1, cell_type="code", cell_source="agent_value = 22")
            await eventually(lambda: "agent_value = 22" in peer_sources(peer), 1.0, "the peer sees our cell")
            assert time.monotonic() - started < 1.0

            # Outputs stream to the peer while the cell runs.
            code = "import time\nfor i in range(4):\n    print('tick', i, flush=True)\n    time.sleep(0.5)"
            inserted = await call(client, "insert_cell", cell_index=-1, cell_type="code", cell_source=code)
            cell_id = cell_id_of(inserted)
            run = asyncio.create_task(client.call_tool("execute_cell", {"cell_id": cell_id}))

            def peer_outputs():
                for i in range(len(peer)):
                    if peer[i]["id"] == cell_id:
                        return "".join(o.get("text", "") for o in peer[i].get("outputs", []))
                return ""

            await eventually(lambda: "tick 0" in peer_outputs(), 5, "the peer sees the first output")
            assert not run.done(), "outputs should reach the peer while the cell is still running"
            result = await run
            assert not result.is_error, joined(result)
            assert "tick 3" in peer_outputs()

            # A peer edit and ours, concurrently, both survive.
            peer.set_cell_source(0, "a = 100")
            await call(client, "insert_cell", cell_index=0, cell_type="markdown", cell_source="# Shared")
            expected = ["# Shared", "a = 100", "peer_value = 20", "agent_value = 22", code]
            await eventually(lambda: peer_sources(peer) == expected, 5, "the peer converges")
            assert await eventually_async(lambda: sources_of(client, "nb"), lambda s: s == expected, 5)

            # The room saves every edit to disk as valid nbformat.
            await eventually(lambda: disk_sources(jupyter_server, path) == expected, 10, "the file holds every edit")
            nb = nbformat.reads((jupyter_server.root / path).read_text(), as_version=4)
            ran = next(c for c in nb.cells if c.id == cell_id)
            assert ran.execution_count and "tick 3" in "".join(o.get("text", "") for o in ran.outputs)
            await call(client, "unuse_notebook", notebook_name="nb")
            # Leaving says goodbye, so the agent drops out of the collaborators at once.
            await eventually(lambda: AGENT not in watcher.names(), 5, "the agent leaves the room's list")
    finally:
        await watcher.stop()
        await peer.stop()


AGENT = "AI agent (jupyter-mcp-server)"


class AwarenessWatcher:
    """A bare room client that tracks who the room says is there, as JupyterLab's collaborator
    list does (jupyter-nbmodel-client ignores awareness messages)."""

    def __init__(self, ws):
        self.ws = ws
        self.awareness = Awareness(Doc())
        self.task = asyncio.create_task(self._listen())

    @classmethod
    async def start(cls, jupyter, path: str) -> "AwarenessWatcher":
        url = get_jupyter_notebook_websocket_url(jupyter.url, path, jupyter.token)
        return cls(await websockets.connect(url))

    async def _listen(self) -> None:
        async for message in self.ws:
            if isinstance(message, bytes) and message and message[0] == 1:
                self.awareness.apply_awareness_update(read_message(message[1:]), "room")

    def names(self) -> set[str]:
        return {(state or {}).get("user", {}).get("name") for state in self.awareness.states.values()}

    async def stop(self) -> None:
        self.task.cancel()
        await self.ws.close()


async def eventually_async(fetch, predicate, timeout: float):
    deadline = time.monotonic() + timeout
    while True:
        value = await fetch()
        if predicate(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s; last value: {value!r}")
        await asyncio.sleep(0.05)


async def test_create_and_edit_live_with_every_tool(jupyter_server):
    path = new_path("tools")
    async with client_for(jupyter_server, "legacy", "--document-backend", "live") as client:
        created = joined(await call(client, "use_notebook", notebook_name="t", notebook_path=path, mode="create"))
        assert "(live backend)" in created
        first = await call(client, "insert_cell", cell_index=0, cell_type="code", cell_source="x = 1")
        first_id = cell_id_of(first)
        await call(client, "insert_cell", cell_index=-1, cell_type="markdown", cell_source="note")
        await call(client, "overwrite_cell_source", cell_id=first_id, cell_source="x = 21")
        await call(client, "edit_cell_source", cell_id=first_id, old_string="21", new_string="21 * 2")
        executed = await call(client, "execute_cell", cell_id=first_id)
        await call(client, "insert_execute_code_cell", cell_index=-1, cell_source="print(x)")
        moved = joined(await call(client, "move_cell", source_cell_id=first_id, target_index=2))
        assert "moved successfully" in moved
        read = await call(client, "read_cell", cell_id=first_id)
        assert texts(read)[1] == "x = 21 * 2"
        await call(client, "clear_cell_output", cell_index=2)
        sources = await sources_of(client, "t")
        # Created empty (the room's placeholder cell is removed), as with the file backend.
        assert sources == ["note", "print(x)", "x = 21 * 2"]
        await call(client, "delete_cell", cell_ids_to_delete=[first_id])
        sources = await sources_of(client, "t")
        assert "x = 21 * 2" not in sources
        await eventually(lambda: disk_sources(jupyter_server, path) == sources, 10, "the file holds every edit")
        assert executed


async def test_cut_socket_loses_and_doubles_nothing(jupyter_server):
    """Edits sent into a dead connection are re-applied once after rejoining; proven ones are
    not doubled."""
    path = new_path("cut")
    write_notebook(jupyter_server, path, ["start"])
    proxy = TcpProxy(int(jupyter_server.url.rsplit(":", 1)[1]))
    try:
        args = ["--document-backend", "live"]
        async with client_for(_via(jupyter_server, proxy), "legacy", *args) as client:
            await call(client, "use_notebook", notebook_name="c", notebook_path=path)
            await call(client, "insert_cell", cell_index=-1, cell_type="code", cell_source="first = 1")
            await asyncio.sleep(0.3)
            # This edit is lost in transit, then the connection dies.
            proxy.swallow = True
            await call(client, "insert_cell", cell_index=-1, cell_type="code", cell_source="lost_in_transit = 2")
            await call(client, "overwrite_cell_source", cell_index=0, cell_source="start, rewritten")
            await asyncio.sleep(0.3)
            proxy.cut()
            proxy.swallow = False
            await call(client, "insert_cell", cell_index=-1, cell_type="code", cell_source="after = 3")
            expected = ["start, rewritten", "first = 1", "lost_in_transit = 2", "after = 3"]
            assert await sources_of(client, "c") == expected
            # The room itself (a fresh peer) and the file agree: nothing lost, nothing doubled.
            peer = await peer_for(jupyter_server, path)
            try:
                assert peer_sources(peer) == expected
            finally:
                await peer.stop()
            await eventually(lambda: disk_sources(jupyter_server, path) == expected, 10, "the file")
    finally:
        proxy.close()


def _via(jupyter, proxy):
    """The same server, reached through the proxy."""
    from harness import JupyterServer

    return JupyterServer(url=proxy.url, token=jupyter.token, root=jupyter.root, process=jupyter.process)


async def test_restarted_jupyter_server_loses_and_doubles_nothing():
    tmp = Path(tempfile.mkdtemp(prefix="jmcp-restart-"))
    jupyter = start_jupyter(tmp)
    try:
        path = new_path("restart")
        write_notebook(jupyter, path, ["before = 0"])
        async with client_for(jupyter, "legacy", "--document-backend", "live") as client:
            await call(client, "use_notebook", notebook_name="r", notebook_path=path)
            await call(client, "insert_cell", cell_index=-1, cell_type="code", cell_source="saved = 1")
            await eventually(lambda: disk_sources(jupyter, path) == ["before = 0", "saved = 1"], 10, "saved")
            jupyter = restart_jupyter(jupyter)
            await call(client, "insert_cell", cell_index=-1, cell_type="code", cell_source="after_restart = 2")
            expected = ["before = 0", "saved = 1", "after_restart = 2"]
            assert await sources_of(client, "r") == expected
            await eventually(lambda: disk_sources(jupyter, path) == expected, 10, "the file after the restart")
            # The kernel died with the server: said clearly, then recovered on request.
            lost = await client.call_tool("execute_cell", {"cell_index": 2})
            assert lost.is_error and "is gone" in joined(lost) and "restart_notebook" in joined(lost)
            await call(client, "restart_notebook", notebook_name="r")
            await call(client, "execute_cell", cell_index=2)  # fails the test if it errs
    finally:
        stop_jupyter(jupyter)
        shutil.rmtree(tmp, ignore_errors=True)


async def test_live_is_refused_clearly_without_collaboration(tmp_path):
    jupyter = start_jupyter(tmp_path, extra=["--ServerApp.jpserver_extensions=jupyter_server_ydoc=False"])
    try:
        path = new_path("nocollab")
        write_notebook(jupyter, path, ["x"])
        async with client_for(jupyter, "legacy", "--document-backend", "live") as client:
            result = await client.call_tool("use_notebook", {"notebook_name": "n", "notebook_path": path})
            assert result.is_error and "has no real-time collaboration" in joined(result)
            assert "--document-backend file" in joined(result)
            # A created notebook's kernel is set up beside its room: when the room cannot be
            # joined, the kernel and its Jupyter session are not left behind.
            created = await client.call_tool("use_notebook", {"notebook_name": "c", "mode": "create",
                                                              "notebook_path": new_path("nocollab-new")})
            assert created.is_error and "has no real-time collaboration" in joined(created)
            assert jupyter.kernel_ids() == set()
            assert jupyter.request("GET", "/api/sessions") == (200, [])
        async with client_for(jupyter, "legacy") as client:
            used = joined(await call(client, "use_notebook", notebook_name="n", notebook_path=path))
            assert "(file backend)" in used
    finally:
        stop_jupyter(jupyter)


async def test_an_edit_made_just_before_exit_reaches_the_room(jupyter_server):
    path = new_path("exit")
    write_notebook(jupyter_server, path, ["x = 1"])
    async with client_for(jupyter_server, "legacy", "--document-backend", "live") as client:
        await call(client, "use_notebook", notebook_name="e", notebook_path=path)
        await call(client, "insert_cell", cell_index=-1, cell_type="code", cell_source="last_words = 1")
    # The client is gone and our server has exited; the room still got the edit.
    peer = await peer_for(jupyter_server, path)
    try:
        assert peer_sources(peer) == ["x = 1", "last_words = 1"]
    finally:
        await peer.stop()
