declare module 'jupyter-mcp:extension/config@0.3.0' {
  /**
   * The `config` table of this guest's `[[extension]]` entry in the operator's config file,
   * as a JSON object (`{}` when there is none).
   */
  export function getConfig(): string;
}
