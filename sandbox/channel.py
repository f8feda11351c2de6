"""JSON lines over a Docker attach socket: the one round trip per submission.

The container's stdin is a plain byte stream; its stdout and stderr come back multiplexed in frames
(8-byte header: stream id, 3 zero bytes, big-endian length) because the container has no TTY.
"""
from __future__ import annotations

import json
import logging
import socket
import struct
import time

log = logging.getLogger(__name__)


class ChannelError(Exception):
    """The runner did not answer properly: EOF, timeout or garbage. Always an infrastructure fault."""


class Channel:
    def __init__(self, sock, name: str = "sandbox"):
        self.sock: socket.socket = getattr(sock, "_sock", sock)  # docker-py hands out a SocketIO wrapper
        self._owner = sock  # keep the wrapper alive: closing it would close the socket
        self.name = name
        self._raw = b""  # undecoded frame bytes
        self._out = b""  # demultiplexed stdout not yet split into lines
        self.stderr_tail = b""  # the runner's own stderr (never program output), for diagnostics

    def send(self, obj: dict) -> None:
        data = (json.dumps(obj) + "\n").encode()
        try:
            self.sock.settimeout(30)
            self.sock.sendall(data)
        except OSError as exc:
            raise ChannelError(f"{self.name}: send failed: {exc}") from exc

    def recv(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._out:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelError(f"{self.name}: no answer within {timeout:.1f}s")
            try:
                self.sock.settimeout(left)
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                continue
            except OSError as exc:
                raise ChannelError(f"{self.name}: receive failed: {exc}") from exc
            if not chunk:
                raise ChannelError(f"{self.name}: runner closed the stream{self._stderr_hint()}")
            self._raw += chunk
            self._demux()
        line, _, self._out = self._out.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError as exc:
            raise ChannelError(f"{self.name}: garbled answer {line[:200]!r}") from exc

    def _demux(self) -> None:
        while len(self._raw) >= 8:
            stream, size = self._raw[0], struct.unpack(">I", self._raw[4:8])[0]
            if len(self._raw) < 8 + size:
                return
            payload, self._raw = self._raw[8:8 + size], self._raw[8 + size:]
            if stream == 1:
                self._out += payload
            else:
                self.stderr_tail = (self.stderr_tail + payload)[-4096:]

    def _stderr_hint(self) -> str:
        text = self.stderr_tail.decode("utf-8", "replace").strip()
        return f" (stderr: {text[-300:]})" if text else ""

    def close(self) -> None:
        for obj in (self.sock, self._owner):
            try:
                obj.close()
            except Exception:
                pass
