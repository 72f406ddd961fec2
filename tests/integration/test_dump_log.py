"""`keel dump-log DIR` on partition directories built from real record
batches (tests/unit/data/plog, written by kafka-python's encoder): what it
prints for clean segments, a torn tail, a damaged older segment and a gap,
and its exit status in each case."""
import os
import struct
import subprocess

import pytest

KEEL = os.environ.get("KEEL", os.path.join(os.path.dirname(__file__), "../../build/keel"))
DATA = os.path.join(os.path.dirname(__file__), "../unit/data/plog")
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def batch(codec, base_offset, epoch):
    """A real batch with its offset and epoch rewritten (both outside the CRC)."""
    with open(os.path.join(DATA, codec + ".bin"), "rb") as f:
        b = bytearray(f.read())
    b[0:8] = struct.pack(">q", base_offset)
    b[12:16] = struct.pack(">i", epoch)
    return bytes(b)


def write_segment(d, base, batches):
    path = os.path.join(d, "%020d.log" % base)
    with open(path, "wb") as f:
        f.write(b"".join(batches))
    return path


def two_segments(d):
    """Offsets 0..24 (one batch per codec, epochs 0,0,1,1,2) then 25..34."""
    older = write_segment(d, 0, [batch(c, 5 * i, i // 2) for i, c in enumerate(CODECS)])
    tail = write_segment(d, 25, [batch("none", 25, 3), batch("zstd", 30, 3)])
    return older, tail


def dump(d, *args):
    p = subprocess.run([KEEL, "dump-log", str(d), *args], capture_output=True, text=True,
                       timeout=30)
    return p.returncode, p.stdout + p.stderr


def flip(path, position):
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x20]))


def test_clean_segments(tmp_path):
    two_segments(tmp_path)
    rc, out = dump(tmp_path)
    assert rc == 0, out
    assert "2 segments" in out
    for i, codec in enumerate(CODECS):
        assert "offset %d..%d " % (5 * i, 5 * i + 4) in out
        assert "epoch %d codec %s crc ok" % (i // 2, codec) in out
    assert "offset 30..34 position 254 size 169 records 5 epoch 3 codec zstd crc ok" in out
    assert "5 batches, offsets 0..24" in out
    assert "2 batches, offsets 25..34" in out
    assert "log ok" in out
    rc, out = dump(tmp_path, "--no-batches")
    assert rc == 0 and "crc ok" not in out and "2 batches" in out


def test_torn_tail_is_reported_and_recoverable(tmp_path):
    _, tail = two_segments(tmp_path)
    flip(tail, 300)  # inside the second batch's records
    rc, out = dump(tmp_path)
    assert rc == 0, out
    assert "stops at position 254: bad crc; 169 bytes after it (a torn tail" in out
    assert "1 batches, offsets 25..29" in out


def test_damaged_older_segment_is_corruption(tmp_path):
    older, _ = two_segments(tmp_path)
    flip(older, 500)  # inside the snappy batch (positions 424..616)
    rc, out = dump(tmp_path)
    assert rc == 1, out
    assert "stops at position 424: bad crc" in out
    assert "corruption: recovery refuses" in out
    assert "log damaged" in out


def test_old_magic_and_gap(tmp_path):
    two_segments(tmp_path)
    b = bytearray(batch("none", 35, 3))
    b[16] = 1
    write_segment(tmp_path, 35, [bytes(b)])
    rc, out = dump(tmp_path)
    assert "stops at position 0: unsupported magic" in out
    assert rc == 0, out  # the last segment: recovery cuts it
    write_segment(tmp_path, 40, [batch("gzip", 40, 4)])
    rc, out = dump(tmp_path)
    assert rc == 1, out
    assert "gap: segment 40 does not follow the previous end 35" in out


def test_usage_and_missing_directory(tmp_path):
    rc, out = dump(tmp_path / "nope")
    assert rc == 2 and "cannot list" in out
    p = subprocess.run([KEEL, "dump-log"], capture_output=True, text=True)
    assert p.returncode == 2 and "usage: keel dump-log" in p.stderr


def test_golden_directory_with_indexes_and_checkpoints():
    """The committed directory written by the partition log itself
    (tests/unit/data/plog/golden, see test_plog_golden.c)."""
    rc, out = dump(os.path.join(DATA, "golden"))
    assert rc == 0, out
    assert "partition.metadata: topic id 101112131415161718191a1b1c1d1e1f" in out
    assert "leader-epoch-checkpoint: 2 entries" in out
    assert "epoch 3 starts at offset 0" in out and "epoch 4 starts at offset 9" in out
    assert "5 batches, offsets 0..8; index files match" in out
    assert "3 batches, offsets 9..14; active segment" in out
