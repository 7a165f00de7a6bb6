"""Hardening: what the server leaves behind and how it takes abuse, through the real binary."""

from __future__ import annotations

import signal
import time
import uuid

import nbformat
import pytest
import websockets

from conftest import RawStdio, client_for, joined, server_env

pytestmark = pytest.mark.anyio


def kernel_ids(jupyter) -> set[str]:
    return jupyter.kernel_ids()


def wait_for_kernels(jupyter, predicate, seconds: float = 20) -> set[str]:
    deadline = time.monotonic() + seconds
    while True:
        ids = kernel_ids(jupyter)
        if predicate(ids) or time.monotonic() > deadline:
            return ids
        time.sleep(0.2)


def notebook_on_disk(jupyter, prefix: str) -> str:
    path = f"{prefix}-{uuid.uuid4().hex[:6]}.ipynb"
    (jupyter.root / path).write_text(nbformat.writes(nbformat.v4.new_notebook()))
    return path


def args_for(jupyter) -> list[str]:
    return ["start", "--jupyter-url", jupyter.url, "--jupyter-token", jupyter.token]


@pytest.mark.parametrize("exit_by", ["eof", signal.SIGTERM, signal.SIGINT])
async def test_no_orphans_but_shared_kernels_keep_running(jupyter_server, exit_by):
    """Kernels we started for our own use stop with us, by any exit path; a kernel we started
    that someone else now uses (here: a second websocket, as JupyterLab would hold) keeps running."""
    before = kernel_ids(jupyter_server)
    private = notebook_on_disk(jupyter_server, "private")
    shared = notebook_on_disk(jupyter_server, "shared")
    server = RawStdio(args_for(jupyter_server), env=server_env())
    try:
        assert not server.call_tool(2, "use_notebook", {"notebook_name": "p", "notebook_path": private}).get("isError")
        assert not server.call_tool(3, "use_notebook", {"notebook_name": "s", "notebook_path": shared}).get("isError")
        ours = kernel_ids(jupyter_server) - before
        assert len(ours) == 2, ours
        sessions = jupyter_server.request("GET", "/api/sessions")[1]
        shared_kernel = next(s["kernel"]["id"] for s in sessions if s["path"] == shared)
        url = jupyter_server.url.replace("http", "ws") + f"/api/kernels/{shared_kernel}/channels"
        async with websockets.connect(url, additional_headers={"Authorization": f"token {jupyter_server.token}"}):
            if exit_by == "eof":
                server.proc.stdin.close()
            else:
                server.proc.send_signal(exit_by)
            assert server.proc.wait(timeout=40) == 0
        left = wait_for_kernels(jupyter_server, lambda ids: ids - before == {shared_kernel})
        assert left - before == {shared_kernel}, f"expected only the shared kernel to remain: {left - before}"
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
        for kernel in kernel_ids(jupyter_server) - before:
            jupyter_server.request("DELETE", f"/api/kernels/{kernel}")


async def test_unused_notebook_kernel_shared_by_a_person_keeps_running(jupyter_server):
    path = notebook_on_disk(jupyter_server, "unuse")
    async with client_for(jupyter_server, "legacy") as client:
        used = joined(await client.call_tool("use_notebook", {"notebook_name": "u", "notebook_path": path}))
        kernel = used.split("Started kernel '")[1].split("'")[0]
        url = jupyter_server.url.replace("http", "ws") + f"/api/kernels/{kernel}/channels"
        async with websockets.connect(url, additional_headers={"Authorization": f"token {jupyter_server.token}"}):
            released = joined(await client.call_tool("unuse_notebook", {"notebook_name": "u"}))
        assert "is shared with someone else and keeps running" in released
    assert kernel in kernel_ids(jupyter_server)
    jupyter_server.request("DELETE", f"/api/kernels/{kernel}")
