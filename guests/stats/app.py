"""Example extension in Python: one tool, `notebook_stats`, counting a notebook's cells by kind
through the granted host function `read-cells`.
Build: componentize-py -d wit/v0.1.0 -w extension componentize app -o stats.wasm
"""

import json

from wit_world import exports
from wit_world.exports.extension_api import ExtensionIdentity
from wit_world.imports import notebook
from wit_world.imports.types import (
    Content_Text, ToolAnnotations, ToolResult, ToolSpec,
)
from componentize_py_types import Err

SCHEMA = {
    "type": "object",
    "properties": {"notebook": {"type": "string",
                                "description": "A notebook in use; the current one if omitted."}},
}


class ExtensionApi(exports.ExtensionApi):
    def identity(self) -> ExtensionIdentity:
        return ExtensionIdentity(name="stats", version="0.1.0")

    def capabilities(self):
        return []

    def tools(self):
        annotations = ToolAnnotations(title=None, read_only_hint=True, destructive_hint=False,
                                      idempotent_hint=True, open_world_hint=False)
        return [ToolSpec(name="notebook_stats",
                         description="Counts a notebook's cells by kind, and their source lines.",
                         input_schema=json.dumps(SCHEMA), annotations=annotations, capability=None)]

    def call_tool(self, name: str, arguments: str) -> ToolResult:
        if name != "notebook_stats":
            raise Err(f"stats has no tool {name!r}")
        target = json.loads(arguments).get("notebook", "")
        try:
            cells = notebook.read_cells(target)
        except Err as refused:
            # The host's explanation (not granted, no such notebook...) is the tool's error.
            return ToolResult(content=[Content_Text(refused.value.value)], structured=None,
                              is_error=True)
        counts = {"code": 0, "markdown": 0, "raw": 0}
        lines = 0
        for cell in cells:
            counts[cell.kind.name.lower()] += 1
            lines += len(cell.source.splitlines())
        stats = {"cells": len(cells), "by_kind": counts, "source_lines": lines}
        return ToolResult(content=[Content_Text(json.dumps(stats))], structured=json.dumps(stats),
                          is_error=False)
