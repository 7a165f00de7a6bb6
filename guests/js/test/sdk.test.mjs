// Unit tests of the SDK (src/index.js) and its examples under plain Node, the host stubbed
// (register.mjs). Run from guests/js: node --import ./test/register.mjs --test test/
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { host } from './host-stub.mjs';
import {
  defineExtension, defineHooks, guard, invalidArguments, notFound, text, toGuestError,
} from 'jupyter-mcp-extension';
import { extensionApi as wordcount, hooks as wordcountHooks } from '../examples/wordcount/app.js';
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

test('the example counts words, edits by id, and passes on refusals and its own errors', () => {
  host.cells = [cell('a', 'markdown', '# Two words'), cell('b', 'code', 'x = 1\nprint(x)'), cell('c', 'raw', 'not counted')];
  host.refuse = undefined;
  const result = wordcount.callTool('word_count', '{}');
  const expected = { markdown: 3, code: 4, total: 7, cells: [
    { id: 'a', index: 0, kind: 'markdown', words: 3 }, { id: 'b', index: 0, kind: 'code', words: 4 }] };
  assert.deepEqual(JSON.parse(result.structured), expected);
  assert.equal(result.isError, false);
  assert.deepEqual(err(() => wordcount.callTool('nope', '{}')),
    { tag: 'not-found', val: "wordcount has no tool 'nope'" });
  assert.deepEqual(err(() => wordcount.callTool('word_count', 'not json')).tag, 'invalid-arguments');
  // Whole words only; the source read is what the host must still find.
  const replaced = wordcount.callTool('replace_word', '{"cell_id":"a","word":"Two","replacement":"Twenty"}');
  assert.deepEqual(replaced.content, [{ tag: 'text', val: "replaced 1 occurrence(s) of 'Two' in cell a" }]);
  assert.deepEqual(host.written.at(-1), [{ tag: 'id', val: 'a' }, '# Twenty words', '# Two words']);
  assert.equal(wordcount.callTool('replace_word', '{"cell_id":"a","word":"wo","replacement":"x"}').content[0].val,
    "'wo' does not occur in cell a");
  assert.deepEqual(err(() => wordcount.callTool('replace_word', '{"cell_id":"a","word":" ","replacement":"x"}')),
    { tag: 'invalid-arguments', val: "'word' is empty; name the word to replace" });
  assert.deepEqual(err(() => wordcount.callTool('replace_word',
    '{"cell_id":"a","word":"words","replacement":"x","expected_source":"stale"}')),
  { tag: 'host', val: { tag: 'conflict', val: 'changed' } });
  assert.deepEqual(err(() => wordcount.callTool('replace_word', '{"cell_id":"zz","word":"a","replacement":"b"}')),
    { tag: 'host', val: { tag: 'not-found', val: 'no cell zz' } });
  host.refuse = { tag: 'not-granted', val: 'read-cells is not granted' };
  assert.deepEqual(err(() => wordcount.callTool('word_count', '{}')), { tag: 'host', val: host.refuse });
  host.refuse = undefined;
});

test('resources, templates and prompts are listed and served', () => {
  host.cells = [cell('a', 'markdown', 'one two three'), cell('b', 'code', 'one')];
  assert.deepEqual(wordcount.resources().map((r) => r.uri), ['wordcount://current']);
  assert.deepEqual(wordcount.resourceTemplates().map((r) => r.uriTemplate), ['wordcount://notebooks/{name}']);
  const [one] = wordcount.readResource('wordcount://notebooks/nb');
  assert.equal(one.mimeType, 'application/json');
  assert.equal(JSON.parse(one.body.val).total, 4);
  assert.equal(err(() => wordcount.readResource('wordcount://else')).tag, 'not-found');
  const got = wordcount.getPrompt('word_budget', '{"budget":"2"}');
  assert.deepEqual(got.messages, [{ role: 'user', content: { tag: 'text', val:
    "The notebook's markdown has 3 words (code: 1); the budget is 2. Cut 1 words. Keep every code cell as it is." } }]);
  assert.deepEqual(err(() => wordcount.getPrompt('word_budget', '{}')),
    { tag: 'invalid-arguments', val: "prompt 'word_budget' needs the argument 'budget'" });
  assert.deepEqual(err(() => wordcount.getPrompt('word_budget', '{"budget":"many"}')),
    { tag: 'invalid-arguments', val: "'budget' must be a whole number of words" });
  // Its name comes from the operator's config when given, asked at load.
  assert.equal(wordcount.identity().name, 'wordcount');
  host.config = '{"name":"wordcount-2"}';
  assert.equal(wordcount.identity().name, 'wordcount-2');
  host.config = '{}';
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
  host.logged.length = 0;
  assert.equal(wordcountHooks.onEvent({ tag: 'before-execute', val: { kernelId: 'k1', code: 'print(1 + 2)' } }, '{}'), undefined);
  assert.deepEqual(host.logged, [['info', '3 words of code sent to kernel k1']]);
  const refusing = defineHooks({ propagateErrors: true, beforeExecute: () => { throw new Error('no kernels today'); } });
  assert.equal(refusing.propagateErrors(), true);
  assert.deepEqual(err(() => refusing.onEvent({ tag: 'before-execute', val: { kernelId: 'k', code: '1' } }, '{}')),
    { tag: 'failed', val: 'no kernels today' });
});
