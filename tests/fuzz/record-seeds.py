"""Records the fuzzers' seed corpora from real traffic, into tests/fuzz/seeds/<target>/.

- stdio_framing: the lines the official MCP client sends our server on stdin (a tee in between);
- tool_arguments: the arguments objects of those tools/call requests;
- kernel_codecs: frames a real kernel sends, in the v1 protocol and in legacy JSON;
- nbformat: notebooks as Jupyter saves them, outputs included;
- yjs_updates: sync messages' updates from a real collaboration room while a peer edits.

Run with the test venv and the server binary: `.venv/bin/python tests/fuzz/record-seeds.py`
(JUPYTER_MCP_SERVER_BIN set, as tests/run does). Not part of the test run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import nbformat
import websockets

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from harness import start_jupyter, stop_jupyter  # noqa: E402
from jupyter_nbmodel_client import NbModelClient, get_jupyter_notebook_websocket_url  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

SEEDS = HERE / "seeds"


def save(target: str, data: bytes) -> None:
    folder = SEEDS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)


async def mcp_traffic(jupyter, tmp: Path) -> None:
    capture = tmp / "stdin.jsonl"
    binary = os.environ["JUPYTER_MCP_SERVER_BIN"]
    command = f'tee "{capture}" | "{binary}" start --jupyter-url {jupyter.url} --jupyter-token {jupyter.token}'
    params = StdioServerParameters(command="sh", args=["-c", command], env=dict(os.environ, RUST_LOG="warn"))
    path = f"seed-{uuid.uuid4().hex[:6]}.ipynb"
    async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
        await client.list_tools()
        await client.call_tool("use_notebook", {"notebook_name": "s", "notebook_path": path, "mode": "create"})
        await client.call_tool("insert_cell", {"cell_index": -1, "cell_type": "markdown", "cell_source": "# Seeds"})
        await client.call_tool("insert_execute_code_cell", {"cell_index": -1, "cell_source": "print('hi')\n1 / 0"})
        await client.call_tool("edit_cell_source", {"cell_index": 0, "old_string": "Seeds", "new_string": "Corpus"})
        await client.call_tool("read_notebook", {"notebook_name": "s", "response_format": "detailed"})
        await client.call_tool("execute_code", {"code": "import sys; sys.version", "timeout": 30})
        await client.call_tool("list_files", {"path": "", "max_depth": 2})
        await client.list_resources()
    for line in capture.read_bytes().splitlines():
        save("stdio_framing", line + b"\n")
        message = json.loads(line)
        if message.get("method") == "tools/call":
            save("tool_arguments", json.dumps(message["params"].get("arguments", {})).encode())
    saved = (jupyter.root / path).read_text()
    save("nbformat", saved.encode())


async def kernel_traffic(jupyter) -> None:
    kernel = jupyter.start_kernel()
    base = jupyter.url.replace("http", "ws") + f"/api/kernels/{kernel}/channels?session_id=seeds"
    headers = {"Authorization": f"token {jupyter.token}"}
    request = {
        "header": {"msg_id": uuid.uuid4().hex, "msg_type": "execute_request", "session": "seeds",
                   "username": "seeds", "version": "5.4", "date": "2026-11-30T00:00:00Z"},
        "parent_header": {}, "metadata": {}, "channel": "shell",
        "content": {"code": "print('x' * 40)\nfrom IPython.display import display\ndisplay({'a': 1}, raw=True)\n1/0",
                    "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False,
                    "stop_on_error": True},
    }
    for subprotocols in (["v1.kernel.websocket.jupyter.org"], None):
        async with websockets.connect(base, additional_headers=headers, subprotocols=subprotocols) as ws:
            if subprotocols:
                body = [json.dumps(request[k]).encode() for k in ("header", "parent_header", "metadata", "content")]
                channel = b"shell"
                offsets = [8 * 7]  # the count and six offsets come first
                for part in [channel, *body]:
                    offsets.append(offsets[-1] + len(part))
                frame = len(offsets).to_bytes(8, "little") + b"".join(o.to_bytes(8, "little") for o in offsets)
                await ws.send(frame + channel + b"".join(body))
            else:
                await ws.send(json.dumps(request))
            for _ in range(12):
                try:
                    frame = await asyncio.wait_for(ws.recv(), 10)
                except asyncio.TimeoutError:
                    break
                save("kernel_codecs", frame if isinstance(frame, bytes) else frame.encode())
    jupyter.request("DELETE", f"/api/kernels/{kernel}")


async def room_traffic(jupyter) -> None:
    path = f"room-{uuid.uuid4().hex[:6]}.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("a = 1"), nbformat.v4.new_markdown_cell("*text*")]
    (jupyter.root / path).write_text(nbformat.writes(nb))
    url = get_jupyter_notebook_websocket_url(jupyter.url, path, jupyter.token)
    async with websockets.connect(url) as watcher:
        peer = NbModelClient(url, path=path, username="seeds")
        await peer.start()
        await peer.wait_until_synced()
        peer.add_code_cell("b = 2")
        peer.set_cell_source(0, "a = 10")
        await asyncio.sleep(0.5)
        await peer.stop()
        # Our own step 1 makes the room send everything it has as a step 2.
        await watcher.send(bytes([0, 0, 1, 0]))
        for _ in range(20):
            try:
                message = await asyncio.wait_for(watcher.recv(), 2)
            except asyncio.TimeoutError:
                break
            if isinstance(message, bytes) and len(message) > 3 and message[0] == 0 and message[1] in (1, 2):
                # Skip the type bytes and the payload's length prefix: the fuzzer gets the update.
                payload = message[2:]
                length, shift, i = 0, 0, 0
                while True:
                    byte = payload[i]
                    length |= (byte & 0x7F) << shift
                    i += 1
                    if byte < 0x80:
                        break
                    shift += 7
                save("yjs_updates", payload[i:i + length])


async def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="jmcp-seeds-"))
    jupyter = start_jupyter(tmp)
    try:
        await mcp_traffic(jupyter, tmp)
        await kernel_traffic(jupyter)
        await room_traffic(jupyter)
    finally:
        stop_jupyter(jupyter)
        shutil.rmtree(tmp, ignore_errors=True)
    for folder in sorted(SEEDS.iterdir()):
        print(f"{folder.name}: {len(list(folder.iterdir()))} seeds")


if __name__ == "__main__":
    asyncio.run(main())
