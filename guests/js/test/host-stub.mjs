// What the host offers a guest, as the tests set it (globalThis.host), shaped as jco maps the WIT:
// a refused call throws an Error whose `payload` is the `host-error` variant.
export const host = (globalThis.host ??= {
  logged: [], cells: [], written: [], refuse: undefined, config: '{}', answers: [], asked: [], progress: [], secrets: {},
});

class Refused extends Error {
  constructor(payload) {
    super(`${payload.tag}: ${payload.val}`);
    this.payload = payload;
  }
}

function check() {
  if (host.refuse) throw new Refused(host.refuse);
}

export function log(level, message) {
  host.logged.push([level, message]);
}
export const getConfig = () => host.config;
export const apiVersion = () => '0.3.0';
export const serverVersion = () => '0.0.0';
export function readCells(notebook) {
  check();
  return host.cells;
}
export function readCell(notebook, ref) {
  check();
  const cell = host.cells.find((c) => c.id === ref.val);
  if (!cell) throw new Refused({ tag: 'not-found', val: `no cell ${ref.val}` });
  return cell;
}
export function overwriteCell(notebook, ref, source, expected, expectedVersion) {
  check();
  const cell = readCell(notebook, ref);
  if (expected !== undefined && expected !== cell.source) throw new Refused({ tag: 'conflict', val: 'changed' });
  if (expectedVersion !== undefined && expectedVersion !== cell.version) throw new Refused({ tag: 'conflict', val: 'changed' });
  host.written.push([ref, source, expected, expectedVersion]);
  cell.source = source;
  cell.version = `${cell.version}+`;
  return cell.version;
}
// The client: `host.answers` are what elicit and sample answer, in order (`{ refuse: hostError }`
// throws it); what was asked is kept in `host.asked`.
function answer(asked) {
  check();
  host.asked.push(asked);
  const next = host.answers.shift();
  if (next?.refuse) throw new Refused(next.refuse);
  return next;
}
export const elicit = (message, schema) => answer(['elicit', message, schema]);
export const sample = (request) => answer(['sample', request]);
export function progress(done, total, message) {
  host.progress.push([done, total, message]);
}
export function get(name) {
  if (!(name in host.secrets)) throw new Refused({ tag: 'not-granted', val: `secret:${name} is not granted` });
  return host.secrets[name];
}
