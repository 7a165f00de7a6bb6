"""Unit tests of the SDK (jupyter_mcp_extension) and its examples under plain CPython, against the
bindings componentize-py generates for WIT 0.3.0 with the host's functions stubbed.
Usage: componentize-py -d ../../wit/v0.3.0 -w extension-with-hooks bindings BINDINGS
       python tests/unit.py BINDINGS        (from guests/python)"""

import importlib.util
import json
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path[:0] = [sys.argv.pop(1), str(HERE)]

from componentize_py_types import Err  # noqa: E402
from wit_world.imports import client  # noqa: E402
from wit_world.imports import log as host_log  # noqa: E402
from wit_world.imports import notebook  # noqa: E402
from wit_world.imports import secrets  # noqa: E402
from wit_world.imports import types as t  # noqa: E402

from wit_world.imports import config as host_config  # noqa: E402

LOGGED = []
CELLS = []
REFUSE = []
WRITTEN = []
CONFIG = ["{}"]
ANSWERS = []  # what elicit and sample answer, in order (a HostError is raised)
ASKED = []
PROGRESS = []
SECRETS = {}


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


def overwrite_cell(name, ref, source, expected, expected_version):
    cell = read_cell(name, ref)
    if (expected is not None and expected != cell.source) or \
            (expected_version is not None and expected_version != cell.version):
        raise Err(t.HostError_Conflict("changed"))
    WRITTEN.append((ref, source, expected, expected_version))
    cell.source = source
    cell.version += "+"
    return cell.version


def answer(*asked):
    check()
    ASKED.append(asked)
    given = ANSWERS.pop(0)
    if type(given).__name__.startswith("HostError_"):
        raise Err(given)
    return given


def get_secret(name):
    if name not in SECRETS:
        raise Err(t.HostError_NotGranted(f"secret:{name} is not granted"))
    return SECRETS[name]


host_log.log = lambda level, message: LOGGED.append((level.name.lower(), message))
host_config.get_config = lambda: CONFIG[0]
notebook.read_cells = read_cells
notebook.read_cell = read_cell
notebook.overwrite_cell = overwrite_cell
client.elicit = lambda message, schema: answer("elicit", message, schema)
client.sample = lambda request: answer("sample", request)
client.progress = lambda done, total, message: PROGRESS.append((done, total, message))
secrets.get = get_secret

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
    return t.Cell(id, 0, kind, source, "{}", "[]", None, f"v-{id}")


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
        # Without the caller's expected source, the version just read is what the host must still find.
        self.assertEqual(WRITTEN[-1], (t.CellRef_Id("a"), "# Twenty words", None, "v-a"))
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
        keep = t.HookReply(None, None)
        before = t.HookEvent_BeforeToolCall(t.BeforeToolCall("insert_cell", "{}"))
        reply = audit.on_event(before, "{}")
        self.assertEqual((json.loads(reply.context), reply.confirm), ({"seen": True}, None))
        after = t.HookEvent_AfterToolCall(t.AfterToolCall("insert_cell", "{}", Err("no")))
        self.assertEqual(audit.on_event(after, reply.context), keep)
        self.assertEqual(audit.on_event(t.HookEvent_BeforeExecute(t.BeforeExecute("k", "1")), "{}"), keep)
        # Critical, so that the host asks the person before a pip install runs; other code just runs.
        self.assertTrue(audit.propagate_errors())
        for code in ("%pip install requests", "x = 1\n!pip install -q numpy"):
            self.assertEqual(audit.on_event(t.HookEvent_BeforeExecute(t.BeforeExecute("k", code)), "{}"),
                             t.HookReply(None, "the code installs packages with pip"), code)
        for code in ("print(1)", "%pip list"):
            self.assertEqual(audit.on_event(t.HookEvent_BeforeExecute(t.BeforeExecute("k", code)), "{}"), keep, code)
        # print and logging go to the host's log too.
        print("printed")
        ext.logging.getLogger("mine").warning("warned")
        self.assertEqual(LOGGED, [("info", "audit-py: tool insert_cell called with {}"),
                                  ("info", "audit-py: tool insert_cell failed: no (paired)"),
                                  ("info", "printed"), ("warn", "mine: warned")])
        LOGGED.clear()
        self.assertEqual(wordcount_hooks.on_event(t.HookEvent_BeforeExecute(t.BeforeExecute("k1", "print(1 + 2)")), "{}"),
                         t.HookReply(None, None))
        self.assertEqual(LOGGED, [("info", "3 words of code sent to kernel k1")])

    def test_the_client_and_secrets_as_python_values_and_a_client_that_cannot_ask(self):
        ASKED.clear()
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
        ANSWERS[:] = [client.ElicitAnswer_Accept('{"ok": true}'), client.ElicitAnswer_Decline(),
                      client.ElicitAnswer_Cancel()]
        accepted = ext.elicit("Go on?", schema)
        self.assertEqual((accepted, accepted.accepted), (ext.Answer("accept", {"ok": True}), True))
        self.assertEqual(ext.elicit("Go on?", json.dumps(schema)), ext.Answer("decline"))
        self.assertEqual(ext.elicit("Go on?", schema).action, "cancel")
        self.assertEqual(ASKED[0], ("elicit", "Go on?", json.dumps(schema)))
        # A client without elicitation or sampling: a host error the guest can tell apart and handle.
        ANSWERS[:] = [t.HostError_UnsupportedByClient("the client did not declare elicitation")]
        with self.assertRaises(Err) as raised:
            ext.elicit("Go on?", schema)
        self.assertEqual(ext.unsupported_by_client(raised.exception), "the client did not declare elicitation")
        self.assertEqual(ext.guest_error(raised.exception),
                         t.GuestError_Host(t.HostError_UnsupportedByClient("the client did not declare elicitation")))
        self.assertIsNone(ext.unsupported_by_client(Err(t.HostError_Refused("no"))))
        self.assertIsNone(ext.unsupported_by_client(ValueError("other")))
        result = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m", "stopReason": "endTurn"}
        ANSWERS[:] = [json.dumps(result)]
        request = {"messages": [{"role": "user", "content": {"type": "text", "text": "hello"}}], "maxTokens": 10}
        self.assertEqual(ext.sample(request), result)
        self.assertEqual(ASKED[-1], ("sample", json.dumps(request)))
        PROGRESS.clear()
        ext.progress(1, 3, "one of three")
        ext.progress(2)
        self.assertEqual(PROGRESS, [(1.0, 3.0, "one of three"), (2.0, None, None)])
        SECRETS["TOKEN"] = "s3cret"
        self.assertEqual(ext.secret("TOKEN"), "s3cret")
        with self.assertRaises(Err) as raised:
            ext.secret("OTHER")
        self.assertIsInstance(raised.exception.value, t.HostError_NotGranted)
        # A hook reply that asks the person keeps the context it is given.
        asking = ext.Hooks(propagate_errors=True)
        asking.on("before_tool_call")(lambda call, context: ext.confirm("sure?", {**context, "asked": 1}))
        self.assertEqual(asking.export()().on_event(t.HookEvent_BeforeToolCall(t.BeforeToolCall("t", "{}")), "{}"),
                         t.HookReply('{"asked": 1}', "sure?"))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"], testRunner=unittest.TextTestRunner(stream=sys.__stderr__, verbosity=2))
