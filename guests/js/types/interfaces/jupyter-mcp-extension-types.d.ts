declare module 'jupyter-mcp:extension/types@0.3.0' {
  /**
   * A cell's stable id (nbformat's `id`): the handle tools and host functions use for a cell.
   */
  export type CellId = string;
  /**
   * Which cell. `id` is stable across edits by others; `index` (0-based) is a convenience
   * that shifts when cells are inserted, moved or deleted.
   */
  export type CellRef = CellRefId | CellRefIndex;
  export interface CellRefId {
    tag: 'id',
    val: CellId,
  }
  export interface CellRefIndex {
    tag: 'index',
    val: number,
  }
  /**
   * An ability the server has or lacks (see capabilities:// and server/discover).
   */
  export interface Capability {
    /**
     * Namespaced by the extension, e.g. `snapshots.auto-save`; core names are reserved.
     */
    name: string,
    /**
     * One sentence a person can act on.
     */
    description: string,
    /**
     * The default; the operator's settings may override it.
     */
    enabled: boolean,
  }
  /**
   * `before_tool_call`: a tool is about to run.
   */
  export interface BeforeToolCall {
    toolName: string,
    /**
     * The call's arguments, a JSON object. Credentials (e.g. a Jupyter token) arrive as
     * `[redacted]`.
     */
    arguments: string,
  }
  /**
   * `after_tool_call`: a tool finished (or was refused).
   */
  export interface AfterToolCall {
    toolName: string,
    /**
     * The call's arguments, a JSON object (credentials redacted).
     */
    arguments: string,
    /**
     * `ok`: the result's text; `err`: why the call failed.
     */
    outcome: Result<string, string>,
  }
  /**
   * `before_execute`: code is about to be sent to a kernel.
   */
  export interface BeforeExecute {
    kernelId: string,
    code: string,
  }
  /**
   * `after_execute`: the kernel answered (or the execution failed).
   */
  export interface AfterExecute {
    kernelId: string,
    /**
     * The nbformat outputs, a JSON array (what arrived, also when the execution failed).
     */
    outputs: string,
    /**
     * Why the execution failed, when it did.
     */
    error?: string,
  }
  /**
   * What happened to a kernel.
   */
  export type KernelChange = KernelChangeStarted | KernelChangeRestarted | KernelChangeStopped | KernelChangeOther;
  export interface KernelChangeStarted {
    tag: 'started',
  }
  export interface KernelChangeRestarted {
    tag: 'restarted',
  }
  export interface KernelChangeStopped {
    tag: 'stopped',
  }
  /**
   * A change this version of the WIT has no case for; the string names it.
   */
  export interface KernelChangeOther {
    tag: 'other',
    val: string,
  }
  /**
   * `kernel_lifecycle`: a kernel was started, restarted or stopped.
   */
  export interface KernelLifecycle {
    change: KernelChange,
    kernelId: string,
    /**
     * The kernel's name or the notebook it serves.
     */
    kernelName: string,
  }
  /**
   * The five hook events, with the same data native handlers get.
   */
  export type HookEvent = HookEventBeforeToolCall | HookEventAfterToolCall | HookEventBeforeExecute | HookEventAfterExecute | HookEventKernelLifecycle;
  export interface HookEventBeforeToolCall {
    tag: 'before-tool-call',
    val: BeforeToolCall,
  }
  export interface HookEventAfterToolCall {
    tag: 'after-tool-call',
    val: AfterToolCall,
  }
  export interface HookEventBeforeExecute {
    tag: 'before-execute',
    val: BeforeExecute,
  }
  export interface HookEventAfterExecute {
    tag: 'after-execute',
    val: AfterExecute,
  }
  export interface HookEventKernelLifecycle {
    tag: 'kernel-lifecycle',
    val: KernelLifecycle,
  }
  /**
   * What a hook handler answers to one event.
   */
  export interface HookReply {
    /**
     * `some(json)` replaces this handler's context for the pair; `none` leaves it.
     */
    context?: string,
    /**
     * On a `before_*` event of a critical handler (`propagate-errors` true): `some(reason)`
     * holds the call until the person confirms it through the client (MCP elicitation),
     * the reason shown to them; a no, or a client that cannot ask, refuses the call.
     * Ignored on `after_*` events and from optional handlers (logged).
     */
    confirm?: string,
  }
  /**
   * MCP tool annotations (hints to the client; never trusted for security).
   */
  export interface ToolAnnotations {
    title?: string,
    readOnlyHint?: boolean,
    destructiveHint?: boolean,
    idempotentHint?: boolean,
    openWorldHint?: boolean,
  }
  /**
   * A tool an extension adds.
   */
  export interface ToolSpec {
    /**
     * Unique across the server; a clash with a core tool or another extension is refused.
     */
    name: string,
    description: string,
    /**
     * JSON Schema of the arguments, a JSON object with `"type": "object"`.
     */
    inputSchema: string,
    /**
     * JSON Schema of `tool-result.structured`, when the tool returns structured output.
     */
    outputSchema?: string,
    annotations: ToolAnnotations,
    /**
     * The capability that must be on for the tool to be listed and callable.
     */
    capability?: string,
  }
  /**
   * An image in a tool result or a prompt message.
   */
  export interface Image {
    /**
     * The raw bytes (the host base64-encodes them for MCP).
     */
    data: Uint8Array,
    /**
     * e.g. `image/png`.
     */
    mimeType: string,
  }
  /**
   * One piece of a tool result's or prompt message's content.
   */
  export type Content = ContentText | ContentImage | ContentResourceLink;
  export interface ContentText {
    tag: 'text',
    val: string,
  }
  export interface ContentImage {
    tag: 'image',
    val: Image,
  }
  /**
   * A link to a resource (a `resource_link` in MCP): its URI.
   */
  export interface ContentResourceLink {
    tag: 'resource-link',
    val: string,
  }
  /**
   * What a tool returns.
   */
  export interface ToolResult {
    content: Array<Content>,
    /**
     * Structured output, a JSON object, when the tool has one.
     */
    structured?: string,
    /**
     * The tool ran but failed; the content says why and what to do next.
     */
    isError: boolean,
  }
  /**
   * A resource an extension provides (listed by `resources/list`). Its URI's scheme should
   * be the extension's own (e.g. `wordcount://summary`); core schemes are refused.
   */
  export interface ResourceSpec {
    uri: string,
    /**
     * A short, unique name.
     */
    name: string,
    title?: string,
    description?: string,
    mimeType?: string,
  }
  /**
   * A family of resources (listed by `resources/templates/list`): an RFC 6570 URI template.
   */
  export interface ResourceTemplate {
    uriTemplate: string,
    name: string,
    title?: string,
    description?: string,
    mimeType?: string,
  }
  /**
   * The body of a resource read.
   */
  export type ResourceBody = ResourceBodyText | ResourceBodyBlob;
  export interface ResourceBodyText {
    tag: 'text',
    val: string,
  }
  export interface ResourceBodyBlob {
    tag: 'blob',
    val: Uint8Array,
  }
  /**
   * One item a resource read returns.
   */
  export interface ResourceContents {
    uri: string,
    mimeType?: string,
    body: ResourceBody,
  }
  /**
   * One argument a prompt takes.
   */
  export interface PromptArgument {
    name: string,
    description?: string,
    required: boolean,
  }
  /**
   * A prompt an extension provides (listed by `prompts/list`).
   */
  export interface Prompt {
    /**
     * Unique across the server, like a tool's name.
     */
    name: string,
    title?: string,
    description?: string,
    arguments: Array<PromptArgument>,
  }
  /**
   * # Variants
   * 
   * ## `"user"`
   * 
   * ## `"assistant"`
   */
  export type Role = 'user' | 'assistant';
  export interface PromptMessage {
    role: Role,
    content: Content,
  }
  /**
   * What `get-prompt` returns.
   */
  export interface PromptResult {
    description?: string,
    messages: Array<PromptMessage>,
  }
  /**
   * The kind of a notebook cell.
   * # Variants
   * 
   * ## `"code"`
   * 
   * ## `"markdown"`
   * 
   * ## `"raw"`
   */
  export type CellKind = 'code' | 'markdown' | 'raw';
  /**
   * A notebook cell as a host function reads it.
   */
  export interface Cell {
    id: CellId,
    /**
     * Its position now (0-based).
     */
    index: number,
    kind: CellKind,
    source: string,
    /**
     * The cell's metadata, a JSON object.
     */
    metadata: string,
    /**
     * The nbformat outputs, a JSON array (empty for markdown and raw cells).
     */
    outputs: string,
    /**
     * The execution count of a code cell that has run.
     */
    executionCount?: number,
    /**
     * The cell's version: a short token that changes whenever its source or kind changes,
     * and never otherwise (the `version` `read_cell` shows). Pass it back as an edit's
     * `expected-version` to refuse the edit if someone changed the cell since.
     */
    version: string,
  }
  /**
   * Why a host function did not do what was asked. Each message says what happened and what
   * to do next.
   */
  export type HostError = HostErrorNotGranted | HostErrorNotAvailable | HostErrorNotFound | HostErrorConflict | HostErrorKernel | HostErrorInvalid | HostErrorFailed | HostErrorUnsupportedByClient | HostErrorRefused;
  /**
   * The operator has not granted this to this guest (the message names the grant).
   */
  export interface HostErrorNotGranted {
    tag: 'not-granted',
    val: string,
  }
  /**
   * This host does not provide the function.
   */
  export interface HostErrorNotAvailable {
    tag: 'not-available',
    val: string,
  }
  /**
   * No such notebook, cell or kernel.
   */
  export interface HostErrorNotFound {
    tag: 'not-found',
    val: string,
  }
  /**
   * The cell changed since the guest read it (someone else edited it); read it again.
   */
  export interface HostErrorConflict {
    tag: 'conflict',
    val: string,
  }
  /**
   * The kernel is gone, busy past the deadline, or failed.
   */
  export interface HostErrorKernel {
    tag: 'kernel',
    val: string,
  }
  /**
   * The arguments are wrong (e.g. an index past the end).
   */
  export interface HostErrorInvalid {
    tag: 'invalid',
    val: string,
  }
  /**
   * It was tried and failed for another reason.
   */
  export interface HostErrorFailed {
    tag: 'failed',
    val: string,
  }
  /**
   * The MCP client in this call cannot do it (it did not declare elicitation or
   * sampling, or there is no client: a call from a hook outside any request); the message
   * names what is missing. Handle it: fall back, or refuse with a clear message.
   */
  export interface HostErrorUnsupportedByClient {
    tag: 'unsupported-by-client',
    val: string,
  }
  /**
   * The person said no (to a grant prompt), or the request was cancelled.
   */
  export interface HostErrorRefused {
    tag: 'refused',
    val: string,
  }
  /**
   * Why a guest did not do what the host asked. The message reaches the client.
   */
  export type GuestError = GuestErrorInvalidArguments | GuestErrorNotFound | GuestErrorHost | GuestErrorFailed;
  /**
   * The arguments did not make sense to the guest.
   */
  export interface GuestErrorInvalidArguments {
    tag: 'invalid-arguments',
    val: string,
  }
  /**
   * No such tool, resource or prompt in this guest.
   */
  export interface GuestErrorNotFound {
    tag: 'not-found',
    val: string,
  }
  /**
   * A host function the guest called failed, passed on as it came.
   */
  export interface GuestErrorHost {
    tag: 'host',
    val: HostError,
  }
  /**
   * Anything else.
   */
  export interface GuestErrorFailed {
    tag: 'failed',
    val: string,
  }
  export type Result<T, E> = { tag: 'ok', val: T } | { tag: 'err', val: E };
}
