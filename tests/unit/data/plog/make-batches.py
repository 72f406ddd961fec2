#!/usr/bin/python3
"""Regenerates the record batches the plog unit tests read.

Each <codec>.bin is one magic-2 record batch built by kafka-python's own
encoder (an independent implementation of the format), with 5 records
carrying keys, values and headers; <codec>.txt says what it holds
(record count, base and max timestamp, compression attribute).
Needs Debian python3-kafka, python3-snappy, python3-lz4, python3-zstandard.
Run from this directory: /usr/bin/python3 make-batches.py
"""
from kafka.record.default_records import DefaultRecordBatchBuilder

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BASE_TS = 1700000000000
COUNT = 5

for name, codec in CODECS.items():
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for i in range(COUNT):
        key = None if i == 2 else ("key-%d" % i).encode()
        value = ("value %d " % i).encode() * (i + 1)
        headers = [("h%d" % i, b"x" * i)] if i % 2 == 0 else []
        b.append(i, timestamp=BASE_TS + 10 * i, key=key, value=value, headers=headers)
    data = bytes(b.build())
    with open(name + ".bin", "wb") as f:
        f.write(data)
    with open(name + ".txt", "w") as f:
        f.write("records %d\nbase_timestamp %d\nmax_timestamp %d\ncompression %d\nsize %d\n"
                % (COUNT, BASE_TS, BASE_TS + 10 * (COUNT - 1), codec, len(data)))
