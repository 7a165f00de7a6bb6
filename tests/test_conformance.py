"""The official MCP conformance suite against our Streamable HTTP transport, both requirement sets.

It runs a build with the suite's fixtures compiled in (feature `conformance-fixtures`, never in the
shipped binary). Known failures are listed with their reasons in conformance/baseline-*.yml; the
suite itself fails on anything new, and we also require at least as many passing checks as the
Python server 2.2.4 reaches on the same suite (42 and 114, measured on a 2-core machine).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import start_http_server

HERE = Path(__file__).parent
PYTHON_SERVER_PASSES = {"2025-11-25": 42, "2026-07-28": 114}


@pytest.fixture(scope="module")
def fixture_server(jupyter_server, tmp_path_factory):
    binary = os.environ.get("JUPYTER_MCP_CONFORMANCE_BIN")
    if not binary or not Path(binary).is_file():
        pytest.fail("JUPYTER_MCP_CONFORMANCE_BIN must name the fixture build; run through tests/run")
    env = {"JUPYTER_MCP_SERVER_BIN": binary}
    old = os.environ.get("JUPYTER_MCP_SERVER_BIN")
    os.environ["JUPYTER_MCP_SERVER_BIN"] = binary
    try:
        server = start_http_server(
            ["start", "--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token],
            env=env, token=None, log_dir=tmp_path_factory.mktemp("conformance-log"),
        )
    finally:
        if old is not None:
            os.environ["JUPYTER_MCP_SERVER_BIN"] = old
    yield server
    server.stop()


@pytest.mark.parametrize("requirements", ["2025-11-25", "2026-07-28"])
def test_conformance_suite(fixture_server, requirements, tmp_path):
    conformance = shutil.which("conformance")
    assert conformance, "the conformance suite is not on PATH; run through tests/run"
    out = subprocess.run(
        [conformance, "server", "--url", fixture_server.mcp_url, "--requirements", requirements,
         "--expected-failures", str(HERE / "conformance" / f"baseline-{requirements}.yml"),
         "-o", str(tmp_path / "results")],
        capture_output=True, text=True, timeout=900,
    )
    report = out.stdout + out.stderr
    totals = re.search(r"Total: (\d+) passed, (\d+) failed", report)
    assert totals, report[-3000:]
    passed = int(totals.group(1))
    print(f"conformance {requirements}: {passed} passed, {totals.group(2)} failed (baseline)")
    assert out.returncode == 0, f"new failures or stale baseline entries:\n{report[-6000:]}"
    assert passed >= PYTHON_SERVER_PASSES[requirements], report[-3000:]
