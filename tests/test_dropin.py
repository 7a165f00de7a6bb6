"""A drop-in for the Python server's clients: its result shapes, its leniency, its flags and texts,
each checked through the official client (or raw HTTP where the client cannot say it)."""

from __future__ import annotations

import json
import secrets
import shutil
import tempfile
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from conftest import MODES, cell_id_of, client_for, http_client, joined, start_http_server, texts
from harness import start_jupyter, stop_jupyter

pytestmark = pytest.mark.anyio

# The Python server's tools by the shape of their answer.
CONTENT_TOOLS = {"execute_cell", "execute_code", "insert_execute_code_cell", "read_cell"}
TEXT_TOOLS = {
    "clear_cell_output", "connect_to_jupyter", "delete_cell", "edit_cell_source", "insert_cell", "list_files",
    "list_kernels", "list_notebooks", "move_cell", "overwrite_cell_source", "read_notebook", "restart_notebook",
    "unuse_notebook", "use_notebook",
}
META = "io.jupyter-mcp/"


def file_client(jupyter_server, mode="legacy", transport="stdio", *extra):
    return client_for(jupyter_server, mode, "--document-backend", "file", *extra, transport=transport)


async def ok(client, tool, **arguments):
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} failed: {joined(result)}"
    return result


@pytest.mark.parametrize("mode", MODES)
async def test_text_tools_answer_result_and_declare_it(jupyter_server, mode, transport):
    path = f"shape-{uuid.uuid4().hex[:6]}.ipynb"
    async with file_client(jupyter_server, mode, transport) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert TEXT_TOOLS | CONTENT_TOOLS <= set(tools)
        for name in TEXT_TOOLS:
            schema = tools[name].output_schema
            assert schema["properties"]["result"]["type"] == "string" and schema["required"] == ["result"], name
        for name in CONTENT_TOOLS:
            schema = tools[name].output_schema
            assert schema["required"] == ["kind", "result"] and schema["properties"]["kind"]["type"] == "string", name

        created = await ok(client, "use_notebook", notebook_name="nb", notebook_path=path, mode="create")
        assert created.structured_content == {"result": joined(created)}
        inserted = await ok(client, "insert_cell", cell_index=-1, cell_type="code", cell_source="print(1 + 1)")
        assert inserted.structured_content == {"result": joined(inserted)}
        assert joined(inserted).startswith("Cell inserted successfully")
        cell_id = cell_id_of(inserted)
        listed = await ok(client, "list_files", limit=0)
        assert listed.structured_content["result"] == joined(listed) and path in joined(listed)
        read = await ok(client, "read_notebook", notebook_name="nb")
        assert read.structured_content == {"result": joined(read)}
        assert read.meta[META + "cell_ids"] == [cell_id] and read.meta[META + "start_index"] == 0

        # Tools answering outputs list them as the Python server 2.x does (an object, whatever the
        # value: Gemini CLI reads a bare `42` in the text as a number); their ids stay in _meta.
        ran = await ok(client, "execute_cell", cell_id=cell_id)
        assert texts(ran)[0] == "2\n" and cell_id_of(ran) == cell_id
        assert ran.structured_content == {"kind": "cell.execute", "result": texts(ran), "outputs": texts(ran),
                                          "count": len(texts(ran)), "images": 0}, ran.structured_content
        cell = await ok(client, "read_cell", cell_index=0)
        assert cell.structured_content["kind"] == "cell.read" and cell_id_of(cell) == cell_id
        assert cell.structured_content["result"] == texts(cell)
        for value in ("42", "[1, 2]", "True"):
            answered = await ok(client, "execute_code", code=value)
            assert answered.structured_content["kind"] == "code.execute"
            assert answered.structured_content["result"] == [value], answered.structured_content
        plotted = await ok(client, "execute_code",
                           code="import io\nfrom PIL import Image as Picture\nfrom IPython.display import Image\n"
                                "png = io.BytesIO()\nPicture.new('RGB', (4, 4), 'red').save(png, 'PNG')\n"
                                "Image(data=png.getvalue())")
        assert plotted.structured_content["images"] == 1, plotted.structured_content
        assert "sha256:" in plotted.structured_content["result"][-1]["data"]
        inserted_ran = await ok(client, "insert_execute_code_cell", cell_index=-1, cell_source="6 * 7")
        assert inserted_ran.structured_content["kind"] == "cell.insert_execute"
        assert inserted_ran.structured_content["result"] == texts(inserted_ran), inserted_ran.structured_content
        assert texts(inserted_ran)[0] == "42"
        deleted = await ok(client, "delete_cell", cell_indices=[0])
        assert deleted.structured_content == {"result": joined(deleted)} and deleted.meta[META + "cell_ids"] == [cell_id]


async def test_unknown_arguments_are_ignored_with_a_note(jupyter_server):
    path = f"lenient-{uuid.uuid4().hex[:6]}.ipynb"
    async with file_client(jupyter_server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in TEXT_TOOLS | CONTENT_TOOLS:
            schema = tools[name].input_schema
            # Open to unknown arguments; only a tool that takes none says so (strict dialects).
            assert (schema.get("additionalProperties") is False) == (not schema["properties"]), name
        await ok(client, "use_notebook", notebook_name="nb", notebook_path=path, mode="create")
        await ok(client, "insert_cell", cell_index=-1, cell_type="code", cell_source="print('ran')")

        # The Python server's 1.x name for `timeout`: honoured, as the clients written for it expect
        # (its own client tests join every content item and compare the value).
        ran = await ok(client, "execute_cell", cell_index=0, timeout_seconds=30)
        assert texts(ran)[0] == "ran\n" and not any("ignored" in text for text in texts(ran)), texts(ran)
        assert META + "ignored_arguments" not in (ran.meta or {})
        ran = await ok(client, "execute_cell", cell_index=0, timeout_secs=30)
        assert texts(ran)[0] == "ran\n", "the call ran as if the argument were not there"
        assert not any("ignored" in text for text in texts(ran)), texts(ran)
        assert ran.meta[META + "ignored_arguments"] == ["timeout_secs"]
        assert "ignored 'timeout_secs'; did you mean 'timeout'?" in ran.meta[META + "note"]

        listed = await ok(client, "list_notebooks", verbose=True)
        # The note is in `_meta`, never in the content, which is the result's value alone.
        assert "ignored 'verbose'" in listed.meta[META + "note"]
        assert not any("ignored" in text for text in texts(listed))
        assert listed.structured_content["result"] == "\n".join(texts(listed))

        # A typo of a needed argument: the failure says what was ignored and what was meant.
        typo = await client.call_tool("read_cell", {"cell_idx": 0})
        assert typo.is_error
        assert "ignored 'cell_idx'; did you mean 'cell_index'?" in joined(typo)


async def test_timeout_notice_comes_first(jupyter_server):
    async with client_for(jupyter_server, "legacy") as client:
        result = await client.call_tool(
            "execute_code", {"code": "import time\nprint('before', flush=True)\nwhile True: time.sleep(0.05)", "timeout": 2}
        )
        items = texts(result)
        assert items[0].startswith("[TIMEOUT ERROR: Execution exceeded 2 seconds"), items
        assert "before\n" in items[1:], "the outputs produced before the timeout follow the notice"


def post(url: str, body: dict, headers: dict | None = None, method: str = "POST"):
    request = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None, method=method,
                                     headers={"Content-Type": "application/json",
                                              "Accept": "application/json, text/event-stream", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def sse_json(body: str) -> dict:
    """The JSON-RPC message of an SSE answer (or a JSON one)."""
    for line in body.splitlines():
        if line.startswith("data:") and line[5:].strip():
            return json.loads(line[5:])
    return json.loads(body)


async def test_bare_initialize_and_session_delete(jupyter_server):
    server = start_http_server(["--jupyter-url", jupyter_server.url, "--jupyter-token", jupyter_server.token])
    auth = {"Authorization": f"Bearer {server.token}"}
    try:
        for params in ({}, None):
            body = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
            if params is not None:
                body["params"] = params
            status, headers, text = post(server.mcp_url, body, auth)
            assert status == 200, (status, text)
            answer = sse_json(text)
            assert answer["result"]["serverInfo"]["name"] and answer["result"]["protocolVersion"], answer
            session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]

            # The session works, and ending it answers 200/204 as the official client expects.
            session_headers = {**auth, "Mcp-Session-Id": session}
            status, _, _ = post(server.mcp_url, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                                session_headers)
            assert status == 202
            status, _, text = post(server.mcp_url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                                   session_headers)
            assert status == 200 and "use_notebook" in text
            status, _, _ = post(server.mcp_url, None, session_headers, method="DELETE")
            assert status in (200, 204), status
            status, _, _ = post(server.mcp_url, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, session_headers)
            assert status == 404, "the deleted session is gone"
    finally:
        server.stop()


async def test_phrases_clients_match_on(jupyter_server):
    path = f"phrases-{uuid.uuid4().hex[:6]}.ipynb"
    async with file_client(jupyter_server) as client:
        missing = await client.call_tool("use_notebook", {"notebook_name": "m", "notebook_path": "absent.ipynb"})
        assert missing.is_error and "'absent.ipynb' not found in jupyter server" in joined(missing)
        await ok(client, "use_notebook", notebook_name="nb", notebook_path=path, mode="create")
        again = await ok(client, "use_notebook", notebook_name="nb", notebook_path=path)
        assert "Notebook 'nb' is already connected" in joined(again)
        for tool in ("unuse_notebook", "restart_notebook"):
            unknown = await client.call_tool(tool, {"notebook_name": "ghost"})
            text = joined(unknown)
            assert unknown.is_error, "a real error keeps isError"
            assert "Notebook 'ghost' is not connected" in text and "All currently connected notebooks: ['nb']" in text
            # Next steps worded as this face's tools, never in their neutral names.
            assert "Call use_notebook to open it" in text and "<" not in text, text
        restarted = await ok(client, "restart_notebook", notebook_name="nb")
        assert "Notebook 'nb' kernel restarted successfully" in joined(restarted)
        unused = await ok(client, "unuse_notebook", notebook_name="nb")
        assert joined(unused).startswith("Notebook 'nb' unused successfully.")


def password_jupyter(tmp: Path, password: str, port: int | None = None, token: str | None = None):
    """A Jupyter Server with password login. Each start signs cookies with a new secret, so a
    restart ends every login (an expired session, as far as clients can tell)."""
    from jupyter_server.auth import passwd

    config = tmp / "jupyter_server_config.py"
    config.write_text(
        f"c.PasswordIdentityProvider.hashed_password = {passwd(password)!r}\n"
        f"c.ServerApp.cookie_secret = {secrets.token_bytes(32)!r}\n"
    )
    config.chmod(0o600)
    # The harness's token stays for the test's own requests; our server is given only the password.
    return start_jupyter(tmp, port=port, token=token, extra=[f"--config={config}"])


async def test_password_login_renewed_and_never_shown(tmp_path_factory):
    tmp = Path(tempfile.mkdtemp(prefix="jmcp-pw-"))
    password = "pw-" + secrets.token_hex(8)
    jupyter = password_jupyter(tmp, password)
    server = None
    try:
        status, _ = jupyter.request("GET", "/api/status")
        assert status == 200
        anonymous = urllib.request.Request(jupyter.url + "/api/contents")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(anonymous, timeout=10)
        assert refused.value.code == 403, "the server really wants a login"

        server = start_http_server(["--jupyter-url", jupyter.url, "--document-backend", "file"],
                                   env={"JUPYTER_PASSWORD": password})
        async with http_client(server, "legacy") as client:
            await ok(client, "use_notebook", notebook_name="nb", notebook_path="pw.ipynb", mode="create")
            ran = await ok(client, "insert_execute_code_cell", cell_index=-1, cell_source="print(6 * 7)")
            assert texts(ran)[0] == "42\n", "REST, XSRF-checked writes and the kernel websocket all logged in"

            # A restart with a new cookie secret ends the login; the next calls log in again.
            port = int(jupyter.url.rsplit(":", 1)[1])
            stop_jupyter(jupyter)
            jupyter = password_jupyter(tmp, password, port=port, token=jupyter.token)
            listed = await ok(client, "list_files", limit=0)
            assert "pw.ipynb" in joined(listed)
            await ok(client, "use_notebook", notebook_name="after", notebook_path="after.ipynb", mode="create")
            ran = await ok(client, "insert_execute_code_cell", cell_index=-1, cell_source="print('again')")
            assert texts(ran)[0] == "again\n"
        log = server.log.read_text()
        assert "expired; logging in again" in log
        assert password not in log, "the password is never logged"

        # A wrong password is named as such, without showing either password.
        server.stop()
        server = start_http_server(["--jupyter-url", jupyter.url], env={"JUPYTER_PASSWORD": "wrong-" + password})
        async with http_client(server, "legacy") as client:
            failed = await client.call_tool("list_files", {})
            assert failed.is_error and "refused the password" in joined(failed) and "JUPYTER_PASSWORD" in joined(failed)
            assert password not in joined(failed)
        assert password not in server.log.read_text()

        # As the Python server's own password tests start it: `--document-url X
        # --code-sandbox-url X` and only the shared password. The document server's credentials
        # default to the shared ones, as the code sandbox's do (its contents check got a 403).
        server.stop()
        server = start_http_server(["--document-url", jupyter.url, "--code-sandbox-url", jupyter.url,
                                    "--document-backend", "file"], env={"JUPYTER_PASSWORD": password})
        async with http_client(server, "legacy") as client:
            used = await ok(client, "use_notebook", notebook_name="nb", notebook_path="shared.ipynb", mode="create")
            assert "error" not in joined(used).lower(), joined(used)
            ran = await ok(client, "insert_execute_code_cell", cell_index=-1, cell_source="print(6 * 7)")
            assert texts(ran)[0] == "42\n"
        assert (jupyter.root / "shared.ipynb").is_file()
        assert password not in server.log.read_text()
    finally:
        if server:
            server.stop()
        stop_jupyter(jupyter)
        shutil.rmtree(tmp, ignore_errors=True)


async def test_document_password_for_a_separate_document_server(jupyter_server):
    tmp = Path(tempfile.mkdtemp(prefix="jmcp-docpw-"))
    password = "doc-" + secrets.token_hex(8)
    documents = password_jupyter(tmp, password)
    try:
        args = ["--document-url", documents.url, "--document-backend", "file"]
        async with client_for(jupyter_server, "legacy", *args, env={"DOCUMENT_PASSWORD": password}) as client:
            await ok(client, "use_notebook", notebook_name="d", notebook_path="doc.ipynb", mode="create")
            await ok(client, "insert_cell", cell_index=-1, cell_type="markdown", cell_source="# on the document server")
        assert (documents.root / "doc.ipynb").is_file() and not (jupyter_server.root / "doc.ipynb").exists()
    finally:
        stop_jupyter(documents)
        shutil.rmtree(tmp, ignore_errors=True)


def health(server) -> dict:
    with urllib.request.urlopen(server.base + "/api/healthz", timeout=10) as response:
        return json.loads(response.read())


def wait_for(condition, seconds: float = 30.0):
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


async def test_document_id_opened_as_default_and_health_says_alive(jupyter_server):
    import nbformat

    path = f"docid-{uuid.uuid4().hex[:6]}.ipynb"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 6 * 7")])
    nbformat.write(notebook, jupyter_server.root / path)
    base = ["--jupyter-url", jupyter_server.url, "--document-backend", "file"]
    server = start_http_server([*base, "--document-id", path], env={"JUPYTER_TOKEN": jupyter_server.token})
    try:
        status = health(server)
        assert status["kernel_status"] == "alive" and status["status"] == "healthy", status
        async with http_client(server, "legacy") as client:
            listed = joined(await ok(client, "list_notebooks"))
            assert f"default\t{path}\t" in listed and "✓" in listed, listed
            read = joined(await ok(client, "read_notebook", notebook_name="default"))
            assert "x = 6 * 7" in read
            await ok(client, "execute_cell", cell_index=0)
            assert texts(await ok(client, "execute_code", code="print(x)")) == ["42\n"], "code runs in its kernel"
            kernel_id = listed.split(f"default\t{path}\t")[1].split("\t")[0]
        # Health reports what is true: the kernel gone is 'dead'.
        jupyter_server.request("DELETE", f"/api/kernels/{kernel_id}")
        wait_for(lambda: health(server)["kernel_status"] == "dead")
    finally:
        server.stop()

    # DOCUMENT_ID naming a notebook that does not exist creates nothing; the server still serves.
    absent = f"absent-{uuid.uuid4().hex[:6]}.ipynb"
    server = start_http_server(base, env={"JUPYTER_TOKEN": jupyter_server.token, "DOCUMENT_ID": absent})
    try:
        assert health(server)["kernel_status"] == "not_initialized"
        assert not (jupyter_server.root / absent).exists()
        assert f"could not open --document-id '{absent}'" in server.log.read_text()
    finally:
        server.stop()


async def test_document_id_without_a_code_sandbox_waits_for_a_kernel(jupyter_server):
    """The Python server's `--start-new-code-sandbox False --document-id X`: the document opens at
    start and no kernel is started until a call needs one, whatever other kernels Jupyter runs."""
    import nbformat

    path = f"nosandbox-{uuid.uuid4().hex[:6]}.ipynb"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 6 * 7")])
    nbformat.write(notebook, jupyter_server.root / path)
    someone_elses = jupyter_server.start_kernel()
    before = jupyter_server.kernel_ids()
    server = start_http_server(
        ["--code-sandbox-url", jupyter_server.url, "--document-id", path, "--start-new-code-sandbox", "False",
         "--document-backend", "file"],
        env={"CODE_SANDBOX_TOKEN": jupyter_server.token},
    )
    try:
        assert health(server)["kernel_status"] == "not_initialized"
        assert f"opened '{path}' as notebook 'default'" in server.log.read_text()
        async with http_client(server, "legacy") as client:
            listed = joined(await ok(client, "list_notebooks"))
            assert f"default\t{path}\t-\tnot_initialized\t✓" in listed, listed
            assert "x = 6 * 7" in joined(await ok(client, "read_notebook", notebook_name="default"))
            assert jupyter_server.kernel_ids() == before, "reading started no kernel"
            await ok(client, "execute_cell", cell_index=0)
            assert texts(await ok(client, "execute_code", code="print(x)")) == ["42\n"], \
                "the first run attached one kernel to the notebook, and the next call used it"
            started = jupyter_server.kernel_ids() - before
            assert len(started) == 1 and someone_elses not in started, started
            assert health(server)["kernel_status"] == "alive"
            released = joined(await ok(client, "unuse_notebook", notebook_name="default"))
            assert "was shut down" in released, released
    finally:
        server.stop()
        jupyter_server.request("DELETE", f"/api/kernels/{someone_elses}")


async def test_start_new_code_sandbox_and_code_sandbox_url(jupyter_server):
    env = {"CODE_SANDBOX_TOKEN": jupyter_server.token}
    lazy = start_http_server(["--code-sandbox-url", jupyter_server.url], env=env)
    try:
        assert health(lazy)["kernel_status"] == "not_initialized", "no kernel until one is asked for"
        async with http_client(lazy, "legacy") as client:
            assert texts(await ok(client, "execute_code", code="print(1)")) == ["1\n"], \
                "--code-sandbox-url and CODE_SANDBOX_TOKEN reach the kernels' server"
        assert health(lazy)["kernel_status"] == "alive"
    finally:
        lazy.stop()
    for flags, extra_env in ((["--start-new-code-sandbox"], {}), ([], {"START_NEW_CODE_SANDBOX": "true"})):
        eager = start_http_server(["--code-sandbox-url", jupyter_server.url, *flags], env={**env, **extra_env})
        try:
            assert health(eager)["kernel_status"] == "alive", "the default kernel was started at start"
        finally:
            eager.stop()


async def test_bare_initialize_on_stdio(jupyter_server):
    import subprocess

    from conftest import server_binary, server_env

    process = subprocess.Popen(
        [server_binary(), "--jupyter-url", jupyter_server.url], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, env=server_env({"JUPYTER_TOKEN": jupyter_server.token}))
    try:
        process.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}\n')
        process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        process.stdin.write(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}\n')
        process.stdin.flush()
        first = json.loads(process.stdout.readline())
        assert first["id"] == 1 and first["result"]["serverInfo"]["name"], first
        second = json.loads(process.stdout.readline())
        assert second["id"] == 2 and any(t["name"] == "use_notebook" for t in second["result"]["tools"])
    finally:
        process.stdin.close()
        process.wait(timeout=30)


def test_secrets_on_the_command_line_are_warned_about_and_not_shown():
    import subprocess

    from conftest import server_binary, server_env

    secret = "argv-" + secrets.token_hex(6)
    env = server_env()
    for variable in ("JUPYTER_PASSWORD", "JUPYTER_TOKEN", "MCP_TOKEN", "DOCUMENT_TOKEN"):
        env.pop(variable, None)
    done = subprocess.run([server_binary(), "--jupyter-url", "http://127.0.0.1:9", "--jupyter-password", secret,
                           "--jupyter-token", secret + "t", "--mcp-token", secret + "m",
                           "--document-url", "http://127.0.0.1:9", "--document-token", secret + "d"],
                          stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=60)
    log = done.stderr.decode()
    for flag, variable in (("--jupyter-password", "JUPYTER_PASSWORD"), ("--jupyter-token", "JUPYTER_TOKEN"),
                           ("--mcp-token", "MCP_TOKEN"), ("--document-token", "DOCUMENT_TOKEN")):
        assert f"{flag} on the command line is visible to other local users; set {variable} in the environment" \
            in log, log
    assert secret not in log
    # The same secrets from the environment: no warning.
    env.update(JUPYTER_TOKEN=secret + "t", MCP_TOKEN=secret + "m")
    done = subprocess.run([server_binary(), "--jupyter-url", "http://127.0.0.1:9"],
                          stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=60)
    log = done.stderr.decode()
    assert "visible to other local users" not in log and secret not in log, log
    # A management command's token too.
    done = subprocess.run([server_binary(), "stop", "--server-url", "http://127.0.0.1:9", "--mcp-token", secret],
                          stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=60)
    log = done.stderr.decode()
    assert done.returncode != 0
    assert "--mcp-token on the command line is visible to other local users; set MCP_TOKEN" in log, log
    assert secret not in log
