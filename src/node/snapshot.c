/*
 * snapshot.c — the server's own snapshots, by fork (see snapshot.h), and
 * loading a snapshot file into the state machine.
 *
 *   IDLE --enough entries or asked--> RUNNING (child pid) --child exits 0-->
 *   raft_snapshot_taken + compact --> IDLE;  child fails --> IDLE (logged)
 *
 * The child inherits a copy-on-write image of the state exactly at
 * applied_index (fork happens between two applies, on the loop thread), so
 * the snapshot is consistent without pausing the parent. The child touches
 * nothing shared: it writes through the storage's vfs (the POSIX one, which
 * holds no state) and _exit()s.
 */
#include "node/snapshot.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/assert.h"
#include "core/fsm.h"
#include "core/feed.h"
#include "os/clock.h"
#include "os/log.h"
#include "wal/snapshot.h"
#include "wal/vfs.h"

struct node_snapshotter {
	pid_t child;
	bool requested;
	uint64_t index;
	uint64_t term;
	struct raft_config config;
	uint64_t started_ms;
	uint64_t failures;
	uint64_t bytes_at_start;
};

static struct node_snapshotter *snap_of(struct node *n)
{
	if (n->snapshotter == NULL) {
		n->snapshotter = calloc(1, sizeof(*n->snapshotter));
		KEEL_ASSERT(n->snapshotter != NULL);
	}
	return n->snapshotter;
}

struct child_writer {
	struct wal_snapshot_writer w;
};

static enum keel_err child_write(void *ctx, const void *data, size_t size)
{
	struct child_writer *cw = ctx;
	return wal_snapshot_append(&cw->w, data, size);
}

/* Runs in the child: write the snapshot, exit 0 on success. */
static _Noreturn void child_main(struct node *n, struct node_snapshotter *s)
{
	struct wal_config wc;
	wal_config_init(&wc, node_storage_vfs(n->storage), n->cfg.data_dir);
	uint8_t membership[4096];
	struct keel_wbuf mw;
	keel_wbuf_init_fixed(&mw, membership, sizeof(membership));
	raft_config_encode(&s->config, &mw);
	struct child_writer cw;
	enum keel_err rc = wal_snapshot_begin(&cw.w, &wc, s->index, s->term, membership,
					      (uint32_t)mw.size);
	if (rc != KEEL_OK) {
		fprintf(stderr, "snapshot: %s\n", cw.w.errmsg);
		_exit(1);
	}
	rc = fsm_snapshot_write(&n->core, child_write, &cw);
	if (rc != KEEL_OK) {
		fprintf(stderr, "snapshot: writing state failed: %s %s\n", keel_strerror(rc),
			cw.w.errmsg);
		wal_snapshot_abort(&cw.w);
		_exit(1);
	}
	rc = wal_snapshot_commit(&cw.w);
	if (rc != KEEL_OK) {
		fprintf(stderr, "snapshot: commit failed: %s\n", cw.w.errmsg);
		_exit(1);
	}
	_exit(0);
}

static enum keel_err start(struct node *n)
{
	struct node_snapshotter *s = snap_of(n);
	if (s->child != 0) {
		return KEEL_BUSY;
	}
	if (n->core.applied_index == 0 || n->core.applied_index <= n->core.snapshot_index || n->core.in_ready) {
		return KEEL_OK;
	}
	s->index = n->core.applied_index;
	s->term = n->core.applied_term;
	s->config = n->core.applied_config;
	s->started_ms = node_now_ms(n);
	s->bytes_at_start = n->core.bytes_since_snapshot;
	pid_t pid = fork();
	if (pid < 0) {
		KEEL_ERROR("snapshot: fork failed: %s", strerror(errno));
		return KEEL_IO;
	}
	if (pid == 0) {
		child_main(n, s);
	}
	s->child = pid;
	s->requested = false;
	KEEL_INFO("snapshot at %llu (term %llu) started in process %d",
		  (unsigned long long)s->index, (unsigned long long)s->term, (int)pid);
	return KEEL_OK;
}

void snapshot_maybe_start(struct node *n)
{
	struct node_snapshotter *s = snap_of(n);
	if (s->child != 0 || n->stopping || n->core.failed) {
		return;
	}
	if (s->requested || n->core.applied_index >= n->core.snapshot_index + n->cfg.snapshot_entries ||
	    n->core.bytes_since_snapshot >= n->cfg.snapshot_bytes) {
		(void)start(n);
	}
}

enum keel_err snapshot_request(struct node *n)
{
	struct node_snapshotter *s = snap_of(n);
	if (s->child != 0) {
		return KEEL_BUSY;
	}
	s->requested = true;
	snapshot_maybe_start(n);
	return KEEL_OK;
}

static void finished(struct node *n, struct node_snapshotter *s, int status)
{
	pid_t pid = s->child;
	s->child = 0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		s->failures++;
		KEEL_ERROR("snapshot at %llu failed (process %d, status %d); will retry",
			   (unsigned long long)s->index, (int)pid, status);
		return;
	}
	struct raft_snapshot_meta meta;
	memset(&meta, 0, sizeof(meta));
	meta.index = s->index;
	meta.term = s->term;
	meta.config = s->config;
	if (node_storage_snapshot_size(n->storage, s->index, s->term, &meta.size_bytes) !=
	    KEEL_OK) {
		KEEL_ERROR("snapshot at %llu vanished: %s", (unsigned long long)s->index,
			   wal_vfs_last_error());
		return;
	}
	enum keel_err rc = raft_snapshot_taken(n->core.raft, &meta);
	if (rc != KEEL_OK) {
		KEEL_WARN("snapshot at %llu not used by Raft (%s)", (unsigned long long)s->index,
			  keel_strerror(rc));
		return;
	}
	n->core.snapshot_index = s->index;
	n->core.bytes_since_snapshot -= KEEL_MIN(n->core.bytes_since_snapshot, s->bytes_at_start);
	n->core.stats.snapshots_taken++;
	node_storage_note_snapshot(n->storage, s->index, s->term);
	node_storage_compact(n->storage, s->index);
	node_feed_on_snapshot_taken(&n->core, s->index);
	KEEL_INFO("snapshot at %llu written (%llu bytes, %llu ms)", (unsigned long long)s->index,
		  (unsigned long long)meta.size_bytes,
		  (unsigned long long)(node_now_ms(n) - s->started_ms));
	core_drive(&n->core);
	/* The log behind the snapshot was freed: give the memory back. */
	malloc_trim(0);
}

void snapshot_tick(struct node *n)
{
	struct node_snapshotter *s = snap_of(n);
	if (s->child == 0) {
		return;
	}
	int status = 0;
	pid_t r = waitpid(s->child, &status, WNOHANG);
	if (r == s->child) {
		finished(n, s, status);
	} else if (r < 0 && errno == ECHILD) {
		s->child = 0;
	}
}

void snapshot_close(struct node *n)
{
	struct node_snapshotter *s = n->snapshotter;
	if (s == NULL) {
		return;
	}
	if (s->child != 0) {
		int status;
		waitpid(s->child, &status, 0);
		s->child = 0;
	}
	free(s);
	n->snapshotter = NULL;
}

/* ---- loading ---- */

struct load_reader {
	struct wal_snapshot_reader r;
};

static enum keel_err load_read(void *ctx, void *buf, size_t size, size_t *got)
{
	struct load_reader *lr = ctx;
	size_t total = 0;
	while (total < size) {
		size_t n = 0;
		enum keel_err rc = wal_snapshot_read(&lr->r, (uint8_t *)buf + total, size - total, &n);
		if (rc != KEEL_OK) {
			return rc;
		}
		if (n == 0) {
			break;
		}
		total += n;
	}
	*got = total;
	return KEEL_OK;
}

enum keel_err fsm_snapshot_load(struct node *n, const char *path, uint64_t index, char *err,
				size_t err_size)
{
	const char *slash = strrchr(path, '/');
	char dir[1024];
	const char *name = path;
	if (slash != NULL) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
		name = slash + 1;
	} else {
		snprintf(dir, sizeof(dir), ".");
	}
	struct wal_config wc;
	wal_config_init(&wc, node_storage_vfs(n->storage), dir);
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct load_reader lr;
	enum keel_err rc = wal_snapshot_open(&lr.r, &wc, name, &arena);
	if (rc != KEEL_OK) {
		snprintf(err, err_size, "%s", lr.r.errmsg);
		keel_arena_close(&arena);
		return rc;
	}
	if (lr.r.meta.index != index) {
		snprintf(err, err_size, "snapshot %s is at index %llu, expected %llu", path,
			 (unsigned long long)lr.r.meta.index, (unsigned long long)index);
		wal_snapshot_close(&lr.r);
		keel_arena_close(&arena);
		return KEEL_CORRUPT;
	}
	struct raft_config config;
	memset(&config, 0, sizeof(config));
	if (lr.r.meta.membership_size > 0 &&
	    raft_config_decode(lr.r.meta.membership, lr.r.meta.membership_size, &config) !=
		    KEEL_OK) {
		snprintf(err, err_size, "snapshot %s has a malformed membership", path);
		wal_snapshot_close(&lr.r);
		keel_arena_close(&arena);
		return KEEL_CORRUPT;
	}
	rc = fsm_snapshot_read(&n->core, load_read, &lr, err, err_size);
	if (rc == KEEL_OK) {
		/* The checksum is verified by the read that delivers the last
		 * byte: make sure the whole payload was consumed. */
		uint8_t extra;
		size_t got = 0;
		if (wal_snapshot_read(&lr.r, &extra, 1, &got) != KEEL_OK || got != 0) {
			snprintf(err, err_size, "snapshot %s: trailing or damaged payload", path);
			rc = KEEL_CORRUPT;
		}
	}
	if (rc == KEEL_OK) {
		n->core.applied_term = lr.r.meta.term;
		n->core.applied_config = config;
	}
	wal_snapshot_close(&lr.r);
	keel_arena_close(&arena);
	return rc;
}
