/// <reference path="./interfaces/jupyter-mcp-extension-client.d.ts" />
/// <reference path="./interfaces/jupyter-mcp-extension-config.d.ts" />
/// <reference path="./interfaces/jupyter-mcp-extension-extension-api.d.ts" />
/// <reference path="./interfaces/jupyter-mcp-extension-hooks.d.ts" />
/// <reference path="./interfaces/jupyter-mcp-extension-host-info.d.ts" />
/// <reference path="./interfaces/jupyter-mcp-extension-log.d.ts" />
/// <reference path="./interfaces/jupyter-mcp-extension-notebook.d.ts" />
/// <reference path="./interfaces/jupyter-mcp-extension-secrets.d.ts" />
/// <reference path="./interfaces/jupyter-mcp-extension-types.d.ts" />
declare module 'jupyter-mcp:extension/extension-with-hooks@0.3.0' {
  export type * as JupyterMcpExtensionClient030 from 'jupyter-mcp:extension/client@0.3.0'; // import jupyter-mcp:extension/client@0.3.0
  export type * as JupyterMcpExtensionConfig030 from 'jupyter-mcp:extension/config@0.3.0'; // import jupyter-mcp:extension/config@0.3.0
  export type * as JupyterMcpExtensionHostInfo030 from 'jupyter-mcp:extension/host-info@0.3.0'; // import jupyter-mcp:extension/host-info@0.3.0
  export type * as JupyterMcpExtensionLog030 from 'jupyter-mcp:extension/log@0.3.0'; // import jupyter-mcp:extension/log@0.3.0
  export type * as JupyterMcpExtensionNotebook030 from 'jupyter-mcp:extension/notebook@0.3.0'; // import jupyter-mcp:extension/notebook@0.3.0
  export type * as JupyterMcpExtensionSecrets030 from 'jupyter-mcp:extension/secrets@0.3.0'; // import jupyter-mcp:extension/secrets@0.3.0
  export type * as JupyterMcpExtensionTypes030 from 'jupyter-mcp:extension/types@0.3.0'; // import jupyter-mcp:extension/types@0.3.0
  export * as hooks from 'jupyter-mcp:extension/hooks@0.3.0'; // export jupyter-mcp:extension/hooks@0.3.0
  export * as extensionApi from 'jupyter-mcp:extension/extension-api@0.3.0'; // export jupyter-mcp:extension/extension-api@0.3.0
}
