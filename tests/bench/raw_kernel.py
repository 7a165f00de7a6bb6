"""The floor: a minimal kernel websocket client without the Nagle stall.

It speaks Jupyter's JSON websocket protocol over a plain socket, sets TCP_NODELAY, and re-arms
TCP_QUICKACK after every read (Linux clears it by itself), so the server's small frames are
acknowledged at once. Measuring with it gives the round trip a client can reach at best.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import socket
import struct
import uuid
from urllib.parse import urlparse

QUICKACK = getattr(socket, "TCP_QUICKACK", None)


class RawKernelClient:
    def __init__(self, base_url: str, token: str, kernel_id: str, quickack: bool = True):
        url = urlparse(base_url)
        self.quickack = quickack and QUICKACK is not None
        self.session = uuid.uuid4().hex
        self.sock = socket.create_connection((url.hostname, url.port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        path = f"/api/kernels/{kernel_id}/channels?session_id={self.session}"
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {url.hostname}:{url.port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Authorization: token {token}\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._recv()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise RuntimeError(f"websocket upgrade refused: {head[:200]!r}")

    def _recv(self) -> bytes:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("socket closed")
        if self.quickack:
            self.sock.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)
        return data

    def _read_exact(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self.buffer += self._recv()
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def _read_frame(self) -> tuple[int, bytes]:
        b0, b1 = self._read_exact(2)
        length = b1 & 0x7F
        if length == 126:
            length = struct.unpack(">H", self._read_exact(2))[0]
        elif length == 127:
            length = struct.unpack(">Q", self._read_exact(8))[0]
        return b0 & 0x0F, self._read_exact(length)

    def _send_text(self, text: str) -> None:
        payload = text.encode()
        mask = os.urandom(4)
        header = bytes([0x81])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def _send_pong(self, payload: bytes) -> None:
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(bytes([0x8A, 0x80 | len(payload)]) + mask + masked)

    def execute(self, code: str) -> list[dict]:
        """Runs code; returns its iopub messages once both the reply and idle status arrived."""
        msg_id = uuid.uuid4().hex
        message = {
            "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "bench",
                       "session": self.session, "version": "5.4",
                       "date": datetime.datetime.now(datetime.timezone.utc).isoformat()},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True},
        }
        self._send_text(json.dumps(message))
        replied = idle = False
        outputs = []
        while not (replied and idle):
            opcode, payload = self._read_frame()
            if opcode == 0x9:
                self._send_pong(payload)
                continue
            if opcode not in (0x1, 0x2):
                continue
            if opcode == 0x2:  # legacy binary frame: u32 count, offsets, JSON, buffers
                count = struct.unpack(">I", payload[:4])[0]
                offsets = struct.unpack(f">{count}I", payload[4 : 4 + 4 * count])
                end = offsets[1] if count > 1 else len(payload)
                payload = payload[offsets[0] : end]
            msg = json.loads(payload)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["header"]["msg_type"]
            if kind == "execute_reply":
                replied = True
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                idle = True
            elif kind in ("stream", "execute_result", "display_data", "error"):
                outputs.append(msg)
        return outputs

    def close(self) -> None:
        self.sock.close()
