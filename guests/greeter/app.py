"""The guide's Python example (guests/README.md); keep the two identical."""

import json
from wit_world import exports
from wit_world.exports.extension_api import ExtensionIdentity
from wit_world.imports.types import Content_Text, ToolAnnotations, ToolResult, ToolSpec
from componentize_py_types import Err

class ExtensionApi(exports.ExtensionApi):
    def identity(self):
        return ExtensionIdentity(name="greeter", version="0.1.0")

    def capabilities(self):
        return []

    def tools(self):
        schema = json.dumps({"type": "object", "properties": {"who": {"type": "string"}}})
        hints = ToolAnnotations(None, True, False, True, False)
        return [ToolSpec("greet", "Greets someone.", schema, hints, None)]

    def call_tool(self, name, arguments):
        if name != "greet":
            raise Err(f"no tool {name}")
        who = json.loads(arguments).get("who", "world")
        return ToolResult([Content_Text(f"Hello, {who}!")], None, False)
