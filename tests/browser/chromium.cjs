// Headless Chromium as the browser tests start it: the flags keep it off this machine's closed
// network (background networking, component updates, sync, QUIC), and a page of one size.
const { chromium } = require(process.env.PLAYWRIGHT_CORE_DIR || "playwright-core");

async function openPage() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"],
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  return { browser, page };
}

module.exports = { openPage };
