"""Unit tests of the SDK (jupyter_mcp_extension) and its examples under plain CPython, against the
bindings componentize-py generates for WIT 0.2.0 with the host's functions stubbed.
Usage: componentize-py -d ../../wit/v0.2.0 -w extension-with-hooks bindings BINDINGS
       python tests/unit.py BINDINGS        (from guests/python)"""

import importlib.util
import json
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path[:0] = [sys.argv.pop(1), str(HERE)]

from componentize_py_types import Err  # noqa: E402
from wit_world.imports import log as host_log  # noqa: E402
from wit_world.imports import notebook  # noqa: E402
from wit_world.imports import types as t  # noqa: E402

from wit_world.imports import config as host_config  # noqa: E402

LOGGED = []
CELLS = []
REFUSE = []
WRITTEN = []
CONFIG = ["{}"]


def check():
    if REFUSE:
        raise Err(REFUSE[0])


def read_cells(name):
    check()
    return CELLS


def read_cell(name, ref):
    check()
    for cell in CELLS:
        if cell.id == ref.value:
            return cell
    raise Err(t.HostError_NotFound(f"no cell {ref.value}"))


def overwrite_cell(name, ref, source, expected):
    cell = read_cell(name, ref)
    if expected is not None and expected != cell.source:
        raise Err(t.HostError_Conflict("changed"))
    WRITTEN.append((ref, source, expected))
    cell.source = source


host_log.log = lambda level, message: LOGGED.append((level.name.lower(), message))
host_config.get_config = lambda: CONFIG[0]
notebook.read_cells = read_cells
notebook.read_cell = read_cell
notebook.overwrite_cell = overwrite_cell

import jupyter_mcp_extension as ext  # noqa: E402


def example(name):
    spec = importlib.util.spec_from_file_location(f"{name}_app", HERE / "examples" / name / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


wordcount_app = example("wordcount")
wordcount, wordcount_hooks = wordcount_app.ExtensionApi(), wordcount_app.Hooks()
audit = example("audit").Hooks()


def cell(id, kind, source):
    return t.Cell(id, 0, kind, source, "{}", "[]", None)


def err(fn):
    try:
        fn()
    except Err as e:
        return e.value
    raise AssertionError("no error")


class Sdk(unittest.TestCase):
    def setUp(self):
        LOGGED.clear()
        REFUSE.clear()
        WRITTEN.clear()

    def test_every_exception_becomes_a_guest_error_with_its_message(self):
        cases = [(ValueError("bad value"), t.GuestError_Failed("bad value")),
                 (KeyError("k"), t.GuestError_Failed("'k'")),
                 (RuntimeError(), t.GuestError_Failed("RuntimeError")),
                 (ext.InvalidArguments("bad"), t.GuestError_InvalidArguments("bad")),
                 (ext.NotFound("gone"), t.GuestError_NotFound("gone")),
                 (Err("a string"), t.GuestError_Failed("a string")),
                 (Err(t.GuestError_NotFound("x")), t.GuestError_NotFound("x")),
                 (Err(t.HostError_Conflict("changed")), t.GuestError_Host(t.HostError_Conflict("changed")))]
        for raised, expected in cases:
            self.assertEqual(ext.guest_error(raised), expected)

            def raising(raised=raised):
                raise raised
            self.assertEqual(err(ext.guard(raising)), expected)

    def test_the_example_counts_words_edits_by_id_and_passes_on_errors(self):
        CELLS[:] = [cell("a", t.CellKind.MARKDOWN, "# Two words"), cell("b", t.CellKind.CODE, "x = 1\nprint(x)"),
                    cell("c", t.CellKind.RAW, "not counted")]
        result = wordcount.call_tool("word_count", "{}")
        self.assertEqual(json.loads(result.structured), {"markdown": 3, "code": 4, "total": 7, "cells": [
            {"id": "a", "index": 0, "kind": "markdown", "words": 3},
            {"id": "b", "index": 0, "kind": "code", "words": 4}]})
        self.assertFalse(result.is_error)
        self.assertEqual(err(lambda: wordcount.call_tool("nope", "{}")),
                         t.GuestError_NotFound("wordcount has no tool 'nope'"))
        self.assertIsInstance(err(lambda: wordcount.call_tool("word_count", "not json")),
                              t.GuestError_InvalidArguments)
        replaced = wordcount.call_tool("replace_word", '{"cell_id": "a", "word": "Two", "replacement": "Twenty"}')
        self.assertEqual(replaced.content, [t.Content_Text("replaced 1 occurrence(s) of 'Two' in cell a")])
        self.assertEqual(WRITTEN[-1], (t.CellRef_Id("a"), "# Twenty words", "# Two words"))
        self.assertEqual(wordcount.call_tool("replace_word", '{"cell_id": "a", "word": "wo", "replacement": "x"}')
                         .content[0].value, "'wo' does not occur in cell a")
        self.assertEqual(err(lambda: wordcount.call_tool("replace_word", '{"cell_id": "a", "word": " ", "replacement": "x"}')),
                         t.GuestError_InvalidArguments("'word' is empty; name the word to replace"))
        self.assertEqual(err(lambda: wordcount.call_tool("replace_word", json.dumps(
            {"cell_id": "a", "word": "words", "replacement": "x", "expected_source": "stale"}))),
            t.GuestError_Host(t.HostError_Conflict("changed")))
        self.assertEqual(err(lambda: wordcount.call_tool("replace_word", '{"cell_id": "zz", "word": "a", "replacement": "b"}')),
                         t.GuestError_Host(t.HostError_NotFound("no cell zz")))
        REFUSE.append(t.HostError_NotGranted("read-cells is not granted"))
        self.assertEqual(err(lambda: wordcount.call_tool("word_count", "{}")),
                         t.GuestError_Host(t.HostError_NotGranted("read-cells is not granted")))

    def test_resources_templates_and_prompts(self):
        CELLS[:] = [cell("a", t.CellKind.MARKDOWN, "one two three"), cell("b", t.CellKind.CODE, "one")]
        self.assertEqual([r.uri for r in wordcount.resources()], ["wordcount://current"])
        self.assertEqual([r.uri_template for r in wordcount.resource_templates()], ["wordcount://notebooks/{name}"])
        (one,) = wordcount.read_resource("wordcount://notebooks/nb")
        self.assertEqual(one.mime_type, "application/json")
        self.assertEqual(json.loads(one.body.value)["total"], 4)
        self.assertIsInstance(err(lambda: wordcount.read_resource("wordcount://else")), t.GuestError_NotFound)
        got = wordcount.get_prompt("word_budget", '{"budget": "2"}')
        self.assertEqual(got.messages, [t.PromptMessage(t.Role.USER, t.Content_Text(
            "The notebook's markdown has 3 words (code: 1); the budget is 2. Cut 1 words. "
            "Keep every code cell as it is."))])
        self.assertEqual(err(lambda: wordcount.get_prompt("word_budget", "{}")),
                         t.GuestError_InvalidArguments("prompt 'word_budget' needs the argument 'budget'"))
        self.assertEqual(err(lambda: wordcount.get_prompt("word_budget", '{"budget": "many"}')),
                         t.GuestError_InvalidArguments("'budget' must be a whole number of words"))
        # Its name comes from the operator's config when given, asked at load.
        self.assertEqual(wordcount.identity().name, "wordcount")
        CONFIG[0] = '{"name": "wordcount-2"}'
        self.assertEqual(wordcount.identity().name, "wordcount-2")
        CONFIG[0] = "{}"

    def test_what_an_extension_leaves_out_is_empty(self):
        bare = ext.Extension("bare", "1.0.0").export()()
        self.assertEqual((bare.identity().name, bare.identity().version), ("bare", "1.0.0"))
        for name in ("capabilities", "tools", "resources", "resource_templates", "prompts"):
            self.assertEqual(getattr(bare, name)(), [], name)

    def test_hooks_get_parsed_context_and_log_through_the_host(self):
        self.assertFalse(audit.propagate_errors())
        before = t.HookEvent_BeforeToolCall(t.BeforeToolCall("insert_cell", "{}"))
        context = audit.on_event(before, "{}")
        self.assertEqual(json.loads(context), {"seen": True})
        after = t.HookEvent_AfterToolCall(t.AfterToolCall("insert_cell", "{}", Err("no")))
        self.assertIsNone(audit.on_event(after, context))
        self.assertIsNone(audit.on_event(t.HookEvent_BeforeExecute(t.BeforeExecute("k", "1")), "{}"))
        # print and logging go to the host's log too.
        print("printed")
        ext.logging.getLogger("mine").warning("warned")
        self.assertEqual(LOGGED, [("info", "audit-py: tool insert_cell called with {}"),
                                  ("info", "audit-py: tool insert_cell failed: no (paired)"),
                                  ("info", "printed"), ("warn", "mine: warned")])
        LOGGED.clear()
        self.assertIsNone(wordcount_hooks.on_event(t.HookEvent_BeforeExecute(t.BeforeExecute("k1", "print(1 + 2)")), "{}"))
        self.assertEqual(LOGGED, [("info", "3 words of code sent to kernel k1")])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"], testRunner=unittest.TextTestRunner(stream=sys.__stderr__, verbosity=2))
