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
    """The runner did not answer properly: EOF, timeout or garbage (`timed_out` says which of these it
    was). The pool retries it on a fresh container; only a fault that repeats is the program's."""

    def __init__(self, message: str, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


class Channel:
    def __init__(self, sock, name: str = "sandbox"):
        self.sock: socket.socket = getattr(sock, "_sock", sock)  # docker-py hands out a SocketIO wrapper
        self._owner = sock  # keep the wrapper alive: closing it would close the socket
        self.name = name
        # Buffers grow by appending and are consumed through offsets, compacted only once a whole
        # frame or line has been taken out: receiving an n-byte answer in k chunks stays O(n + k).
        self._raw = bytearray()  # undecoded frame bytes (at most one partial frame between chunks)
        self._out = bytearray()  # demultiplexed stdout not yet split into lines
        self._scanned = 0  # self._out[:self._scanned] holds no b"\n"
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
        newline = self._out.find(b"\n", self._scanned)
        while newline < 0:
            self._scanned = len(self._out)
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelError(f"{self.name}: no answer within {timeout:.1f}s", timed_out=True)
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
            newline = self._out.find(b"\n", self._scanned)  # only the bytes added since the last look
        line = bytes(self._out[:newline])
        del self._out[:newline + 1]
        self._scanned = 0
        try:
            return json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise ChannelError(f"{self.name}: garbled answer {line[:200]!r}") from exc

    def _demux(self) -> None:
        raw, pos = self._raw, 0  # pos: start of the next undecoded frame
        with memoryview(raw) as view:  # payloads are copied once, straight into their stream
            while len(raw) - pos >= 8:
                stream, size = raw[pos], struct.unpack_from(">I", raw, pos + 4)[0]
                if len(raw) - pos - 8 < size:
                    break
                with view[pos + 8:pos + 8 + size] as payload:  # released before `raw` is resized
                    if stream == 1:
                        self._out += payload
                    else:
                        self.stderr_tail = (self.stderr_tail + bytes(payload[-4096:]))[-4096:]
                pos += 8 + size
        if pos:  # drop the consumed frames once per chunk, not once per frame
            del raw[:pos]

    def _stderr_hint(self) -> str:
        text = self.stderr_tail.decode("utf-8", "replace").strip()
        return f" (stderr: {text[-300:]})" if text else ""

    def close(self) -> None:
        for obj in (self.sock, self._owner):
            try:
                obj.close()
            except Exception:
                pass
