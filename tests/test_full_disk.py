"""The execution store on a disk that fills (F4): a small tmpfs of its own as --state-dir. While
the disk is full every call still answers, `/api/healthz` says `degraded` with the store's error
and `get_execution` says the record waits in memory; once space is freed the store writes again
on its own, so what ran during the outage is answered after a restart. A start on a full disk
does not move the good store aside. Needs root (mount), as CI has."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import call, http_client, joined, start_http_server

pytestmark = pytest.mark.anyio

ID_KEY = "io.jupyter-mcp/execution_id"


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=700", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Fills `disk` to the last byte; returns the filler to remove."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 65536, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def health(server) -> dict:
    with urllib.request.urlopen(server.base + "/api/healthz", timeout=10) as response:
        return json.load(response)


def args(jupyter, state_dir):
    return ["start", "--jupyter-url", jupyter.url, "--jupyter-token", jupyter.token,
            "--document-backend", "file", "--state-dir", str(state_dir)]


async def run(client, code: str) -> str:
    result = await call(client, "execute_code", code=code, timeout=60, background=True)
    execution_id = result.meta[ID_KEY]
    done = await call(client, "get_execution", execution_id=execution_id, wait_seconds=30)
    return execution_id, joined(done)


async def test_a_full_disk_degrades_the_store_and_it_recovers_by_itself(jupyter_server, small_disk):
    state = small_disk / "state"
    server = start_http_server(args(jupyter_server, state))
    try:
        async with http_client(server, "legacy") as client:
            before, said = await run(client, "print('before the disk filled')")
            assert "before the disk filled" in said
            assert health(server)["status"] == "healthy"
            filler = fill(small_disk)
            # Records big enough to need pages the full disk no longer has.
            during = []
            deadline = time.monotonic() + 60
            while "state_store" not in health(server) and time.monotonic() < deadline:
                execution_id, said = await run(client, "print('x' * 200_000)")
                during.append(execution_id)
            shown = health(server)
            assert shown["status"] == "degraded", shown
            assert shown["state_store"]["status"] == "failing" and "space" in shown["state_store"]["error"].lower(), shown
            execution_id, said = await run(client, "print('while full')")
            during.append(execution_id)
            assert "while full" in said and "[STORE FAILING" in said and "kept in memory" in said, said
            filler.unlink()
            deadline = time.monotonic() + 60
            while "state_store" in health(server) and time.monotonic() < deadline:
                time.sleep(0.5)
            assert health(server)["status"] == "healthy", health(server)
            assert "writes again" in server.log.read_text()
    finally:
        server.stop()
    # A new process reads what ran during the outage from the disk.
    again = start_http_server(args(jupyter_server, state))
    try:
        async with http_client(again, "legacy") as client:
            for execution_id in (before, during[-1]):
                said = joined(await call(client, "get_execution", execution_id=execution_id))
                assert "No execution" not in said and "finished" in said, said
    finally:
        again.stop()


async def test_a_start_on_a_full_disk_keeps_the_store(jupyter_server, small_disk):
    state = small_disk / "state"
    server = start_http_server(args(jupyter_server, state))
    try:
        async with http_client(server, "legacy") as client:
            kept, _ = await run(client, "print('kept across a full disk')")
    finally:
        server.stop()
    filler = fill(small_disk)
    server = start_http_server(args(jupyter_server, state))
    try:
        assert not list(state.glob("*.unreadable-*")), "a good store was moved aside"
        async with http_client(server, "legacy") as client:
            said = joined(await call(client, "get_execution", execution_id=kept))
            assert "kept across a full disk" in said, said
    finally:
        server.stop()
        filler.unlink()
    assert "moved aside" not in server.log.read_text()
