/// <reference path="./jupyter-mcp-extension-types.d.ts" />
declare module 'jupyter-mcp:extension/extension-api@0.3.0' {
  export function identity(): ExtensionIdentity;
  /**
   * The capabilities this extension adds (namespaced names).
   */
  export function capabilities(): Array<Capability>;
  /**
   * The tools this extension adds.
   */
  export function tools(): Array<ToolSpec>;
  /**
   * Calls one of this extension's tools. `arguments` is a JSON object that matched the
   * tool's schema. An `err` is a failure of the extension itself, shown to the caller.
   */
  export function callTool(name: string, arguments: string): ToolResult;
  /**
   * The resources this extension provides.
   */
  export function resources(): Array<ResourceSpec>;
  /**
   * The resource templates this extension provides.
   */
  export function resourceTemplates(): Array<ResourceTemplate>;
  /**
   * Reads a resource: one this extension listed, or one matching its templates.
   */
  export function readResource(uri: string): Array<ResourceContents>;
  /**
   * The prompts this extension provides.
   */
  export function prompts(): Array<Prompt>;
  /**
   * Renders a prompt. `arguments` is a JSON object of string values.
   */
  export function getPrompt(name: string, arguments: string): PromptResult;
  export type Capability = import('jupyter-mcp:extension/types@0.3.0').Capability;
  export type ToolSpec = import('jupyter-mcp:extension/types@0.3.0').ToolSpec;
  export type ToolResult = import('jupyter-mcp:extension/types@0.3.0').ToolResult;
  export type ResourceSpec = import('jupyter-mcp:extension/types@0.3.0').ResourceSpec;
  export type ResourceTemplate = import('jupyter-mcp:extension/types@0.3.0').ResourceTemplate;
  export type ResourceContents = import('jupyter-mcp:extension/types@0.3.0').ResourceContents;
  export type Prompt = import('jupyter-mcp:extension/types@0.3.0').Prompt;
  export type PromptResult = import('jupyter-mcp:extension/types@0.3.0').PromptResult;
  export type GuestError = import('jupyter-mcp:extension/types@0.3.0').GuestError;
  export interface ExtensionIdentity {
    /**
     * Unique among the loaded extensions; also the `source` of its capabilities.
     */
    name: string,
    /**
     * Semantic version of the extension.
     */
    version: string,
  }
}
