// Drives JupyterLab in headless Chromium for tests/test_browser.py.
// Usage: node lab.cjs URL SCREENSHOT. Prints "ready" once the notebook is shown, then reads one
// JSON line {"source", "output"} from stdin and waits, without reloading, until the page shows a
// cell with that source and that output. Prints "seen" (exit 0) or the reason it failed (exit 1);
// saves a screenshot either way.
const { openPage } = require("./chromium.cjs");
const readline = require("node:readline");

const [url, screenshot] = process.argv.slice(2);

async function main() {
  const { browser, page } = await openPage();
  let status = 1;
  try {
    await page.goto(url);
    await page.waitForSelector(".jp-Notebook .jp-Cell", { timeout: 90_000 });
    console.log("ready");
    const line = await new Promise((resolve) => readline.createInterface({ input: process.stdin }).once("line", resolve));
    const { source, output } = JSON.parse(line);
    await page.waitForFunction(([source, output]) => {
      for (const cell of document.querySelectorAll(".jp-Notebook .jp-Cell")) {
        const text = cell.querySelector(".cm-content")?.textContent || "";
        const out = [...cell.querySelectorAll(".jp-OutputArea-output")].map((o) => o.textContent).join("");
        if (text.includes(source) && out.includes(output)) return true;
      }
      return false;
    }, [source, output], { timeout: 30_000, polling: 100 });
    console.log("seen");
    status = 0;
  } catch (e) {
    console.log(`failed: ${e.message.split("\n")[0]}`);
  } finally {
    await page.screenshot({ path: screenshot, fullPage: true }).catch(() => {});
    await browser.close();
  }
  process.exit(status);
}

main();
