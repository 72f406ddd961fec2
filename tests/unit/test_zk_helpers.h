/*
 * test_zk_helpers.h — a small in-process "server" for the zk unit tests:
 * builds txns the way the server will (zk_txn.h), applies them with
 * zk_apply(), and decodes replies. Header-only (static functions), included
 * by the test_zk_*.c binaries that need it.
 */
#ifndef KEEL_TEST_ZK_HELPERS_H
#define KEEL_TEST_ZK_HELPERS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "zk/zk_mutate.h"
#include "zk/zk_proto.h"
#include "zk/zk_state.h"
#include "zk/zk_txn.h"

struct zt {
	struct zk_state st;
	struct zk_result res;
	struct keel_wbuf txn;
	struct keel_wbuf body;
	struct keel_wbuf acl;
	uint64_t zxid;
	int64_t now_ms;
	struct zk_ids ids; /* identities of the next request */
};

static inline struct zk_bytes zt_b(const char *s)
{
	return zk_bytes_str(s);
}

static inline void zt_init_cfg(struct zt *z, const struct zk_config *cfg)
{
	memset(z, 0, sizeof(*z));
	assert_int_equal(zk_state_init(&z->st, cfg), KEEL_OK);
	zk_result_init(&z->res, cfg->max_reply_size);
	keel_wbuf_init_dynamic(&z->txn, 256, 1u << 24);
	keel_wbuf_init_dynamic(&z->body, 256, 1u << 24);
	keel_wbuf_init_dynamic(&z->acl, 256, 1u << 16);
	z->now_ms = 1700000000000;
	zk_ids_init(&z->ids);
	assert_int_equal(zk_ids_add(&z->ids, zt_b("ip"), zt_b("127.0.0.1")), KEEL_OK);
}

static inline void zt_init(struct zt *z)
{
	struct zk_config cfg;
	zk_config_default(&cfg);
	zt_init_cfg(z, &cfg);
}

static inline void zt_close(struct zt *z)
{
	zk_result_close(&z->res);
	zk_state_close(&z->st);
	keel_wbuf_free(&z->txn);
	keel_wbuf_free(&z->body);
	keel_wbuf_free(&z->acl);
}

/* Applies the txn in z->txn at the next zxid; checks the incremental hash
 * against a full recompute after every apply. */
static inline enum keel_err zt_apply_txn(struct zt *z)
{
	z->zxid++;
	enum keel_err err = zk_apply(&z->st, z->zxid, z->txn.data, z->txn.size, &z->res);
	assert_true(zk_state_hash(&z->st) == zk_state_hash_full(&z->st));
	return err;
}

static inline int64_t zt_session(struct zt *z, int32_t timeout_ms)
{
	uint8_t pw[ZK_PASSWD_SIZE];
	for (int i = 0; i < ZK_PASSWD_SIZE; i++) {
		pw[i] = (uint8_t)(z->zxid * 31u + (unsigned)i);
	}
	z->now_ms += 7;
	struct zk_txn_meta meta = {z->now_ms, 1, 0, 0};
	keel_wbuf_reset(&z->txn);
	zk_txn_encode_create_session(&z->txn, &meta, timeout_ms, pw);
	assert_int_equal(zt_apply_txn(z), KEEL_OK);
	assert_int_equal(z->res.err, ZK_OK);
	assert_int_equal(z->res.new_session_timeout_ms, timeout_ms);
	assert_memory_equal(z->res.new_session_passwd, pw, ZK_PASSWD_SIZE);
	return z->res.new_session_id;
}

/* Applies a client request (body in z->body) from session `sid`. Returns
 * the ZooKeeper error of the reply. */
static inline int32_t zt_request(struct zt *z, int64_t sid, int32_t opcode)
{
	z->now_ms += 7;
	struct zk_txn_meta meta = {z->now_ms, 0xabc, (int32_t)z->zxid + 100, sid};
	keel_wbuf_reset(&z->txn);
	zk_txn_encode_request(&z->txn, &meta, &z->ids, opcode, z->body.data, z->body.size);
	assert_int_equal(zt_apply_txn(z), KEEL_OK);
	assert_int_equal(z->res.origin, 0xabc);
	assert_int_equal(z->res.xid, (int32_t)z->zxid + 99);
	return z->res.err;
}

static inline struct zk_acl_vec zt_open_acl(struct zt *z)
{
	keel_wbuf_reset(&z->acl);
	struct zk_acl a = {ZK_PERM_ALL, {zt_b("world"), zt_b("anyone")}};
	return zk_acl_vec_build(&z->acl, &a, 1);
}

/* create/create2/createContainer/createTTL; *out_path (optional) gets the
 * created path (NUL-terminated, static), *stat (optional) its Stat from the
 * reply for create2-style ops. */
static inline int32_t zt_create_full(struct zt *z, int64_t sid, int32_t opcode, const char *path,
				     struct zk_bytes data, int32_t flags, struct zk_acl_vec acl,
				     int64_t ttl, char *out_path, struct zk_stat *stat)
{
	struct zk_request req;
	memset(&req, 0, sizeof(req));
	req.opcode = opcode;
	req.u.create = (struct zk_create_request){zt_b(path), data, acl, flags, ttl};
	keel_wbuf_reset(&z->body);
	zk_request_body_encode(&z->body, &req);
	int32_t err = zt_request(z, sid, opcode);
	if (err != ZK_OK) {
		assert_int_equal(z->res.body.size, 0);
		return err;
	}
	struct zk_response rsp;
	assert_int_equal(zk_response_decode(&rsp, opcode, z->res.body.data, z->res.body.size),
			 KEEL_OK);
	if (out_path != NULL) {
		memcpy(out_path, rsp.path.data, (size_t)rsp.path.size);
		out_path[rsp.path.size] = '\0';
	}
	if (stat != NULL && opcode != ZK_OP_CREATE) {
		*stat = rsp.stat;
	}
	return err;
}

static inline int32_t zt_create(struct zt *z, int64_t sid, const char *path, const char *data,
				int32_t flags)
{
	return zt_create_full(z, sid, ZK_OP_CREATE, path, zt_b(data), flags, zt_open_acl(z), -1,
			      NULL, NULL);
}

static inline int32_t zt_delete(struct zt *z, int64_t sid, const char *path, int32_t version)
{
	struct zk_request req;
	memset(&req, 0, sizeof(req));
	req.opcode = ZK_OP_DELETE;
	req.u.delete_ = (struct zk_delete_request){zt_b(path), version};
	keel_wbuf_reset(&z->body);
	zk_request_body_encode(&z->body, &req);
	return zt_request(z, sid, ZK_OP_DELETE);
}

static inline int32_t zt_set(struct zt *z, int64_t sid, const char *path, struct zk_bytes data,
			     int32_t version, struct zk_stat *stat)
{
	struct zk_request req;
	memset(&req, 0, sizeof(req));
	req.opcode = ZK_OP_SET_DATA;
	req.u.set_data = (struct zk_set_data_request){zt_b(path), data, version};
	keel_wbuf_reset(&z->body);
	zk_request_body_encode(&z->body, &req);
	int32_t err = zt_request(z, sid, ZK_OP_SET_DATA);
	if (err == ZK_OK && stat != NULL) {
		struct zk_response rsp;
		assert_int_equal(zk_response_decode(&rsp, ZK_OP_SET_DATA, z->res.body.data,
						    z->res.body.size),
				 KEEL_OK);
		*stat = rsp.stat;
	}
	return err;
}

static inline int32_t zt_set_acl(struct zt *z, int64_t sid, const char *path,
				 struct zk_acl_vec acl, int32_t version, struct zk_stat *stat)
{
	struct zk_request req;
	memset(&req, 0, sizeof(req));
	req.opcode = ZK_OP_SET_ACL;
	req.u.set_acl = (struct zk_set_acl_request){zt_b(path), acl, version};
	keel_wbuf_reset(&z->body);
	zk_request_body_encode(&z->body, &req);
	int32_t err = zt_request(z, sid, ZK_OP_SET_ACL);
	if (err == ZK_OK && stat != NULL) {
		struct zk_response rsp;
		assert_int_equal(zk_response_decode(&rsp, ZK_OP_SET_ACL, z->res.body.data,
						    z->res.body.size),
				 KEEL_OK);
		*stat = rsp.stat;
	}
	return err;
}

/* Stat of `path` straight from the state; false if absent. */
static inline bool zt_stat(struct zt *z, const char *path, struct zk_stat *stat)
{
	uint32_t id = zk_state_lookup(&z->st, zt_b(path));
	if (id == ZK_NODE_NONE) {
		return false;
	}
	zk_state_stat(&z->st, id, stat);
	return true;
}

static inline bool zt_exists(struct zt *z, const char *path)
{
	struct zk_stat s;
	return zt_stat(z, path, &s);
}

static inline int32_t zt_close_session(struct zt *z, int64_t sid)
{
	keel_wbuf_reset(&z->body);
	return zt_request(z, sid, ZK_OP_CLOSE_SESSION);
}

/* Does the last apply have trigger i = (type, path)? */
static inline void zt_assert_trigger(struct zt *z, uint32_t i, int32_t type, const char *path)
{
	assert_true(i < z->res.trigger_count);
	assert_int_equal(z->res.triggers[i].type, type);
	struct zk_bytes p = zk_trigger_path(&z->res, &z->res.triggers[i]);
	if (!zk_bytes_eq(p, zt_b(path))) {
		print_error("trigger %u: got %.*s, want %s\n", i, p.size, (const char *)p.data,
			    path);
	}
	assert_true(zk_bytes_eq(p, zt_b(path)));
}

#endif
