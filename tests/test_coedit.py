"""Co-editing: cell and notebook versions, and writes and runs conditional on them, on both
backends. Someone else — another program writing the file, or a second collaboration peer in the
room — changes a cell after the agent read it; the agent's write with the version it read is
refused, nothing is changed, and the error shows the current source and version."""

from __future__ import annotations

import asyncio
import hashlib
import uuid

import nbformat
import pytest

from conftest import (call, cell_id_of, client_for, disk_sources, eventually, joined, peer_for, peer_sources,
                      refused, texts, write_notebook)

pytestmark = pytest.mark.anyio

META = "io.jupyter-mcp/"


def version(cell_type: str, source: str) -> str:
    """What a cell's version is: a hash over its type and source, the same on every read, after
    a restart and on both backends (so the test can compute it)."""
    return hashlib.sha256(cell_type.encode() + b"\0" + source.encode() + b"\0").hexdigest()[:8]


def notebook_version(ids: list[str]) -> str:
    return hashlib.sha256(b"".join(i.encode() + b"\0" for i in ids)).hexdigest()[:8]


def client(jupyter, backend: str):
    return client_for(jupyter, "legacy", "--document-backend", backend)


async def wait_for_source(client, index: int, source: str) -> dict:
    """Until our server sees `source` in cell `index` (the other writer's change reached it)."""
    async def seen():
        read = await call(client, "read_notebook", notebook_name="nb", response_format="detailed")
        return source in joined(read) and read

    for _ in range(200):
        read = await seen()
        if read:
            return read.meta
        await asyncio.sleep(0.05)
    raise AssertionError(f"cell {index} never showed {source!r}")


@pytest.mark.parametrize("backend", ["file", "live"])
async def test_versions_are_stable_and_shown_everywhere(jupyter_server, backend):
    path = f"versions-{backend}-{uuid.uuid4().hex[:6]}.ipynb"
    write_notebook(jupyter_server, path, ["x = 1", "print(x)"])
    async with client(jupyter_server, backend) as agent:
        await call(agent, "use_notebook", notebook_name="nb", notebook_path=path)
        first = await call(agent, "read_cell", cell_index=0)
        assert first.meta[META + "cell_version"] == version("code", "x = 1")
        assert f"| version: {version('code', 'x = 1')}=====" in texts(first)[0]
        detailed = await call(agent, "read_notebook", notebook_name="nb", response_format="detailed")
        ids = detailed.meta[META + "cell_ids"]
        assert detailed.meta[META + "cell_versions"] == [version("code", "x = 1"), version("code", "print(x)")]
        assert detailed.meta[META + "notebook_version"] == notebook_version(ids)
        assert f"version: {version('code', 'print(x)')}" in joined(detailed)

        # Reads, runs and output changes leave every version as it was.
        await call(agent, "execute_cell", cell_index=0)
        await call(agent, "clear_cell_output", cell_index=0)
        again = await call(agent, "read_notebook", notebook_name="nb", response_format="brief")
        assert again.meta[META + "cell_versions"] == detailed.meta[META + "cell_versions"]
        assert again.meta[META + "notebook_version"] == detailed.meta[META + "notebook_version"]

        # Every edit gives the new version, in its text and _meta.
        edited = await call(agent, "edit_cell_source", cell_index=1, old_string="x", new_string="x * 2")
        assert edited.meta[META + "cell_version"] == version("code", "print(x * 2)")
        assert f"\nversion: {version('code', 'print(x * 2)')}\n" in joined(edited)
        # And whether it is on disk: a file is saved by the edit; a room saves a moment later.
        if backend == "file":
            assert edited.meta[META + "persisted"] is True
            assert joined(edited).endswith("saved: the notebook file holds this change")
        else:
            assert edited.meta[META + "persisted"] is False
            assert 0.3 <= save_delay_said(joined(edited)) < 3, joined(edited)
        inserted = await call(agent, "insert_cell", cell_index=-1, cell_type="markdown", cell_source="# end")
        assert inserted.meta[META + "cell_version"] == version("markdown", "# end")
        assert inserted.meta[META + "notebook_version"] == notebook_version(ids + [cell_id_of(inserted)])
        assert inserted.meta[META + "persisted"] is (backend == "file")
        deleted = await call(agent, "delete_cell", cell_ids_to_delete=[cell_id_of(inserted)])
        assert deleted.meta[META + "notebook_version"] == notebook_version(ids)
        assert deleted.meta[META + "persisted"] is (backend == "file")


@pytest.mark.parametrize("backend", ["file", "live"])
async def test_a_page_or_a_cell_read_alone_shows_what_the_whole_read_shows(jupyter_server, backend):
    """read_cell and read_notebook's pages read only the cells they show (and every id); what they
    show is what a whole read shows, and a version seen on a page serves a conditional write and
    its diff as one from a whole read does."""
    path = f"pages-{backend}-{uuid.uuid4().hex[:6]}.ipynb"
    sources = [f"# cell {i}\nv{i} = {i}" for i in range(30)]
    write_notebook(jupyter_server, path, sources)
    async with client(jupyter_server, backend) as agent:
        await call(agent, "use_notebook", notebook_name="nb", notebook_path=path)
        whole = await call(agent, "read_notebook", notebook_name="nb", response_format="detailed", limit=0)
        ids, versions = whole.meta[META + "cell_ids"], whole.meta[META + "cell_versions"]
        assert versions == [version("code", s) for s in sources]
        for start, limit in [(0, 5), (10, 7), (25, 0), (29, 1), (28, 50)]:
            end = 30 if limit == 0 else min(start + limit, 30)
            for response_format in ("brief", "detailed"):
                page = await call(agent, "read_notebook", notebook_name="nb", response_format=response_format,
                                  start_index=start, limit=limit)
                text = joined(page)
                assert page.meta[META + "cell_ids"] == ids[start:end], (start, limit)
                assert page.meta[META + "cell_versions"] == versions[start:end], (start, limit)
                assert page.meta[META + "notebook_version"] == whole.meta[META + "notebook_version"]
                assert text.startswith("Notebook nb has 30 cells (revision: "), text
                for i in range(30):
                    row = (f"\n{i}\tcode\tN/A\t# cell {i}...(1 lines hidden)" if response_format == "brief"
                           else f"=====Cell {i} | type: code | execution count: N/A | version: {versions[i]}=====")
                    assert (row in text) == (start <= i < end), (response_format, start, limit, i, text)
        past = await call(agent, "read_notebook", notebook_name="nb", start_index=30)
        assert joined(past) == "Start index 30 is out of range. Notebook has 30 cells."

        for i in (0, 17, 29):
            by_index = await call(agent, "read_cell", cell_index=i)
            by_id = await call(agent, "read_cell", cell_id=ids[i])
            assert texts(by_index) == texts(by_id) and sources[i] in joined(by_index)
            assert by_index.meta[META + "cell_version"] == by_id.meta[META + "cell_version"] == versions[i]
        for index in (30, -1):
            said = await refused(agent, "read_cell", cell_index=index)
            assert f"Cell index {index} is out of range. Notebook has 30 cells." in said, said
        assert "No cell 'nope' in this notebook" in await refused(agent, "read_cell", cell_id="nope")

    # A new server has seen nothing: a version it showed on a page alone is what it can diff against.
    theirs = "# cell 17\nv17 = 'changed by a person'"
    async with client(jupyter_server, backend) as agent:
        await call(agent, "use_notebook", notebook_name="nb", notebook_path=path)
        page = await call(agent, "read_notebook", notebook_name="nb", start_index=17, limit=1)
        seen = page.meta[META + "cell_versions"][0]
        peer = None
        if backend == "file":
            nb = nbformat.reads((jupyter_server.root / path).read_text(), as_version=4)
            nb.cells[17].source = theirs
            (jupyter_server.root / path).write_text(nbformat.writes(nb))
        else:
            peer = await peer_for(jupyter_server, path, username="ada")
            peer.set_cell_source(17, theirs)
        try:
            for _ in range(200):
                if theirs in joined(await call(agent, "read_cell", cell_index=17)):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the person's change never reached the server")
            error = await refused(agent, "overwrite_cell_source", cell_index=17, cell_source="v17 = 0",
                                  expected_version=seen)
            assert "-v17 = 17\n+v17 = 'changed by a person'" in error, error
        finally:
            if peer is not None:
                await peer.stop()


async def _people_of(agent, index: int):
    """Who a read of cell `index` says is in the notebook, once someone has a cursor there."""
    people = (await call(agent, "read_cell", cell_index=index)).meta[META + "people"]
    return people if any(p["cursor"] for p in people) else None


async def eventually_async(read, timeout: float, what: str):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await read()
        if value:
            return value
        assert asyncio.get_running_loop().time() < deadline, f"not within {timeout}s: {what}"
        await asyncio.sleep(0.1)


def save_delay_said(text: str) -> float:
    """The room's save delay an edit's result gives ("… saves the shared document N s after …")."""
    import re

    found = re.search(r"not yet saved: Jupyter saves the shared document (\d+(?:\.\d)?) s after the last change", text)
    assert found, text
    return float(found.group(1))


async def test_the_rooms_save_delay_is_learned_from_its_saves(tmp_path):
    """The Jupyter Server publishes no document_save_delay; the figure an edit gives is the default
    until the room is seen to save one of our changes, then what was seen (here 3 s)."""
    from harness import start_jupyter, stop_jupyter

    jupyter = start_jupyter(tmp_path, extra=["--YDocExtension.document_save_delay=3"])
    try:
        path = f"delay-{uuid.uuid4().hex[:6]}.ipynb"
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("a = 1")]
        (jupyter.root / path).write_text(nbformat.writes(nb))
        async with client(jupyter, "live") as agent:
            await call(agent, "use_notebook", notebook_name="nb", notebook_path=path, mode="connect")
            first = await call(agent, "overwrite_cell_source", cell_index=0, cell_source="a = 2")
            assert "jupyter-collaboration's default" in joined(first) and save_delay_said(joined(first)) == 1
            await eventually(lambda: (s := disk_sources(jupyter, path)) and s[0] == "a = 2", 30, "the room's save")
            await asyncio.sleep(0.5)  # the room's news of its save reaches our server after the file
            second = await call(agent, "overwrite_cell_source", cell_index=0, cell_source="a = 3")
            assert "as this notebook's room was seen to save" in joined(second), joined(second)
            assert 3 <= save_delay_said(joined(second)) < 6, joined(second)
    finally:
        stop_jupyter(jupyter)


@pytest.mark.parametrize("backend", ["file", "live"])
async def test_a_write_with_a_stale_version_changes_nothing(jupyter_server, backend):
    path = f"stale-{backend}-{uuid.uuid4().hex[:6]}.ipynb"
    write_notebook(jupyter_server, path, ["value = 1\nprint(value)", "other = 0"])
    peer = None
    async with client(jupyter_server, backend) as agent:
        await call(agent, "use_notebook", notebook_name="nb", notebook_path=path)
        read = await call(agent, "read_notebook", notebook_name="nb", response_format="detailed")
        seen, seen_structure = read.meta[META + "cell_versions"][0], read.meta[META + "notebook_version"]
        theirs = "value = 2  # a person's edit\nprint(value)"
        if backend == "file":
            # Another program saves the file between the agent's read and its write.
            nb = nbformat.reads((jupyter_server.root / path).read_text(), as_version=4)
            nb.cells[0].source = theirs
            nb.cells.append(nbformat.v4.new_code_cell("added = True"))
            (jupyter_server.root / path).write_text(nbformat.writes(nb))
        else:
            # A second collaboration peer (as a person's JupyterLab) edits the room.
            peer = await peer_for(jupyter_server, path, username="ada")
            peer.set_cell_source(0, theirs)
            peer.add_code_cell("added = True")
        try:
            await wait_for_source(agent, 0, "added = True")
            now = version("code", theirs)

            error = await refused(agent, "overwrite_cell_source", cell_index=0, cell_source="value = 3",
                                  expected_version=seen)
            assert f"it is now version {now}" in error and "Nothing was changed or run." in error, error
            assert theirs in error, "the current source is shown"
            assert "-value = 1\n+value = 2  # a person's edit" in error, "a diff against what the agent saw"
            assert f'expected_version="{now}"' in error
            if peer is not None:
                # The room says who changed it, and who else is here.
                assert "Last changed by: ada." in error, error
                # The peer has no editor cursor: it is where it last changed a cell (cell 0's
                # source or the cell it added; the room may bring both in one update).
                ids = (await call(agent, "read_notebook", notebook_name="nb")).meta[META + "cell_ids"]
                touched = [ids[0], ids[-1]]
                here = await call(agent, "read_cell", cell_index=1)
                (ada,) = here.meta[META + "people"]
                added = ada["cell_id"]
                assert ada == {"name": "ada", "cell_id": added, "cursor": False} and added in touched, (touched, here.meta)
                assert texts(here)[-1] == f"Also in this notebook: ada (last changed cell {added}).", texts(here)
                listed = await call(agent, "read_notebook", notebook_name="nb", response_format="detailed")
                assert listed.meta[META + "people"] == [ada]
                assert f"\nAlso in this notebook: ada (last changed cell {added}).\n" in joined(listed)
            else:
                assert "Last changed by" not in error

            # Every conditional tool refuses the same way, and runs nothing.
            await refused(agent, "edit_cell_source", cell_index=0, old_string="value", new_string="v",
                          expected_version=seen)
            await refused(agent, "execute_cell", cell_index=0, expected_version=seen)
            await refused(agent, "clear_cell_output", cell_index=0, expected_version=seen)
            await refused(agent, "move_cell", source_index=0, target_index=1, expected_version=seen)
            await refused(agent, "delete_cell", cell_indices=[0], expected_version=seen)
            structure = await refused(agent, "insert_cell", cell_index=1, cell_type="code", cell_source="mine = 1",
                                      expected_notebook_version=seen_structure)
            assert "It now has 3 cells" in structure and "added = True" in structure, structure
            await refused(agent, "delete_cell", cell_indices=[1], expected_notebook_version=seen_structure)
            await refused(agent, "insert_execute_code_cell", cell_index=-1, cell_source="1",
                          expected_notebook_version=seen_structure)

            after = await call(agent, "read_notebook", notebook_name="nb", response_format="detailed")
            assert after.meta[META + "cell_versions"] == [now, version("code", "other = 0"),
                                                          version("code", "added = True")]
            ran = await call(agent, "read_cell", cell_index=0)
            assert ran.meta[META + "cell_version"] == now and "execution count: N/A" in texts(ran)[0], "never run"
            expected_sources = [theirs, "other = 0", "added = True"]
            if peer is not None:
                assert peer_sources(peer) == expected_sources, "the person's text is intact in the room"
            await eventually(lambda: disk_sources(jupyter_server, path) == expected_sources, 10,
                             "the person's text is intact on disk")

            # With the version just read, the same write goes through.
            done = await call(agent, "overwrite_cell_source", cell_index=0, cell_source="value = 3",
                              expected_version=now)
            assert done.meta[META + "cell_version"] == version("code", "value = 3")
            fresh = after.meta[META + "notebook_version"]
            await call(agent, "insert_cell", cell_index=-1, cell_type="code", cell_source="mine = 1",
                       expected_notebook_version=fresh)
            # Without the argument, as before: no check.
            await call(agent, "overwrite_cell_source", cell_index=1, cell_source="other = 1")
            final = ["value = 3", "other = 1", "added = True", "mine = 1"]
            if peer is not None:
                await eventually(lambda: peer_sources(peer) == final, 5, "the peer sees the agent's writes")
            await call(agent, "unuse_notebook", notebook_name="nb")
            assert disk_sources(jupyter_server, path) == final
        finally:
            if peer is not None:
                await peer.stop()


async def test_a_person_typing_in_jupyterlab_is_never_overwritten_by_a_stale_write(tmp_path):
    """The person is JupyterLab in headless Chromium. They retype cell 0 after the agent read it;
    the agent's overwrite with the version it read is refused, and the person's text stays, on
    screen and on disk. The person sees the agent's cursor in the cell it works on."""
    from conftest import lab_notebook, lab_person, start_lab
    from harness import stop_jupyter

    lab = start_lab(tmp_path)
    try:
        path = lab_notebook(lab, "typed", ["x = 1", "y = 2"])
        with lab_person(lab, path, "jupyterlab-person-typed.png") as person:
            await typed_by_a_person(lab, path, person)
    finally:
        stop_jupyter(lab)


async def typed_by_a_person(lab, path: str, person) -> None:
    """The agent reads, the person retypes, the stale overwrite is refused; cursors both ways."""
    typed = "x = 'typed by a person'"
    async with client(lab, "live") as agent:
        await call(agent, "use_notebook", notebook_name="nb", notebook_path=path)
        read = await call(agent, "read_cell", cell_index=0)
        seen = read.meta[META + "cell_version"]
        person(type=typed, cell=0)
        await wait_for_source(agent, 0, typed)
        # Where the person is: their editor's cursor is in the cell they typed in.
        first_id = read.meta[META + "cell_id"]
        here = await eventually_async(lambda: _people_of(agent, 1), 10, "the person's cursor cell")
        (someone,) = here
        assert someone["cell_id"] == first_id and someone["cursor"] is True, here
        error = await refused(agent, "overwrite_cell_source", cell_index=0, cell_source="x = 'the agent'",
                              expected_version=seen)
        assert typed in error, error
        person(shows=typed, cell=0)
        # Jupyter saves the room a moment later: the person's text, never the agent's, on disk.
        on_disk = await eventually(lambda: (s := disk_sources(lab, path)) and typed in s[0] and s, 30,
                                   "the person's text saved")
        assert "the agent" not in on_disk[0], on_disk
        # The agent's own awareness: the person sees its cursor (in its colour) in the cell it
        # works on, and it follows the agent to the next one.
        await call(agent, "overwrite_cell_source", cell_index=1, cell_source="y = 3")
        person(cursor="rgb(124, 77, 255)", cell=1)
        fresh = (await call(agent, "read_cell", cell_index=0)).meta[META + "cell_version"]
        await call(agent, "overwrite_cell_source", cell_index=0, cell_source=typed + "  # seen",
                   expected_version=fresh)
        person(cursor="rgb(124, 77, 255)", cell=0)


@pytest.mark.parametrize("transport", ["stdio", "streamable-http"])
async def test_a_subscriber_hears_a_persons_changes_until_it_unsubscribes(jupyter_server, transport):
    """`resources/subscribe` on a notebook is told of a person's change in the room, not only of
    the agent's; a person typing is heard at most once per 500 ms; after `resources/unsubscribe`
    nothing more comes."""
    path = f"heard-{uuid.uuid4().hex[:6]}.ipynb"
    write_notebook(jupyter_server, path, ["x = 1"])
    heard: list[tuple[float, str]] = []

    async def on_message(message):
        params = getattr(getattr(message, "root", message), "params", None)
        uri = getattr(params, "uri", None)
        if uri:
            heard.append((asyncio.get_running_loop().time(), uri))

    async with client_for(jupyter_server, "legacy", "--document-backend", "live", transport=transport,
                          message_handler=on_message) as agent:
        await call(agent, "use_notebook", notebook_name="nb", notebook_path=path)
        await agent.subscribe_resource("notebook://nb")
        peer = await peer_for(jupyter_server, path, username="ada")
        try:
            peer.set_cell_source(0, "x = 2")
            await eventually(lambda: heard, 10, "a notification of the person's change")
            assert heard[0][1] == "notebook://nb"
            # A person typing: twenty changes in a second are heard a few times, not twenty.
            heard.clear()
            started = asyncio.get_running_loop().time()
            for n in range(20):
                peer.set_cell_source(0, f"x = {n}")
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)
            span = asyncio.get_running_loop().time() - started
            assert 1 <= len(heard) <= span / 0.5 + 1, heard
            gaps = [b[0] - a[0] for a, b in zip(heard, heard[1:])]
            assert all(gap >= 0.45 for gap in gaps), gaps
            # The last change is among those heard: what the agent reads now is the person's.
            assert "x = 19" in joined(await call(agent, "read_cell", cell_index=0))
            await agent.unsubscribe_resource("notebook://nb")
            heard.clear()
            peer.set_cell_source(0, "x = 'after'")
            await eventually(lambda: "x = 'after'" in peer_sources(peer)[0], 5, "the peer's own change")
            await asyncio.sleep(1.5)
            assert heard == [], heard
        finally:
            await peer.stop()


async def test_a_subscriber_hears_another_programs_save_on_the_file_backend(jupyter_server):
    """No event says a file changed: its timestamp is looked at every second while someone
    listens. Another program's save is heard; the agent's own edits are heard once each, as
    before, not again as a save by someone else."""
    path = f"saved-{uuid.uuid4().hex[:6]}.ipynb"
    write_notebook(jupyter_server, path, ["x = 1"])
    heard: list[str] = []

    async def on_message(message):
        params = getattr(getattr(message, "root", message), "params", None)
        if getattr(params, "uri", None):
            heard.append(params.uri)

    async with client_for(jupyter_server, "legacy", "--document-backend", "file",
                          message_handler=on_message) as agent:
        await call(agent, "use_notebook", notebook_name="nb", notebook_path=path)
        await agent.subscribe_resource("notebook://nb")
        await asyncio.sleep(1.5)  # the first look learns the file as it is
        await call(agent, "overwrite_cell_source", cell_index=0, cell_source="x = 'ours'")
        await eventually(lambda: heard, 10, "a notification of our own edit")
        await asyncio.sleep(2.5)
        assert heard == ["notebook://nb"], heard
        # Edits in a row are spaced out too: the first at once, the rest together 500 ms later.
        heard.clear()
        for n in range(5):
            await call(agent, "insert_cell", cell_index=-1, cell_type="code", cell_source=f"n = {n}")
        await asyncio.sleep(1.5)
        assert 1 <= len(heard) <= 3, heard
        heard.clear()
        nb = nbformat.reads((jupyter_server.root / path).read_text(), as_version=4)
        nb.cells[0].source = "x = 'theirs'"
        (jupyter_server.root / path).write_text(nbformat.writes(nb))
        await eventually(lambda: heard, 10, "a notification of the other program's save")
        assert "x = 'theirs'" in joined(await call(agent, "read_cell", cell_index=0))
