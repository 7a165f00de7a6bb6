// What the host offers a guest, as the tests set it (globalThis.host), shaped as jco maps the WIT:
// a refused call throws an Error whose `payload` is the `host-error` variant.
export const host = (globalThis.host ??= { logged: [], cells: [], written: [], refuse: undefined, config: '{}' });

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
export const apiVersion = () => '0.2.0';
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
export function overwriteCell(notebook, ref, source, expected) {
  check();
  const cell = readCell(notebook, ref);
  if (expected !== undefined && expected !== cell.source) throw new Refused({ tag: 'conflict', val: 'changed' });
  host.written.push([ref, source, expected]);
  cell.source = source;
}
