// Acts as an MCP Apps host (io.modelcontextprotocol/ui) in headless Chromium for tests/test_apps.py.
// Usage: node app-host.cjs VIEW.json SCREENSHOT, where VIEW.json holds {"resource": <the ui://
// resource's contents from resources/read>, "arguments": <the tool call's arguments>, "result":
// <the tool result>}. Like a host, it loads the resource's HTML into a sandboxed iframe (scripts
// only, opaque origin, a CSP allowing no network), answers ui/initialize, and once the view says
// ui/notifications/initialized sends ui/notifications/tool-input and ui/notifications/tool-result.
// Prints one JSON line describing what the view rendered (or {"error": ...}); saves a screenshot.
const { chromium } = require(process.env.PLAYWRIGHT_CORE_DIR || "playwright-core");
const fs = require("node:fs");

const [viewFile, screenshot] = process.argv.slice(2);
const view = JSON.parse(fs.readFileSync(viewFile, "utf8"));

// The host page: everything between host and view goes through postMessage, as in a real host.
const HOST = `<!DOCTYPE html><html><body style="margin:0">
<iframe id="view" sandbox="allow-scripts" style="width:800px;height:200px;border:1px solid #ccc"></iframe>
<script>
window.hostLog = [];
window.startView = (html, args, result) => {
  const frame = document.getElementById("view");
  const csp = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:";
  frame.srcdoc = html.replace("<head>", '<head><meta http-equiv="Content-Security-Policy" content="' + csp + '">');
  window.addEventListener("message", (event) => {
    if (event.source !== frame.contentWindow) return;
    const msg = event.data;
    window.hostLog.push(msg.method || ("response " + msg.id));
    const post = (m) => frame.contentWindow.postMessage({ jsonrpc: "2.0", ...m }, "*");
    if (msg.method === "ui/initialize") {
      post({ id: msg.id, result: { protocolVersion: msg.params.protocolVersion, hostInfo: { name: "test-host", version: "1" },
        hostCapabilities: {}, hostContext: { theme: "light", displayMode: "inline" } } });
    } else if (msg.method === "ui/notifications/initialized") {
      post({ method: "ui/notifications/tool-input", params: { arguments: args } });
      post({ method: "ui/notifications/tool-result", params: result });
    } else if (msg.method === "ui/notifications/size-changed") {
      frame.style.height = Math.min(msg.params.height + 4, 4000) + "px";
    } else if (msg.id !== undefined && msg.method) {
      post({ id: msg.id, error: { code: -32601, message: "not supported by the test host" } });
    }
  });
};
</script></body></html>`;

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--no-first-run", "--disable-sync"],
  });
  const page = await browser.newPage({ viewport: { width: 820, height: 900 } });
  const requests = [];
  page.on("request", (r) => { if (!r.url().startsWith("data:") && r.url() !== "about:blank") requests.push(r.url()); });
  let status = 1;
  try {
    await page.setContent(HOST);
    const started = Date.now();
    await page.evaluate(([html, args, result]) => window.startView(html, args, result),
      [view.resource.text, view.arguments, view.result]);
    const frame = await (await page.waitForSelector("#view")).contentFrame();
    await frame.waitForSelector("body[data-rendered=true]", { timeout: 30_000 });
    const renderedMs = Date.now() - started; // load, unpack what the outputs need, draw
    // Images decoded, then the size-changed round trip.
    await frame.waitForFunction(() => [...document.images].every((i) => i.complete), null, { timeout: 10_000 });
    const wanted = await frame.evaluate(() => document.documentElement.getBoundingClientRect().height);
    await page.waitForFunction((h) => document.getElementById("view").getBoundingClientRect().height >= h,
      wanted, { timeout: 5_000 }).catch(() => {});
    const seen = await frame.evaluate(() => ({
      tables: [...document.querySelectorAll("table")].map((t) => t.textContent.replace(/\s+/g, " ").trim()),
      // Plotly figures as plotly.js drew them: its SVG layers and each trace's marks.
      plotly: [...document.querySelectorAll(".chart-plotly")].map((b) => ({
        svgs: b.querySelectorAll("svg.main-svg").length,
        bars: b.querySelectorAll("g.trace.bars g.point path").length,
        heatmapImages: b.querySelectorAll("g.hm image").length,
        slices: b.querySelectorAll("g.slice path.surface").length,
        title: b.querySelector(".gtitle")?.textContent ?? null })),
      // Vega / Vega-Lite charts as vega drew them (SVG renderer): marks by type, items in each.
      vega: [...document.querySelectorAll(".chart-vega-lite, .chart-vega")].map((b) => ({
        svgs: b.querySelectorAll("svg.marks").length,
        marks: Object.fromEntries([...b.querySelectorAll("g.role-mark")].map((g) =>
          [g.getAttribute("class").match(/mark-(\w+)/)[1], g.querySelectorAll("path").length])) })),
      // Math as KaTeX rendered it: MathML, with the TeX kept as its annotation.
      math: [...document.querySelectorAll(".output math")].map((m) => ({
        display: m.getAttribute("display"), tex: m.querySelector("annotation")?.textContent ?? null,
        fractions: m.querySelectorAll("mfrac").length, roots: m.querySelectorAll("msqrt").length,
        width: Math.round(m.getBoundingClientRect().width), within: m.closest(".markdown, .latex, .html-math")?.className ?? null })),
      widgets: [...document.querySelectorAll(".widget[data-model-id]")].map((w) => ({
        kind: w.className.replace("widget ", ""), label: w.querySelector(":scope > label")?.textContent ?? null,
        range: w.querySelector(":scope > input[type=range]")?.value ?? null,
        value: w.querySelector(":scope > output")?.textContent ?? null,
        checked: w.querySelector(":scope > input[type=checkbox]")?.checked ?? null,
        selected: w.querySelector(":scope > select")?.selectedOptions[0]?.textContent ?? null,
        progress: w.querySelector(":scope > progress")?.value ?? null,
        inside: w.parentElement.closest(".widget")?.dataset.modelId ?? null })),
      notes: [...document.querySelectorAll(".note")].map((n) => n.textContent),
      images: [...document.querySelectorAll("img")].map((i) => ({ src: i.src.slice(0, 22), width: i.naturalWidth })),
      scripts: document.querySelectorAll(".output script").length,
      headings: [...document.querySelectorAll(".output h2")].map((h) => h.textContent).join("|"),
      strong: [...document.querySelectorAll(".output strong")].map((h) => h.textContent).join("|"),
      bad: window.bad ?? null,
      text: document.body.innerText,
    }));
    seen.renderedMs = renderedMs;
    seen.hostLog = await page.evaluate(() => window.hostLog);
    seen.frameHeight = await page.evaluate(() => document.getElementById("view").style.height);
    seen.requests = requests;
    console.log(JSON.stringify(seen));
    status = 0;
  } catch (e) {
    console.log(JSON.stringify({ error: e.message.split("\n")[0] }));
  } finally {
    // A viewport as tall as the page: Chromium paints an iframe only near the viewport, so a
    // full-page screenshot of a short one leaves the bottom of a tall view blank.
    const height = await page.evaluate(() => document.documentElement.scrollHeight).catch(() => 900);
    await page.setViewportSize({ width: 820, height: Math.min(Math.max(height, 200), 8000) }).catch(() => {});
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))).catch(() => {});
    await page.screenshot({ path: screenshot, fullPage: true }).catch(() => {});
    await browser.close();
  }
  process.exit(status);
}

main();
