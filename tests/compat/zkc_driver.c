/* zkc_driver — a scripted scenario for the official ZooKeeper C client
 * (libzookeeper_mt), used by tests/compat/test_cclient.py.
 *
 * Usage: zkc_driver HOSTS ROOT
 *
 * Runs one fixed scenario under the (not yet existing) znode ROOT and prints
 * one line per step in a stable text form: return codes by name, data,
 * children, and the parts of a Stat that do not depend on zxids or clocks
 * (versions, lengths, child counts, whether the ephemeral owner is this
 * session). The same scenario against keel and against Apache ZooKeeper
 * must print the same text. Exit status 0 when the scenario ran to the end
 * (whatever the codes were), 2 on a usage or connection failure.
 *
 * This is a test tool, not product code: it uses stdio and pthreads freely.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zookeeper/zookeeper.h>

#define WAIT_MS 10000
#define MAX_EVENTS 64

struct event {
  int type;
  int state;
  char path[256];
  char label[32];
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static struct event g_events[MAX_EVENTS];
static int g_event_count;
static int g_connected;
static int g_sync_rc = 99;
static char g_sync_path[256];
static int g_sync_done;
static const char *g_root;

static const char *rc_name(int rc) {
  switch (rc) {
    case ZOK: return "OK";
    case ZSYSTEMERROR: return "SystemError";
    case ZRUNTIMEINCONSISTENCY: return "RuntimeInconsistency";
    case ZDATAINCONSISTENCY: return "DataInconsistency";
    case ZCONNECTIONLOSS: return "ConnectionLoss";
    case ZMARSHALLINGERROR: return "MarshallingError";
    case ZUNIMPLEMENTED: return "Unimplemented";
    case ZOPERATIONTIMEOUT: return "OperationTimeout";
    case ZBADARGUMENTS: return "BadArguments";
    case ZINVALIDSTATE: return "InvalidState";
    case ZNONODE: return "NoNode";
    case ZNOAUTH: return "NoAuth";
    case ZBADVERSION: return "BadVersion";
    case ZNOCHILDRENFOREPHEMERALS: return "NoChildrenForEphemerals";
    case ZNODEEXISTS: return "NodeExists";
    case ZNOTEMPTY: return "NotEmpty";
    case ZSESSIONEXPIRED: return "SessionExpired";
    case ZINVALIDACL: return "InvalidACL";
    case ZAUTHFAILED: return "AuthFailed";
    case ZCLOSING: return "Closing";
    default: return "Other";
  }
}

static const char *event_name(int type) {
  if (type == ZOO_CREATED_EVENT) return "NodeCreated";
  if (type == ZOO_DELETED_EVENT) return "NodeDeleted";
  if (type == ZOO_CHANGED_EVENT) return "NodeDataChanged";
  if (type == ZOO_CHILD_EVENT) return "NodeChildrenChanged";
  if (type == ZOO_SESSION_EVENT) return "Session";
  if (type == ZOO_NOTWATCHING_EVENT) return "NotWatching";
  return "Unknown";
}

/* Paths are printed relative to the scenario root. */
static const char *rel(const char *path) {
  size_t n = strlen(g_root);
  if (path != NULL && strncmp(path, g_root, n) == 0) {
    return path[n] == '\0' ? "<root>" : path + n;
  }
  return path != NULL ? path : "(null)";
}

static void out(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fputc('\n', stdout);
  fflush(stdout);
}

static void deadline_after(struct timespec *ts, int ms) {
  clock_gettime(CLOCK_REALTIME, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec += 1;
    ts->tv_nsec -= 1000000000L;
  }
}

/* Session events go to the global watcher; node events to the watcher
 * given with the call, whose context is a label naming the step. */
static void global_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
  (void)zh;
  (void)path;
  (void)ctx;
  if (type != ZOO_SESSION_EVENT) return;
  pthread_mutex_lock(&g_mu);
  if (state == ZOO_CONNECTED_STATE) g_connected = 1;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
}

static void node_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
  (void)zh;
  pthread_mutex_lock(&g_mu);
  if (g_event_count < MAX_EVENTS) {
    struct event *e = &g_events[g_event_count++];
    e->type = type;
    e->state = state;
    snprintf(e->path, sizeof e->path, "%s", path != NULL ? path : "");
    snprintf(e->label, sizeof e->label, "%s", ctx != NULL ? (const char *)ctx : "");
  }
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
}

/* Waits until at least `count` node events have arrived; prints them all
 * from index `from`. */
static void wait_events(int from, int count) {
  struct timespec ts;
  deadline_after(&ts, WAIT_MS);
  pthread_mutex_lock(&g_mu);
  while (g_event_count < count) {
    if (pthread_cond_timedwait(&g_cv, &g_mu, &ts) != 0) break;
  }
  for (int i = from; i < g_event_count; i++) {
    struct event *e = &g_events[i];
    out("event %s type=%s state=%d path=%s", e->label, event_name(e->type), e->state, rel(e->path));
  }
  if (g_event_count < count) out("event timeout: got %d of %d", g_event_count - from, count - from);
  pthread_mutex_unlock(&g_mu);
}

static int events_now(void) {
  pthread_mutex_lock(&g_mu);
  int n = g_event_count;
  pthread_mutex_unlock(&g_mu);
  return n;
}

static zhandle_t *connect_wait(const char *hosts) {
  pthread_mutex_lock(&g_mu);
  g_connected = 0;
  pthread_mutex_unlock(&g_mu);
  zhandle_t *zh = zookeeper_init(hosts, global_watcher, 10000, NULL, NULL, 0);
  if (zh == NULL) return NULL;
  struct timespec ts;
  deadline_after(&ts, WAIT_MS);
  pthread_mutex_lock(&g_mu);
  while (!g_connected) {
    if (pthread_cond_timedwait(&g_cv, &g_mu, &ts) != 0) break;
  }
  int ok = g_connected;
  pthread_mutex_unlock(&g_mu);
  if (!ok) {
    zookeeper_close(zh);
    return NULL;
  }
  return zh;
}

static void print_stat(const char *what, const struct Stat *st, zhandle_t *zh) {
  const clientid_t *cid = zoo_client_id(zh);
  const char *owner = st->ephemeralOwner == 0 ? "none"
                      : (cid != NULL && st->ephemeralOwner == cid->client_id) ? "self"
                                                                              : "other";
  out("%s stat version=%d cversion=%d aversion=%d dataLength=%d numChildren=%d owner=%s "
      "mzxid>=czxid=%d pzxid>=czxid=%d",
      what, st->version, st->cversion, st->aversion, st->dataLength, st->numChildren, owner,
      st->mzxid >= st->czxid, st->pzxid >= st->czxid);
}

static void mkpath(char *buf, size_t size, const char *suffix) {
  snprintf(buf, size, "%s%s", g_root, suffix);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void print_children(const char *what, struct String_vector *v) {
  qsort(v->data, (size_t)v->count, sizeof(char *), cmp_str);
  char line[2048];
  size_t used = 0;
  line[0] = '\0';
  for (int i = 0; i < v->count && used < sizeof line; i++) {
    int n = snprintf(line + used, sizeof line - used, "%s%s", i ? "," : "", v->data[i]);
    if (n < 0) break;
    used += (size_t)n;
  }
  out("%s children=[%s]", what, line);
}

static void sync_done(int rc, const char *value, const void *data) {
  (void)data;
  pthread_mutex_lock(&g_mu);
  g_sync_rc = rc;
  snprintf(g_sync_path, sizeof g_sync_path, "%s", value != NULL ? value : "(null)");
  g_sync_done = 1;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
}

static void step_crud(zhandle_t *zh) {
  char p[512], got[512];
  struct Stat st;
  int rc = zoo_create(zh, g_root, "root", 4, &ZOO_OPEN_ACL_UNSAFE, 0, got, sizeof got);
  out("create root rc=%s path=%s", rc_name(rc), rel(got));

  mkpath(p, sizeof p, "/a");
  rc = zoo_create(zh, p, "v1", 2, &ZOO_OPEN_ACL_UNSAFE, 0, got, sizeof got);
  out("create /a rc=%s path=%s", rc_name(rc), rc == ZOK ? rel(got) : "-");
  rc = zoo_create(zh, p, "again", 5, &ZOO_OPEN_ACL_UNSAFE, 0, got, sizeof got);
  out("create /a again rc=%s", rc_name(rc));

  char data[64];
  int len = (int)sizeof data;
  memset(&st, 0, sizeof st);
  rc = zoo_get(zh, p, 0, data, &len, &st);
  out("get /a rc=%s data=%.*s", rc_name(rc), len < 0 ? 0 : len, data);
  print_stat("get /a", &st, zh);

  rc = zoo_set2(zh, p, "v2", 2, 0, &st);
  out("set /a v0 rc=%s version=%d", rc_name(rc), st.version);
  rc = zoo_set(zh, p, "v3", 2, 0);
  out("set /a v0 again rc=%s", rc_name(rc));
  rc = zoo_set2(zh, p, "v3", 2, -1, &st);
  out("set /a any rc=%s version=%d dataLength=%d", rc_name(rc), st.version, st.dataLength);

  memset(&st, 0, sizeof st);
  rc = zoo_create2(zh, p, "x", 1, &ZOO_OPEN_ACL_UNSAFE, 0, got, sizeof got, &st);
  out("create2 /a rc=%s", rc_name(rc));
  mkpath(p, sizeof p, "/b");
  rc = zoo_create2(zh, p, "bb", 2, &ZOO_OPEN_ACL_UNSAFE, 0, got, sizeof got, &st);
  out("create2 /b rc=%s path=%s", rc_name(rc), rel(got));
  print_stat("create2 /b", &st, zh);

  mkpath(p, sizeof p, "/nope");
  rc = zoo_exists(zh, p, 0, &st);
  out("exists /nope rc=%s", rc_name(rc));
  len = (int)sizeof data;
  rc = zoo_get(zh, p, 0, data, &len, &st);
  out("get /nope rc=%s", rc_name(rc));
  rc = zoo_set(zh, p, "z", 1, -1);
  out("set /nope rc=%s", rc_name(rc));
  mkpath(p, sizeof p, "/nope/child");
  rc = zoo_create(zh, p, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, got, sizeof got);
  out("create /nope/child rc=%s", rc_name(rc));

  mkpath(p, sizeof p, "/a");
  rc = zoo_delete(zh, p, 5);
  out("delete /a v5 rc=%s", rc_name(rc));
  rc = zoo_delete(zh, g_root, -1);
  out("delete root rc=%s", rc_name(rc));
  rc = zoo_delete(zh, p, 2);
  out("delete /a v2 rc=%s", rc_name(rc));
  rc = zoo_delete(zh, p, -1);
  out("delete /a again rc=%s", rc_name(rc));

  /* Null data: a znode with no data reads back as length -1. */
  mkpath(p, sizeof p, "/null");
  rc = zoo_create(zh, p, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, got, sizeof got);
  len = (int)sizeof data;
  int rc2 = zoo_get(zh, p, 0, data, &len, &st);
  out("null data create rc=%s get rc=%s len=%d dataLength=%d", rc_name(rc), rc_name(rc2), len,
      st.dataLength);
}

static void step_sequential_ephemeral(zhandle_t *zh) {
  char p[512], got[512];
  struct Stat st;
  mkpath(p, sizeof p, "/seq");
  int rc = zoo_create(zh, p, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, got, sizeof got);
  out("create /seq rc=%s", rc_name(rc));
  mkpath(p, sizeof p, "/seq/n-");
  for (int i = 0; i < 3; i++) {
    rc = zoo_create(zh, p, "s", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT_SEQUENTIAL, got, sizeof got);
    out("create seq %d rc=%s path=%s", i, rc_name(rc), rel(got));
  }
  char ep[512];
  mkpath(ep, sizeof ep, "/seq/n-0000000001");
  rc = zoo_delete(zh, ep, -1);
  out("delete seq 1 rc=%s", rc_name(rc));
  rc = zoo_create(zh, p, "s", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, got, sizeof got);
  out("create eseq rc=%s path=%s", rc_name(rc), rel(got));
  /* a short path buffer truncates the returned name, as the C client does */
  char small[8];
  rc = zoo_create(zh, p, "s", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT_SEQUENTIAL, small, sizeof small);
  out("create seq small-buffer rc=%s len=%zu", rc_name(rc), strlen(small));

  mkpath(p, sizeof p, "/eph");
  rc = zoo_create(zh, p, "e", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, got, sizeof got);
  out("create /eph rc=%s path=%s", rc_name(rc), rel(got));
  rc = zoo_exists(zh, p, 0, &st);
  out("exists /eph rc=%s", rc_name(rc));
  print_stat("exists /eph", &st, zh);
  mkpath(p, sizeof p, "/eph/child");
  rc = zoo_create(zh, p, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, got, sizeof got);
  out("create /eph/child rc=%s", rc_name(rc));
}

static void step_watches(zhandle_t *zh) {
  char p[512], got[512], cp[512];
  struct Stat st;
  mkpath(p, sizeof p, "/w");
  int base = events_now();
  int rc = zoo_wexists(zh, p, node_watcher, (void *)"exists", &st);
  out("wexists /w rc=%s", rc_name(rc));
  rc = zoo_create(zh, p, "w0", 2, &ZOO_OPEN_ACL_UNSAFE, 0, got, sizeof got);
  out("create /w rc=%s", rc_name(rc));
  wait_events(base, base + 1);

  base = events_now();
  char data[64];
  int len = (int)sizeof data;
  rc = zoo_wget(zh, p, node_watcher, (void *)"get", data, &len, &st);
  out("wget /w rc=%s data=%.*s", rc_name(rc), len < 0 ? 0 : len, data);
  rc = zoo_set(zh, p, "w1", 2, -1);
  out("set /w rc=%s", rc_name(rc));
  wait_events(base, base + 1);
  /* a watch fires once: a second change brings no event */
  rc = zoo_set(zh, p, "w2", 2, -1);
  out("set /w again rc=%s", rc_name(rc));

  base = events_now();
  struct String_vector kids;
  rc = zoo_wget_children(zh, p, node_watcher, (void *)"children", &kids);
  out("wget_children /w rc=%s count=%d", rc_name(rc), kids.count);
  deallocate_String_vector(&kids);
  mkpath(cp, sizeof cp, "/w/c");
  rc = zoo_create(zh, cp, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, got, sizeof got);
  out("create /w/c rc=%s", rc_name(rc));
  wait_events(base, base + 1);

  base = events_now();
  rc = zoo_wexists(zh, cp, node_watcher, (void *)"exists-del", &st);
  out("wexists /w/c rc=%s", rc_name(rc));
  len = (int)sizeof data;
  rc = zoo_wget(zh, cp, node_watcher, (void *)"get-del", data, &len, &st);
  out("wget /w/c rc=%s", rc_name(rc));
  rc = zoo_wget_children(zh, p, node_watcher, (void *)"children-del", &kids);
  out("wget_children /w rc=%s count=%d", rc_name(rc), kids.count);
  deallocate_String_vector(&kids);
  rc = zoo_delete(zh, cp, -1);
  out("delete /w/c rc=%s", rc_name(rc));
  wait_events(base, base + 3);
}

static void print_multi(const char *what, int rc, int count, zoo_op_result_t *res) {
  out("%s rc=%s", what, rc_name(rc));
  for (int i = 0; i < count; i++) {
    if (res[i].err == ZOK && res[i].value != NULL) {
      out("%s op%d err=%s value=%s", what, i, rc_name(res[i].err), rel(res[i].value));
    } else if (res[i].err == ZOK && res[i].stat != NULL) {
      out("%s op%d err=%s version=%d", what, i, rc_name(res[i].err), res[i].stat->version);
    } else {
      out("%s op%d err=%s(%d)", what, i, rc_name(res[i].err), res[i].err);
    }
  }
}

static void step_multi(zhandle_t *zh) {
  char p1[512], p2[512], pb[512], pn[512], p3[512];
  char b1[512], b2[512], b3[512];
  struct Stat st;
  mkpath(p1, sizeof p1, "/m1");
  mkpath(p2, sizeof p2, "/m1/m2");
  mkpath(pb, sizeof pb, "/b");
  mkpath(pn, sizeof pn, "/nope");
  mkpath(p3, sizeof p3, "/m3");

  zoo_op_t ops[5];
  zoo_op_result_t res[5];
  memset(res, 0, sizeof res);
  zoo_create_op_init(&ops[0], p1, "m", 1, &ZOO_OPEN_ACL_UNSAFE, 0, b1, sizeof b1);
  zoo_create_op_init(&ops[1], p2, "mm", 2, &ZOO_OPEN_ACL_UNSAFE, 0, b2, sizeof b2);
  zoo_set_op_init(&ops[2], pb, "b2", 2, 0, &st);
  zoo_check_op_init(&ops[3], pb, 1);
  zoo_delete_op_init(&ops[4], p2, 0);
  int rc = zoo_multi(zh, 5, ops, res);
  print_multi("multi ok", rc, 5, res);
  rc = zoo_exists(zh, p1, 0, &st);
  out("after multi ok: /m1 rc=%s numChildren=%d", rc_name(rc), st.numChildren);

  /* Fails at op 2 (check with a wrong version): nothing is applied. */
  memset(res, 0, sizeof res);
  zoo_create_op_init(&ops[0], p3, "m", 1, &ZOO_OPEN_ACL_UNSAFE, 0, b3, sizeof b3);
  zoo_set_op_init(&ops[1], pb, "b3", 2, -1, &st);
  zoo_check_op_init(&ops[2], pb, 7);
  zoo_delete_op_init(&ops[3], p1, -1);
  rc = zoo_multi(zh, 4, ops, res);
  print_multi("multi bad-check", rc, 4, res);
  rc = zoo_exists(zh, p3, 0, &st);
  out("after rollback: /m3 rc=%s", rc_name(rc));
  char data[64];
  int len = (int)sizeof data;
  rc = zoo_get(zh, pb, 0, data, &len, &st);
  out("after rollback: /b rc=%s data=%.*s version=%d", rc_name(rc), len < 0 ? 0 : len, data,
      st.version);
  rc = zoo_exists(zh, p1, 0, &st);
  out("after rollback: /m1 rc=%s", rc_name(rc));

  /* Fails at op 1 (delete of a missing node). */
  memset(res, 0, sizeof res);
  zoo_create_op_init(&ops[0], p3, "m", 1, &ZOO_OPEN_ACL_UNSAFE, 0, b3, sizeof b3);
  zoo_delete_op_init(&ops[1], pn, -1);
  zoo_create_op_init(&ops[2], p3, "m", 1, &ZOO_OPEN_ACL_UNSAFE, 0, b3, sizeof b3);
  rc = zoo_multi(zh, 3, ops, res);
  print_multi("multi bad-delete", rc, 3, res);
  rc = zoo_exists(zh, p3, 0, &st);
  out("after rollback 2: /m3 rc=%s", rc_name(rc));

  /* Duplicate create inside one multi: the second sees the first. */
  memset(res, 0, sizeof res);
  zoo_create_op_init(&ops[0], p3, "m", 1, &ZOO_OPEN_ACL_UNSAFE, 0, b3, sizeof b3);
  zoo_create_op_init(&ops[1], p3, "m", 1, &ZOO_OPEN_ACL_UNSAFE, 0, b2, sizeof b2);
  rc = zoo_multi(zh, 2, ops, res);
  print_multi("multi dup-create", rc, 2, res);

  rc = zoo_multi(zh, 0, ops, res);
  out("multi empty rc=%s", rc_name(rc));
}

static void step_acl(zhandle_t *zh, const char *hosts) {
  char p[512], got[512];
  struct Stat st;
  mkpath(p, sizeof p, "/acl");
  int rc = zoo_create(zh, p, "secret", 6, &ZOO_CREATOR_ALL_ACL, 0, got, sizeof got);
  out("create /acl creator-all without auth rc=%s", rc_name(rc));
  rc = zoo_add_auth(zh, "digest", "alice:pw", 8, NULL, NULL);
  out("add_auth rc=%s", rc_name(rc));
  /* zoo_add_auth is asynchronous; a sync round trip orders it before the create. */
  rc = zoo_exists(zh, g_root, 0, &st);
  rc = zoo_create(zh, p, "secret", 6, &ZOO_CREATOR_ALL_ACL, 0, got, sizeof got);
  out("create /acl creator-all rc=%s", rc_name(rc));
  struct ACL_vector acl;
  rc = zoo_get_acl(zh, p, &acl, &st);
  out("get_acl /acl rc=%s count=%d aversion=%d", rc_name(rc), acl.count, st.aversion);
  for (int i = 0; rc == ZOK && i < acl.count; i++) {
    out("get_acl /acl %d perms=%d scheme=%s id=%s", i, acl.data[i].perms, acl.data[i].id.scheme,
        acl.data[i].id.id);
  }
  if (rc == ZOK) deallocate_ACL_vector(&acl);
  char data[64];
  int len = (int)sizeof data;
  rc = zoo_get(zh, p, 0, data, &len, &st);
  out("get /acl as alice rc=%s data=%.*s", rc_name(rc), len < 0 ? 0 : len, data);

  zhandle_t *other = connect_wait(hosts);
  if (other == NULL) {
    out("second connect failed");
    return;
  }
  len = (int)sizeof data;
  rc = zoo_get(other, p, 0, data, &len, &st);
  out("get /acl anonymous before set_acl rc=%s", rc_name(rc));
  rc = zoo_get_acl(other, p, &acl, &st);
  out("get_acl /acl anonymous rc=%s", rc_name(rc));
  if (rc == ZOK) deallocate_ACL_vector(&acl);

  /* read-only for everyone, all for alice */
  struct ACL two[2] = {{ZOO_PERM_READ, {(char *)"world", (char *)"anyone"}},
                       {ZOO_PERM_ALL, {(char *)"auth", (char *)""}}};
  struct ACL_vector av = {2, two};
  rc = zoo_set_acl(zh, p, 0, &av);
  out("set_acl /acl v0 rc=%s", rc_name(rc));
  rc = zoo_set_acl(zh, p, 0, &av);
  out("set_acl /acl v0 again rc=%s", rc_name(rc));

  len = (int)sizeof data;
  rc = zoo_get(other, p, 0, data, &len, &st);
  out("get /acl anonymous rc=%s data=%.*s", rc_name(rc), rc == ZOK && len > 0 ? len : 0, data);
  rc = zoo_set(other, p, "hack", 4, -1);
  out("set /acl anonymous rc=%s", rc_name(rc));
  rc = zoo_add_auth(other, "digest", "mallory:pw", 10, NULL, NULL);
  rc = zoo_set(other, p, "hack", 4, -1);
  out("set /acl mallory rc=%s", rc_name(rc));
  rc = zoo_get_acl(other, p, &acl, &st);
  out("get_acl /acl mallory rc=%s count=%d", rc_name(rc), rc == ZOK ? acl.count : -1);
  if (rc == ZOK) deallocate_ACL_vector(&acl);
  rc = zoo_add_auth(other, "digest", "alice:pw", 8, NULL, NULL);
  rc = zoo_set(other, p, "ok", 2, -1);
  out("set /acl second alice rc=%s", rc_name(rc));
  char cp[512];
  mkpath(cp, sizeof cp, "/acl/kid");
  rc = zoo_create(other, cp, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, got, sizeof got);
  out("create /acl/kid second alice rc=%s", rc_name(rc));
  zookeeper_close(other);
}

static void step_sync_children2(zhandle_t *zh) {
  pthread_mutex_lock(&g_mu);
  g_sync_done = 0;
  pthread_mutex_unlock(&g_mu);
  int rc = zoo_async(zh, g_root, sync_done, NULL);
  out("zoo_async rc=%s", rc_name(rc));
  struct timespec ts;
  deadline_after(&ts, WAIT_MS);
  pthread_mutex_lock(&g_mu);
  while (!g_sync_done) {
    if (pthread_cond_timedwait(&g_cv, &g_mu, &ts) != 0) break;
  }
  out("sync done=%d rc=%s path=%s", g_sync_done, rc_name(g_sync_rc), rel(g_sync_path));
  pthread_mutex_unlock(&g_mu);

  struct String_vector kids;
  struct Stat st;
  rc = zoo_get_children2(zh, g_root, 0, &kids, &st);
  out("get_children2 root rc=%s count=%d", rc_name(rc), kids.count);
  if (rc == ZOK) {
    print_children("get_children2 root", &kids);
    print_stat("get_children2 root", &st, zh);
    deallocate_String_vector(&kids);
  }
  char p[512];
  mkpath(p, sizeof p, "/seq");
  rc = zoo_get_children(zh, p, 0, &kids);
  if (rc == ZOK) {
    print_children("get_children /seq", &kids);
    deallocate_String_vector(&kids);
  }
  mkpath(p, sizeof p, "/nope");
  rc = zoo_get_children2(zh, p, 0, &kids, &st);
  out("get_children2 /nope rc=%s", rc_name(rc));
}

int main(int argc, char **argv) {
  if (argc != 3 || argv[2][0] != '/') {
    fprintf(stderr, "usage: zkc_driver HOSTS /ROOT\n");
    return 2;
  }
  const char *hosts = argv[1];
  g_root = argv[2];
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);

  zhandle_t *zh = connect_wait(hosts);
  if (zh == NULL) {
    fprintf(stderr, "zkc_driver: could not connect to %s\n", hosts);
    return 2;
  }
  out("connected state=%d", zoo_state(zh));
  step_crud(zh);
  step_sequential_ephemeral(zh);
  step_watches(zh);
  step_multi(zh);
  step_acl(zh, hosts);
  step_sync_children2(zh);

  /* Closing the session removes its ephemerals, seen from another session. */
  int rc = zookeeper_close(zh);
  out("close rc=%s", rc_name(rc));
  zhandle_t *check = connect_wait(hosts);
  if (check == NULL) {
    out("reconnect failed");
    return 2;
  }
  char p[512];
  struct Stat st;
  mkpath(p, sizeof p, "/eph");
  rc = zoo_exists(check, p, 0, &st);
  out("after close: /eph rc=%s", rc_name(rc));
  struct String_vector kids;
  mkpath(p, sizeof p, "/seq");
  rc = zoo_get_children(check, p, 0, &kids);
  if (rc == ZOK) {
    print_children("after close: /seq", &kids);
    deallocate_String_vector(&kids);
  }
  zookeeper_close(check);
  out("done");
  return 0;
}
