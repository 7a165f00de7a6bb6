"""MCP Apps (io.modelcontextprotocol/ui): the output viewer, for clients that declare the extension.

The last test acts as an MCP Apps host in headless Chromium: it loads the ui:// resource into a
sandboxed iframe as the extension specifies, hands it a real tool result (a pandas DataFrame, a
Plotly figure, a matplotlib plot) and checks what the view rendered. The screenshot lands in
tests/artifacts/."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from test_browser import chromium
from test_protocol import answer, http_server, modern  # noqa: F401 (http_server is a fixture)

UI = "io.modelcontextprotocol/ui"
APP_MIME = "text/html;profile=mcp-app"
WITH_UI = {"extensions": {UI: {"mimeTypes": [APP_MIME]}}}
VIEWER_TOOLS = {"execute_cell", "execute_code", "insert_execute_code_cell", "read_cell"}
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
DRIVER = Path(__file__).resolve().parent / "browser" / "app-host.cjs"

RICH_CODE = """
%matplotlib inline
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import matplotlib.pyplot as plt
from IPython.display import display
display(pd.DataFrame({"city": ["Paris", "Lyon", "Nice"], "people": [2102650, 522250, 342669]}))
pio.renderers.default = "plotly_mimetype"
go.Figure(go.Bar(x=["a", "b", "c"], y=[3, 1, 2], name="bars"), layout={"title": {"text": "Plotly bars"}}).show()
plt.plot([1, 2, 3], [1, 4, 9])
plt.title("matplotlib line")
plt.show()
from IPython.display import HTML, Markdown
display(HTML('<b class="kept">kept</b><script>window.bad = 1</script><img src="x" onerror="window.bad = 2">'))
display(Markdown("## A heading\\n\\nSome **strong** words"))
display({"application/vnd.vegalite.v5+json": {"mark": "point", "data": {"values": [{"u": 1, "v": 2}, {"u": 2, "v": 5}]},
         "encoding": {"x": {"field": "u"}, "y": {"field": "v"}}}, "text/plain": "vega"}, raw=True)
"""


def test_only_clients_with_the_extension_see_the_viewer(http_server):
    plain = answer(modern(http_server, "server/discover", {}))["result"]
    assert UI not in plain["capabilities"].get("extensions", {})
    rich = answer(modern(http_server, "server/discover", {}, capabilities=WITH_UI))["result"]
    assert UI in rich["capabilities"]["extensions"]

    tools = answer(modern(http_server, "tools/list", {}, capabilities=WITH_UI))["result"]["tools"]
    linked = {t["name"]: t["_meta"]["ui"]["resourceUri"] for t in tools if "ui" in (t.get("_meta") or {})}
    assert set(linked) == VIEWER_TOOLS and len(set(linked.values())) == 1
    uri = next(iter(linked.values()))
    assert uri.startswith("ui://")
    plain_tools = answer(modern(http_server, "tools/list", {}))["result"]["tools"]
    assert not any("ui" in (t.get("_meta") or {}) for t in plain_tools)

    listed = answer(modern(http_server, "resources/list", {}, capabilities=WITH_UI))["result"]["resources"]
    assert any(r["uri"] == uri and r["mimeType"] == APP_MIME for r in listed)
    assert not any(r["uri"] == uri for r in answer(modern(http_server, "resources/list", {}))["result"]["resources"])
    read = answer(modern(http_server, "resources/read", {"uri": uri}, capabilities=WITH_UI))["result"]
    [contents] = read["contents"]
    assert contents["mimeType"] == APP_MIME and contents["text"].startswith("<!DOCTYPE html>")

    # The same call: outputs beside result for the viewer, nothing new for everyone else.
    call = {"name": "execute_code", "arguments": {"code": "print('hi')\n{'a': 1}"}}
    with_ui = answer(modern(http_server, "tools/call", call, capabilities=WITH_UI))["result"]
    texts = [c["text"] for c in with_ui["content"]]
    assert with_ui["structuredContent"]["result"] == "\n".join(texts)
    kinds = [o["output_type"] for o in with_ui["structuredContent"]["outputs"]]
    assert kinds == ["stream", "execute_result"], with_ui
    without = answer(modern(http_server, "tools/call", call))["result"]
    assert "structuredContent" not in without and [c["text"] for c in without["content"]] == texts


def test_an_mcp_apps_host_renders_dataframes_plotly_and_matplotlib(http_server, tmp_path):
    node = shutil.which("node")
    assert node and os.environ.get("PLAYWRIGHT_CORE_DIR"), "run the suite through tests/run"
    browser = chromium()
    tools = answer(modern(http_server, "tools/list", {}, capabilities=WITH_UI))["result"]["tools"]
    uri = next(t["_meta"]["ui"]["resourceUri"] for t in tools if t["name"] == "execute_code")
    [resource] = answer(modern(http_server, "resources/read", {"uri": uri}, capabilities=WITH_UI))["result"]["contents"]
    arguments = {"code": RICH_CODE, "timeout": 120}
    result = answer(modern(http_server, "tools/call", {"name": "execute_code", "arguments": arguments},
                           capabilities=WITH_UI))["result"]
    assert not result.get("isError"), result
    mimes = [m for o in result["structuredContent"]["outputs"] for m in o.get("data", {})]
    for mime in ("text/html", "application/vnd.plotly.v1+json", "image/png"):
        assert mime in mimes, f"{mime} missing from {mimes}"

    view = tmp_path / "view.json"
    view.write_text(json.dumps({"resource": resource, "arguments": arguments, "result": result}))
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "mcp-app-outputs.png"
    out = subprocess.run([node, str(DRIVER), str(view), str(screenshot)], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, CHROMIUM=browser))
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert "error" not in seen, f"{seen} ({out.stderr[-2000:]}); see {screenshot}"
    assert seen["hostLog"][:2] == ["ui/initialize", "ui/notifications/initialized"], seen["hostLog"]
    assert "ui/notifications/size-changed" in seen["hostLog"]
    assert any("Paris" in t and "2102650" in t for t in seen["tables"]), seen["tables"]
    plotly, vega = seen["charts"]
    assert plotly["kind"] == "plotly" and plotly["bars"] == 3 and "Plotly bars" in plotly["text"], plotly
    assert vega["kind"] == "vega-lite" and vega["points"] == 2, vega
    assert "A heading" in seen["headings"] and "strong" in seen["strong"]
    assert "kept" in seen["text"] and seen["bad"] is None, "the HTML's script and handler never ran"
    pngs = [i for i in seen["images"] if i["src"].startswith("data:image/png")]
    assert pngs and all(i["width"] > 100 for i in pngs), seen["images"]
    assert seen["scripts"] == 0 and seen["requests"] == [], "no script survives, nothing is fetched"
    assert screenshot.stat().st_size > 10_000
