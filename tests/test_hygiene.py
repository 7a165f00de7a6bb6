"""Hardening, round three, through the real binary: HTTP edges, control characters in paths and
outputs, byte budgets on every output kind."""

from __future__ import annotations

import uuid

import pytest

from conftest import INIT, client_for, joined, raw, start_http_server

pytestmark = pytest.mark.anyio


def test_http_edges(http_server):
    good = {"Authorization": f"Bearer {http_server.token}"}
    # Names that start like an IPv6 loopback literal but are not one.
    for host in (f"[::1].evil.com:{http_server.port}", "[::1]evil.com", f"[::1]x:{http_server.port}"):
        status, _, body = raw(http_server.mcp_url, headers={**good, "Host": host})
        assert status == 403 and "Host" in body, (host, status, body)
        status, _, body = raw(http_server.base + "/api/healthz", method="GET", headers={"Host": host})
        assert status == 421 and "Host" in body, (host, status, body)
    status, _, _ = raw(http_server.mcp_url, headers={**good, "Host": f"[::1]:{http_server.port}"})
    assert status == 200
    # The bearer scheme is case-insensitive.
    for scheme in ("BEARER", "bearer", "BeArEr"):
        status, _, body = raw(http_server.mcp_url, headers={"Authorization": f"{scheme} {http_server.token}"})
        assert status == 200 and '"protocolVersion"' in body, (scheme, status, body)
    # One body limit, 16 MiB, on every route: 5 MiB passes (rmcp's own default is 4 MiB) ...
    padded = dict(INIT, params=dict(INIT["params"], padding="x" * (5 << 20)))
    status, _, body = raw(http_server.mcp_url, headers=good, body=padded)
    assert status == 200 and '"protocolVersion"' in body, (status, body[:200])
    # ... and 17 MiB is refused with 413 on /mcp and on /api/connect alike.
    huge = {"jupyter_url": "http://127.0.0.1:9/", "padding": "x" * (17 << 20)}
    for url, method in ((http_server.mcp_url, "POST"), (http_server.base + "/api/connect", "PUT")):
        status, _, body = raw(url, method=method, headers=good, body=huge)
        assert status == 413 and "16777216 bytes" in body, (url, status, body[:200])


async def test_control_characters_in_paths_are_refused(jupyter_server):
    name = f"target-{uuid.uuid4().hex[:6]}.ipynb"
    status, _ = jupyter_server.request("PUT", f"/api/contents/{name}", {"type": "notebook", "content": {
        "cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}})
    assert status in (200, 201)
    async with client_for(jupyter_server, "legacy", "--document-backend", "file") as client:
        # `sub/..<TAB>/name` once reached `name` one level up.
        for path in (f"sub/..\t/{name}", f"sub/..\n/{name}", f"..\t/{name}"):
            used = await client.call_tool("use_notebook", {"notebook_name": "x", "notebook_path": path})
            assert used.is_error and "control character" in joined(used), joined(used)
            listed = await client.call_tool("list_files", {"path": path.rsplit("/", 1)[0]})
            assert listed.is_error and "control character" in joined(listed), joined(listed)
        # The server keeps serving.
        assert not (await client.call_tool("list_kernels", {})).is_error


async def test_control_characters_in_outputs(jupyter_server):
    code = (
        "import sys\n"
        "print('\\x1b[31mred\\x1b[0m \\x9b31m8bit\\x07bell X\\x08Y \\x1bPdcs payload\\x1b\\\\ "
        "\\x1b_apc payload\\x9c \\x1b]0;title\\x07\\x85c1\\x7f end\\tTAB')\n"
        "for i in range(4):\n"
        "    sys.stdout.write(f'\\rprogress {i}/3 ' + '#' * (3 - i))\n"
        "print()\n"
        "print('long line\\rshort')\n"
    )
    async with client_for(jupyter_server, "legacy") as client:
        result = await client.call_tool("execute_code", {"code": code})
        assert not result.is_error, joined(result)
        text = joined(result)
    assert text.splitlines() == ["red 8bitbell Y   c1 end\tTAB", "progress 3/3 ###", "shortline"], repr(text)
    assert not any(c in text for c in "\x1b\x07\x08\x7f\x85\x9b\x9c\r")


async def test_every_output_kind_shares_one_byte_budget(jupyter_server, tmp_path):
    from conftest import http_client
    from harness import peak_rss_mb

    server = start_http_server(["start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token],
                               log_dir=tmp_path)
    try:
        async with http_client(server, "legacy") as client:
            await client.call_tool("list_kernels", {})
            before = peak_rss_mb(server.process.pid)
            # 20 × 32 MiB of display_data: once 1.36 GiB of server memory.
            code = ("from IPython.display import display\n"
                    "for i in range(20):\n"
                    "    display({'image/png': 'A' * (32 << 20), 'text/plain': f'image {i}'}, raw=True)\n"
                    "print('done')\n")
            result = await client.call_tool("execute_code", {"code": code, "timeout": 600})
            text = joined(result)
            peak = peak_rss_mb(server.process.pid)
        print(f"peak RSS: {before:.0f} MB before, {peak:.0f} MB after 20 x 32 MiB of display_data")
        assert "[output cut: this execution produced more than 16 MiB of output" in text, text[:500]
        assert "done" not in text, "output after the cut is dropped"
        assert peak < 400, f"peak RSS {peak:.0f} MB"
    finally:
        server.stop()
