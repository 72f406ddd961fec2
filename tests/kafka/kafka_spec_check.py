"""Decodes keel's encodings with a decoder driven by Kafka's own JSON specs.

Kafka describes every message in clients/src/main/resources/common/message/
*.json of its source tree. This tool reads those files from a checkout given
on the command line (they are not part of keel), decodes every body that
kafka_dump_samples prints with a generic decoder built from them, and
requires that every byte is consumed. It covers the flexible versions
(compact forms, tagged fields) that the real clients in the suite do not
use. It is a tool, not a ctest: the suite cannot depend on a Kafka checkout.

Usage: python3 kafka_spec_check.py KAFKA_MESSAGE_DIR PATH/TO/kafka_dump_samples [KEY VERSION KIND]
With KEY VERSION KIND (e.g. 1 12 response) it also prints that body decoded.
"""
import json
import os
import struct
import subprocess
import sys

from kafka_python_check import EXPECTED, is_subsequence

# Sample values for the APIs kafka-python does not know, and where the
# spec's later versions drop a field kafka-python's versions carry.
EXPECTED_SPEC = dict(EXPECTED)
EXPECTED_SPEC.update({
    (20, 'request'): ['orders', 20000],  # v6 names topics by id
    (22, 'request'): ['txn-1', 60000],
    (22, 'response'): [21, 0, 5001, 4],
    (23, 'request'): ['orders', 2, 8],
    (23, 'response'): ['orders', 0, 0, 300, 74, 1, -1],
    (44, 'request'): [2, 'orders', 'retention.ms', 0, '1000', 'segment.bytes', 1, None, True],
    (44, 'response'): [3, 0, None, 2, 'orders', 40, 'bad value', 4, '1'],
    (60, 'request'): [True],
    (60, 'response'): [0, 0, None, 'keel-cluster', 1, 1, '10.0.0.1', 9092, 'r1', 2, '10.0.0.2',
                       9093, None, 0x2f],
})


def leaves(value):
    """The primitive values of a decoded body, in field order."""
    if isinstance(value, dict):
        for v in value.values():
            yield from leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from leaves(v)
    else:
        yield value

NAMES = {0: 'Produce', 1: 'Fetch', 2: 'ListOffsets', 3: 'Metadata', 8: 'OffsetCommit',
         9: 'OffsetFetch', 10: 'FindCoordinator', 11: 'JoinGroup', 12: 'Heartbeat',
         13: 'LeaveGroup', 14: 'SyncGroup', 15: 'DescribeGroups', 16: 'ListGroups',
         17: 'SaslHandshake', 18: 'ApiVersions', 19: 'CreateTopics', 20: 'DeleteTopics',
         22: 'InitProducerId', 23: 'OffsetForLeaderEpoch', 32: 'DescribeConfigs',
         36: 'SaslAuthenticate', 37: 'CreatePartitions', 42: 'DeleteGroups',
         33: 'AlterConfigs', 44: 'IncrementalAlterConfigs', 47: 'OffsetDelete', 60: 'DescribeCluster'}
FIXED = {'int8': '>b', 'int16': '>h', 'int32': '>i', 'int64': '>q', 'uint16': '>H',
         'uint32': '>I', 'float64': '>d'}


def load_spec(directory, name):
    with open(os.path.join(directory, name + '.json')) as f:
        text = '\n'.join(l for l in f if not l.strip().startswith('//'))
    return json.loads(text)


def in_range(spec, v):
    """Kafka's version ranges: "3+", "1-4", "7", "none"."""
    if spec is None or spec == 'none':
        return False
    if spec.endswith('+'):
        return v >= int(spec[:-1])
    if '-' in spec:
        lo, hi = spec.split('-')
        return int(lo) <= v <= int(hi)
    return v == int(spec)


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ValueError('short input at byte %d (need %d)' % (self.pos, n))
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def uvarint(self):
        value, shift = 0, 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7f) << shift
            shift += 7
            if not b & 0x80:
                return value


class Decoder:
    def __init__(self, version, flexible, common):
        self.v, self.flexible, self.common = version, flexible, common

    def length(self, r, wide):
        if self.flexible:
            return r.uvarint() - 1
        return struct.unpack('>i' if wide else '>h', r.take(4 if wide else 2))[0]

    def struct(self, r, fields):
        out = {}
        for f in fields:
            if not in_range(f.get('versions'), self.v):
                continue
            if self.flexible and in_range(f.get('taggedVersions'), self.v):
                continue
            out[f['name']] = self.field(r, f)
        if self.flexible:
            tagged = {f['tag']: f for f in fields
                      if 'tag' in f and in_range(f.get('taggedVersions'), self.v)}
            for _ in range(r.uvarint()):
                tag, size = r.uvarint(), r.uvarint()
                body = r.take(size)
                if tag in tagged:
                    sub = Reader(body)
                    out[tagged[tag]['name']] = self.field(sub, tagged[tag])
                    if sub.pos != len(body):
                        raise ValueError('tagged field %d has bytes left' % tag)
        return out

    def field(self, r, f):
        t, nullable = f['type'], in_range(f.get('nullableVersions'), self.v)
        if t.startswith('[]'):
            n = self.length(r, True)
            if n < 0:
                if not nullable:
                    raise ValueError('null array %s' % f['name'])
                return None
            elem = t[2:]
            if 'fields' in f or elem in self.common:
                fields = f.get('fields') or self.common[elem]
                return [self.struct(r, fields) for _ in range(n)]
            return [self.field(r, {'name': f['name'], 'type': elem}) for _ in range(n)]
        if 'fields' in f or t in self.common:
            return self.struct(r, f.get('fields') or self.common[t])
        if t in FIXED:
            return struct.unpack(FIXED[t], r.take(struct.calcsize(FIXED[t])))[0]
        if t == 'bool':
            b = r.take(1)[0]
            if b > 1:
                raise ValueError('bool %d' % b)
            return bool(b)
        if t == 'uuid':
            return r.take(16).hex()
        if t in ('string', 'bytes', 'records'):
            n = self.length(r, t != 'string')
            if n < 0:
                if not nullable:
                    raise ValueError('null %s %s' % (t, f['name']))
                return None
            raw = r.take(n)
            return raw.decode() if t == 'string' else raw
        raise ValueError('unknown type ' + t)


def main():
    directory, dump = sys.argv[1], sys.argv[2]
    show = tuple(sys.argv[3:6]) if len(sys.argv) > 5 else None
    out = subprocess.run([dump], check=True, capture_output=True, text=True).stdout
    specs, ok, failures = {}, 0, []
    for line in out.splitlines():
        parts = line.split(' ')
        key, version, kind = int(parts[0]), int(parts[1]), parts[2]
        body = bytes.fromhex(parts[3]) if len(parts) > 3 else b''
        name = NAMES[key] + ('Request' if kind == 'request' else 'Response')
        if name not in specs:
            specs[name] = load_spec(directory, name)
        spec = specs[name]
        where = '%s v%d' % (name, version)
        if not in_range(spec['validVersions'], version):
            failures.append('%s: not a valid version in the spec' % where)
            continue
        common = {c['name']: c['fields'] for c in spec.get('commonStructs', [])}
        dec = Decoder(version, in_range(spec.get('flexibleVersions'), version), common)
        r = Reader(body)
        try:
            decoded = dec.struct(r, spec['fields'])
            if r.pos != len(body):
                raise ValueError('%d bytes left over' % (len(body) - r.pos))
        except ValueError as e:
            failures.append('%s: %s' % (where, e))
            continue
        want = EXPECTED_SPEC[(key, kind)]
        got = list(leaves(decoded))
        if not is_subsequence(want, got):
            failures.append('%s: values %r not found in order in %r' % (where, want, got))
            continue
        ok += 1
        if show == (str(key), str(version), kind):
            print(json.dumps(decoded, indent=1, default=lambda b: b.hex()))
    for f in failures:
        print('FAIL', f)
    print('decoded %d bodies with Kafka\'s specs, %d failures' % (ok, len(failures)))
    sys.exit(1 if failures or ok == 0 else 0)


if __name__ == '__main__':
    main()
