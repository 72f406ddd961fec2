#!/usr/bin/python3
"""Captures the record batches kcat (librdkafka) produces, for every codec.

A tiny listener that speaks just enough Kafka (ApiVersions v0-v3, Metadata v1,
Produce v3-v7; one topic "plog", one partition, this broker its leader)
and writes the records field of each Produce request to kcat-<codec>.bin.
Needs Debian kcat. Run from this directory: /usr/bin/python3 capture-kcat.py [PORT] (uses PORT..PORT+4)
"""
import socket
import struct
import subprocess
import sys
import threading

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 27413
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
# (api key, min, max) this listener offers; librdkafka uses magic 2 only when
# Fetch v4+ is offered too
# and (librdkafka <= 2.11) gzip, snappy and lz4 only when Produce v0 is
# offered: it checks codec support as "Produce in [0, 0]". Only Produce,
# Metadata and ApiVersions are ever called.
APIS = [(0, 0, 7), (1, 4, 11), (2, 0, 5), (3, 0, 1), (8, 0, 7), (9, 0, 5), (10, 0, 2),
        (11, 0, 5), (12, 0, 3), (13, 0, 3), (14, 0, 3), (15, 0, 4), (16, 0, 3),
        (17, 0, 1), (18, 0, 3), (19, 0, 4), (20, 0, 3), (22, 0, 2), (36, 0, 1)]


def s16(v):
    return struct.pack(">h", v)


def s32(v):
    return struct.pack(">i", v)


def string(v):
    b = v.encode()
    return s16(len(b)) + b


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        v = self.data[self.pos:self.pos + n]
        self.pos += n
        return v

    def i16(self):
        return struct.unpack(">h", self.take(2))[0]

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def string(self):
        n = self.i16()
        return None if n < 0 else self.take(n).decode()


def api_versions(version):
    if version < 3:
        body = s16(0) + s32(len(APIS))
        for key, lo, hi in APIS:
            body += s16(key) + s16(lo) + s16(hi)
        return body + (s32(0) if version >= 1 else b"")
    # v3 is flexible: compact array (count + 1), a tag buffer per entry
    body = s16(0) + bytes([len(APIS) + 1])
    for key, lo, hi in APIS:
        body += s16(key) + s16(lo) + s16(hi) + b"\x00"
    return body + s32(0) + b"\x00"


def metadata(r):
    n = r.i32()
    names = [r.string() for _ in range(max(n, 0))] or ["plog"]
    body = s32(1) + s32(1) + string("127.0.0.1") + s32(PORT) + s16(-1)  # broker, null rack
    body += s32(1) + s32(len(names))  # controller id
    for name in names:
        body += s16(0) + string(name) + b"\x00" + s32(1)
        body += s16(0) + s32(0) + s32(1) + s32(1) + s32(1) + s32(1) + s32(1)
    return body


def produce(r, version, out):
    if version >= 3:
        r.string()  # transactional id
    r.i16()  # acks
    r.i32()  # timeout
    body = b""
    topics = r.i32()
    body += s32(topics)
    for _ in range(topics):
        name = r.string()
        parts = r.i32()
        body += string(name) + s32(parts)
        for _ in range(parts):
            index = r.i32()
            size = r.i32()
            out.append(r.take(size))
            body += s32(index) + s16(0) + struct.pack(">q", 0) + struct.pack(">q", -1)
            if version >= 5:
                body += struct.pack(">q", 0)
    return body + s32(0)


def serve(conn, out):
    with conn:
        while True:
            head = conn.recv(4, socket.MSG_WAITALL)
            if len(head) < 4:
                return
            data = conn.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
            r = Reader(data)
            key, version, corr = r.i16(), r.i16(), r.i32()
            r.string()  # client id
            if key == 18:
                body = api_versions(version)
            elif key == 3:
                body = metadata(r)
            elif key == 0:
                body = produce(r, version, out)
            else:
                return
            reply = s32(corr) + body
            conn.sendall(s32(len(reply)) + reply)


def capture(codec, port):
    global PORT
    PORT = port  # one port per codec: a closed listener may linger
    out = []
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", PORT))
    srv.listen(8)
    stop = False

    def accept():
        while not stop:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn, out), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    lines = "".join("key-%d:value %d %s\n" % (i, i, "x" * (20 * i)) for i in range(8))
    subprocess.run(["kcat", "-P", "-b", "127.0.0.1:%d" % PORT, "-t", "plog", "-p", "0",
                    "-K:", "-X", "compression.codec=" + codec, "-H", "trace=abc", "-X", "linger.ms=200",
                    "-X", "api.version.request=true"],
                   input=lines.encode(), check=True, timeout=30)
    stop = True
    srv.close()
    data = b"".join(out)
    assert data, "kcat sent no batches"
    with open("kcat-%s.bin" % codec, "wb") as f:
        f.write(data)
    print(codec, len(out), "produce payloads,", len(data), "bytes")


for i, c in enumerate(CODECS):
    capture(c, PORT + i)
