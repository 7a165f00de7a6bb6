/// <reference path="./jupyter-mcp-extension-types.d.ts" />
declare module 'jupyter-mcp:extension/secrets@0.3.0' {
  /**
   * The secret's value; `not-granted` without `secret:NAME`, `not-found` when the operator
   * has none by that name.
   */
  export function get(name: string): string;
  export type HostError = import('jupyter-mcp:extension/types@0.3.0').HostError;
}
