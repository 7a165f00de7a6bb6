"""Extensions added, replaced and removed while the server runs (the management routes through the
`extension` subcommands, and the watched folder), clients told on both protocol eras; components
pulled from a real OCI registry (Debian's docker-registry on loopback), pinned by digest, and
checked against cosign-format signatures made with keys the test generates."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path

import anyio
import pytest
import requests
from mcp.shared.exceptions import MCPError

from conftest import (CACHE, extension_entry, guest, http_client, joined, serve, serve_guests, server_binary,
                      server_env, toml_str, wait_for_log)
from harness import free_port

pytestmark = pytest.mark.anyio

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
WASM_CONFIG = "application/vnd.wasm.config.v0+json"
WASM_LAYER = "application/wasm"
SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
TOOLS_CHANGED = "notifications/tools/list_changed"


def extension(server, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`jupyter-mcp-server extension ARGS` against a running server; its token in the environment,
    never on the command line."""
    done = subprocess.run([server_binary(), "extension", *args, "--server-url", server.base],
                          capture_output=True, text=True, timeout=300,
                          env=server_env({"MCP_TOKEN": server.token}))
    if check:
        assert done.returncode == 0, f"extension {' '.join(args)} failed:\n{done.stderr}"
    return done


def answer(done: subprocess.CompletedProcess) -> dict:
    return json.loads(done.stdout)


def lifecycle_copy(directory: Path, version: int, name: str = "lifecycle.wasm") -> Path:
    """A version of the test extension put in place whole (written aside, then renamed), as a
    deploy would, so no reader sees half a file."""
    target = directory / name
    aside = directory / f".{name}.part"
    shutil.copyfile(guest(f"lifecycle-v{version}"), aside)
    aside.rename(target)
    return target


class Watchers:
    """A 2025-11-25 session and a 2026-07-28 `listen` stream on one server, recording the change
    notifications each hears."""

    def __init__(self):
        self.legacy: list[str] = []
        self.modern: list[str] = []

    async def on_legacy(self, message):
        method = getattr(getattr(message, "root", message), "method", None)
        if method:
            self.legacy.append(method)

    @staticmethod
    async def wait(seen: list[str], method: str, count: int, what: str):
        deadline = time.monotonic() + 60
        while seen.count(method) < count:
            assert time.monotonic() < deadline, f"{what} heard {count} x {method}? it heard: {seen}"
            await anyio.sleep(0.05)

    async def both_heard(self, method: str, count: int):
        await self.wait(self.legacy, method, count, "legacy")
        await self.wait(self.modern, method, count, "listen")


@contextlib.asynccontextmanager
async def clients_of_both_eras(server):
    """A 2025-11-25 session and a 2026-07-28 client listening to the tool list and
    capabilities://, with what each hears recorded in the `Watchers`."""
    watchers = Watchers()
    async with http_client(server, "legacy", message_handler=watchers.on_legacy) as legacy, \
            http_client(server, "auto") as modern:
        async with modern.listen(tools_list_changed=True, resource_subscriptions=["capabilities://"]) as stream:
            async def record():
                async for event in stream:
                    # Typed events: ToolsListChanged(), ResourceUpdated(uri=...).
                    is_tools = type(event).__name__ == "ToolsListChanged"
                    watchers.modern.append(TOOLS_CHANGED if is_tools else str(event))

            async with anyio.create_task_group() as group:
                group.start_soon(record)
                yield legacy, modern, watchers
                group.cancel_scope.cancel()


async def call_text(client, name: str, arguments: dict | None = None) -> str:
    result = await client.call_tool(name, arguments or {})
    assert not result.is_error, joined(result)
    return joined(result)


async def tool_names(client) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


async def capability(client, name: str) -> dict | None:
    contents = (await client.read_resource("capabilities://")).contents
    declared = json.loads(contents[0].text)["declared"]
    return next((c for c in declared if c["name"] == name), None)


async def test_reload_and_remove_while_clients_are_connected(jupyter_server, tmp_path):
    """A guest loaded at start is replaced by its next version (the new version's tools answer; a
    call in flight on the old one completes; the operator's capability value stays) and then
    removed (its tools gone); a 2025-11-25 session and a 2026-07-28 `listen` stream both hear
    each change of the tool list, and capabilities:// changes with it."""
    component = lifecycle_copy(tmp_path, 1)
    config = tmp_path / "server.toml"
    config.write_text(f"cache_dir = {toml_str(CACHE)}\n[capabilities]\n\"lifecycle.feature\" = false\n"
                      + extension_entry(component))
    server = serve_guests(jupyter_server, "--config", str(config))
    try:
        async with clients_of_both_eras(server) as (legacy, modern, watchers):
            assert await call_text(legacy, "lifecycle_version") == "lifecycle version 1"
            feature = await capability(legacy, "lifecycle.feature")
            assert (feature["enabled"], feature["source"]) == (False, "config"), feature

            slow: dict = {}
            async with anyio.create_task_group() as group:
                async def slow_call():
                    slow["text"] = await call_text(legacy, "lifecycle_slow", {"ms": 20000})

                group.start_soon(slow_call)
                # The call is in the old guest before the reload starts.
                await anyio.to_thread.run_sync(
                    lambda: wait_for_log(server, "lifecycle version 1 sleeping 20000 ms", timeout=60))
                lifecycle_copy(tmp_path, 2)
                reloaded = answer(await anyio.to_thread.run_sync(
                    lambda: extension(server, "reload", "lifecycle")))["extension"]
                assert reloaded["name"] == "lifecycle"
                assert "lifecycle_v2_only" in reloaded["tools"], reloaded
                # New calls go to the new version at once, while the old one still sleeps.
                assert await call_text(modern, "lifecycle_version") == "lifecycle version 2"
                assert await call_text(legacy, "lifecycle_v2_only") == "lifecycle version 2"
                assert "text" not in slow, "the reload and the new calls took longer than the slow call"
            assert slow["text"] == "lifecycle version 1 slept 20000 ms", slow
            await watchers.both_heard(TOOLS_CHANGED, 1)
            assert "lifecycle_v2_only" in await tool_names(modern)

            # The operator's value survives the reload; the declaration is the new one.
            feature = await capability(legacy, "lifecycle.feature")
            assert (feature["enabled"], feature["source"]) == (False, "config"), feature
            assert "version 2" in feature["description"], feature

            listed = answer(extension(server, "list"))["extensions"]
            assert [e["name"] for e in listed] == ["lifecycle"], listed
            assert listed[0]["source"] == str(component)

            removed = answer(await anyio.to_thread.run_sync(
                lambda: extension(server, "remove", "lifecycle")))
            assert removed["success"] is True
            await watchers.both_heard(TOOLS_CHANGED, 2)
            assert not {n for n in await tool_names(legacy) if n.startswith("lifecycle")}
            assert not {n for n in await tool_names(modern) if n.startswith("lifecycle")}
            assert await capability(modern, "lifecycle.feature") is None
            assert any("capabilities://" in e for e in watchers.modern), watchers.modern
            with pytest.raises(MCPError):
                await legacy.call_tool("lifecycle_version", {})

            # Removing what is not there names what is.
            missing = extension(server, "remove", "lifecycle", check=False)
            assert missing.returncode != 0
            assert "no extension 'lifecycle' is loaded (loaded: none)" in missing.stderr, missing.stderr
            # The server serves on.
            assert "list_kernels" in await tool_names(legacy)
    finally:
        server.stop()


async def test_hot_add_with_config_entries_and_refusals(jupyter_server, tmp_path):
    """`extension add` into a server started without guests, with `--config-entry` lines; a second
    add of the same extension, a file that is no component and an unauthenticated request are
    refused with what to do, and the server keeps serving."""
    server = serve(jupyter_server)
    watchers = Watchers()
    try:
        async with http_client(server, "legacy", message_handler=watchers.on_legacy) as client:
            before = await tool_names(client)
            component = lifecycle_copy(tmp_path, 1)
            added = answer(await anyio.to_thread.run_sync(lambda: extension(
                server, "add", str(component), "--config-entry", "limits.memory_mb = 64",
                "--config-entry", 'config = { note = "hi" }')))["extension"]
            assert sorted(added["tools"]) == ["lifecycle_slow", "lifecycle_version"], added
            assert added["capabilities"][0]["name"] == "lifecycle.feature"
            await Watchers.wait(watchers.legacy, TOOLS_CHANGED, 1, "legacy")
            assert await tool_names(client) == before | {"lifecycle_slow", "lifecycle_version"}
            assert await call_text(client, "lifecycle_version") == "lifecycle version 1"

            again = extension(server, "add", str(lifecycle_copy(tmp_path, 2, "other.wasm")), check=False)
            assert again.returncode != 0
            assert "extension 'lifecycle' is loaded already" in again.stderr, again.stderr
            assert "extension reload lifecycle" in again.stderr

            junk = tmp_path / "junk.wasm"
            junk.write_bytes(b"not a component")
            refused = extension(server, "add", str(junk), check=False)
            assert refused.returncode != 0
            assert "not a WebAssembly file" in refused.stderr, refused.stderr

            bad_entry = extension(server, "add", str(component), "--config-entry", "grants = [", check=False)
            assert bad_entry.returncode != 0 and "not TOML" in bad_entry.stderr, bad_entry.stderr

            nobody = requests.get(server.base + "/api/extensions", timeout=10)
            assert nobody.status_code == 401, nobody.text
            # Still version 1, still answering.
            assert await call_text(client, "lifecycle_version") == "lifecycle version 1"
    finally:
        server.stop()


async def test_watched_folder_loads_reloads_and_unloads(jupyter_server, tmp_path):
    """--extensions-dir: a component put there is loaded, a new version put in its place is
    reloaded, and removing the file unloads it; a connected client hears each change."""
    folder = tmp_path / "extensions"
    folder.mkdir()
    config = tmp_path / "server.toml"
    config.write_text(f"cache_dir = {toml_str(CACHE)}\n")
    server = serve(jupyter_server, "--config", str(config), "--extensions-dir", str(folder))
    try:
        async with clients_of_both_eras(server) as (client, modern, watchers):
            lifecycle_copy(folder, 1)
            await watchers.both_heard(TOOLS_CHANGED, 1)
            assert await call_text(client, "lifecycle_version") == "lifecycle version 1"

            lifecycle_copy(folder, 2)
            await watchers.both_heard(TOOLS_CHANGED, 2)
            assert await call_text(modern, "lifecycle_version") == "lifecycle version 2"
            assert "lifecycle_v2_only" in await tool_names(client)

            (folder / "lifecycle.wasm").unlink()
            await watchers.both_heard(TOOLS_CHANGED, 3)
            assert not {n for n in await tool_names(client) if n.startswith("lifecycle")}
            assert not {n for n in await tool_names(modern) if n.startswith("lifecycle")}

            # A broken file is reported and costs nothing else.
            (folder / "broken.wasm").write_bytes(b"\0asm broken")
            await anyio.to_thread.run_sync(
                lambda: wait_for_log(server, "broken.wasm in the extensions folder was not loaded", timeout=30))
            assert "list_kernels" in await tool_names(client)
    finally:
        server.stop()


# ---- a real OCI registry on loopback ----

class Registry:
    """Debian's docker-registry (the CNCF distribution registry) on a free loopback port, with
    storage in a temporary folder; pushes go over its HTTP API, as an OCI client sends them."""

    def __init__(self, binary: str, root: Path):
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.base = f"http://{self.host}"
        config = root / "registry.yml"
        config.write_text(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
            f"    rootdirectory: {root / 'storage'}\n  delete:\n    enabled: true\n"
            f"http:\n  addr: {self.host}\n")
        self.log = root / "registry.log"
        self.process = subprocess.Popen([binary, "serve", str(config)], stdin=subprocess.DEVNULL,
                                        stdout=open(self.log, "wb"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            assert self.process.poll() is None, f"the registry exited: {self.log.read_text()}"
            try:
                if requests.get(self.base + "/v2/", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, "the registry did not start"
            time.sleep(0.05)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()

    def push_blob(self, repository: str, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        started = requests.post(f"{self.base}/v2/{repository}/blobs/uploads/", timeout=30)
        assert started.status_code == 202, started.text
        location = urllib.parse.urljoin(self.base, started.headers["Location"])
        joiner = "&" if "?" in location else "?"
        put = requests.put(f"{location}{joiner}digest={digest}", data=data, timeout=60,
                           headers={"Content-Type": "application/octet-stream"})
        assert put.status_code == 201, put.text
        return digest

    def push_manifest(self, repository: str, reference: str, manifest: dict) -> str:
        body = json.dumps(manifest).encode()
        put = requests.put(f"{self.base}/v2/{repository}/manifests/{reference}", data=body, timeout=30,
                           headers={"Content-Type": OCI_MANIFEST})
        assert put.status_code == 201, put.text
        return "sha256:" + hashlib.sha256(body).hexdigest()

    def push_component(self, repository: str, tag: str, wasm: bytes) -> str:
        """A component as `wkg oci push` publishes it: a wasm config and one `application/wasm`
        layer. Returns the manifest digest."""
        layer = self.push_blob(repository, wasm)
        config = json.dumps({"created": "2026-01-01T00:00:00Z", "architecture": "wasm", "os": "wasip2",
                             "layerDigests": [layer]}).encode()
        manifest = {
            "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": WASM_CONFIG,
            "config": {"mediaType": WASM_CONFIG, "digest": self.push_blob(repository, config), "size": len(config)},
            "layers": [{"mediaType": WASM_LAYER, "digest": layer, "size": len(wasm)}],
        }
        return self.push_manifest(repository, tag, manifest)

    def sign(self, repository: str, digest: str, key) -> None:
        """A cosign signature of a manifest digest: the simple-signing payload under the tag
        `sha256-<hex>.sig`, its ECDSA P-256 signature in the layer's annotation."""
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        payload = json.dumps({"critical": {"identity": {"docker-reference": f"{self.host}/{repository}"},
                                           "image": {"docker-manifest-digest": digest},
                                           "type": "cosign container image signature"},
                              "optional": None}).encode()
        signature = base64.b64encode(key.sign(payload, ec.ECDSA(hashes.SHA256()))).decode()
        config = json.dumps({"architecture": "", "os": "", "config": {}, "rootfs": {"type": "layers",
                                                                                    "diff_ids": []}}).encode()
        manifest = {
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": self.push_blob(repository, config), "size": len(config)},
            "layers": [{"mediaType": SIMPLE_SIGNING, "digest": self.push_blob(repository, payload),
                        "size": len(payload), "annotations": {SIGNATURE_ANNOTATION: signature}}],
        }
        self.push_manifest(repository, digest.replace(":", "-", 1) + ".sig", manifest)


@pytest.fixture
def registry(tmp_path):
    binary = os.environ.get("JUPYTER_MCP_REGISTRY_BIN")
    if not binary:
        pytest.skip("no OCI registry: install Debian's docker-registry (tests/ensure-registry does it as root)")
    root = Path(tempfile.mkdtemp(prefix="jmcp-registry-", dir=tmp_path))
    registry = Registry(binary, root)
    try:
        yield registry
    finally:
        registry.stop()


def key_pair(directory: Path, name: str):
    """An ECDSA P-256 key as `cosign generate-key-pair` makes one; its public half as PEM."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    public = directory / f"{name}.pub"
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return key, public


async def test_oci_by_tag_pinned_by_digest_and_tampering_refused(jupyter_server, tmp_path, registry):
    """A component pushed to a real registry loads by tag; the digest the tag resolved to is logged
    and written beside the config, so a later start gets the same bytes after the tag moved; a
    digest reference loads exactly that; a digest the registry does not hold and a cached copy
    changed on disk are refused (the latter pulled again)."""
    v1 = registry.push_component("ext/lifecycle", "1.0", guest("lifecycle-v1").read_bytes())
    reference = f"oci://{registry.host}/ext/lifecycle:1.0"
    cache = tmp_path / "cache"
    config = tmp_path / "server.toml"
    config.write_text(f"cache_dir = {toml_str(cache)}\n[[extension]]\npath = {toml_str(reference)}\n")
    server = serve_guests(jupyter_server, "--config", str(config))
    try:
        log = wait_for_log(server, f"{reference} resolved to {v1}")
        assert "JUPYTER_MCP_REGISTRY_PASSWORD" not in log
        lock = (tmp_path / "server.lock").read_text()
        assert reference in lock and v1 in lock, lock
        async with http_client(server, "legacy") as client:
            assert await call_text(client, "lifecycle_version") == "lifecycle version 1"
        listed = answer(extension(server, "list"))["extensions"][0]
        assert (listed["source"], listed["digest"]) == (reference, v1), listed
    finally:
        server.stop()

    # The tag moves to version 2; the lock file keeps the next start on version 1's bytes, and a
    # cached copy changed on disk is not used.
    v2 = registry.push_component("ext/lifecycle", "1.0", guest("lifecycle-v2").read_bytes())
    blobs = list((cache / "oci" / "blobs").glob("*.wasm"))
    assert len(blobs) == 1, blobs
    blobs[0].write_bytes(blobs[0].read_bytes()[:-1] + b"\0")
    server = serve_guests(jupyter_server, "--config", str(config))
    try:
        wait_for_log(server, f"the cached copy of {v1} was changed on disk; pulling it again")
        async with http_client(server, "legacy") as client:
            assert await call_text(client, "lifecycle_version") == "lifecycle version 1"
            # `extension reload` asks the registry again: the tag now names version 2.
            reloaded = answer(extension(server, "reload", "lifecycle"))["extension"]
            assert reloaded["digest"] == v2, reloaded
            assert await call_text(client, "lifecycle_version") == "lifecycle version 2"
            assert v2 in (tmp_path / "server.lock").read_text()

            # By digest: exactly those bytes (here, version 1 again, under another name).
            extension(server, "remove", "lifecycle")
            pinned = answer(extension(server, "add", f"oci://{registry.host}/ext/lifecycle@{v1}"))["extension"]
            assert pinned["digest"] == v1
            assert await call_text(client, "lifecycle_version") == "lifecycle version 1"

            # A digest the registry does not hold (one character changed) is refused.
            tampered = v1[:-1] + ("0" if v1[-1] != "0" else "1")
            refused = extension(server, "add", f"oci://{registry.host}/ext/lifecycle@{tampered}", check=False)
            assert refused.returncode != 0
            assert "the registry 127.0.0.1" in refused.stderr, refused.stderr
            no_registry = extension(server, "add", "oci://lifecycle:1.0", check=False)
            assert "names no registry host" in no_registry.stderr, no_registry.stderr
            assert await call_text(client, "lifecycle_version") == "lifecycle version 1"
    finally:
        server.stop()


async def test_signatures_required_against_a_registry(jupyter_server, tmp_path, registry):
    """With trusted_keys and require_signatures: a component signed with a trusted key loads (at
    start and by `extension add`); an unsigned one and one signed with another key are refused,
    naming the component and the key set; a local file needs its `FILE.sig`."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    trusted, trusted_pub = key_pair(tmp_path, "trusted")
    stranger, _ = key_pair(tmp_path, "stranger")
    signed = registry.push_component("ext/signed", "1", guest("lifecycle-v1").read_bytes())
    registry.sign("ext/signed", signed, trusted)
    registry.push_component("ext/unsigned", "1", guest("lifecycle-v2").read_bytes())
    wrongly = registry.push_component("ext/wrongly", "1", guest("lifecycle-v2").read_bytes())
    registry.sign("ext/wrongly", wrongly, stranger)

    config = tmp_path / "server.toml"
    config.write_text(f"cache_dir = {toml_str(tmp_path / 'cache')}\n"
                      f"trusted_keys = [{toml_str(trusted_pub.name)}]\nrequire_signatures = true\n"
                      f"[[extension]]\npath = {toml_str(f'oci://{registry.host}/ext/signed:1')}\n")
    server = serve_guests(jupyter_server, "--config", str(config))
    try:
        async with http_client(server, "legacy") as client:
            assert await call_text(client, "lifecycle_version") == "lifecycle version 1"
            listed = answer(extension(server, "list"))["extensions"][0]
            assert listed["signed_by"] == str(trusted_pub), listed
            extension(server, "remove", "lifecycle")

            unsigned = extension(server, "add", f"oci://{registry.host}/ext/unsigned:1", check=False)
            assert unsigned.returncode != 0
            assert "ext/unsigned:1 carries no signature" in unsigned.stderr, unsigned.stderr
            assert "require_signatures = true" in unsigned.stderr and str(trusted_pub) in unsigned.stderr

            wrong = extension(server, "add", f"oci://{registry.host}/ext/wrongly:1", check=False)
            assert wrong.returncode != 0
            assert "no signature verifies with a trusted key" in wrong.stderr, wrong.stderr

            # A local file: refused without FILE.sig, loaded with a `cosign sign-blob` signature.
            local = lifecycle_copy(tmp_path, 2)
            bare = extension(server, "add", str(local), check=False)
            assert "carries no signature" in bare.stderr, bare.stderr
            signature = trusted.sign(local.read_bytes(), ec.ECDSA(hashes.SHA256()))
            Path(f"{local}.sig").write_text(base64.b64encode(signature).decode())
            added = answer(extension(server, "add", str(local)))["extension"]
            assert added["signed_by"] == str(trusted_pub), added
            assert await call_text(client, "lifecycle_version") == "lifecycle version 2"
    finally:
        server.stop()


async def test_a_hook_handler_is_reloaded_in_place_removed_and_added(jupyter_server, tmp_path):
    """The policy guest (a critical hook handler) keeps guarding across a reload, stops guarding
    when removed, and guards again when added at run time with its config as --config-entry."""
    policy = tmp_path / "policy.wasm"
    shutil.copyfile(guest("policy"), policy)
    config = tmp_path / "server.toml"
    config.write_text(f"cache_dir = {toml_str(CACHE)}\n"
                      + extension_entry(policy, {"deny": ["forbidden"]}))
    server = serve_guests(jupyter_server, "--config", str(config))
    try:
        async with http_client(server, "legacy") as client:
            async def refused() -> bool:
                result = await client.call_tool("execute_code", {"code": "print('forbidden')"})
                if result.is_error:
                    assert "refused by hook handler 'policy'" in joined(result), joined(result)
                return result.is_error

            assert await refused()
            reloaded = answer(extension(server, "reload", "policy"))["extension"]
            assert reloaded["hook_handler"] is True, reloaded
            assert await refused(), "the reloaded policy guards in its place"
            extension(server, "remove", "policy")
            assert not await refused(), "a removed policy guards nothing"
            extension(server, "add", str(policy), "--config-entry", 'config = { deny = ["forbidden"] }')
            assert await refused(), "the policy added at run time guards again"
    finally:
        server.stop()
