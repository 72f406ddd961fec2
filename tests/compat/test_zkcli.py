"""zkCli.sh (Apache ZooKeeper's Java shell, Debian's `zookeeper` package)
against keel and against Apache ZooKeeper 3.8.

One JVM per session (a start costs ~0.5-2 s): SCRIPT is fed through stdin,
its output is normalized (zxids, times and session ids replaced, paths made
relative to the test's root) and compared with EXPECTED, which is what
Apache ZooKeeper 3.8 prints. Raw zxids are then checked for their ordering,
and a kazoo client checks the resulting tree.
"""
import re
import subprocess

from kazoo.client import KazooClient

ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"

# bob:secret -> base64(sha1("bob:secret"))
BOB = "digest:bob:fyVmFCwVbTJYrznoSu1koqYEYF0="

SCRIPT = """\
create /R hello
create /R again
get /R
set /R world
set -v 0 /R stale
get -s /R
stat /R
create /R/a 1
create /R/b
create -e /R/eph e
create -s /R/seq- s
create -s /R/seq- s
create -e -s /R/eseq- x
ls /R
ls -s /R
create /R/eph/kid
delete /R
delete -v 5 /R/a
delete /R/a
delete /R/a
get /R/nope
ls /R/nope
stat /R/eph
get /R/acl
addauth digest bob:secret
create /R/acl data %(bob)s:cdrwa
getAcl /R/acl
setAcl /R/acl world:anyone:r,%(bob)s:cdrwa
getAcl /R/acl
setAcl -v 0 /R/acl world:anyone:rw
create /R/d
create /R/d/e
create /R/d/e/f
deleteall /R/d
ls /R
create noslash
get /R/
sync /R
setAcl -v 1 /R/acl world:anyone:r
getAcl /R/acl
get /R/acl
create /R/closed x world:anyone:r
set /R/closed y
quit
"""

EXPECTED = """\
WATCHER::
WatchedEvent state:SyncConnected type:None path:null
Created /R
Node already exists: /R
hello
version No is not valid : /R
world
cZxid = <zxid>
ctime = <time>
mZxid = <zxid>
mtime = <time>
pZxid = <zxid>
cversion = 0
dataVersion = 1
aclVersion = 0
ephemeralOwner = 0x0
dataLength = 5
numChildren = 0
cZxid = <zxid>
ctime = <time>
mZxid = <zxid>
mtime = <time>
pZxid = <zxid>
cversion = 0
dataVersion = 1
aclVersion = 0
ephemeralOwner = 0x0
dataLength = 5
numChildren = 0
Created /R/a
Created /R/b
Created /R/eph
Created /R/seq-0000000003
Created /R/seq-0000000004
Created /R/eseq-0000000005
[a, b, eph, eseq-0000000005, seq-0000000003, seq-0000000004]
[a, b, eph, eseq-0000000005, seq-0000000003, seq-0000000004]
cZxid = <zxid>
ctime = <time>
mZxid = <zxid>
mtime = <time>
pZxid = <zxid>
cversion = 6
dataVersion = 1
aclVersion = 0
ephemeralOwner = 0x0
dataLength = 5
numChildren = 6
Ephemerals cannot have children: /R/eph/kid
Node not empty: /R
version No is not valid : /R/a
Node does not exist: /R/a
Node does not exist: /R/nope
Node does not exist: /R/nope
cZxid = <zxid>
ctime = <time>
mZxid = <zxid>
mtime = <time>
pZxid = <zxid>
cversion = 0
dataVersion = 0
aclVersion = 0
ephemeralOwner = <session>
dataLength = 1
numChildren = 0
Node does not exist: /R/acl
Created /R/acl
'digest,'bob:fyVmFCwVbTJYrznoSu1koqYEYF0=
: cdrwa
'world,'anyone
: r
'digest,'bob:fyVmFCwVbTJYrznoSu1koqYEYF0=
: cdrwa
version No is not valid : /R/acl
Created /R/d
Created /R/d/e
Created /R/d/e/f
[acl, b, eph, eseq-0000000005, seq-0000000003, seq-0000000004]
Path must start with / character
Path must not end with / character
Sync is OK
'world,'anyone
: r
data
Created /R/closed
Insufficient permission : /R/closed
WATCHER::
WatchedEvent state:Closed type:None path:null
"""

NOISE = re.compile(r"^(SLF4J:|\d{4}-\d\d-\d\d .*(INFO|WARN|DEBUG)|\s+at |Connecting to "
                   r"|Welcome to ZooKeeper|JLine support)")


def normalize(text, root):
    out = []
    for ln in text.splitlines():
        if not ln.strip() or NOISE.match(ln):
            continue
        ln = re.sub(r"^([cmp]Zxid) = 0x[0-9a-f]+$", r"\1 = <zxid>", ln)
        ln = re.sub(r"^([cm]time) = .*$", r"\1 = <time>", ln)
        ln = re.sub(r"^ephemeralOwner = 0x(?!0$)[0-9a-f]+$", "ephemeralOwner = <session>", ln)
        out.append(ln.replace(root, "/R"))
    return out


CONNECTED = ["WATCHER::", "WatchedEvent state:SyncConnected type:None path:null"]


def connected_once(lines):
    """zkCli prints the SyncConnected event from its event thread while its
    main thread already runs the first command, so the pair lands before or
    after that command's output.  The pair must be there exactly once; where
    is the client's race, not the server's behaviour."""
    for i in range(len(lines) - 1):
        if lines[i:i + 2] == CONNECTED:
            rest = lines[:i] + lines[i + 2:]
            assert all(rest[j:j + 2] != CONNECTED for j in range(len(rest) - 1)), \
                "SyncConnected seen twice\n" + "\n".join(lines)
            return rest
    raise AssertionError("no SyncConnected event\n" + "\n".join(lines))


def zkcli(hosts, *args, stdin=None):
    p = subprocess.run([ZKCLI, "-server", hosts, *args], input=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=90)
    return p.returncode, p.stdout.decode(errors="replace")


def test_zkcli_session(backend, path):
    script = SCRIPT.replace("%(bob)s", "%s" % BOB).replace("/R", path)
    rc, raw = zkcli(backend.hosts, stdin=script.encode())
    got = connected_once(normalize(raw, path))
    want = connected_once(EXPECTED.splitlines())
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, "line %d differs\n%s" % (i + 1, "\n".join(got))
    assert len(got) == len(want), "\n".join(got)

    # The first stat of /R: set moved mZxid past cZxid, pZxid is the creation.
    zx = re.findall(r"^([cmp])Zxid = 0x([0-9a-f]+)$", raw, re.M)
    first = {k: int(v, 16) for k, v in zx[:3]}
    assert first["m"] > first["c"] > 0 and first["p"] == first["c"]
    # ls -s after the children: pZxid moved past mZxid.
    third = {k: int(v, 16) for k, v in zx[6:9]}
    assert third["p"] > third["m"]

    zk = KazooClient(hosts=backend.hosts)
    zk.start(timeout=15)
    try:
        assert zk.get(path)[0] == b"world"
        # the session's ephemerals went with it, deleteall removed the subtree
        assert sorted(zk.get_children(path)) == ["acl", "b", "closed", "seq-0000000003",
                                                 "seq-0000000004"]
        assert zk.get(path + "/acl")[0] == b"data"
        assert [(a.id.scheme, a.id.id, a.perms) for a in zk.get_acls(path + "/acl")[0]] == \
            [("world", "anyone", 1)]
    finally:
        zk.stop()
        zk.close()


def test_zkcli_command_line(backend, path):
    # One command given on the command line (no stdin session).
    rc, raw = zkcli(backend.hosts, "create", path, "v1")
    assert "Created %s" % path in normalize(raw, path + "-") , raw
    rc, raw = zkcli(backend.hosts, "get", path)
    lines = normalize(raw, path + "-")
    assert lines[-1] == "v1", raw
    assert "WatchedEvent state:SyncConnected type:None path:null" in lines
