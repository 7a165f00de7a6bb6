"""Two server processes editing one notebook through the file backend at once: every insert that
answered success is in the file, none that answered with an error is, and the file is valid
nbformat after every run (Jupyter's contents API saves in place and has no conditional write)."""

from __future__ import annotations

import uuid

import anyio
import nbformat
import pytest

from conftest import http_client, joined, start_http_server

pytestmark = pytest.mark.anyio

RUNS = 10
INSERTS = 40


async def test_two_writers_lose_nothing(jupyter_server, tmp_path):
    servers = [start_http_server(["start", "--jupyter-url", jupyter_server.url, "--jupyter-token",
                                  jupyter_server.token, "--document-backend", "file"], log_dir=tmp_path)
               for _ in range(2)]
    totals = {"reported": 0, "errors": 0, "lost": 0, "phantom": 0, "invalid": 0}
    try:
        async with http_client(servers[0], "legacy") as a, http_client(servers[1], "legacy") as b:
            for run in range(RUNS):
                path = f"two-writers-{uuid.uuid4().hex[:8]}.ipynb"
                status, _ = jupyter_server.request("PUT", f"/api/contents/{path}", {"type": "notebook", "content": {
                    "cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}})
                assert status in (200, 201)
                done: dict[str, bool] = {}

                async def writer(client, name: str) -> None:
                    used = await client.call_tool("use_notebook", {"notebook_name": f"nb{run}", "notebook_path": path})
                    assert not used.is_error, joined(used)
                    for i in range(INSERTS):
                        source = f"{name}-{run}-{i}"
                        result = await client.call_tool("insert_cell", {
                            "cell_index": -1, "cell_type": "code", "cell_source": source})
                        done[source] = not result.is_error

                async with anyio.create_task_group() as group:
                    group.start_soon(writer, a, "A")
                    group.start_soon(writer, b, "B")

                text = (jupyter_server.root / path).read_text()
                try:
                    notebook = nbformat.reads(text, as_version=4)
                    nbformat.validate(notebook)
                except Exception as e:  # noqa: BLE001 - any failure to read is the finding
                    totals["invalid"] += 1
                    print(f"run {run}: the file is not valid nbformat: {e}")
                    continue
                sources = [c.source for c in notebook.cells]
                lost = [s for s, ok in done.items() if ok and sources.count(s) != 1]
                phantom = [s for s, ok in done.items() if not ok and s in sources]
                errors = sum(1 for ok in done.values() if not ok)
                totals["reported"] += sum(done.values())
                totals["errors"] += errors
                totals["lost"] += len(lost)
                totals["phantom"] += len(phantom)
                print(f"run {run}: {sum(done.values())} inserts reported done, {errors} errors, "
                      f"{len(lost)} lost or duplicated, {len(phantom)} present despite an error")
    finally:
        for server in servers:
            server.stop()
    print(f"two writers x {INSERTS} inserts x {RUNS} runs: {totals}")
    assert totals["invalid"] == 0 and totals["lost"] == 0 and totals["phantom"] == 0, totals
    assert totals["reported"] + totals["errors"] == 2 * INSERTS * RUNS
