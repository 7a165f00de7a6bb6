"""Word counts of a notebook's cells, over the granted `read-cells`: the tool `word_count`, the
resource `wordcount://current` and the template `wordcount://notebooks/{name}`, the prompt
`word_budget`, and `replace_word`, an edit of one cell by id that never overwrites someone else's
change (grant `overwrite-cell` too). As a hook handler it logs how many words of code each
execution sends to a kernel. The same example as the Rust one, in Python."""

import re

from jupyter_mcp_extension import Argument, Extension, Hooks, InvalidArguments, config, log
from wit_world.imports.notebook import overwrite_cell, read_cell, read_cells
from wit_world.imports.types import CellKind, CellRef_Id

# The operator's config may name it otherwise (`config = { name = "..." }`), e.g. to load it twice.
wordcount = Extension(lambda: config().get("name", "wordcount"), "0.1.0")
hooks = Hooks()


def words(text):
    return len(text.split())


def count(notebook=""):
    """Counts the markdown and code cells (raw cells are not prose nor code). A refused host call
    raises; the SDK passes the host's message on."""
    counts = {"markdown": 0, "code": 0, "total": 0, "cells": []}
    for cell in read_cells(notebook):
        if cell.kind == CellKind.RAW:
            continue
        kind, n = cell.kind.name.lower(), words(cell.source)
        counts[kind] += n
        counts["total"] += n
        counts["cells"].append({"id": cell.id, "index": cell.index, "kind": kind, "words": n})
    return counts


NOTEBOOK = {"type": "string", "description": "The notebook, as named in use_notebook (default: the current one)."}


@wordcount.tool("word_count", "Counts the words of a notebook's markdown and code cells, per cell and in total.",
                {"type": "object", "properties": {"notebook": NOTEBOOK}}, read_only=True)
def word_count(notebook=""):
    return count(notebook)


@wordcount.tool("replace_word", "Replaces a whole word in one cell, named by its id; refused if the cell changed "
                "since you read it.", {
                    "type": "object", "required": ["cell_id", "word", "replacement"], "properties": {
                        "notebook": NOTEBOOK,
                        "cell_id": {"type": "string", "description": "The id of the cell to edit."},
                        "word": {"type": "string", "description": "The word to replace (whole words only)."},
                        "replacement": {"type": "string", "description": "What replaces it."},
                        "expected_source": {"type": "string", "description": "The cell's source as you last read "
                                            "it: if someone changed the cell since, nothing is written and the "
                                            "call says so."}}})
def replace_word(cell_id, word, replacement, notebook="", expected_source=None):
    if not word.strip():
        raise InvalidArguments("'word' is empty; name the word to replace")
    cell = read_cell(notebook, CellRef_Id(cell_id))
    source, replaced = re.subn(rf"(?<!\w){re.escape(word)}(?!\w)", lambda _: replacement, cell.source)
    if replaced == 0:
        return f"'{word}' does not occur in cell {cell.id}"
    # What the caller saw, else the version just read: either way a change made since by someone
    # else is refused by the host (a conflict), never overwritten.
    overwrite_cell(notebook, CellRef_Id(cell.id), source, expected_source,
                   cell.version if expected_source is None else None)
    return f"replaced {replaced} occurrence(s) of '{word}' in cell {cell.id}"


@wordcount.resource("wordcount://current", "word-count", description="Word counts of the current notebook (JSON).",
                    mime_type="application/json")
def current(uri):
    return count()


@wordcount.resource_template("wordcount://notebooks/{name}", "notebook-word-count",
                             description="Word counts of the notebook in use under this name (JSON).",
                             mime_type="application/json")
def named(uri, name):
    return count(name)


@wordcount.prompt("word_budget", description="Asks to bring a notebook's prose within a word budget.",
                  arguments=[Argument("budget", "The most words the markdown may have", required=True),
                             Argument("notebook", "The notebook (default: the current one)")])
def word_budget(budget, notebook=""):
    if not budget.strip().isdigit():
        raise InvalidArguments("'budget' must be a whole number of words")
    counts, limit = count(notebook), int(budget)
    verdict = ("It is within budget; tighten it only where it is unclear." if counts["markdown"] <= limit
               else f"Cut {counts['markdown'] - limit} words.")
    return (f"The notebook's markdown has {counts['markdown']} words (code: {counts['code']}); the budget is "
            f"{limit}. {verdict} Keep every code cell as it is.")


@hooks.on("before_execute")
def before_execute(execute, context):
    log.info(f"{words(execute.code)} words of code sent to kernel {execute.kernel_id}")


ExtensionApi = wordcount.export()
Hooks = hooks.export()
