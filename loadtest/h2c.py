"""Cleartext HTTP/2 (prior knowledge) in the standard library alone: enough
of a client for loadtest's scripts to run a server's HTTP/2 path, which a load
balancer speaking HTTP/2 takes (Python's http.client speaks HTTP/1.1 only).

    sys.path.insert(0, LOADTEST_DIR); from h2c import H2c
    with H2c(port) as c:
        ids = [c.post("/mcp", body, headers) for _ in range(3)]   # multiplexed
        c.wait(ids, until="data")    # each has its first DATA (an SSE stream's first event)
        c.wait(ids, until="end")     # each has ended

Headers go as HPACK literals without indexing or Huffman coding; the server's
header blocks are not decoded (a stream's status is not read), so a test of
behaviour wants a real client: this one only drives a server's code paths.
"""
import socket
import struct

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7, 0x8
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
WINDOW = 1 << 30


def _integer(value, prefix_bits, first_byte=0):
    """An HPACK integer with a `prefix_bits` prefix (RFC 7541 §5.1)."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first_byte | value])
    out = bytearray([first_byte | limit])
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def _literal(name, value):
    """A header field as a literal without indexing, with a new name (§6.2.2)."""
    name, value = name.encode(), value.encode()
    return b"\x00" + _integer(len(name), 7) + name + _integer(len(value), 7) + value


class H2c:
    def __init__(self, port, timeout=120):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.authority = f"127.0.0.1:{port}"
        self.next_id = 1
        self.data = {}  # stream id -> bytes received
        self.ended = set()
        self.buffer = b""
        # Our settings: none changed; then a large connection window, so the
        # server never waits on us.
        self.sock.sendall(PREFACE + self._frame(SETTINGS, 0, 0, b""))
        self.sock.sendall(self._frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", WINDOW)))

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    @staticmethod
    def _frame(kind, flags, stream, payload):
        return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload

    def post(self, path, body, headers):
        """Opens a stream with a POST of `body` (bytes or str); its id."""
        stream, self.next_id = self.next_id, self.next_id + 2
        body = body.encode() if isinstance(body, str) else body
        block = b"".join(
            _literal(name, value)
            for name, value in [(":method", "POST"), (":scheme", "http"), (":path", path),
                                (":authority", self.authority), *headers.items()]
        )
        self.sock.sendall(self._frame(HEADERS, END_HEADERS, stream, block)
                          + self._frame(DATA, END_STREAM, stream, body))
        self.data[stream] = b""
        return stream

    def cancel(self, stream):
        """Resets `stream` (CANCEL), as a client that leaves does."""
        self.sock.sendall(self._frame(RST_STREAM, 0, stream, struct.pack(">I", 0x8)))
        self.ended.add(stream)

    def wait(self, streams, until="end"):
        """Reads frames until each of `streams` has had DATA (`until="data"`)
        or has ended (`"end"`: END_STREAM, or reset by the server)."""
        def done(stream):
            return stream in self.ended or (until == "data" and self.data.get(stream))
        while not all(done(s) for s in streams):
            self._read_frame()

    def _read_frame(self):
        while len(self.buffer) < 9:
            self._receive()
        length = int.from_bytes(self.buffer[:3], "big")
        kind, flags = self.buffer[3], self.buffer[4]
        stream = int.from_bytes(self.buffer[5:9], "big") & 0x7FFFFFFF
        while len(self.buffer) < 9 + length:
            self._receive()
        payload, self.buffer = self.buffer[9:9 + length], self.buffer[9 + length:]
        if kind == SETTINGS and not flags & ACK:
            self.sock.sendall(self._frame(SETTINGS, ACK, 0, b""))
        elif kind == PING and not flags & ACK:
            self.sock.sendall(self._frame(PING, ACK, 0, payload))
        elif kind == DATA:
            self.data[stream] = self.data.get(stream, b"") + payload
            if payload and not flags & END_STREAM:  # what was read may be sent again
                self.sock.sendall(self._frame(WINDOW_UPDATE, 0, stream, struct.pack(">I", len(payload))))
        elif kind == RST_STREAM:
            self.ended.add(stream)
        elif kind == GOAWAY:
            raise ConnectionError(f"the server sent GOAWAY ({payload[4:8].hex()})")
        if kind in (DATA, HEADERS) and flags & END_STREAM:
            self.ended.add(stream)

    def _receive(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buffer += chunk

    def close(self):
        self.sock.close()
