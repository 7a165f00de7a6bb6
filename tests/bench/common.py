"""What the benchmarks share: the two binaries they compare, and how a server reaches Jupyter."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def parser(description: str | None) -> argparse.ArgumentParser:
    """A benchmark's arguments, starting with the servers it compares: ours, and the Python server
    (skipped when not given or not installed)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--ours", default=os.environ.get("JUPYTER_MCP_SERVER_BIN"),
                        help="our binary (default: JUPYTER_MCP_SERVER_BIN)")
    parser.add_argument("--previous", default=os.environ.get("JUPYTER_MCP_PREVIOUS_BIN"),
                        help="an earlier build of ours, measured beside it in the same run (default: "
                             "JUPYTER_MCP_PREVIOUS_BIN; e.g. the build before a refactor)")
    parser.add_argument("--upstream", default=os.environ.get("UPSTREAM_JUPYTER_MCP_SERVER"),
                        help="the Python server's executable (default: UPSTREAM_JUPYTER_MCP_SERVER); "
                             "a path that does not exist skips it")
    return parser


def upstream(opts: argparse.Namespace) -> str | None:
    """The Python server to compare with, when one was given and is there."""
    return opts.upstream if opts.upstream and Path(opts.upstream).exists() else None


def connect(jupyter) -> list[str]:
    """The flags that point a server (ours or the Python one) at the test Jupyter Server."""
    return ["--jupyter-url", jupyter.url, "--jupyter-token", jupyter.token]
