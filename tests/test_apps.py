"""MCP Apps (io.modelcontextprotocol/ui): the output viewer, for clients that declare the extension.

The browser tests act as an MCP Apps host in headless Chromium: they load the ui:// resource into a
sandboxed iframe as the extension specifies, hand it a real tool result (a pandas DataFrame, Plotly
figures, Vega-Lite charts, LaTeX and Markdown math, a matplotlib plot, ipywidgets) and check the DOM
the view rendered with its vendored libraries (plotly.js, vega, KaTeX). Screenshots land in
tests/artifacts/."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

from conftest import answer, chromium, modern


UI = "io.modelcontextprotocol/ui"
APP_MIME = "text/html;profile=mcp-app"
WITH_UI = {"extensions": {UI: {"mimeTypes": [APP_MIME]}}}
VIEWER_TOOLS = {"execute_cell", "execute_code", "insert_execute_code_cell", "read_cell"}
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
DRIVER = Path(__file__).resolve().parent / "browser" / "app-host.cjs"
VENDOR = Path(__file__).resolve().parent.parent / "runtime" / "server" / "src" / "mcp" / "apps" / "vendor"

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
go.Figure(go.Heatmap(z=[[1, 20, 30], [20, 1, 60], [30, 60, 1]]), layout={"title": {"text": "Plotly heatmap"}}).show()
go.Figure(go.Pie(labels=["tea", "coffee", "water", "juice"], values=[4, 3, 2, 1])).show()
go.Figure(go.Scattergeo(lon=[2.35], lat=[48.85])).show()
plt.plot([1, 2, 3], [1, 4, 9])
plt.title("matplotlib line")
plt.show()
from IPython.display import HTML, Markdown
display(HTML('<b class="kept">kept</b><script>window.bad = 1</script><img src="x" onerror="window.bad = 2">'))
display(Markdown("## A heading\\n\\nSome **strong** words"))
display({"application/vnd.vegalite.v5+json": {"mark": "point", "data": {"values": [{"u": 1, "v": 2}, {"u": 2, "v": 5}]},
         "encoding": {"x": {"field": "u"}, "y": {"field": "v"}}}, "text/plain": "vega"}, raw=True)
display({"application/vnd.vegalite.v5+json": {"mark": "area", "data": {"values": [{"u": i, "v": i * i % 7} for i in range(8)]},
         "encoding": {"x": {"field": "u", "type": "quantitative"}, "y": {"field": "v", "type": "quantitative"}}},
         "text/plain": "vega area"}, raw=True)
display({"application/vnd.vegalite.v5+json": {"mark": "rect",
         "data": {"values": [{"a": a, "b": b, "n": i * 3 + b} for i, a in enumerate("xyz") for b in range(3)]},
         "encoding": {"x": {"field": "a", "type": "nominal"}, "y": {"field": "b", "type": "ordinal"},
                      "color": {"field": "n", "type": "quantitative"}}}, "text/plain": "vega heatmap"}, raw=True)
display({"application/vnd.vega.v5+json": {"width": 120, "height": 60,
         "data": [{"name": "t", "values": [{"k": "a", "v": 1}, {"k": "b", "v": 3}]}],
         "scales": [{"name": "x", "type": "band", "domain": {"data": "t", "field": "k"}, "range": "width"},
                    {"name": "y", "domain": {"data": "t", "field": "v"}, "range": "height"}],
         "marks": [{"type": "rect", "from": {"data": "t"}, "encode": {"enter": {
             "x": {"scale": "x", "field": "k"}, "width": {"scale": "x", "band": 1},
             "y": {"scale": "y", "field": "v"}, "y2": {"signal": "scale('y', 0)"}}}}]},
         "text/plain": "vega"}, raw=True)
display({"application/vnd.vegalite.v5+json": {"mark": "bar", "data": {"url": "https://example.com/data.csv"},
         "encoding": {"x": {"field": "a", "type": "nominal"}, "y": {"field": "b", "type": "quantitative"}}},
         "text/plain": "vega from a URL"}, raw=True)
from IPython.display import Latex
display(Latex(r"$$\\frac{a}{b} = \\sqrt{x^2 + 1}$$"))
display(Markdown(r"Euler: $e^{i\\pi} + 1 = 0$, and in display: $$\\int_0^1 x\\,dx = \\frac{1}{2}$$ (`$not math$`)"))
"""

WIDGET_CODE = """
import ipywidgets as w
slider = w.IntSlider(value=3, min=0, max=10, description="level")
box = w.VBox([w.Checkbox(value=True, description="on"), w.Dropdown(options=["red", "green", "blue"], value="green"),
              w.IntProgress(value=30, max=40), w.HTMLMath(value=r"Area: $\\pi r^2$")])
display(slider, box)
slider.value = 7
"""


def test_only_clients_with_the_extension_see_the_viewer(file_http_server):
    plain = answer(modern(file_http_server, "server/discover", {}))["result"]
    assert UI not in plain["capabilities"].get("extensions", {})
    rich = answer(modern(file_http_server, "server/discover", {}, capabilities=WITH_UI))["result"]
    assert UI in rich["capabilities"]["extensions"]

    tools = answer(modern(file_http_server, "tools/list", {}, capabilities=WITH_UI))["result"]["tools"]
    linked = {t["name"]: t["_meta"]["ui"]["resourceUri"] for t in tools if "ui" in (t.get("_meta") or {})}
    assert set(linked) == VIEWER_TOOLS and len(set(linked.values())) == 1
    uri = next(iter(linked.values()))
    assert uri.startswith("ui://")
    plain_tools = answer(modern(file_http_server, "tools/list", {}))["result"]["tools"]
    assert not any("ui" in (t.get("_meta") or {}) for t in plain_tools)

    listed = answer(modern(file_http_server, "resources/list", {}, capabilities=WITH_UI))["result"]["resources"]
    assert any(r["uri"] == uri and r["mimeType"] == APP_MIME for r in listed)
    assert not any(r["uri"] == uri for r in answer(modern(file_http_server, "resources/list", {}))["result"]["resources"])
    read = answer(modern(file_http_server, "resources/read", {"uri": uri}, capabilities=WITH_UI))["result"]
    [contents] = read["contents"]
    assert contents["mimeType"] == APP_MIME and contents["text"].startswith("<!DOCTYPE html>")

    # The same call: outputs beside result for the viewer, nothing new for everyone else.
    call = {"name": "execute_code", "arguments": {"code": "print('hi')\n{'a': 1}"}}
    with_ui = answer(modern(file_http_server, "tools/call", call, capabilities=WITH_UI))["result"]
    texts = [c["text"] for c in with_ui["content"]]
    assert with_ui["structuredContent"]["result"] == "\n".join(texts)
    kinds = [o["output_type"] for o in with_ui["structuredContent"]["outputs"]]
    assert kinds == ["stream", "execute_result"], with_ui
    without = answer(modern(file_http_server, "tools/call", call))["result"]
    assert [c["text"] for c in without["content"]] == texts
    # Everyone else gets the Python server's answer: the outputs as the content lists them.
    assert without["structuredContent"] == {"kind": "code.execute", "result": texts, "outputs": texts,
                                            "count": len(texts), "images": 0}, without


def host_renders(file_http_server, tmp_path, code, screenshot_name, least_screenshot_bytes=10_000, may_fail=()):
    """Runs `code` through execute_code as a client with the extension, then has the test host
    render the result in the viewer; returns the result and what the view rendered."""
    node = shutil.which("node")
    assert node and os.environ.get("PLAYWRIGHT_CORE_DIR"), "run the suite through tests/run"
    browser = chromium()
    tools = answer(modern(file_http_server, "tools/list", {}, capabilities=WITH_UI))["result"]["tools"]
    uri = next(t["_meta"]["ui"]["resourceUri"] for t in tools if t["name"] == "execute_code")
    [resource] = answer(modern(file_http_server, "resources/read", {"uri": uri}, capabilities=WITH_UI))["result"]["contents"]
    arguments = {"code": code, "timeout": 120}
    result = answer(modern(file_http_server, "tools/call", {"name": "execute_code", "arguments": arguments},
                           capabilities=WITH_UI))["result"]
    assert not result.get("isError"), result

    view = tmp_path / "view.json"
    view.write_text(json.dumps({"resource": resource, "arguments": arguments, "result": result}))
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / screenshot_name
    out = subprocess.run([node, str(DRIVER), str(view), str(screenshot)], capture_output=True, text=True,
                         timeout=180, env=dict(os.environ, CHROMIUM=browser))
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert "error" not in seen, f"{seen} ({out.stderr[-2000:]}); see {screenshot}"
    assert seen["hostLog"][:2] == ["ui/initialize", "ui/notifications/initialized"], seen["hostLog"]
    assert "ui/notifications/size-changed" in seen["hostLog"]
    failed = [n for n in seen["notes"] if "Could not" in n and not any(m in n for m in may_fail)]
    assert not failed, f"{seen['notes']}; see {screenshot}"
    assert seen["scripts"] == 0 and seen["requests"] == [], "no script survives, nothing is fetched"
    assert screenshot.stat().st_size > least_screenshot_bytes
    return result, seen


def test_an_mcp_apps_host_renders_tables_charts_math_and_images(file_http_server, tmp_path):
    result, seen = host_renders(file_http_server, tmp_path, RICH_CODE, "mcp-app-outputs.png", may_fail=("scattergeo",))
    mimes = [m for o in result["structuredContent"]["outputs"] for m in o.get("data", {})]
    for mime in ("text/html", "application/vnd.plotly.v1+json", "image/png", "text/latex", "text/markdown"):
        assert mime in mimes, f"{mime} missing from {mimes}: {result}"
    assert "widgets" not in result["structuredContent"], "no widget, no widget state"

    assert any("Paris" in t and "2102650" in t for t in seen["tables"]), seen["tables"]
    # plotly.js drew every figure: bars, a heatmap (a trace the old hand-made plotter never knew), a pie.
    bars, heatmap, pie, geo = seen["plotly"]
    assert all(p["svgs"] >= 2 for p in (bars, heatmap, pie)), seen["plotly"]
    assert bars["bars"] == 3 and bars["title"] == "Plotly bars", bars
    assert heatmap["heatmapImages"] == 1 and heatmap["title"] == "Plotly heatmap", heatmap
    assert pie["slices"] == 4, pie
    # A map needs geography plotly.js would fetch: not attempted (no request, checked in
    # host_renders), and the view says why, with the figure's data.
    assert geo["svgs"] == 0 and any("scattergeo" in n and "network" in n for n in seen["notes"]), seen["notes"]
    # vega drew every Vega-Lite spec, whatever its mark, and a Vega spec.
    points, area, rect, vega, remote = seen["vega"]
    assert all(v["svgs"] == 1 for v in seen["vega"]), seen["vega"]
    assert points["marks"].get("symbol") == 2, points
    assert area["marks"].get("area") == 1, area
    assert rect["marks"].get("rect") == 9, rect
    # A full Vega spec too, its expression (scale('y', 0)) run by the interpreter, not eval.
    assert vega["marks"] == {"rect": 2}, vega
    # A spec that loads its data from a URL: nothing is fetched (checked below), and it says so.
    assert remote["marks"] == {"rect": 0}, remote
    assert any("https://example.com/data.csv" in n and "no network" in n for n in seen["notes"]), seen["notes"]
    # KaTeX turned the LaTeX output and the Markdown's math into MathML; code stayed code.
    latex = [m for m in seen["math"] if m["within"] == "latex"]
    assert len(latex) == 1 and latex[0]["display"] == "block", seen["math"]
    assert latex[0]["fractions"] == 1 and latex[0]["roots"] == 1 and latex[0]["width"] > 20, latex
    inline, display = [m for m in seen["math"] if m["within"] == "markdown"]
    assert inline["tex"] == "e^{i\\pi} + 1 = 0" and inline["display"] is None, inline
    assert display["display"] == "block" and display["fractions"] == 1, display
    assert "Euler:" in seen["text"] and "$not math$" in seen["text"]
    assert "A heading" in seen["headings"] and "strong" in seen["strong"]
    assert "kept" in seen["text"] and seen["bad"] is None, "the HTML's script and handler never ran"
    pngs = [i for i in seen["images"] if i["src"].startswith("data:image/png")]
    assert pngs and all(i["width"] > 100 for i in pngs), seen["images"]


def test_an_mcp_apps_host_shows_widgets_in_their_current_state(file_http_server, tmp_path):
    result, seen = host_renders(file_http_server, tmp_path, WIDGET_CODE, "mcp-app-widgets.png", 3_000)
    views = [o["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
             for o in result["structuredContent"]["outputs"]]
    models = result["structuredContent"]["widgets"]["state"]
    assert set(views) <= set(models), (views, list(models))
    # The value set after display, not the one the slider was made with.
    slider = next(m for m in models.values() if m["model_name"] == "IntSliderModel")
    assert slider["state"]["value"] == 7, slider
    # Rendered: the slider at 7 with its label; the box with its children, in their state.
    by_kind = {w["kind"]: w for w in seen["widgets"]}
    assert by_kind["widget-IntSlider"]["range"] == "7" and by_kind["widget-IntSlider"]["value"] == "7", by_kind
    assert by_kind["widget-IntSlider"]["label"] == "level", by_kind
    box = by_kind["widget-VBox widget-box"]
    assert by_kind["widget-Checkbox"]["checked"] is True and by_kind["widget-Checkbox"]["inside"] is not None, by_kind
    assert by_kind["widget-Dropdown"]["selected"] == "green", by_kind
    assert by_kind["widget-IntProgress"]["progress"] == 30 and by_kind["widget-IntProgress"]["inside"], by_kind
    [math] = seen["math"]
    assert math["within"] == "html-math" and math["tex"] == "\\pi r^2", seen["math"]
    assert box["inside"] is None, box


def test_cell_tools_carry_the_widget_state_of_what_they_show(file_http_server, jupyter_server):
    """An executed cell carries the widget state its kernel's comms told; read_cell the kernel's too,
    else the notebook's saved metadata.widgets. Only the models shown (and those they refer to)."""
    view = lambda model: {"output_type": "display_data", "metadata": {},  # noqa: E731
                          "data": {"application/vnd.jupyter.widget-view+json": {"model_id": model, "version_major": 2,
                                                                                   "version_minor": 0},
                                   "text/plain": "IntSlider(value=4)"}}
    saved = {"saved-slider": {"model_name": "IntSliderModel", "model_module": "@jupyter-widgets/controls",
                              "model_module_version": "2.0.0",
                              "state": {"value": 4, "max": 9, "layout": "IPY_MODEL_saved-layout"}},
             "saved-layout": {"model_name": "LayoutModel", "model_module": "@jupyter-widgets/base",
                              "model_module_version": "2.0.0", "state": {"width": "50%"}},
             "unrelated": {"model_name": "IntSliderModel", "model_module": "@jupyter-widgets/controls",
                           "model_module_version": "2.0.0", "state": {"value": 1}}}
    name = f"widgets-{uuid.uuid4().hex[:6]}.ipynb"
    status, _ = jupyter_server.request("PUT", f"/api/contents/{name}", {"type": "notebook", "content": {
        "cells": [{"cell_type": "code", "id": "c0", "source": "slider", "metadata": {}, "execution_count": 1,
                   "outputs": [view("saved-slider")]}],
        "metadata": {"widgets": {"application/vnd.jupyter.widget-state+json": {
            "version_major": 2, "version_minor": 0, "state": saved}}},
        "nbformat": 4, "nbformat_minor": 5}})
    assert status in (200, 201)
    call = lambda tool, args: answer(modern(file_http_server, "tools/call", {"name": tool, "arguments": args},  # noqa: E731
                                            capabilities=WITH_UI))["result"]
    assert not call("use_notebook", {"notebook_name": "w", "notebook_path": name}).get("isError")
    read = call("read_cell", {"cell_index": 0})
    models = read["structuredContent"]["widgets"]["state"]
    assert set(models) == {"saved-slider", "saved-layout"} and models["saved-slider"]["state"]["value"] == 4, read

    ran = call("insert_execute_code_cell", {"cell_index": 1, "cell_source": WIDGET_CODE, "timeout": 120})
    assert not ran.get("isError"), ran
    models = ran["structuredContent"]["widgets"]["state"]
    kinds = sorted(m["model_name"] for m in models.values())
    assert {"IntSliderModel", "VBoxModel", "CheckboxModel", "DropdownModel"} <= set(kinds), kinds
    assert next(m for m in models.values() if m["model_name"] == "IntSliderModel")["state"]["value"] == 7
    # Read back: the notebook saved no state for these, the kernel holds it.
    reread = call("read_cell", {"cell_index": 1})["structuredContent"]["widgets"]["state"]
    assert set(reread) == set(models), (list(reread), list(models))
    # A client without the extension gets neither MIME bundles nor widgets in structured content.
    plain = answer(modern(file_http_server, "tools/call", {"name": "read_cell", "arguments": {"cell_index": 0}}))["result"]
    assert plain["structuredContent"]["kind"] == "cell.read" and "widgets" not in plain["structuredContent"]
    assert plain["structuredContent"]["result"] == [c["text"] for c in plain["content"]]


def test_vendored_libraries_match_their_manifest():
    """Every library the viewer ships is the file its pinned npm package holds (MANIFEST, written
    by vendor/fetch), with that package's licence beside it."""
    entries = [line.split() for line in (VENDOR / "MANIFEST").read_text().splitlines() if not line.startswith("#")]
    assert {e[0] for e in entries} == {"katex", "plotly", "vega", "vega-lite", "vega-embed", "vega-interpreter"}
    for name, package, _, sha256 in entries:
        assert "@" in package.lstrip("@"), package
        unpacked = gzip.decompress((VENDOR / f"{name}.js.gz").read_bytes())
        assert hashlib.sha256(unpacked).hexdigest() == sha256, name
        assert "Copyright" in (VENDOR / f"{name}.LICENSE").read_text(), name
