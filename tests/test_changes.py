"""What changed since I looked, and waiting for the person: `get_notebook_changes` against real
peers — a jupyter_nbmodel_client peer in the room, another program saving the file, and a person
in JupyterLab (headless Chromium). Every read and edit hands out the notebook's revision; the
changes since one name the cells and who changed them; a wait ends when someone else changes the
notebook, never for the agent's own edits or runs."""

from __future__ import annotations

import asyncio
import re
import time
import uuid

import nbformat
import pytest

from conftest import call, client_for, eventually, joined, peer_for, peer_sources, write_notebook

pytestmark = pytest.mark.anyio

META = "io.jupyter-mcp/"


def revision_of(result) -> str:
    """The revision a result hands out, in `_meta` and (for texts of ours) as a line."""
    revision = result.meta[META + "revision"]
    assert re.fullmatch(r"[0-9a-f]{6}-\d+", revision), revision
    return revision


async def changes(agent, since: str, **arguments):
    return await call(agent, "get_notebook_changes", since=since, **arguments)


async def test_changes_since_a_revision_name_the_cell_and_who_made_them(jupyter_server):
    """A peer in the room edits, adds and moves cells: the changes since the agent's read say
    which, as a diff, each by the peer's name; the agent's own edits and runs are its own."""
    path = f"changes-{uuid.uuid4().hex[:6]}.ipynb"
    write_notebook(jupyter_server, path, ["a = 1", "b = 2", "c = 3"])
    async with client_for(jupyter_server, "legacy", "--document-backend", "live") as agent:
        await call(agent, "use_notebook", notebook_name="nb", notebook_path=path)
        read = await call(agent, "read_notebook", notebook_name="nb", response_format="brief")
        first = revision_of(read)
        assert joined(read).startswith(f"Notebook nb has 3 cells (revision: {first}).\n"), joined(read)
        ids = read.meta[META + "cell_ids"]
        quiet = await changes(agent, first)
        assert f"Nothing changed in notebook nb since revision {first}." in joined(quiet), joined(quiet)
        assert revision_of(quiet) == first and quiet.meta[META + "changes"] == 0

        peer = await peer_for(jupyter_server, path, username="ada")
        try:
            peer.set_cell_source(1, "b = 20\nprint(b)")
            peer.add_code_cell("d = 4")
            moved = peer.delete_cell(0)
            peer.insert(len(peer), dict(moved))
            await eventually(lambda: peer_sources(peer)[-1] == "a = 1", 10, "the peer's move")
            told = None
            for _ in range(100):
                told = await changes(agent, first)
                if told.meta[META + "changes"] >= 3 and "moved" in joined(told):
                    break
                await asyncio.sleep(0.1)
            text = joined(told)
            assert told.meta[META + "changed_by_others"] is True, text
            assert f"- Cell 0 (id {ids[1]}) changed by ada" in text, text
            assert "-b = 2\n+b = 20\n+print(b)" in text, text
            assert re.search(r"- Cell \d \(id \w+, code, version \w{8}\) added by ada:\n```\nd = 4\n```", text), text
            assert f"- Cell id {ids[0]} moved from index 0 to 3 by ada" in text, text
            # Where the person is: the peer has no cursor, so the cell it last changed.
            (ada,) = told.meta[META + "people"]
            assert ada["name"] == "ada" and ada["cell_id"] == ids[0] and ada["cursor"] is False, ada
            assert "Also in this notebook: ada (last changed cell" in text, text
            second = revision_of(told)
            assert second != first and text.endswith(f"revision: {second} (pass it as `since` next time)")
            assert (await changes(agent, second)).meta[META + "changes"] == 0

            # The agent's own edit and run: its answers hand out the revision after them, and
            # the changes since the earlier one are the agent's own.
            edited = await call(agent, "overwrite_cell_source", cell_id=ids[2], cell_source="c = 30")
            third = revision_of(edited)
            assert f"\nrevision: {third}\n" in joined(edited), joined(edited)
            ran = await call(agent, "execute_cell", cell_id=ids[2])
            # A run hands out the newest revision known (no read of the notebook for it).
            assert revision_of(ran) == third
            ours = await changes(agent, second)
            text = joined(ours)
            assert ours.meta[META + "changed_by_others"] is False, text
            assert "Nobody else changed notebook nb" in text, text
            assert "changed by this agent" in text and "outputs changed by this agent (execution count" in text, text
            after_run = await changes(agent, third)
            assert after_run.meta[META + "changed_by_others"] is False, joined(after_run)
            assert "outputs changed by this agent" in joined(after_run), joined(after_run)
            assert (await changes(agent, revision_of(after_run))).meta[META + "changes"] == 0
        finally:
            await peer.stop()


async def test_a_wait_ends_when_someone_else_changes_the_notebook_and_not_before(jupyter_server):
    """With wait_seconds the call answers within a second of the peer's change; the agent's own
    edits and runs meanwhile do not end it; with nobody changing anything it says so at the
    deadline."""
    path = f"wait-{uuid.uuid4().hex[:6]}.ipynb"
    write_notebook(jupyter_server, path, ["x = 1", "y = 2"])
    async with client_for(jupyter_server, "legacy", "--document-backend", "live") as agent:
        await call(agent, "use_notebook", notebook_name="nb", notebook_path=path)
        since = revision_of(await call(agent, "read_notebook", notebook_name="nb"))
        began = time.monotonic()
        nothing = await changes(agent, since, wait_seconds=2)
        assert time.monotonic() - began >= 1.9
        assert "Nothing changed in notebook nb since revision" in joined(nothing), joined(nothing)
        assert "(waited 2." in joined(nothing), joined(nothing)

        peer = await peer_for(jupyter_server, path, username="ada")
        try:
            waiting = asyncio.create_task(changes(agent, since, wait_seconds=60))
            await asyncio.sleep(1.0)
            await call(agent, "insert_cell", cell_index=-1, cell_type="code", cell_source="z = 3")
            await call(agent, "execute_cell", cell_index=0)
            await asyncio.sleep(1.5)
            assert not waiting.done(), "the agent's own edit and run ended the wait"
            changed_at = time.monotonic()
            peer.set_cell_source(1, "y = 'from ada'")
            told = await waiting
            took = time.monotonic() - changed_at
            assert took < 1.0, f"the wait ended {took:.2f}s after the peer's change"
            text = joined(told)
            assert told.meta[META + "changed_by_others"] is True
            assert "changed by ada" in text and "+y = 'from ada'" in text, text
            assert "added by this agent" in text, text
        finally:
            await peer.stop()


async def test_the_file_backend_hears_another_programs_save(jupyter_server):
    """No room: another program saving the file ends a wait within the file's look interval,
    and the changes name it as another program."""
    path = f"file-{uuid.uuid4().hex[:6]}.ipynb"
    write_notebook(jupyter_server, path, ["x = 1"])
    async with client_for(jupyter_server, "legacy", "--document-backend", "file") as agent:
        await call(agent, "use_notebook", notebook_name="nb", notebook_path=path)
        since = revision_of(await call(agent, "read_notebook", notebook_name="nb"))
        waiting = asyncio.create_task(changes(agent, since, wait_seconds=60))
        await asyncio.sleep(2.0)  # the file's first look learns it as it is
        await call(agent, "overwrite_cell_source", cell_index=0, cell_source="x = 'ours'")
        await asyncio.sleep(2.5)
        assert not waiting.done(), "the agent's own save ended the wait"
        nb = nbformat.reads((jupyter_server.root / path).read_text(), as_version=4)
        nb.cells.append(nbformat.v4.new_markdown_cell("# theirs"))
        saved_at = time.monotonic()
        (jupyter_server.root / path).write_text(nbformat.writes(nb))
        told = await waiting
        took = time.monotonic() - saved_at
        assert took < 3.0, f"the wait ended {took:.2f}s after the save"
        text = joined(told)
        assert "added by another program" in text and "# theirs" in text, text
        assert "changed by this agent" in text, text


async def test_a_revision_not_handed_out_here_says_so_and_shows_the_notebook(jupyter_server):
    path = f"unknown-{uuid.uuid4().hex[:6]}.ipynb"
    write_notebook(jupyter_server, path, ["x = 1"])
    async with client_for(jupyter_server, "legacy", "--document-backend", "file") as agent:
        await call(agent, "use_notebook", notebook_name="nb", notebook_path=path)
        told = await changes(agent, "abcdef-3")
        text = joined(told)
        assert "Revision abcdef-3 is not one this server handed out for notebook nb" in text, text
        assert "x = 1" in text and told.meta[META + "changes"] is None, text
        again = await changes(agent, revision_of(told))
        assert again.meta[META + "changes"] == 0, joined(again)


async def test_a_person_typing_in_jupyterlab_ends_the_agents_wait(tmp_path):
    """The person is JupyterLab in headless Chromium: the agent waits for them; their typing
    ends the wait, and the answer names them, the cell and the diff; a read reports the cell
    their cursor is in."""
    from conftest import lab_notebook, lab_person, start_lab
    from harness import stop_jupyter

    lab = start_lab(tmp_path)
    try:
        path = lab_notebook(lab, "person", ["x = 1", "y = 2"])
        with lab_person(lab, path, "jupyterlab-person-changes.png") as person:
            async with client_for(lab, "legacy", "--document-backend", "live") as agent:
                await call(agent, "use_notebook", notebook_name="nb", notebook_path=path)
                read = await call(agent, "read_notebook", notebook_name="nb")
                since, ids = revision_of(read), read.meta[META + "cell_ids"]
                waiting = asyncio.create_task(changes(agent, since, wait_seconds=60))
                await asyncio.sleep(1.0)
                assert not waiting.done()
                typed = "y = 'typed by a person'"
                await asyncio.to_thread(person, type=typed, cell=1)
                done_at = time.monotonic()
                told = await waiting
                assert time.monotonic() - done_at < 1.0
                text = joined(told)
                (someone,) = told.meta[META + "people"]
                assert f"(id {ids[1]}) changed by {someone['name']}" in text, text
                assert "-y = 2" in text, text
                # The rest of the typing, and where their cursor is now.
                whole = await eventually_changed(agent, revision_of(told), typed)
                assert someone["name"] in joined(whole)
                here = await call(agent, "read_notebook", notebook_name="nb", response_format="detailed")
                (person_now,) = here.meta[META + "people"]
                assert person_now["cell_id"] == ids[1] and person_now["cursor"] is True, person_now
    finally:
        stop_jupyter(lab)


async def eventually_changed(agent, since: str, text: str):
    """Changes since `since`, asked again (each answer's revision passed on) until the source
    shows `text` in full."""
    seen = ""
    for _ in range(50):
        told = await changes(agent, since, wait_seconds=5)
        seen += joined(told)
        if text in joined(await call(agent, "read_notebook", notebook_name="nb", response_format="detailed")):
            return told
        since = revision_of(told)
    raise AssertionError(f"never saw {text!r}: {seen}")
