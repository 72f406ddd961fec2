"""Loopback TCP proxies between servers, for network partitions.

Each server reaches each peer through its own proxy (one per directed pair):
server i's --cluster lists peer j at the address of proxy (i -> j), which
forwards to j's real peer port. (Addresses in --cluster are local to each
server; only the ids must agree.) Cutting a link black-holes it: existing
connections are dropped and new ones are accepted but never forwarded, the
way a partition looks to TCP — no resets, just silence.
"""
import select
import socket
import threading


class LinkProxy:
    def __init__(self, target_port, listen_port=0):
        self.target = ("127.0.0.1", target_port)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", listen_port))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.cut = False
        self.closing = False
        self.lock = threading.Lock()
        self.pairs = []
        self.thread = threading.Thread(target=self._accept_loop, daemon=True)
        self.thread.start()

    def _accept_loop(self):
        while not self.closing:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                if self.cut:
                    # Black hole: keep the socket open, forward nothing.
                    self.pairs.append((client, None))
                    continue
            try:
                upstream = socket.create_connection(self.target, timeout=2)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a, b):
        socks = [a, b]
        try:
            while True:
                with self.lock:
                    if self.cut or self.closing:
                        break
                r, _, _ = select.select(socks, [], [], 0.1)
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        raise OSError("closed")
                    with self.lock:
                        if self.cut:
                            raise OSError("cut")
                        (b if s is a else a).sendall(data)
        except OSError:
            pass
        with self.lock:
            black_holed = any(c is a and u is None for c, u in self.pairs)
        try:
            b.close()
        except OSError:
            pass
        if not black_holed:
            try:
                a.close()
            except OSError:
                pass

    def set_cut(self, cut):
        """Takes effect before it returns: no byte crosses a cut link after."""
        with self.lock:
            self.cut = cut
            if cut:
                live = [(c, u) for c, u in self.pairs if u is not None]
                self.pairs = [(c, u) for c, u in self.pairs if u is None]
                for c, u in live:
                    # Stop forwarding at once; the client side stays open
                    # (black hole) until the link is healed.
                    try:
                        u.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    self.pairs.append((c, None))
            else:
                dead = [c for c, u in self.pairs if u is None]
                self.pairs = [(c, u) for c, u in self.pairs if u is not None]
        if not cut:
            for c in dead:  # black-holed sockets: drop them now
                try:
                    c.close()
                except OSError:
                    pass

    def close(self):
        self.closing = True
        self.set_cut(True)
        try:
            self.sock.close()
        except OSError:
            pass


class Network:
    """Proxies for every directed pair of a cluster's servers."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.links = {}
        ids = sorted(cluster.servers)
        for i in ids:
            for j in ids:
                if i != j:
                    self.links[(i, j)] = LinkProxy(cluster.servers[j].peer_port)

    def cluster_arg_for(self, i):
        parts = []
        for j in sorted(self.cluster.servers):
            if j == i:
                parts.append("%d=%s" % (j, self.cluster.servers[j].peer_addr))
            else:
                parts.append("%d=127.0.0.1:%d" % (j, self.links[(i, j)].port))
        return ",".join(parts)

    def start(self):
        for sid, s in self.cluster.servers.items():
            s.start(cluster_arg=self.cluster_arg_for(sid))

    def partition(self, *groups):
        """Only servers in the same group can talk."""
        where = {}
        for g, members in enumerate(groups):
            for m in members:
                where[m] = g
        for (i, j), link in self.links.items():
            link.set_cut(where.get(i) != where.get(j))

    def isolate(self, sid):
        others = [i for i in self.cluster.servers if i != sid]
        self.partition([sid], others)

    def heal(self):
        for link in self.links.values():
            link.set_cut(False)

    def close(self):
        for link in self.links.values():
            link.close()
