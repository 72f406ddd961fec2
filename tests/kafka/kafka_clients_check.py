"""Real Kafka clients parse keel's ApiVersions and Metadata answers.

Starts kafka_meta_server (keel's codecs behind a toy socket loop) on a port
from 21100 up and asks three clients for the cluster's metadata:
  kcat -L (librdkafka 2.0.2), confluent-kafka's AdminClient.list_topics
  (librdkafka again, through Python), and kafka-python's KafkaConsumer
  (its own codecs). Each must report broker 1 at the server's port and
  topic keel-test with partitions 0 and 1.

Usage: python3 kafka_clients_check.py PATH/TO/kafka_meta_server
"""
import subprocess
import sys

CLIENT_TIMEOUT = 30


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=CLIENT_TIMEOUT)


def check_kcat(port):
    out = run(['kcat', '-L', '-b', '127.0.0.1:%d' % port, '-m', '10']).stdout
    want = ['1 brokers:', 'broker 1 at 127.0.0.1:%d' % port,
            'topic "keel-test" with 2 partitions:',
            'partition 0, leader 1, replicas: 1, isrs: 1',
            'partition 1, leader 1, replicas: 1, isrs: 1']
    missing = [w for w in want if w not in out]
    return 'kcat output lacks %r:\n%s' % (missing, out) if missing else None


CONFLUENT = '''
import sys
from confluent_kafka.admin import AdminClient
md = AdminClient({'bootstrap.servers': '127.0.0.1:%d'}).list_topics(timeout=10)
print(md.cluster_id, md.controller_id,
      sorted((b.id, b.host, b.port) for b in md.brokers.values()),
      sorted((t, sorted(v.partitions)) for t, v in md.topics.items()))
'''

KAFKA_PYTHON = '''
from kafka import KafkaConsumer
c = KafkaConsumer(bootstrap_servers='127.0.0.1:%d', request_timeout_ms=10000,
                  api_version_auto_timeout_ms=8000)
print(sorted(c.topics()), sorted(c.partitions_for_topic('keel-test')))
c.close()
'''


def check_python(name, script, port, want):
    r = run([sys.executable, '-c', script % port])
    out = r.stdout.strip()
    return None if out == want else '%s printed %r, want %r (stderr %s)' % (
        name, out, want, r.stderr[-2000:])


def main():
    server = subprocess.Popen([sys.argv[1], '21100', '', '120'], stdout=subprocess.PIPE,
                              text=True)
    try:
        line = server.stdout.readline().split()
        if len(line) != 2 or line[0] != 'port':
            sys.exit('kafka_meta_server did not start')
        port = int(line[1])
        failures = [f for f in (
            check_kcat(port),
            check_python('confluent-kafka', CONFLUENT, port,
                         "keel-cluster 1 [(1, '127.0.0.1', %d)] [('keel-test', [0, 1])]" % port),
            check_python('kafka-python', KAFKA_PYTHON, port, "['keel-test'] [0, 1]"),
        ) if f]
    finally:
        server.terminate()
        server.wait(timeout=10)
    for f in failures:
        print('FAIL', f)
    print('%d of 3 clients read the metadata' % (3 - len(failures)))
    sys.exit(1 if failures else 0)


if __name__ == '__main__':
    main()
