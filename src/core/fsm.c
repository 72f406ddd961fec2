/*
 * fsm.c — applying committed entries and (de)serializing the state.
 *
 * Dispatch: NOOP entries change nothing; CONFIG entries are the Raft core's
 * business (peers follow the address book, not the config); NORMAL entries
 * carry an envelope (entry.h) whose kind picks the layer. A malformed entry
 * is logged and skipped identically on every server — applying must never
 * diverge or crash on data that is already committed.
 */
#include "core/fsm.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/fmt.h"
#include "core/entry.h"
#include "zk/zk_reconfig.h"
#include "zk/zk_snapshot.h"

#define SNAP_MAGIC 0x4b534e50u /* "KSNP" */
#define SNAP_VERSION 1
#define SNAP_HEAD_SIZE 6
_Static_assert(SNAP_HEAD_SIZE == 4 + 2, "stream head: u32 magic, u16 version");
#define SNAP_TAG_END 0
#define SNAP_TAG_BOOK 1
#define SNAP_TAG_ZK 2
#define SNAP_TAG_META 3
#define SNAP_MAX_CHUNK (64u << 20)

struct node_fsm {
	struct fsm_image_ops image; /* the metadata section's owner */
	uint64_t malformed_entries;
	struct zk_config zk_config;
	struct zk_state zk;
	struct zk_result zk_result;
};

enum keel_err fsm_create(const struct zk_config *zk_config, const struct fsm_image_ops *image,
			 struct node_fsm **out)
{
	KEEL_ASSERT(image->save != NULL);
	KEEL_ASSERT(image->load != NULL);
	struct node_fsm *fsm = calloc(1, sizeof(*fsm));
	if (fsm == NULL) {
		return KEEL_NOMEM;
	}
	fsm->image = *image;
	fsm->zk_config = *zk_config;
	enum keel_err rc = zk_state_init(&fsm->zk, &fsm->zk_config);
	if (rc != KEEL_OK) {
		free(fsm);
		return rc;
	}
	zk_result_init(&fsm->zk_result, fsm->zk_config.max_reply_size);
	*out = fsm;
	return KEEL_OK;
}

void fsm_destroy(struct node_fsm *fsm)
{
	zk_result_close(&fsm->zk_result);
	zk_state_close(&fsm->zk);
	free(fsm);
}

struct zk_state *fsm_zk(struct node_fsm *fsm)
{
	return &fsm->zk;
}

const struct zk_config *fsm_zk_config(const struct node_fsm *fsm)
{
	return &fsm->zk_config;
}

/* Applies a ZooKeeper txn; the result is in fsm->zk_result. Returns
 * FSM_APPLIED_ZK, or FSM_APPLIED_ZK_FAILED for a txn that does not decode
 * (skipped on every server), or FSM_APPLIED_NOTHING when this server runs
 * out of memory (it stops: it can no longer follow the log). */
static enum fsm_applied_kind apply_zk(struct node_core *c, const struct raft_entry *entry,
				      const struct node_entry *ne)
{
	struct node_fsm *fsm = c->fsm;
	zk_result_reset(&fsm->zk_result);
	enum keel_err rc = zk_apply(&fsm->zk, entry->index, ne->payload, ne->payload_size,
				    &fsm->zk_result);
	if (rc == KEEL_NOMEM) {
		CORE_ERROR(c, "out of memory applying entry %llu: this server cannot follow the log",
			   (unsigned long long)entry->index);
		c->failed = true;
		return FSM_APPLIED_NOTHING;
	}
	if (rc != KEEL_OK) {
		fsm->malformed_entries++;
		CORE_ERROR(c, "entry %llu: undecodable ZooKeeper txn (%s); skipped on every server",
			   (unsigned long long)entry->index, keel_strerror(rc));
		return FSM_APPLIED_ZK_FAILED;
	}
	return FSM_APPLIED_ZK;
}

static struct node_addr *book_upsert(struct node_core *c, uint64_t id)
{
	for (size_t i = 0; i < c->book.count; i++) {
		if (c->book.addrs[i].id == id) {
			return &c->book.addrs[i];
		}
	}
	if (c->book.count >= KEEL_ARRAY_SIZE(c->book.addrs)) {
		return NULL;
	}
	struct node_addr *a = &c->book.addrs[c->book.count++];
	memset(a, 0, sizeof(*a));
	a->id = id;
	return a;
}

static void book_delete(struct node_core *c, uint64_t id)
{
	for (size_t i = 0; i < c->book.count; i++) {
		if (c->book.addrs[i].id == id) {
			c->book.addrs[i] = c->book.addrs[c->book.count - 1];
			c->book.count--;
			return;
		}
	}
}

static bool read_string(struct keel_rbuf *r, char *out, size_t out_size)
{
	uint16_t len = keel_rbuf_u16(r);
	const uint8_t *p = keel_rbuf_bytes(r, len);
	if (p == NULL || len >= out_size) {
		keel_rbuf_fail(r);
		return false;
	}
	memcpy(out, p, len);
	out[len] = '\0';
	return true;
}

bool fsm_apply_cluster_payload(struct node_core *c, const uint8_t *payload, size_t size, bool final)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, payload, size);
	uint8_t op = keel_rbuf_u8(&r);
	uint64_t id = keel_rbuf_u64(&r);
	if (!keel_rbuf_ok(&r) || id == 0) {
		return false;
	}
	if (op == NODE_CLUSTER_SET_ADDR) {
		char peer[CORE_ADDR_SIZE], client[CORE_ADDR_SIZE];
		if (!read_string(&r, peer, sizeof(peer)) || !read_string(&r, client, sizeof(client))) {
			return false;
		}
		struct node_addr *a = book_upsert(c, id);
		if (a == NULL) {
			return false;
		}
		keel_fmt(a->peer_addr, sizeof(a->peer_addr), "%s", peer);
		if (client[0] != '\0') {
			keel_fmt(a->client_addr, sizeof(a->client_addr), "%s", client);
		}
		if (final) {
			CORE_INFO(c, "address book: server %llu at %s", (unsigned long long)id, peer);
		}
	} else if (op == NODE_CLUSTER_DEL_ADDR && final) {
		if (id == c->id) {
			return false; /* never forget ourselves */
		}
		book_delete(c, id);
		CORE_INFO(c, "address book: server %llu removed", (unsigned long long)id);
	}
	return final;
}

#define ZK_CONFIG_PATH "/zookeeper/config"

/*
 * /zookeeper/config after the membership entry at `index` (zk_reconfig.h):
 * every server renders the members of `config` with their addresses from
 * the address book, version = index, and writes it as a system write at
 * zxid `index` (so its watches fire like a client's setData). A member
 * whose address this server does not know yet (a server that joined and
 * replays the bootstrap entry) leaves the node as it is.
 */
static void put_zk_config(struct node_core *c, uint64_t index, const struct raft_config *config,
			  struct fsm_applied *out)
{
	struct zk_config_member members[RAFT_MAX_MEMBERS];
	for (uint32_t i = 0; i < config->count; i++) {
		const struct node_addr *a = core_addr_find(c, config->members[i].id);
		if (a == NULL || a->peer_addr[0] == '\0') {
			return;
		}
		members[i] = (struct zk_config_member){
			.id = config->members[i].id,
			.role = config->members[i].role == RAFT_LEARNER ? ZK_ROLE_OBSERVER
									: ZK_ROLE_PARTICIPANT,
			.peer_addr = a->peer_addr,
			.tail = a->client_addr,
		};
	}
	struct keel_wbuf text;
	keel_wbuf_init_dynamic(&text, 256, 64u * 1024u);
	zk_config_render(members, config->count, index, &text);
	struct zk_state *st = fsm_zk(c->fsm);
	struct zk_result *res = &c->fsm->zk_result;
	zk_system_begin(st, res, index, 0);
	enum keel_err rc = keel_wbuf_ok(&text)
				   ? zk_system_put(st, res, ZK_CONFIG_PATH, sizeof(ZK_CONFIG_PATH) - 1,
						   text.data, text.size, zk_acl_read_unsafe(), 0)
				   : KEEL_NOMEM;
	keel_wbuf_free(&text);
	if (rc == KEEL_NOMEM) {
		CORE_ERROR(c, "entry %llu: out of memory writing %s", (unsigned long long)index,
			   ZK_CONFIG_PATH);
		c->failed = true;
		return;
	}
	if (rc == KEEL_OK) {
		out->kind = FSM_APPLIED_ZK_SYSTEM;
		out->zk = res;
	}
}

void fsm_apply(struct node_core *c, const struct raft_entry *entry, struct fsm_applied *out)
{
	memset(out, 0, sizeof(*out));
	if (entry->type != RAFT_ENTRY_NORMAL) {
		if (entry->type == RAFT_ENTRY_CONFIG) {
			struct raft_config config;
			if (raft_config_decode(entry->data, entry->size, &config) == KEEL_OK) {
				CORE_INFO(c, "membership at %llu: %u members, %u voters",
					  (unsigned long long)entry->index, config.count,
					  raft_config_voters(&config));
				put_zk_config(c, entry->index, &config, out);
			}
		}
		return;
	}
	struct node_entry ne;
	if (node_entry_decode(entry->data, entry->size, &ne) != KEEL_OK) {
		c->fsm->malformed_entries++;
		CORE_ERROR(c, "entry %llu is malformed; skipped on every server",
			   (unsigned long long)entry->index);
		return;
	}
	out->entry = ne;
	switch (ne.kind) {
	case NODE_ENTRY_CLUSTER:
		if (fsm_apply_cluster_payload(c, ne.payload, ne.payload_size, true)) {
			out->kind = FSM_APPLIED_BOOK;
		}
		return;
	case NODE_ENTRY_ZK:
		out->kind = apply_zk(c, entry, &ne);
		out->zk = out->kind == FSM_APPLIED_ZK ? &c->fsm->zk_result : NULL;
		return;
	case NODE_ENTRY_META:
		out->kind = FSM_APPLIED_META; /* the image's owner applies it */
		return;
	default:
		c->fsm->malformed_entries++;
		return;
	}
}

/* ---- snapshot stream ---- */

struct section_writer {
	fsm_write_fn write;
	void *ctx;
	enum keel_err err;
};

static void put(struct section_writer *sw, const void *data, size_t size)
{
	if (sw->err == KEEL_OK) {
		sw->err = sw->write(sw->ctx, data, size);
	}
}

static void put_u8(struct section_writer *sw, uint8_t v)
{
	put(sw, &v, 1);
}

/* Writes one chunk of a section. */
static void put_chunk(struct section_writer *sw, const void *data, size_t size)
{
	uint8_t hdr[4];
	keel_store_be32(hdr, (uint32_t)size);
	put(sw, hdr, 4);
	if (size > 0) {
		put(sw, data, size);
	}
}

/* zk_snapshot_write's callback: each piece becomes one chunk. */
static enum keel_err zk_section_write(void *ctx, const void *data, size_t size)
{
	struct section_writer *sw = ctx;
	if (size > 0) {
		put_chunk(sw, data, size);
	}
	return sw->err;
}

/* The stream's head, the address book and the ZooKeeper state. */
static void write_book_and_zk(struct section_writer *sw, const struct node_addr_book *book,
			      const struct zk_state *zk)
{
	uint8_t head[SNAP_HEAD_SIZE];
	keel_store_be32(head, SNAP_MAGIC);
	keel_store_be16(head + 4, SNAP_VERSION);
	put(sw, head, sizeof(head));

	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 1024, 1u << 20);
	keel_wbuf_u32(&w, (uint32_t)book->count);
	for (size_t i = 0; i < book->count; i++) {
		const struct node_addr *a = &book->addrs[i];
		keel_wbuf_u64(&w, a->id);
		size_t pl = strlen(a->peer_addr), cl = strlen(a->client_addr);
		keel_wbuf_u16(&w, (uint16_t)pl);
		keel_wbuf_bytes(&w, a->peer_addr, pl);
		keel_wbuf_u16(&w, (uint16_t)cl);
		keel_wbuf_bytes(&w, a->client_addr, cl);
	}
	if (!keel_wbuf_ok(&w)) {
		keel_wbuf_free(&w);
		if (sw->err == KEEL_OK) {
			sw->err = KEEL_NOMEM;
		}
		return;
	}
	put_u8(sw, SNAP_TAG_BOOK);
	put_chunk(sw, w.data, w.size);
	put_chunk(sw, NULL, 0);
	keel_wbuf_free(&w);

	put_u8(sw, SNAP_TAG_ZK);
	uint64_t written = 0;
	enum keel_err rc = zk_snapshot_write(zk, zk_section_write, sw, &written);
	if (rc != KEEL_OK && sw->err == KEEL_OK) {
		sw->err = rc;
	}
	put_chunk(sw, NULL, 0);
}

enum keel_err fsm_snapshot_write_parts(const struct node_addr_book *book,
				       const struct zk_state *zk, fsm_write_fn write, void *ctx)
{
	struct section_writer sw = {write, ctx, KEEL_OK};
	write_book_and_zk(&sw, book, zk);
	put_u8(&sw, SNAP_TAG_END);
	return sw.err;
}

enum keel_err fsm_snapshot_write(struct node_core *c, fsm_write_fn write, void *ctx)
{
	struct section_writer sw = {write, ctx, KEEL_OK};
	write_book_and_zk(&sw, &c->book, &c->fsm->zk);
	enum keel_err rc;

	/* The metadata image (core/controller.h). */
	put_u8(&sw, SNAP_TAG_META);
	rc = c->fsm->image.save(c->fsm->image.ctx, zk_section_write, &sw);
	if (rc != KEEL_OK && sw.err == KEEL_OK) {
		sw.err = rc;
	}
	put_chunk(&sw, NULL, 0);

	put_u8(&sw, SNAP_TAG_END);
	return sw.err;
}

struct section_reader {
	fsm_read_fn read;
	void *ctx;
	enum keel_err err;
};

static bool get(struct section_reader *sr, void *buf, size_t size)
{
	if (sr->err != KEEL_OK) {
		return false;
	}
	size_t got = 0;
	sr->err = sr->read(sr->ctx, buf, size, &got);
	if (sr->err == KEEL_OK && got != size) {
		sr->err = KEEL_SHORT;
	}
	return sr->err == KEEL_OK;
}

/* Reads a whole section into a heap buffer (sections of the address book and
 * metadata are small; the ZooKeeper state streams chunk by chunk). */
static uint8_t *get_section(struct section_reader *sr, size_t *size, size_t max)
{
	uint8_t *data = NULL;
	size_t used = 0;
	for (;;) {
		uint8_t hdr[4];
		if (!get(sr, hdr, 4)) {
			break;
		}
		uint32_t len = keel_load_be32(hdr);
		if (len == 0) {
			*size = used;
			return data != NULL ? data : malloc(1);
		}
		if (len > SNAP_MAX_CHUNK || used + len > max) {
			sr->err = KEEL_CORRUPT;
			break;
		}
		uint8_t *nd = realloc(data, used + len);
		if (nd == NULL) {
			sr->err = KEEL_NOMEM;
			break;
		}
		data = nd;
		if (!get(sr, data + used, len)) {
			break;
		}
		used += len;
	}
	free(data);
	return NULL;
}

static enum keel_err load_book(struct node_core *c, const uint8_t *data, size_t size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, data, size);
	uint32_t count = keel_rbuf_u32(&r);
	if (count > KEEL_ARRAY_SIZE(c->book.addrs)) {
		return KEEL_CORRUPT;
	}
	struct node_addr_book book;
	memset(&book, 0, sizeof(book));
	for (uint32_t i = 0; i < count; i++) {
		struct node_addr *a = &book.addrs[i];
		a->id = keel_rbuf_u64(&r);
		read_string(&r, a->peer_addr, sizeof(a->peer_addr));
		read_string(&r, a->client_addr, sizeof(a->client_addr));
	}
	if (!keel_rbuf_done(&r)) {
		return KEEL_CORRUPT;
	}
	book.count = count;
	c->book = book;
	return KEEL_OK;
}

/* A section's chunks as one continuous stream (zk_snapshot_load reads it);
 * got == 0 at the section's end. */
struct section_stream {
	struct section_reader *sr;
	uint32_t left; /* bytes left in the current chunk */
	bool ended;
};

static enum keel_err section_stream_read(void *ctx, void *buf, size_t max, size_t *got)
{
	struct section_stream *ss = ctx;
	*got = 0;
	while (!ss->ended && ss->left == 0) {
		uint8_t hdr[4];
		if (!get(ss->sr, hdr, 4)) {
			return ss->sr->err;
		}
		ss->left = keel_load_be32(hdr);
		if (ss->left == 0) {
			ss->ended = true;
		} else if (ss->left > SNAP_MAX_CHUNK) {
			return KEEL_CORRUPT;
		}
	}
	if (ss->ended) {
		return KEEL_OK;
	}
	size_t n = KEEL_MIN(max, (size_t)ss->left);
	if (!get(ss->sr, buf, n)) {
		return ss->sr->err;
	}
	ss->left -= (uint32_t)n;
	*got = n;
	return KEEL_OK;
}

static enum keel_err load_zk(struct node_core *c, struct section_reader *sr, char *err,
			     size_t err_size)
{
	struct node_fsm *fsm = c->fsm;
	struct zk_state fresh;
	struct section_stream ss = {sr, 0, false};
	/* zk_snapshot_load initializes `fresh` itself, and closes it on error. */
	enum keel_err rc = zk_snapshot_load(&fresh, &fsm->zk_config, section_stream_read, &ss);
	if (rc == KEEL_OK) {
		/* The section must end right after the state. */
		uint8_t extra;
		size_t got = 0;
		rc = section_stream_read(&ss, &extra, 1, &got);
		if (rc == KEEL_OK && (got != 0 || !ss.ended)) {
			rc = KEEL_CORRUPT;
		}
		if (rc != KEEL_OK) {
			zk_state_close(&fresh);
		}
	}
	if (rc != KEEL_OK) {
		keel_fmt(err, err_size, "ZooKeeper state in the snapshot is damaged (%s)",
			 keel_strerror(rc));
		return rc;
	}
	zk_state_close(&fsm->zk);
	fsm->zk = fresh;
	return KEEL_OK;
}

enum keel_err fsm_snapshot_read(struct node_core *c, fsm_read_fn read, void *ctx, char *err,
				size_t err_size)
{
	struct section_reader sr = {read, ctx, KEEL_OK};
	uint8_t head[SNAP_HEAD_SIZE];
	if (!get(&sr, head, sizeof(head)) || keel_load_be32(head) != SNAP_MAGIC ||
	    keel_load_be16(head + 4) != SNAP_VERSION) {
		keel_fmt(err, err_size, "not a keel state snapshot (bad magic or version)");
		return sr.err != KEEL_OK ? sr.err : KEEL_CORRUPT;
	}
	bool meta_seen = false;
	for (;;) {
		uint8_t tag;
		if (!get(&sr, &tag, 1)) {
			break;
		}
		if (tag == SNAP_TAG_END) {
			/* No metadata section: an empty image. */
			return meta_seen ? KEEL_OK : c->fsm->image.load(c->fsm->image.ctx, NULL, 0, err, err_size);
		}
		if (tag == SNAP_TAG_ZK) {
			enum keel_err rc = load_zk(c, &sr, err, err_size);
			if (rc != KEEL_OK) {
				return rc;
			}
			continue;
		}
		size_t size = 0;
		uint8_t *data = get_section(&sr, &size, 1u << 30);
		if (data == NULL) {
			break;
		}
		enum keel_err rc = KEEL_OK;
		if (tag == SNAP_TAG_BOOK) {
			rc = load_book(c, data, size);
		} else if (tag == SNAP_TAG_META) {
			meta_seen = true;
			rc = c->fsm->image.load(c->fsm->image.ctx, data, size, err, err_size);
			if (rc != KEEL_OK) {
				free(data);
				return rc;
			}
		}
		free(data);
		if (rc != KEEL_OK) {
			keel_fmt(err, err_size, "snapshot section %u is malformed", tag);
			return rc;
		}
	}
	keel_fmt(err, err_size, "snapshot stream ends early or is malformed (%s)",
		 keel_strerror(sr.err));
	return sr.err != KEEL_OK ? sr.err : KEEL_CORRUPT;
}

uint64_t fsm_znode_count(const struct node_fsm *fsm)
{
	return zk_state_node_count(&fsm->zk);
}

uint64_t fsm_session_count(const struct node_fsm *fsm)
{
	return zk_state_session_count(&fsm->zk);
}

uint64_t fsm_ephemeral_count(const struct node_fsm *fsm)
{
	uint64_t count = 0;
	size_t cursor = 0;
	const struct zk_session *s;
	while ((s = zk_state_session_next(&fsm->zk, &cursor)) != NULL) {
		count += s->eph_count;
	}
	return count;
}

uint64_t fsm_data_bytes(const struct node_fsm *fsm)
{
	struct zk_memory mem;
	zk_state_memory(&fsm->zk, &mem);
	return mem.total_bytes;
}
