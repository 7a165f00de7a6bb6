// The policy tests' JavaScript guest: `fetch` (componentize-js's, over wasi:http) under the
// guest's allowed_hosts. Built against WIT v0.1.0 without the SDK, so its tool can be async:
// componentize-js runs the event loop until the promise of an export settles.
// Build: guests/tests/reach-js/build OUT_DIR
const annotations = {
  title: undefined,
  readOnlyHint: true,
  destructiveHint: undefined,
  idempotentHint: undefined,
  openWorldHint: true,
};

export const extensionApi = {
  identity: () => ({ name: 'reach-js', version: '0.1.0' }),
  capabilities: () => [],
  tools: () => [{
    name: 'reach_js_fetch',
    description: 'GETs a URL with fetch, following redirects.',
    inputSchema: JSON.stringify({ type: 'object', properties: { url: { type: 'string' } } }),
    annotations,
    capability: undefined,
  }],
  async callTool(name, args) {
    const { url } = JSON.parse(args);
    let text;
    try {
      // This fetch hands redirects back rather than following them: follow up to five, as a
      // browser would, each a request of its own for the host to check.
      let target = url;
      let response = await fetch(target);
      for (let hops = 0; hops < 5 && response.status >= 300 && response.status < 400; hops++) {
        target = new URL(response.headers.get('location'), target).href;
        response = await fetch(target);
      }
      text = `status ${response.status}: ${await response.text()}`;
    } catch (error) {
      text = `error: ${error?.message ?? error}${error?.cause ? ` (${error.cause})` : ''}`;
    }
    return { content: [{ tag: 'text', val: text }], structured: undefined, isError: false };
  },
};
