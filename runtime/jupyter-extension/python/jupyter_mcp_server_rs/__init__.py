"""Jupyter MCP Server in Rust, as a Jupyter Server extension.

When enabled, the Jupyter Server starts the `jupyter-mcp-server` binary this package ships,
pointed at itself, and serves MCP at `/mcp` on its own port with its own token. Configure it with
traitlets on `JupyterMCPServerExtensionApp`, the class name the Python server uses, so existing
configuration carries over.
"""

from .app import JupyterMCPServerExtensionApp

__all__ = ["JupyterMCPServerExtensionApp"]


def _jupyter_server_extension_points():
    return [{"module": "jupyter_mcp_server_rs", "app": JupyterMCPServerExtensionApp}]
