// A person at JupyterLab in headless Chromium, for tests/test_coedit.py and tests/test_sandbox.py.
// Usage: node person.cjs URL SCREENSHOT. Prints "ready" once the notebook is shown, then takes one
// JSON command a line from stdin and prints "done" or "failed: why" for each:
//   {"type": TEXT, "cell": N}   replaces cell N's text by typing, as a person does
//   {"shows": TEXT, "cell": N}  waits (no reload) until cell N shows TEXT
//   {"cursor": COLOR, "cell": N} waits until cell N's editor draws a collaborator's cursor in
//                                COLOR (an rgb() string), and no other cell does
//   {"run": N, "until": TEXT}   once the kernel is idle, runs cell N with Shift+Enter and waits
//                                until its output shows TEXT; prints that output as a JSON string
//                                instead of "done"
// Saves a screenshot when stdin closes, and exits 0 if every command was done.
const { openPage } = require("./chromium.cjs");
const readline = require("node:readline");

const [url, screenshot] = process.argv.slice(2);

async function main() {
  const { browser, page } = await openPage();
  let status = 0;
  try {
    await page.goto(url);
    await page.waitForSelector(".jp-Notebook .jp-Cell .cm-content", { timeout: 90_000 });
    console.log("ready");
    for await (const line of readline.createInterface({ input: process.stdin })) {
      const command = JSON.parse(line);
      try {
        const editor = page.locator(".jp-Notebook .jp-Cell").nth(command.run ?? command.cell).locator(".cm-content");
        if (command.run !== undefined) {
          // A person waits for the kernel to say idle (JupyterLab would queue the run anyway).
          await page.waitForFunction(
            () => document.querySelector(".jp-Notebook-ExecutionIndicator")?.getAttribute("data-status") === "idle",
            null, { timeout: 60_000, polling: 200 }).catch(() => {});
          await editor.click();
          await page.keyboard.press("Shift+Enter");
          const output = await page.waitForFunction(([n, text]) => {
            const cell = document.querySelectorAll(".jp-Notebook .jp-Cell")[n];
            const out = [...(cell?.querySelectorAll(".jp-OutputArea-output") || [])].map((o) => o.textContent).join("\n");
            return out.includes(text) ? out : null;
          }, [command.run, command.until], { timeout: 120_000, polling: 200 });
          console.log(JSON.stringify(await output.jsonValue()));
          continue;
        }
        if (command.type !== undefined) {
          await editor.click();
          await page.keyboard.press("Control+A");
          await page.keyboard.type(command.type);
        } else if (command.cursor !== undefined) {
          await page.waitForFunction(([n, color]) => {
            const cells = [...document.querySelectorAll(".jp-Notebook .jp-Cell")];
            const drawn = (cell) => [...cell.querySelectorAll(".jp-remote-cursor")]
              .some((c) => getComputedStyle(c).borderLeftColor === color);
            return cells[n] && drawn(cells[n]) && cells.every((cell, i) => i === n || !drawn(cell));
          }, [command.cell, command.cursor], { timeout: 30_000, polling: 100 });
        } else {
          await page.waitForFunction(([n, text]) => {
            const cell = document.querySelectorAll(".jp-Notebook .jp-Cell")[n];
            return (cell?.querySelector(".cm-content")?.textContent || "").includes(text);
          }, [command.cell, command.shows], { timeout: 30_000, polling: 100 });
        }
        console.log("done");
      } catch (e) {
        status = 1;
        console.log(`failed: ${e.message.split("\n")[0]}`);
      }
    }
  } catch (e) {
    status = 1;
    console.log(`failed: ${e.message.split("\n")[0]}`);
  } finally {
    await page.screenshot({ path: screenshot, fullPage: true }).catch(() => {});
    await browser.close();
  }
  process.exit(status);
}

main();
