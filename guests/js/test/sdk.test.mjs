// Unit tests of the SDK (src/index.js) and its examples under plain Node, the host stubbed
// (register.mjs). Run from guests/js: node --import ./test/register.mjs --test test/
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { host } from './host-stub.mjs';
import {
  defineExtension, defineHooks, guard, invalidArguments, notFound, text, toGuestError,
} from 'jupyter-mcp-extension';
import { extensionApi as wordcount } from '../examples/wordcount/app.js';
import { hooks as audit } from '../examples/audit/app.js';

const cell = (id, kind, source) => ({
  id, index: 0, kind, source, metadata: '{}', outputs: '[]', executionCount: undefined,
});

/** What componentize-js passes on as the `err` of a `result` export: the thrown plain value. */
function err(fn) {
  try {
    fn();
  } catch (thrown) {
    assert.ok(!(thrown instanceof Error), `an Error would trap: ${thrown}`);
    return thrown;
  }
  assert.fail('no error');
}

test('every thrown value becomes a guest-error with its message', () => {
  const cases = [
    [new Error('an Error'), { tag: 'failed', val: 'an Error' }],
    [new TypeError('x is undefined'), { tag: 'failed', val: 'x is undefined' }],
    ['a string', { tag: 'failed', val: 'a string' }],
    [42, { tag: 'failed', val: '42' }],
    [{ any: 'object' }, { tag: 'failed', val: '{"any":"object"}' }],
    [invalidArguments('bad'), { tag: 'invalid-arguments', val: 'bad' }],
    [notFound('gone'), { tag: 'not-found', val: 'gone' }],
  ];
  for (const [thrown, expected] of cases) {
    assert.deepEqual(toGuestError(thrown), expected);
    assert.deepEqual(err(guard(() => { throw thrown; })), expected);
  }
  // A refused host call is passed on as `host`, with the host's own variant and message.
  const refused = Object.assign(new Error('refused'), { payload: { tag: 'not-granted', val: 'add read-cells' } });
  assert.deepEqual(toGuestError(refused), { tag: 'host', val: { tag: 'not-granted', val: 'add read-cells' } });
});

test('the example counts words, and passes on a refusal and its own errors', () => {
  host.cells = [cell('a', 'markdown', '# Two words'), cell('b', 'code', 'x = 1\nprint(x)')];
  host.refuse = undefined;
  const result = wordcount.callTool('word_count_js', '{}');
  const expected = { cells: 2, words: 7, per_cell: [
    { id: 'a', kind: 'markdown', words: 3 }, { id: 'b', kind: 'code', words: 4 }] };
  assert.deepEqual(JSON.parse(result.structured), expected);
  assert.equal(result.isError, false);
  assert.deepEqual(err(() => wordcount.callTool('word_count_js', '{"cell_id":"zz"}')),
    { tag: 'failed', val: "no cell has the id 'zz'; read_notebook lists them" });
  assert.deepEqual(err(() => wordcount.callTool('nope', '{}')),
    { tag: 'not-found', val: "wordcount-js has no tool 'nope'" });
  assert.deepEqual(err(() => wordcount.callTool('word_count_js', 'not json')).tag, 'invalid-arguments');
  host.refuse = { tag: 'not-granted', val: 'read-cells is not granted' };
  assert.deepEqual(err(() => wordcount.callTool('word_count_js', '{}')),
    { tag: 'host', val: host.refuse });
  host.refuse = undefined;
});

test('resources, templates and prompts are listed and served', () => {
  host.cells = [cell('a', 'markdown', 'one two three'), cell('b', 'markdown', 'one')];
  assert.deepEqual(wordcount.resources().map((r) => r.uri), ['wordcount-js://current']);
  assert.deepEqual(wordcount.resourceTemplates().map((r) => r.uriTemplate), ['wordcount-js://cell/{id}']);
  const [one] = wordcount.readResource('wordcount-js://cell/b');
  assert.equal(one.mimeType, 'application/json');
  assert.equal(JSON.parse(one.body.val).words, 1);
  assert.equal(err(() => wordcount.readResource('wordcount-js://else')).tag, 'not-found');
  const got = wordcount.getPrompt('tighten_prose_js', '{"limit":"2"}');
  assert.deepEqual(got.messages, [{ role: 'user', content: { tag: 'text', val: 'Rewrite markdown cell a (3 words) in at most 2 words.' } }]);
  assert.deepEqual(err(() => wordcount.getPrompt('tighten_prose_js', '{}')),
    { tag: 'invalid-arguments', val: "prompt 'tighten_prose_js' needs the argument 'limit'" });
});

test('what an extension leaves out is empty', () => {
  const { extensionApi, hooks } = defineExtension({ name: 'bare', version: '1.0.0' });
  assert.equal(hooks, undefined);
  assert.deepEqual(extensionApi.identity(), { name: 'bare', version: '1.0.0' });
  for (const list of ['capabilities', 'tools', 'resources', 'resourceTemplates', 'prompts']) {
    assert.deepEqual(extensionApi[list](), [], list);
  }
  const tools = defineExtension({ name: 'one', version: '1', tools: [{ name: 't', call: () => text('hi') }] });
  const [spec] = tools.extensionApi.tools();
  assert.deepEqual(JSON.parse(spec.inputSchema), { type: 'object', properties: {} });
  assert.deepEqual(tools.extensionApi.callTool('t', '{}').content, [{ tag: 'text', val: 'hi' }]);
  // With hooks, both exports (for the extension-with-hooks world).
  const both = defineExtension({ name: 'both', version: '1', hooks: { beforeExecute: (e, ctx) => ({ ...ctx, code: e.code }) } });
  assert.deepEqual(both.extensionApi.tools(), []);
  assert.equal(both.hooks.onEvent({ tag: 'before-execute', val: { kernelId: 'k', code: '1 + 1' } }, '{}'), '{"code":"1 + 1"}');
});

test('hooks get parsed context, and log through the host, console included', () => {
  host.logged.length = 0;
  assert.equal(audit.propagateErrors(), false);
  const event = { tag: 'before-tool-call', val: { toolName: 'insert_cell', arguments: '{}' } };
  const context = audit.onEvent(event, '{}');
  assert.deepEqual(JSON.parse(context), { seen: true });
  const after = { tag: 'after-tool-call', val: { toolName: 'insert_cell', arguments: '{}', outcome: { tag: 'err', val: 'no' } } };
  assert.equal(audit.onEvent(after, context), undefined);
  // An event it has no handler for leaves the context.
  assert.equal(audit.onEvent({ tag: 'before-execute', val: { kernelId: 'k', code: '1' } }, '{}'), undefined);
  assert.deepEqual(host.logged, [
    ['info', 'audit-js: tool insert_cell called with {}'],
    ['info', 'audit-js: tool insert_cell failed: no (paired)'],
  ]);
  const refusing = defineHooks({ propagateErrors: true, beforeExecute: () => { throw new Error('no kernels today'); } });
  assert.equal(refusing.propagateErrors(), true);
  assert.deepEqual(err(() => refusing.onEvent({ tag: 'before-execute', val: { kernelId: 'k', code: '1' } }, '{}')),
    { tag: 'failed', val: 'no kernels today' });
});
