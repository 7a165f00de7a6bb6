// What the host offers a guest, as the tests set it (globalThis.host), shaped as jco maps the WIT:
// a refused call throws an Error whose `payload` is the `host-error` variant.
export const host = (globalThis.host ??= { logged: [], cells: [], refuse: undefined, config: '{}' });

class Refused extends Error {
  constructor(payload) {
    super(`${payload.tag}: ${payload.val}`);
    this.payload = payload;
  }
}

export function log(level, message) {
  host.logged.push([level, message]);
}
export const getConfig = () => host.config;
export const apiVersion = () => '0.2.0';
export const serverVersion = () => '0.0.0';
export function readCells(notebook) {
  if (host.refuse) throw new Refused(host.refuse);
  return host.cells;
}
