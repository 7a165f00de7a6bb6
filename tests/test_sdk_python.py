"""The Python SDK (guests/python): its word-count example and audit hook handler, built from
source by guests/build with componentize-py, in the real server; the guide's Python section shows
the example and the build commands as they are run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sdk_examples import (ROOT, check_guide_shows, check_pip_install_asks_the_person, check_refused_without_grant,
                          check_word_count)

pytestmark = pytest.mark.anyio
PY = ROOT / "guests" / "python"


async def test_word_count_and_audit_in_python(jupyter_server, tmp_path):
    await check_word_count(jupyter_server, tmp_path, "py")


async def test_the_python_audit_handler_asks_before_a_pip_install(jupyter_server, tmp_path):
    await check_pip_install_asks_the_person(jupyter_server, tmp_path, "py")


async def test_python_word_count_is_refused_without_its_grant(jupyter_server, tmp_path):
    await check_refused_without_grant(jupyter_server, tmp_path, "py")


def test_sdk_unit_tests_under_cpython(tmp_path):
    """The SDK and the examples under plain CPython against componentize-py's generated bindings,
    the host stubbed (guests/python/tests/unit.py): every kind of exception, defaults, resources,
    prompts, hooks, print and logging."""
    subprocess.run(["componentize-py", "-d", str(ROOT / "wit" / "v0.3.0"), "-w", "extension-with-hooks", "bindings",
                    str(tmp_path)], check=True, capture_output=True)
    ran = subprocess.run([sys.executable, "tests/unit.py", str(tmp_path)], cwd=PY, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Ran 6 tests" in ran.stderr and ran.stderr.rstrip().endswith("OK"), ran.stderr


def test_the_guide_shows_the_python_example_as_built():
    check_guide_shows("Python", "python", [PY / "examples" / name / "app.py" for name in ("wordcount", "audit")],
                      PY / "build")
