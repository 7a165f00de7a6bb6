// jupyter-mcp-extension: write a jupyter-mcp-server extension or hook handler in JavaScript.
//
// An author describes tools, resources, prompts and hooks as plain objects; this module turns
// them into the exports the WIT (jupyter-mcp:extension@0.3.0) asks for, with empty lists for
// whatever is left out. Every export is guarded: whatever a handler throws (an Error, a string,
// a refused host call) reaches the host as a `guest-error` with its message, because
// componentize-js traps on a thrown Error and accepts only the WIT's own variant as an `err`.
import { log as hostLog } from 'jupyter-mcp:extension/log@0.3.0';
import { getConfig } from 'jupyter-mcp:extension/config@0.3.0';
import { apiVersion as hostApiVersion } from 'jupyter-mcp:extension/host-info@0.3.0';
import { elicit as hostElicit, progress as hostProgress, sample as hostSample } from 'jupyter-mcp:extension/client@0.3.0';
import { get as hostSecret } from 'jupyter-mcp:extension/secrets@0.3.0';

const HOST_ERRORS = ['not-granted', 'not-available', 'not-found', 'conflict', 'kernel', 'invalid', 'failed',
  'unsupported-by-client', 'refused'];
const GUEST_ERRORS = ['invalid-arguments', 'not-found', 'host', 'failed'];

/** Text of any value, as console.log would show it. */
function show(value) {
  if (typeof value === 'string') return value;
  if (value instanceof Error) return value.stack ? `${value.message}\n${value.stack}` : value.message;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

function logAt(level) {
  return (...values) => hostLog(level, values.map(show).join(' '));
}

/** Logging into the server's log, tagged with this guest's name (`info` and above also reach
 * MCP clients that asked for logging). */
export const log = {
  trace: logAt('trace'),
  debug: logAt('debug'),
  info: logAt('info'),
  warn: logAt('warn'),
  error: logAt('error'),
};

// console.* writes to WASI stdout/stderr, which the host discards: route it to the host's log.
for (const [name, level] of [['log', 'info'], ['info', 'info'], ['debug', 'debug'], ['trace', 'trace'],
  ['warn', 'warn'], ['error', 'error']]) {
  try {
    globalThis.console[name] = logAt(level);
  } catch {
    // A console that cannot be replaced keeps its own behaviour; `log` still works.
  }
}

/** An error with the `guest-error` case the host should see. Throw one, or use the helpers. */
export class GuestError extends Error {
  constructor(tag, message) {
    super(message);
    this.name = 'GuestError';
    this.tag = tag;
  }
}

/** The arguments did not make sense (shown to the caller as such). */
export function invalidArguments(message) {
  return new GuestError('invalid-arguments', message);
}

/** No such tool, resource or prompt (or thing the arguments name). */
export function notFound(message) {
  return new GuestError('not-found', message);
}

function hostErrorOf(value) {
  return value && typeof value === 'object' && HOST_ERRORS.includes(value.tag) && typeof value.val === 'string'
    ? value : undefined;
}

/** A refused host call's `host-error` (`{tag, val}`), or `undefined` for any other value. The
 * host functions throw an Error whose `payload` is it. */
export function hostError(thrown) {
  return hostErrorOf(thrown?.payload);
}

/** The message of a host call refused because this call's MCP client cannot do it (it declared
 * no elicitation or sampling, or there is no client), or `undefined` for any other value: the
 * case to fall back on, e.g. `catch (e) { if (unsupportedByClient(e) === undefined) throw e; ... }`. */
export function unsupportedByClient(thrown) {
  const host = hostError(thrown);
  return host?.tag === 'unsupported-by-client' ? host.val : undefined;
}

/** Turns any thrown value into the WIT's `guest-error` variant, keeping its message. */
export function toGuestError(thrown) {
  if (thrown instanceof GuestError && GUEST_ERRORS.includes(thrown.tag) && thrown.tag !== 'host') {
    return { tag: thrown.tag, val: thrown.message };
  }
  const host = hostError(thrown);
  if (host) return { tag: 'host', val: host };
  if (thrown instanceof Error) return { tag: 'failed', val: thrown.message || thrown.name };
  if (typeof thrown === 'string') return { tag: 'failed', val: thrown };
  return { tag: 'failed', val: show(thrown) };
}

/** Wraps a function so that whatever it throws becomes a `guest-error` the host can read. */
export function guard(fn) {
  return function guarded(...args) {
    try {
      return fn.apply(this, args);
    } catch (thrown) {
      // A plain object (not an Error) is what componentize-js passes on as the `err` case.
      throw toGuestError(thrown);
    }
  };
}

/** Like `guard`, for an export that returns no `result`: a failure is logged and `fallback` is
 * returned instead of trapping the instance. */
function orFallback(what, fn, fallback) {
  return () => {
    try {
      return fn();
    } catch (thrown) {
      log.error(`${what} failed: ${toGuestError(thrown).val}`);
      return fallback;
    }
  };
}

/** This guest's `config` table from the operator's config file, parsed (`{}` when none). */
export function config() {
  return JSON.parse(getConfig());
}

/** The WIT version the host implements, e.g. `0.3.0`. */
export function apiVersion() {
  return hostApiVersion();
}

// ---- the client and secrets ----

/** Asks the person a question through the MCP client (`elicitation/create`; grant `elicit`).
 * `requestedSchema` is a JSON Schema object of flat primitive properties (an object or its
 * JSON). Returns `{ action: 'accept', content }` (the answer, parsed), `{ action: 'decline' }`
 * or `{ action: 'cancel' }`. Throws a host error when refused: `unsupportedByClient(e)` tells
 * a client without elicitation apart. */
export function elicit(message, requestedSchema) {
  const answer = hostElicit(message, json(requestedSchema));
  return answer.tag === 'accept' ? { action: 'accept', content: JSON.parse(answer.val) } : { action: answer.tag };
}

/** Asks the client's model (`sampling/createMessage`; grant `sample`). `request` is its params
 * (`{ messages, maxTokens, systemPrompt?, ... }`, an object or its JSON); returns the client's
 * result parsed (`{ role, content, model, stopReason }`). Throws as `elicit` does. */
export function sample(request) {
  return JSON.parse(hostSample(json(request)));
}

/** Reports progress on the current call to a client that asked for it; does nothing otherwise. */
export function progress(done, total, message) {
  hostProgress(done, total ?? undefined, message ?? undefined);
}

/** The operator's secret `name` (grant `secret:NAME`); throws `not-granted` or `not-found`. */
export function secret(name) {
  return hostSecret(name);
}

// ---- results ----

/** A tool result of one text block. */
export function text(value, { isError = false } = {}) {
  return { content: [{ tag: 'text', val: value }], structured: undefined, isError };
}

/** A tool result with structured output (a JSON object) and its JSON text for older clients. */
export function structured(object, summary) {
  return {
    content: [{ tag: 'text', val: summary ?? JSON.stringify(object) }],
    structured: JSON.stringify(object),
    isError: false,
  };
}

/** A tool result that says the tool ran and failed, with what to do next. */
export function errorResult(message) {
  return text(message, { isError: true });
}

function toolResult(value) {
  if (typeof value === 'string') return text(value);
  if (value && Array.isArray(value.content)) {
    return {
      content: value.content,
      structured: typeof value.structured === 'string' || value.structured === undefined
        ? value.structured : JSON.stringify(value.structured),
      isError: Boolean(value.isError),
    };
  }
  // Any other value is the tool's structured output.
  return structured(value ?? {});
}

function parseArguments(json) {
  try {
    const value = JSON.parse(json);
    return value && typeof value === 'object' ? value : {};
  } catch (e) {
    throw invalidArguments(`the arguments are not JSON: ${e.message}`);
  }
}

const json = (value) => (value === undefined ? undefined : typeof value === 'string' ? value : JSON.stringify(value));

function toolSpec(tool) {
  const a = tool.annotations ?? {};
  return {
    name: tool.name,
    description: tool.description ?? '',
    inputSchema: json(tool.inputSchema ?? { type: 'object', properties: {} }),
    outputSchema: json(tool.outputSchema),
    annotations: {
      title: a.title ?? tool.title,
      readOnlyHint: a.readOnlyHint ?? tool.readOnly,
      destructiveHint: a.destructiveHint ?? tool.destructive,
      idempotentHint: a.idempotentHint ?? tool.idempotent,
      openWorldHint: a.openWorldHint ?? tool.openWorld,
    },
    capability: tool.capability,
  };
}

// ---- resources ----

/** A matcher for an RFC 6570 template's simple `{name}` expressions (one path segment each). */
function templateMatcher(template) {
  const names = [];
  const pattern = template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{([^}]+)\}/g, (_, name) => {
    names.push(name);
    return '([^/?#]*)';
  });
  const regex = new RegExp(`^${pattern}$`);
  return (uri) => {
    const m = regex.exec(uri);
    if (!m) return undefined;
    return Object.fromEntries(names.map((name, i) => [name, decodeURIComponent(m[i + 1])]));
  };
}

function contents(uri, mimeType, value) {
  const list = Array.isArray(value) ? value : [value];
  return list.map((item) => {
    if (typeof item === 'string') return { uri, mimeType, body: { tag: 'text', val: item } };
    if (item instanceof Uint8Array) return { uri, mimeType, body: { tag: 'blob', val: item } };
    if (item && item.body) return { uri: item.uri ?? uri, mimeType: item.mimeType ?? mimeType, body: item.body };
    return { uri, mimeType: mimeType ?? 'application/json', body: { tag: 'text', val: JSON.stringify(item) } };
  });
}

// ---- prompts ----

function promptResult(value, description) {
  if (typeof value === 'string') {
    return { description, messages: [{ role: 'user', content: { tag: 'text', val: value } }] };
  }
  return {
    description: value.description ?? description,
    messages: value.messages.map((m) => ({
      role: m.role ?? 'user',
      content: typeof m.content === 'string' ? { tag: 'text', val: m.content } : m.content,
    })),
  };
}

// ---- hooks ----

const camel = (tag) => tag.replace(/-([a-z])/g, (_, c) => c.toUpperCase());

/** A hook handler's whole answer: `context` (an object) replaces the call's context, `confirm`
 * (a reason shown to the person) holds a `before_*` call until they confirm it. */
export class HookReply {
  constructor({ context, confirm } = {}) {
    this.context = context;
    this.confirm = confirm;
  }
}

/** Holds the call until the person confirms it through the client, `reason` shown to them; a no,
 * or a client that cannot ask, refuses the call. Honoured on `before_*` events of a critical
 * handler (`propagateErrors: true`); `context`, when given, replaces the call's context. */
export function confirm(reason, context) {
  return new HookReply({ context, confirm: reason });
}

/** The `hooks` export from `{ propagateErrors, onEvent(event, context) }` or per-event handlers
 * named in camelCase (`beforeToolCall(data, context)`, ...). `context` arrives parsed; return an
 * object to replace it, nothing to leave it, `confirm(reason)` to ask the person first, or
 * throw to refuse. */
export function defineHooks(spec) {
  const handle = spec.onEvent ?? ((event, context) => spec[camel(event.tag)]?.(event.val, context));
  const context = (value) => (value === undefined || value === null ? undefined : JSON.stringify(value));
  return {
    propagateErrors: () => Boolean(spec.propagateErrors),
    onEvent: guard((event, given) => {
      const answer = handle(event, JSON.parse(given || '{}'));
      return answer instanceof HookReply
        ? { context: context(answer.context), confirm: answer.confirm ?? undefined }
        : { context: context(answer), confirm: undefined };
    }),
  };
}

// ---- the extension ----

/** The `extensionApi` export (and `hooks`, when `spec.hooks` is given) from a description:
 * `{ name, version, capabilities, tools, resources, resourceTemplates, prompts, hooks }`; every
 * list may be left out. See guests/README.md for the shape of each entry. */
export function defineExtension(spec) {
  if (!spec?.name || !spec?.version) throw new Error('defineExtension needs a name and a version');
  // A function is asked at load (the host is not there while the module is pre-initialized).
  const name = () => (typeof spec.name === 'function' ? spec.name() : spec.name);
  const tools = spec.tools ?? [];
  const resources = spec.resources ?? [];
  const templates = (spec.resourceTemplates ?? []).map((t) => ({ ...t, match: templateMatcher(t.uriTemplate) }));
  const prompts = spec.prompts ?? [];
  const extensionApi = {
    identity: () => ({ name: name(), version: spec.version }),
    capabilities: orFallback('capabilities', () => (spec.capabilities ?? []).map((c) => ({
      name: c.name, description: c.description ?? '', enabled: c.enabled ?? true,
    })), []),
    tools: orFallback('tools', () => tools.map(toolSpec), []),
    callTool: guard((toolName, args) => {
      const tool = tools.find((t) => t.name === toolName);
      if (!tool) throw notFound(`${name()} has no tool '${toolName}'`);
      return toolResult(tool.call(parseArguments(args)));
    }),
    resources: orFallback('resources', () => resources.map(({ uri, name, title, description, mimeType }) => (
      { uri, name, title, description, mimeType })), []),
    resourceTemplates: orFallback('resourceTemplates', () => templates.map(
      ({ uriTemplate, name, title, description, mimeType }) => ({ uriTemplate, name, title, description, mimeType })), []),
    readResource: guard((uri) => {
      const resource = resources.find((r) => r.uri === uri);
      if (resource) return contents(uri, resource.mimeType, resource.read(uri));
      for (const template of templates) {
        const params = template.match(uri);
        if (params) return contents(uri, template.mimeType, template.read(uri, params));
      }
      throw notFound(`${name()} has no resource '${uri}'`);
    }),
    prompts: orFallback('prompts', () => prompts.map(({ name, title, description, arguments: args }) => ({
      name, title, description,
      arguments: (args ?? []).map((a) => ({ name: a.name, description: a.description, required: Boolean(a.required) })),
    })), []),
    getPrompt: guard((promptName, args) => {
      const prompt = prompts.find((p) => p.name === promptName);
      if (!prompt) throw notFound(`${name()} has no prompt '${promptName}'`);
      const given = parseArguments(args);
      for (const a of prompt.arguments ?? []) {
        if (a.required && given[a.name] === undefined) {
          throw invalidArguments(`prompt '${promptName}' needs the argument '${a.name}'`);
        }
      }
      return promptResult(prompt.get(given), prompt.description);
    }),
  };
  return spec.hooks ? { extensionApi, hooks: defineHooks(spec.hooks) } : { extensionApi };
}
