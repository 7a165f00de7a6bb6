"""Real Jupyter gateways on loopback for the gateway tests and benchmark: Jupyter Enterprise Gateway
and Jupyter Kernel Gateway, each from its own venv (`tests/ensure-gateways`), and a Jupyter Server
that hands its kernels to one (`--GatewayClient.url`)."""

from __future__ import annotations

import os
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from harness import JupyterServer, free_port, json_request, start_jupyter, stop_process, wait_ready

HERE = Path(__file__).resolve().parent


def gateway_venvs() -> tuple[Path, Path]:
    """(Enterprise Gateway's venv, Kernel Gateway's venv), from what `tests/run` exported, else
    installed now by `tests/ensure-gateways`."""
    enterprise = os.environ.get("JUPYTER_MCP_ENTERPRISE_GATEWAY_VENV")
    kernel = os.environ.get("JUPYTER_MCP_KERNEL_GATEWAY_VENV")
    if not (enterprise and kernel):
        lines = subprocess.run([str(HERE / "ensure-gateways")], check=True, capture_output=True,
                               text=True).stdout.split()
        enterprise, kernel = lines[0], lines[1]
    return Path(enterprise), Path(kernel)


@dataclass
class Gateway:
    """A gateway process serving kernels on a loopback port."""

    kind: str
    url: str
    token: str
    process: subprocess.Popen
    log: Path

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
        return json_request(self.url + path, self.token, method, body)

    def start_kernel(self, name: str = "python3") -> str:
        status, model = self.request("POST", "/api/kernels", {"name": name})
        assert status == 201, model
        return model["id"]

    def kernel_ids(self) -> set[str]:
        status, kernels = self.request("GET", "/api/kernels")
        assert status == 200, kernels
        return {k["id"] for k in kernels}

    def stop(self) -> None:
        stop_process(self.process)


def _start(kind: str, venv: Path, tmp: Path, argv: list[str], token: str, token_variable: str,
           port: int, data_dir: Path | None, env: dict[str, str] | None = None) -> Gateway:
    tmp.mkdir(parents=True, exist_ok=True)
    environment = dict(os.environ, **(env or {}))
    # The kernelspecs' argv says `python`: the gateway's own, with its ipykernel.
    environment["PATH"] = f"{venv / 'bin'}:{environment.get('PATH', '')}"
    environment["JUPYTER_RUNTIME_DIR"] = str(tmp / "rt")
    environment[token_variable] = token
    if data_dir:
        # More kernelspecs beside the venv's own.
        environment["JUPYTER_PATH"] = str(data_dir)
    log = tmp / f"{kind}.log"
    process = subprocess.Popen(argv, cwd=tmp, env=environment, stdin=subprocess.DEVNULL,
                               stdout=open(log, "ab"), stderr=subprocess.STDOUT)
    gateway = Gateway(kind=kind, url=f"http://127.0.0.1:{port}", token=token, process=process, log=log)
    wait_ready(process, lambda: gateway.request("GET", "/api/kernelspecs")[0] == 200, kind, log, 90)
    return gateway


def start_enterprise_gateway(tmp: Path, *traitlets: str, port: int | None = None,
                             refuse_root: bool = False, token: str | None = None,
                             data_dir: Path | None = None, env: dict[str, str] | None = None) -> Gateway:
    """Enterprise Gateway 3.3.0 on loopback. It refuses `root` by default (`unauthorized_users`):
    these tests run as root, so that is lifted unless `refuse_root`; `list_kernels` is on."""
    venv, _ = gateway_venvs()
    port = port or free_port()
    token = token or uuid.uuid4().hex
    argv = [str(venv / "bin" / "jupyter-enterprisegateway"), "--ip=127.0.0.1", f"--port={port}",
            "--port_retries=0", "--EnterpriseGatewayApp.list_kernels=True", *traitlets]
    if not refuse_root:
        argv.append("--EnterpriseGatewayApp.unauthorized_users=set()")
    gateway = _start("enterprise-gateway", venv, tmp, argv, token, "EG_AUTH_TOKEN", port, data_dir, env)
    return gateway


def start_kernel_gateway(tmp: Path, *traitlets: str, port: int | None = None) -> Gateway:
    """Kernel Gateway 3.0.1 on loopback, in its default (Jupyter websocket) mode."""
    _, venv = gateway_venvs()
    port = port or free_port()
    token = uuid.uuid4().hex
    argv = [str(venv / "bin" / "jupyter-kernelgateway"), "--KernelGatewayApp.ip=127.0.0.1",
            f"--KernelGatewayApp.port={port}", "--KernelGatewayApp.port_retries=0",
            "--JupyterWebsocketPersonality.list_kernels=True", *traitlets]
    return _start("kernel-gateway", venv, tmp, argv, token, "KG_AUTH_TOKEN", port, None)


def start_jupyter_on_gateway(tmp: Path, gateway: Gateway) -> JupyterServer:
    """A Jupyter Server of the test venv whose kernels live on `gateway` (its token from the
    environment, as an operator would keep it off the command line)."""
    env = dict(os.environ, JUPYTER_GATEWAY_AUTH_TOKEN=gateway.token)
    return start_jupyter(tmp, extra=[f"--GatewayClient.url={gateway.url}"], env=env)
