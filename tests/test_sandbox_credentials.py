"""kernel.sandbox's credentials: a sandboxed kernel's request to a credentialed host gets the
header from the operator's secret at the egress proxy, which terminates TLS with a certificate of
the server's authority (trusted through the kernel's CA bundle variables) and verifies the real
host against the machine's roots; the kernel's environment and the files it can read never hold
the value, nor does any log; plain HTTP to that host is refused; a host without a credential is
tunnelled untouched. And `hosts` and `credentials` changed in the config file apply to a running
kernel at its next connection, with no restart."""

from __future__ import annotations

import datetime
import ipaddress
import json
import subprocess
import time
from pathlib import Path

import pytest

from conftest import joined, server_binary
from test_sandbox import ON, Site, home, sandbox_env  # noqa: F401 (home: a fixture)

pytestmark = pytest.mark.anyio

SECRET = "sk-live-7b1f0c9e-credential-never-in-the-kernel"
FORGED = "Bearer forged-by-the-kernel"


def make_authority(dir: Path) -> tuple[Path, Path, Path]:
    """A test CA (the 'machine's roots' for the launcher) and a certificate for 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test root")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_file, cert_file, key_file = dir / "test-root.pem", dir / "site.pem", dir / "site.key"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return ca_file, cert_file, key_file


def credential_check(request) -> bytes:
    """Says whether the request carried the secret, never what it carried."""
    said = request.headers.get("Authorization")
    return {f"Bearer {SECRET}": b"authorized", None: b"no credential"}.get(said, b"wrong credential")


def checking_site(tls: tuple[Path, Path] | None = None) -> Site:
    return Site(tls=tls, answer=credential_check)


def config_text(hosts: list[str], credentialed: list[int]) -> str:
    text = "[kernel_sandbox]\nhosts = [" + ", ".join(json.dumps(h) for h in hosts) + "]\n"
    for port in credentialed:
        text += f'[[kernel_sandbox.credentials]]\nhost = "127.0.0.1:{port}"\nsecret = "SITE_TOKEN"\n'
    return text


def rewrite(config: Path, text: str) -> None:
    # A new size and a new time, whatever the file system's clock granularity.
    time.sleep(0.01)
    config.write_text(text + f"# {time.time_ns()}\n")


FETCH = r'''
import os, ssl, urllib.request, urllib.error
def fetch(url, headers=None, cafile=None):
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    request = urllib.request.Request(url, headers=headers or {})
    try:
        return urllib.request.urlopen(request, timeout=20, context=context).read().decode()
    except urllib.error.HTTPError as error:
        return f"HTTP {error.code} {error.read().decode().strip()}"
    except Exception as error:
        return f"FAILED {type(error).__name__}: {error}"
'''


def found_in_files(roots: list[str]) -> str:
    """Kernel code: every readable file under `roots` searched for the secret."""
    # Reversed in the code, so the code itself (kept in IPython's history) does not hold it.
    return (f"secret = {SECRET[::-1]!r}[::-1]\nhits = []\n"
            f"for root in {roots!r}:\n"
            "    for dirpath, _, files in os.walk(root):\n"
            "        for name in files:\n"
            "            try:\n"
            "                if secret.encode() in open(os.path.join(dirpath, name), 'rb').read():\n"
            "                    hits.append(os.path.join(dirpath, name))\n"
            "            except OSError:\n"
            "                pass\n"
            "print('files holding it:', hits)\n"
            "print('environment holds it:', secret in repr(dict(os.environ)) or secret.encode() in open('/proc/self/environ', 'rb').read())\n")


async def test_a_credential_is_added_at_the_proxy_and_never_seen_by_the_kernel(tmp_path, home):  # noqa: F811
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    root = tmp_path / "root"
    root.mkdir()
    ca_file, cert_file, key_file = make_authority(tmp_path)
    credentialed, plain, tunnelled, later = (checking_site((cert_file, key_file)), checking_site(),
                                            checking_site((cert_file, key_file)),
                                            checking_site())
    secrets_file = tmp_path / "secrets.json"
    env = sandbox_env(tmp_path, home, {"SSL_CERT_FILE": str(ca_file), "JUPYTER_MCP_SECRETS_FILE": str(secrets_file)})
    subprocess.run([server_binary(), "secret", "set", "SITE_TOKEN"], input=SECRET, text=True, env=env,
                   check=True, capture_output=True, timeout=30)
    config = tmp_path / "config.toml"
    hosts = [f"127.0.0.1:{plain.port}", f"127.0.0.1:{tunnelled.port}"]
    rewrite(config, config_text(hosts, [credentialed.port, plain.port]))
    errlog = tmp_path / "server.log"
    params = StdioServerParameters(command=server_binary(), args=[*ON, "--config", str(config)], env=env,
                                   cwd=str(root))
    try:
        with open(errlog, "w") as err:
            async with Client(stdio_client(params, errlog=err), mode="legacy", read_timeout_seconds=300) as client:
                async def run(code: str) -> str:
                    return joined(await client.call_tool("execute_code", {"code": FETCH + code, "timeout": 60}))

                said = await run(
                    f"print('with', fetch('https://127.0.0.1:{credentialed.port}/a'))\n"
                    f"print('forged', fetch('https://127.0.0.1:{credentialed.port}/b', {{'Authorization': {FORGED!r}}}))\n"
                    f"print('clear', fetch('http://127.0.0.1:{plain.port}/c'))\n"
                    f"print('tunnel', fetch('https://127.0.0.1:{tunnelled.port}/d', cafile={str(ca_file)!r}))\n"
                    "print('bundle', os.environ.get('SSL_CERT_FILE'), os.environ.get('REQUESTS_CA_BUNDLE'))\n")
                assert "with authorized" in said, said
                assert "forged authorized" in said, "the kernel's own header is replaced: " + said
                assert "clear HTTP 403" in said and "only over HTTPS" in said, said
                assert "tunnel no credential" in said, said
                bundle = said.split("bundle ")[1].split()[0]
                assert bundle != str(ca_file) and said.split("bundle ")[1].split()[1] == bundle, said
                # The tunnelled host saw its own certificate's client and no credential.
                assert "authorization" not in tunnelled.headers[0]
                assert plain.headers == [], "plain HTTP to a credentialed host never left the proxy"
                assert [h["authorization"] for h in credentialed.headers] == [f"Bearer {SECRET}"] * 2

                # Nothing the kernel can read holds the value: its environment, its files, the
                # secrets file and the certificates' keys (hidden).
                # This test's whole tree: the root, the home, the sandbox's state and each
                # kernel's TMPDIR (all in the cache), and the secrets file (hidden).
                looked = await run(found_in_files([str(tmp_path)]) +
                                   f"try:\n    open({str(secrets_file)!r}).read(); print('read the secrets file')\n"
                                   "except OSError as error:\n    print('secrets file refused', type(error).__name__)\n")
                assert "files holding it: []" in looked, looked
                assert "environment holds it: False" in looked, looked
                assert "secrets file refused" in looked, looked

                # Changed while running: a host added, then a credential removed, with no restart.
                refused = await run(f"print('later', fetch('http://127.0.0.1:{later.port}/e'))")
                assert "later HTTP 403" in refused, refused
                rewrite(config, config_text(hosts + [f"127.0.0.1:{later.port}"], [plain.port]))
                deadline, reached = time.monotonic() + 15, ""
                while time.monotonic() < deadline:
                    reached = await run(
                        f"print('later', fetch('http://127.0.0.1:{later.port}/e'))\n"
                        f"print('dropped', fetch('https://127.0.0.1:{credentialed.port}/f'))\n")
                    if "later no credential" in reached:
                        break
                    time.sleep(0.5)
                assert "later no credential" in reached, reached
                # The credentialed host is no longer listed: refused, and never sent the secret.
                assert "dropped FAILED" in reached or "dropped HTTP 403" in reached, reached
                listed = joined(await client.call_tool("list_kernels", {}))
                assert listed.count("\n") >= 1
        log = errlog.read_text()
        assert SECRET not in log, "the secret's value reached the log"
        assert "re-read from" in log, log[-3000:]
        assert "SITE_TOKEN" in log, "the start log names the secret, not its value"
    finally:
        for site in (credentialed, plain, tunnelled, later):
            site.close()


def test_a_bad_credential_entry_stops_the_server_with_the_reason(tmp_path, home):  # noqa: F811
    env = sandbox_env(tmp_path, home)
    for entry, said in [('host = "*.example.org"\nsecret = "T"', "no wildcards"),
                        ('host = "api.example.org"\nsecret = "T"\nformat = "Bearer"', "exactly once"),
                        ('host = "api.example.org"\nsecret = "bad name!"', "not valid")]:
        config = tmp_path / "bad.toml"
        config.write_text(f"[kernel_sandbox]\n[[kernel_sandbox.credentials]]\n{entry}\n")
        done = subprocess.run([server_binary(), *ON, "--config", str(config)], env=env, capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode != 0 and said in done.stderr, done.stderr
