"""Kafka brokers for the integration tests: a keel cluster with `keel
broker`s started on it, as the module-scoped fixtures of the test_kafka_*
files use it.

    with running_brokers() as (cluster, brokers, bootstrap):
        ...

starts the servers, waits for a leader, runs setup(cluster) if given (e.g.
cluster configs the brokers must see when they start), starts one broker per
id, waits until the controller lists each one active and, with listed=True,
until each broker's own metadata lists them all (kcat -L), then yields
(cluster, {id: Broker}, "host:port,..."). On the way out it kills the
brokers, printing the tail of each one's log if the start-up failed, and
removes the cluster.
"""
import contextlib
import subprocess

from harness import Cluster
from test_controller import SERVER_ARGS, Broker, wait_active

KCAT = "/usr/bin/kcat"


def kcat(*args, stdin=None, timeout=60):
    out = subprocess.run([KCAT] + list(args), input=stdin, capture_output=True,
                         timeout=timeout)
    assert out.returncode == 0, (args, out.stdout[-2000:], out.stderr[-2000:])
    return out.stdout.decode()


@contextlib.contextmanager
def running_brokers(servers=3, ids=(1, 2, 3), server_args=SERVER_ARGS, broker_args=None,
                    rack=None, setup=None, listed=True):
    """broker_args(cluster, id) gives a broker's extra arguments, rack(id)
    its rack (both called before anything starts)."""
    c = Cluster(servers, server_args=server_args)
    brokers = {i: Broker(c, i, rack=rack(i) if rack else None,
                         extra_args=broker_args(c, i) if broker_args else ())
               for i in ids}
    ok = False
    try:
        c.start()
        c.wait_leader()
        if setup is not None:
            setup(c)
        for b in brokers.values():
            b.start()
        wait_active(c, tuple(ids))
        c.kafka_brokers = brokers
        if listed:
            want = "%d brokers" % len(brokers)
            for b in brokers.values():  # each broker's own image lists them all
                c.wait(lambda: want in kcat("-b", "127.0.0.1:%d" % b.port, "-L"),
                       timeout=15, what="broker %d lists %s" % (b.id, want))
        ok = True
        yield c, brokers, ",".join("127.0.0.1:%d" % b.port for b in brokers.values())
    finally:
        for b in brokers.values():
            b.kill()
            if not ok:
                print("---- broker %d ----\n%s" % (b.id, b.log()[-4000:]))
        c.cleanup()
