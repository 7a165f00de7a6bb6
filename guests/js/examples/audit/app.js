// A critical hook handler in JavaScript: logs every tool call and how it ended through the
// host's log, and asks the person before code that installs packages with pip runs.
// Build: jupyter-mcp-js build app.js --world hook-handler -o audit.wasm
import { confirm, defineHooks, log } from 'jupyter-mcp-extension';

const installs = (code) => code.includes('%pip install') || code.includes('!pip install');

export const hooks = defineHooks({
  // Critical, so that the host honours its confirmation; it fails no call otherwise.
  propagateErrors: true,
  beforeToolCall({ toolName, arguments: args }, context) {
    log.info(`audit-js: tool ${toolName} called with ${args}`);
    // The before and after events of one call share this context.
    return { ...context, seen: true };
  },
  afterToolCall({ toolName, outcome }, context) {
    const how = outcome.tag === 'ok' ? 'succeeded' : `failed: ${outcome.val}`;
    console.log(`audit-js: tool ${toolName} ${how} (${context.seen ? 'paired' : 'unpaired'})`);
  },
  beforeExecute({ code }) {
    // The host asks the person through the client; a no (or a client that cannot ask) refuses.
    if (installs(code)) return confirm('the code installs packages with pip');
  },
  kernelLifecycle({ change, kernelId }) {
    log.info(`audit-js: kernel ${kernelId} ${change.tag}`);
  },
});
