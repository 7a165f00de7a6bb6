/// <reference path="./jupyter-mcp-extension-types.d.ts" />
declare module 'jupyter-mcp:extension/hooks@0.2.0' {
  /**
   * `true`: an error fails the call it observes (a critical handler, e.g. a policy);
   * `false`: errors are logged and suppressed (an optional handler, e.g. an audit log).
   */
  export function propagateErrors(): boolean;
  /**
   * Handles one event. `context` is this handler's own JSON object, shared by the `before_*`
   * and `after_*` events of one call (`{}` on the first). Return `some(json)` to replace it,
   * `none` to leave it, or an error to refuse (the message reaches the caller when critical).
   */
  export function onEvent(event: HookEvent, context: string): string | undefined;
  export type HookEvent = import('jupyter-mcp:extension/types@0.2.0').HookEvent;
  export type GuestError = import('jupyter-mcp:extension/types@0.2.0').GuestError;
}
