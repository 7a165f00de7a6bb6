// Unit tests of the SDK (src/index.js) and its examples under plain Node, the host stubbed
// (register.mjs). Run from guests/js: node --import ./test/register.mjs --test test/
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { host } from './host-stub.mjs';
import {
  confirm, defineExtension, defineHooks, elicit, guard, invalidArguments, notFound, progress, sample, secret, text,
  toGuestError, unsupportedByClient,
} from 'jupyter-mcp-extension';
import { extensionApi as wordcount, hooks as wordcountHooks } from '../examples/wordcount/app.js';
import { hooks as audit } from '../examples/audit/app.js';

const cell = (id, kind, source) => ({
  id, index: 0, kind, source, metadata: '{}', outputs: '[]', executionCount: undefined, version: `v-${id}`,
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
  // Without the caller's expected source, the version just read is what the host must still find.
  assert.deepEqual(host.written.at(-1), [{ tag: 'id', val: 'a' }, '# Twenty words', undefined, 'v-a']);
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
  assert.deepEqual(both.hooks.onEvent({ tag: 'before-execute', val: { kernelId: 'k', code: '1 + 1' } }, '{}'),
    { context: '{"code":"1 + 1"}', confirm: undefined });
});

test('hooks get parsed context, and log through the host, console included', () => {
  host.logged.length = 0;
  const event = { tag: 'before-tool-call', val: { toolName: 'insert_cell', arguments: '{}' } };
  const { context, confirm: asked } = audit.onEvent(event, '{}');
  assert.deepEqual(JSON.parse(context), { seen: true });
  assert.equal(asked, undefined);
  const after = { tag: 'after-tool-call', val: { toolName: 'insert_cell', arguments: '{}', outcome: { tag: 'err', val: 'no' } } };
  const keep = { context: undefined, confirm: undefined };
  assert.deepEqual(audit.onEvent(after, context), keep);
  // An event it has no handler for leaves the context.
  assert.deepEqual(audit.onEvent({ tag: 'kernel-lifecycle', val: { kernelId: 'k', change: { tag: 'started' } } }, '{}'), keep);
  assert.deepEqual(host.logged, [
    ['info', 'audit-js: tool insert_cell called with {}'],
    ['info', 'audit-js: tool insert_cell failed: no (paired)'],
    ['info', 'audit-js: kernel k started'],
  ]);
  // Critical, so that the host asks the person before a pip install runs; other code just runs.
  assert.equal(audit.propagateErrors(), true);
  const execute = (code) => audit.onEvent({ tag: 'before-execute', val: { kernelId: 'k', code } }, '{}');
  for (const code of ['%pip install requests', 'x = 1\n!pip install -q numpy']) {
    assert.deepEqual(execute(code), { context: undefined, confirm: 'the code installs packages with pip' }, code);
  }
  for (const code of ['print(1)', '%pip list']) assert.deepEqual(execute(code), keep, code);
  host.logged.length = 0;
  assert.deepEqual(wordcountHooks.onEvent({ tag: 'before-execute', val: { kernelId: 'k1', code: 'print(1 + 2)' } }, '{}'), keep);
  assert.deepEqual(host.logged, [['info', '3 words of code sent to kernel k1']]);
  const refusing = defineHooks({ propagateErrors: true, beforeExecute: () => { throw new Error('no kernels today'); } });
  assert.equal(refusing.propagateErrors(), true);
  assert.deepEqual(err(() => refusing.onEvent({ tag: 'before-execute', val: { kernelId: 'k', code: '1' } }, '{}')),
    { tag: 'failed', val: 'no kernels today' });
});

test('the client and secrets: answers as JavaScript values, a client that cannot ask as a typed error', () => {
  host.refuse = undefined;
  host.asked.length = 0;
  const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] };
  host.answers = [{ tag: 'accept', val: '{"ok":true}' }, { tag: 'decline' }, { tag: 'cancel' }];
  assert.deepEqual(elicit('Go on?', schema), { action: 'accept', content: { ok: true } });
  assert.deepEqual(elicit('Go on?', JSON.stringify(schema)), { action: 'decline' });
  assert.deepEqual(elicit('Go on?', schema), { action: 'cancel' });
  assert.deepEqual(host.asked[0], ['elicit', 'Go on?', JSON.stringify(schema)]);
  // A client without elicitation or sampling: a host error the guest can tell apart and handle.
  host.answers = [{ refuse: { tag: 'unsupported-by-client', val: 'the client did not declare elicitation' } }];
  let thrown;
  try {
    elicit('Go on?', schema);
  } catch (e) {
    thrown = e;
  }
  assert.equal(unsupportedByClient(thrown), 'the client did not declare elicitation');
  assert.deepEqual(toGuestError(thrown).val.tag, 'unsupported-by-client');
  assert.equal(unsupportedByClient(new Error('other')), undefined);
  assert.equal(unsupportedByClient(Object.assign(new Error('x'), { payload: { tag: 'refused', val: 'no' } })), undefined);
  // Sampling takes and gives JSON-able values.
  const result = { role: 'assistant', content: { type: 'text', text: 'hi' }, model: 'm', stopReason: 'endTurn' };
  host.answers = [JSON.stringify(result)];
  const request = { messages: [{ role: 'user', content: { type: 'text', text: 'hello' } }], maxTokens: 10 };
  assert.deepEqual(sample(request), result);
  assert.deepEqual(host.asked.at(-1), ['sample', JSON.stringify(request)]);
  host.progress.length = 0;
  progress(1, 3, 'one of three');
  progress(2);
  assert.deepEqual(host.progress, [[1, 3, 'one of three'], [2, undefined, undefined]]);
  host.secrets = { TOKEN: 's3cret' };
  assert.equal(secret('TOKEN'), 's3cret');
  assert.equal(hostErrorTag(() => secret('OTHER')), 'not-granted');
  // A hook reply that asks the person keeps the context it is given.
  const asking = defineHooks({ propagateErrors: true, beforeToolCall: (_, ctx) => confirm('sure?', { ...ctx, asked: 1 }) });
  assert.deepEqual(asking.onEvent({ tag: 'before-tool-call', val: { toolName: 't', arguments: '{}' } }, '{}'),
    { context: '{"asked":1}', confirm: 'sure?' });
});

function hostErrorTag(fn) {
  try {
    fn();
  } catch (e) {
    return e.payload?.tag;
  }
  assert.fail('no error');
}
