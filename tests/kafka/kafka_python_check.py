"""Checks keel's Kafka encoders against kafka-python's protocol classes.

kafka-python (Debian python3-kafka) carries its own, independently written
schemas for the versions it knows. For every body that
kafka_dump_samples prints, this script decodes it with kafka-python's class
for that (API, version, request/response), and requires that
  - the decode consumes every byte,
  - kafka-python re-encodes the decoded value to exactly keel's bytes,
  - the sample's values come out in order (a subsequence of the decoded
    leaf values; see tests/unit/test_kafka_samples.h for the samples).
It fails if kafka-python knows fewer than a minimum of the pairs, so a
broken import cannot pass silently.

Usage: python3 kafka_python_check.py PATH/TO/kafka_dump_samples
"""
import io
import subprocess
import sys

from kafka.protocol import admin, commit, fetch, group, metadata, offset, produce

META = bytes([0, 1, 0, 0, 0, 1, 0, 6]) + b'orders'
SASL = b'\x00user\x00pw'
RECORDS = bytes([0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 9, 0xff, 0xff, 0xff, 0xff,
                 2, 0xde, 0xad, 0xbe, 0xef])

# api_key -> (request classes, response classes), indexed by version.
CLASSES = {
    0: (produce.ProduceRequest, produce.ProduceResponse),
    1: (fetch.FetchRequest, fetch.FetchResponse),
    2: (offset.OffsetRequest, offset.OffsetResponse),
    3: (metadata.MetadataRequest, metadata.MetadataResponse),
    18: (admin.ApiVersionRequest, admin.ApiVersionResponse),
    19: (admin.CreateTopicsRequest, admin.CreateTopicsResponse),
    20: (admin.DeleteTopicsRequest, admin.DeleteTopicsResponse),
    32: (admin.DescribeConfigsRequest, admin.DescribeConfigsResponse),
    33: (admin.AlterConfigsRequest, admin.AlterConfigsResponse),
    37: (admin.CreatePartitionsRequest, admin.CreatePartitionsResponse),
    8: (commit.OffsetCommitRequest, commit.OffsetCommitResponse),
    9: (commit.OffsetFetchRequest, commit.OffsetFetchResponse),
    10: (commit.GroupCoordinatorRequest, commit.GroupCoordinatorResponse),
    11: (group.JoinGroupRequest, group.JoinGroupResponse),
    12: (group.HeartbeatRequest, group.HeartbeatResponse),
    13: (group.LeaveGroupRequest, group.LeaveGroupResponse),
    14: (group.SyncGroupRequest, group.SyncGroupResponse),
    15: (admin.DescribeGroupsRequest, admin.DescribeGroupsResponse),
    16: (admin.ListGroupsRequest, admin.ListGroupsResponse),
    17: (admin.SaslHandShakeRequest, admin.SaslHandShakeResponse),
    36: (admin.SaslAuthenticateRequest, admin.SaslAuthenticateResponse),
    42: (admin.DeleteGroupsRequest, admin.DeleteGroupsResponse),
}

# The sample's values, in wire order, that every version carries.
EXPECTED = {
    (0, 'request'): ['txn-1', -1, 30000, 'orders', 0, RECORDS, 7, None],
    (0, 'response'): ['orders', 0, 0, 42, 1, 6, -1],
    (1, 'request'): [2, 500, 1, 52428800, 1, 'orders', 0, 100, 1048576, 5, 7, 65536],
    (1, 'response'): ['orders', 0, 0, 120, 110, 77, 40, RECORDS, 1, 1, -1, None],
    (2, 'request'): [-1, 'orders', 0, -2, 1, 1700000000000],
    (2, 'response'): ['orders', 0, 0, 1700000000000, 17],
    (3, 'request'): ['orders', 'payments'],
    (3, 'response'): [1, '10.0.0.1', 9092, 2, 'broker-2.local', 19092, 0, 'orders', 0, 0, 1,
                      1, 2, 3, 1, 3, 5, 'nope'],
    (18, 'request'): [],
    (18, 'response'): [0, 0, 3, 9, 1, 4, 12, 18, 0, 3],
    (19, 'request'): ['orders', 1, 3, 0, 1, 2, 3, 'retention.ms', '60000', 'cleanup.policy',
                      None, 15000],
    (19, 'response'): ['orders', 0, 'dup', 36],
    (20, 'request'): ['orders', 'payments', 20000],
    (20, 'response'): ['orders', 0, 'gone', 3],
    (32, 'request'): [2, 'orders', 'retention.ms', 'segment.bytes', 4, '1', None],
    (32, 'response'): [1, 0, None, 2, 'orders', 'retention.ms', '60000', False, 'secret',
                       None, True],
    (33, 'request'): [2, 'orders', 'retention.ms', '2000', 'cleanup.policy', None, True],
    (33, 'response'): [6, 40, 'unknown', 4, '2'],
    (37, 'request'): ['orders', 3, 1, 2, 1, 3, 25000, True],
    (37, 'response'): [2, 'orders', 0, None, 'small', 37, 'cannot shrink'],
    (8, 'request'): ['group-a', 'orders', 0, 42, 'meta', 1, 43, None],
    (8, 'response'): ['orders', 0, 0, 1, 22],
    (9, 'request'): ['group-a', 'orders', 1, 2],
    (9, 'response'): ['orders', 0, 42, 'meta', 0, 1, -1, None, 3],
    (10, 'request'): ['group-a'],
    (10, 'response'): [2, '10.0.0.2', 9092],
    (11, 'request'): ['group-a', 10000, 'member-1', 'consumer', 'range', META, 'roundrobin',
                      META[:2]],
    (11, 'response'): [0, 7, 'range', 'member-1', 'member-1', 'member-1', META, 'member-2',
                       META[:1]],
    (12, 'request'): ['group-a', 7, 'member-1'],
    (12, 'response'): [27],
    (13, 'request'): ['group-a', 'member-1'],
    (13, 'response'): [0],
    (14, 'request'): ['group-a', 7, 'member-1', 'member-1', META, 'member-2', b''],
    (14, 'response'): [0, META],
    (15, 'request'): ['group-a', 'group-b'],
    (15, 'response'): [0, 'group-a', 'Stable', 'consumer', 'range', 'member-1', 'client-1',
                       '/10.0.0.9', META, META[:2], 69, 'group-b', 'Dead'],
    (16, 'request'): [],
    (16, 'response'): [0, 'group-a', 'consumer', 'group-b', ''],
    (17, 'request'): ['PLAIN'],
    (17, 'response'): [33, 'PLAIN', 'SCRAM-SHA-256'],
    (36, 'request'): [SASL],
    (36, 'response'): [58, 'bad password', META[:3]],
    (42, 'request'): ['group-a', 'group-b'],
    (42, 'response'): [20, 'group-a', 0, 'group-b', 68],
}

# Where kafka-python 2.0.2's own schema disagrees with Kafka's JSON specs;
# these pairs are not checked (the spec, not kafka-python, is the reference).
KNOWN_DEFECTS = {
    # record_errors/error_message sit outside the partition array.
    (0, 8, 'response'): 'ProduceResponse_v8 nests its fields wrongly',
    # String() without an encoding: kafka-python cannot decode these at all.
    (1, 7, 'request'): 'FetchRequest_v7 forgotten_topics String() is broken',
    (1, 8, 'request'): 'FetchRequest_v8 forgotten_topics String() is broken',
    (1, 9, 'request'): 'FetchRequest_v9 forgotten_topics String() is broken',
    (1, 10, 'request'): 'FetchRequest_v10 forgotten_topics String() is broken',
    (1, 11, 'request'): 'FetchRequest_v11 forgotten_topics String() is broken',
    # The spec's CurrentLeaderEpoch is int32; kafka-python says Int64.
    (2, 4, 'request'): 'OffsetRequest_v4 current_leader_epoch is Int64',
    (2, 5, 'request'): 'OffsetRequest_v5 current_leader_epoch is Int64',
    # v1 replaced IsDefault (bool) by ConfigSource (int8); kafka-python
    # keeps a Boolean there, so any source other than 0/1 re-encodes as 1.
    (32, 1, 'response'): 'DescribeConfigsResponse_v1 reads config_source as a Boolean',
    # The spec's FindCoordinator v1 starts with ThrottleTimeMs; kafka-python lacks it.
    (10, 1, 'response'): 'GroupCoordinatorResponse_v1 has no throttle_time_ms',
    # authorized_operations belongs to each group, not after the array.
    (15, 3, 'response'): 'DescribeGroupsResponse_v3 nests authorized_operations wrongly',
    # AlterConfigsResponse's list holds AlterConfigsRequest_v1 as its v1.
    (33, 1, 'response'): 'AlterConfigsResponse[1] is the v1 request class',
}

MIN_CHECKED = 110


def leaves(value):
    """The primitive values of a decoded struct, depth first."""
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from leaves(v)
    elif hasattr(value, 'SCHEMA'):
        for name in value.SCHEMA.names:
            yield from leaves(getattr(value, name))
    else:
        yield value


def is_subsequence(want, got):
    it = iter(got)
    for w in want:
        for g in it:
            if g == w and type(g) is not bool or g is w:
                break
            if isinstance(g, bool) and isinstance(w, bool) and g == w:
                break
        else:
            return False
    return True


def main():
    out = subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout
    checked, failures = 0, []
    for line in out.splitlines():
        key, version, kind, hexbody = line.split(' ')
        key, version = int(key), int(version)
        if key not in CLASSES:
            continue
        classes = CLASSES[key][0 if kind == 'request' else 1]
        if version >= len(classes) or (key, version, kind) in KNOWN_DEFECTS:
            continue
        body = bytes.fromhex(hexbody)
        where = '%s v%d %s' % (classes[version].__name__, version, kind)
        buf = io.BytesIO(body)
        try:
            decoded = classes[version].decode(buf)
        except Exception as e:  # any decode failure is a finding
            failures.append('%s: kafka-python cannot decode: %r' % (where, e))
            continue
        if buf.tell() != len(body):
            failures.append('%s: %d of %d bytes consumed' % (where, buf.tell(), len(body)))
            continue
        again = decoded.encode()
        if again != body:
            failures.append('%s: re-encodes differently\n keel %s\n  kp  %s'
                            % (where, body.hex(), again.hex()))
            continue
        got = list(leaves(decoded))
        want = EXPECTED[(key, kind)]
        if not is_subsequence(want, got):
            failures.append('%s: values %r not found in order in %r' % (where, want, got))
            continue
        checked += 1
    for f in failures:
        print('FAIL', f)
    print('kafka-python decoded and checked %d bodies, %d failures' % (checked, len(failures)))
    if failures or checked < MIN_CHECKED:
        sys.exit(1)


if __name__ == '__main__':
    main()
