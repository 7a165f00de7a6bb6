"""The JavaScript SDK (guests/js): its word-count example and audit hook handler, built from
source by guests/build, in the real server; its typings are jco's, fresh from the WIT; the guide's
JavaScript section shows the example and the build commands as they are run."""

from __future__ import annotations

import filecmp
import shutil
import subprocess
from pathlib import Path

import pytest

from sdk_examples import ROOT, check_guide_shows, check_refused_without_grant, check_word_count

pytestmark = pytest.mark.anyio
JS = ROOT / "guests" / "js"


def toolchain() -> Path:
    """The pinned toolchain (guests/build installed it; this is a no-op then)."""
    if shutil.which("node") is None:
        pytest.fail("node is required for the JavaScript SDK (tests/run puts it on PATH)")
    subprocess.run([JS / "ensure-toolchain"], check=True, capture_output=True)
    return JS / "node_modules"


async def test_word_count_and_audit_in_javascript(jupyter_server, tmp_path):
    await check_word_count(jupyter_server, tmp_path, "js")


async def test_javascript_word_count_is_refused_without_its_grant(jupyter_server, tmp_path):
    await check_refused_without_grant(jupyter_server, tmp_path, "js")


def test_sdk_unit_tests_under_node():
    """The SDK and the examples under plain Node with the host stubbed (guests/js/test): every
    kind of thrown value, defaults, resources, prompts, hooks, logging."""
    toolchain()
    ran = subprocess.run(["node", "--import", "./test/register.mjs", "--test", "test/sdk.test.mjs"], cwd=JS,
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "# pass 6" in ran.stdout and "# fail 0" in ran.stdout, ran.stdout


def test_typings_are_generated_from_the_wit(tmp_path):
    toolchain()
    subprocess.run(["node", "bin/jupyter-mcp-js.mjs", "types", str(tmp_path / "types")], cwd=JS, check=True,
                   capture_output=True)
    compared = filecmp.dircmp(JS / "types", tmp_path / "types")

    def differences(c) -> list[str]:
        found = c.left_only + c.right_only + c.diff_files + c.funny_files
        return found + [d for sub in c.subdirs.values() for d in differences(sub)]

    assert differences(compared) == [], "guests/js/types is stale: node bin/jupyter-mcp-js.mjs types types"


def test_examples_type_check_against_the_typings():
    """The SDK's typings and the WIT's describe the examples (a typo in a field name fails)."""
    modules = toolchain()
    tsc = modules / "typescript-compiler-api" / "bin" / "tsc"
    checked = subprocess.run(
        ["node", str(tsc), "--noEmit", "--strict", "--noImplicitAny", "false", "--allowJs", "--checkJs",
         "--target", "es2022", "--module", "nodenext", "--moduleResolution", "nodenext",
         "examples/wordcount/app.js", "examples/audit/app.js"], cwd=JS, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_guide_shows_the_javascript_example_as_built():
    check_guide_shows("JavaScript", "js", [JS / "examples" / name / "app.js" for name in ("wordcount", "audit")],
                      JS / "build")


def test_the_package_carries_the_wit_it_builds_against():
    """npm packs no symlink: the package holds a copy of wit/v0.3.0, which must stay the same."""
    assert (JS / "wit" / "extension.wit").read_text() == (ROOT / "wit" / "v0.3.0" / "extension.wit").read_text(), \
        "guests/js/wit is stale: cp wit/v0.3.0/extension.wit guests/js/wit/"
