// An optional hook handler in JavaScript: logs every tool call and how it ended through the
// host's log. Build: jupyter-mcp-js build app.js --world hook-handler -o audit.wasm
import { defineHooks, log } from 'jupyter-mcp-extension';

export const hooks = defineHooks({
  propagateErrors: false, // auditing must never break a call
  beforeToolCall({ toolName, arguments: args }, context) {
    log.info(`audit-js: tool ${toolName} called with ${args}`);
    // The before and after events of one call share this context.
    return { ...context, seen: true };
  },
  afterToolCall({ toolName, outcome }, context) {
    const how = outcome.tag === 'ok' ? 'succeeded' : `failed: ${outcome.val}`;
    console.log(`audit-js: tool ${toolName} ${how} (${context.seen ? 'paired' : 'unpaired'})`);
  },
  kernelLifecycle({ change, kernelId }) {
    log.info(`audit-js: kernel ${kernelId} ${change.tag}`);
  },
});
