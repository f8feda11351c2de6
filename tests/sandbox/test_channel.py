"""The attach-socket framing: JSON lines in, multiplexed frames out. No Docker (a socketpair)."""
import socket
import struct
import threading

import pytest

from sandbox.channel import Channel, ChannelError


def frame(stream: int, payload: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + struct.pack(">I", len(payload)) + payload


def test_demultiplexes_split_frames_and_keeps_stderr_apart():
    ours, theirs = socket.socketpair()
    ch = Channel(ours)
    data = frame(2, b"runner warning\n") + frame(1, b'{"a": 1}\n{"b"') + frame(1, b": 2}\n")

    def feed():
        for i in range(0, len(data), 3):  # dribble the bytes in: frames split anywhere
            theirs.sendall(data[i:i + 3])

    threading.Thread(target=feed).start()
    assert ch.recv(5) == {"a": 1}
    assert ch.recv(5) == {"b": 2}
    assert b"runner warning" in ch.stderr_tail
    ch.send({"op": "ping"})
    assert theirs.recv(100) == b'{"op": "ping"}\n'
    ch.close()
    theirs.close()


def test_timeout_eof_and_garbage_are_channel_errors():
    ours, theirs = socket.socketpair()
    ch = Channel(ours)
    with pytest.raises(ChannelError, match="no answer"):
        ch.recv(0.2)
    theirs.sendall(frame(1, b"not json\n"))
    with pytest.raises(ChannelError, match="garbled"):
        ch.recv(1)
    theirs.sendall(frame(2, b"Traceback: boom"))
    theirs.close()
    with pytest.raises(ChannelError, match="closed the stream.*boom"):
        ch.recv(1)


def test_large_line_in_many_chunks_decodes():
    """A 30 MiB answer split into 40,000-byte frames, sent in 64 KiB chunks (frame and chunk borders
    never line up), followed by a second answer in the same chunk as the first one's end."""
    ours, theirs = socket.socketpair()
    ch = Channel(ours)
    body = "ab" * (15 << 20)
    line = ('{"stdout_b64": "' + body + '"}\n{"next": 2}\n').encode()
    data = bytearray()
    for i in range(0, len(line), 40_000):
        data += frame(1, line[i:i + 40_000])
        if i == 40_000 * 100:
            data += frame(2, b"noise")  # stderr interleaved: not part of the line
    data = bytes(data)

    def feed():
        for i in range(0, len(data), 64 << 10):
            theirs.sendall(data[i:i + (64 << 10)])

    feeder = threading.Thread(target=feed)
    feeder.start()
    got = ch.recv(60)
    assert len(got["stdout_b64"]) == len(body) and got["stdout_b64"] == body
    assert ch.recv(5) == {"next": 2}
    assert ch.stderr_tail == b"noise"
    feeder.join()
    ch.close()
    theirs.close()
