// Runs the SDK and the examples under plain Node for the unit tests: the WIT's interfaces
// (`jupyter-mcp:extension/...`), which only a component host provides, resolve to host-stub.mjs.
import { register } from 'node:module';

register('./resolve-host.mjs', import.meta.url);
