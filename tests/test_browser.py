"""A person's view: JupyterLab (with jupyter-collaboration and our extension) open in headless
Chromium; the agent inserts and runs a cell through our /mcp; the open page shows the cell and its
output without a reload. The screenshot lands in tests/artifacts/."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import nbformat
import pytest

from conftest import mcp_client, open_lab_page, start_lab
from harness import stop_jupyter

pytestmark = pytest.mark.anyio

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


async def test_agent_edit_appears_in_open_jupyterlab(tmp_path):
    # Everything started from here on is stopped in `finally`, whatever fails.
    lab = start_lab(tmp_path)
    page = None
    try:
        path = f"shown-{uuid.uuid4().hex[:6]}.ipynb"
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.cells = [nbformat.v4.new_markdown_cell("# Opened by a person")]
        (lab.root / path).write_text(nbformat.writes(nb))
        screenshot = ARTIFACTS / "jupyterlab-agent-cell.png"
        page = open_lab_page(lab, path, screenshot)
        assert page.stdout.readline().strip() == "ready", "JupyterLab did not show the notebook"
        source = "answer = 6 * 7\nprint('the agent says', answer)"
        async with mcp_client(lab, lab.token) as client:
            used = await client.call_tool("use_notebook", {"notebook_name": "shown", "notebook_path": path})
            assert not used.is_error and "(live backend)" in "".join(c.text for c in used.content)
            ran = await client.call_tool("insert_execute_code_cell", {"cell_index": -1, "cell_source": source})
            assert not ran.is_error
        page.stdin.write(json.dumps({"source": "answer = 6 * 7", "output": "the agent says 42"}) + "\n")
        page.stdin.flush()
        verdict = page.stdout.readline().strip()
        assert verdict == "seen", f"the page did not show the agent's cell and output ({verdict}); see {screenshot}"
        assert page.wait(timeout=30) == 0
        assert screenshot.stat().st_size > 10_000
    finally:
        if page is not None:
            try:
                page.wait(timeout=30)  # lets the driver save its screenshot
            except subprocess.TimeoutExpired:
                page.kill()
        stop_jupyter(lab)
