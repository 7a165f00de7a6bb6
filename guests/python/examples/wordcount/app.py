"""Word count, in Python: a tool, a resource, a resource template and a prompt over the granted
host function `read-cells`. Build (from guests/python):
componentize-py -d ../../wit/v0.2.0 -w extension componentize -p . -p examples/wordcount app -o wordcount.wasm
"""

from jupyter_mcp_extension import Argument, Extension
from wit_world.imports.notebook import read_cells

wordcount = Extension("wordcount-py", "0.1.0")


def count(notebook="", cell_id=None):
    cells = read_cells(notebook)  # a refused call raises; the SDK passes its message on
    if cell_id is not None:
        cells = [cell for cell in cells if cell.id == cell_id]
        if not cells:  # any exception reaches the caller as a clean error, not a trap
            raise LookupError(f"no cell has the id {cell_id!r}; read_notebook lists them")
    per_cell = [{"id": c.id, "kind": c.kind.name.lower(), "words": len(c.source.split())}
                for c in cells]
    return {"cells": len(per_cell), "words": sum(c["words"] for c in per_cell),
            "per_cell": per_cell}


@wordcount.tool("word_count_py", "Counts the words in a notebook's cells (all, or the one with cell_id).",
                {"type": "object", "properties": {
                    "notebook": {"type": "string", "description": "A notebook in use; the current one if omitted."},
                    "cell_id": {"type": "string", "description": "Count only this cell."}}},
                read_only=True)
def word_count(notebook="", cell_id=None):
    return count(notebook, cell_id)


@wordcount.resource("wordcount-py://current", "wordcount-py-current",
                    description="Word counts of the current notebook.", mime_type="application/json")
def current(uri):
    return count()


@wordcount.resource_template("wordcount-py://cell/{id}", "wordcount-py-cell",
                             description="Word count of one cell of the current notebook.",
                             mime_type="application/json")
def one_cell(uri, id):
    return count("", id)


@wordcount.prompt("tighten_prose_py", description="Asks to shorten the longest markdown cell.",
                  arguments=[Argument("limit", "Words to aim for.", required=True)])
def tighten(limit):
    markdown = [c for c in count()["per_cell"] if c["kind"] == "markdown"]
    if not markdown:
        return "The notebook has no markdown cell to tighten."
    longest = max(markdown, key=lambda c: c["words"])
    return f"Rewrite markdown cell {longest['id']} ({longest['words']} words) in at most {limit} words."


ExtensionApi = wordcount.export()
