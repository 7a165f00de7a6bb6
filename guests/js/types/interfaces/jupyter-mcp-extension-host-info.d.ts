declare module 'jupyter-mcp:extension/host-info@0.3.0' {
  /**
   * The WIT package version the host implements in full, e.g. `0.3.0`. A guest built against
   * an older minor version keeps working.
   */
  export function apiVersion(): string;
  /**
   * The server's own version, e.g. `0.9.0`.
   */
  export function serverVersion(): string;
}
