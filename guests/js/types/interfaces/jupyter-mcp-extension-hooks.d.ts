/// <reference path="./jupyter-mcp-extension-types.d.ts" />
declare module 'jupyter-mcp:extension/hooks@0.3.0' {
  /**
   * `true`: an error fails the call it observes (a critical handler, e.g. a policy);
   * `false`: errors are logged and suppressed (an optional handler, e.g. an audit log).
   */
  export function propagateErrors(): boolean;
  /**
   * Handles one event. `context` is this handler's own JSON object, shared by the `before_*`
   * and `after_*` events of one call (`{}` on the first). Return a `hook-reply` (its context,
   * and whether to ask the person first), or an error to refuse (the message reaches the
   * caller when critical).
   */
  export function onEvent(event: HookEvent, context: string): HookReply;
  export type HookEvent = import('jupyter-mcp:extension/types@0.3.0').HookEvent;
  export type HookReply = import('jupyter-mcp:extension/types@0.3.0').HookReply;
  export type GuestError = import('jupyter-mcp:extension/types@0.3.0').GuestError;
}
