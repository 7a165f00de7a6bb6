/// <reference path="./jupyter-mcp-extension-types.d.ts" />
declare module 'jupyter-mcp:extension/client@0.3.0' {
  /**
   * Asks the person a question through the client (MCP `elicitation/create`, form mode).
   * `requested-schema` is a JSON Schema object of flat primitive properties, as MCP requires.
   * Needs the grant `elicit`; a client without elicitation gives `unsupported-by-client`.
   */
  export function elicit(message: string, requestedSchema: string): ElicitAnswer;
  /**
   * Asks the client's model (MCP `sampling/createMessage`). `request` is the JSON of its
   * params (`messages`, `maxTokens`, optionally `systemPrompt`, `modelPreferences`, …); the
   * answer is the JSON of the client's result (`role`, `content`, `model`, `stopReason`).
   * Needs the grant `sample`; a client without sampling gives `unsupported-by-client`.
   */
  export function sample(request: string): string;
  /**
   * Reports progress on the current call to a client that asked for it (MCP
   * `notifications/progress`); `done` should grow. No grant needed; without a progress token
   * it does nothing. Rate-limited by the host.
   */
  export function progress(done: number, total: number | undefined, message: string | undefined): void;
  export type HostError = import('jupyter-mcp:extension/types@0.3.0').HostError;
  /**
   * The person's answer to `elicit`.
   */
  export type ElicitAnswer = ElicitAnswerAccept | ElicitAnswerDecline | ElicitAnswerCancel;
  /**
   * They answered: the content, a JSON object matching the requested schema.
   */
  export interface ElicitAnswerAccept {
    tag: 'accept',
    val: string,
  }
  /**
   * They said no.
   */
  export interface ElicitAnswerDecline {
    tag: 'decline',
  }
  /**
   * They dismissed the question without choosing.
   */
  export interface ElicitAnswerCancel {
    tag: 'cancel',
  }
}
