/*
 * Fuzz target: the ZooKeeper request decoder (zk_request_decode) and the
 * other decoders a client can reach (handshake, response bodies, multi
 * results, txn envelopes).
 *
 * Properties: no crash, no out-of-bounds read, no allocation; a request
 * that decodes re-encodes to a form that decodes to the same encoding
 * (encode(decode(x)) is a fixed point); iterators walk exactly the counts
 * the decoder validated.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "zk/zk_proto.h"
#include "zk/zk_txn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk_request(const struct zk_request *req)
{
	if (req->opcode == ZK_OP_MULTI || req->opcode == ZK_OP_MULTI_READ) {
		struct zk_multi_iter it;
		struct zk_multi_op op;
		uint32_t n = 0;
		zk_multi_iter_init(&it, &req->u.multi);
		while (zk_multi_iter_next(&it, &op)) {
			n++;
		}
		KEEL_ASSERT(n == req->u.multi.count);
	}
	struct zk_acl_vec acl = {-1, NULL, 0};
	if (req->opcode == ZK_OP_CREATE || req->opcode == ZK_OP_CREATE2 ||
	    req->opcode == ZK_OP_CREATE_TTL || req->opcode == ZK_OP_CREATE_CONTAINER) {
		acl = req->u.create.acl;
	} else if (req->opcode == ZK_OP_SET_ACL) {
		acl = req->u.set_acl.acl;
	}
	struct zk_acl_iter ai;
	struct zk_acl a;
	int32_t count = 0;
	zk_acl_iter_init(&ai, acl);
	while (zk_acl_iter_next(&ai, &a)) {
		count++;
	}
	KEEL_ASSERT(count == (acl.count < 0 ? 0 : acl.count));
	if (req->opcode == ZK_OP_SET_WATCHES || req->opcode == ZK_OP_SET_WATCHES2) {
		for (int i = 0; i < ZK_SW_LIST_COUNT; i++) {
			struct zk_str_iter si;
			struct zk_bytes s;
			zk_str_iter_init(&si, req->u.set_watches.lists[i]);
			while (zk_str_iter_next(&si, &s)) {
				KEEL_ASSERT(s.size < 0 || s.data != NULL || s.size == 0);
			}
		}
	}
}

static void check_request(const uint8_t *data, size_t size)
{
	struct zk_request req;
	enum keel_err err = zk_request_decode(&req, data, size);
	if (err != KEEL_OK) {
		return;
	}
	walk_request(&req);
	struct keel_wbuf w1, w2;
	keel_wbuf_init_dynamic(&w1, 64, 1u << 22);
	keel_wbuf_init_dynamic(&w2, 64, 1u << 22);
	zk_request_encode(&w1, &req);
	KEEL_ASSERT(keel_wbuf_ok(&w1));
	struct zk_request again;
	err = zk_request_decode(&again, w1.data, w1.size);
	KEEL_ASSERT(err == KEEL_OK);
	zk_request_encode(&w2, &again);
	KEEL_ASSERT(w1.size == w2.size);
	KEEL_ASSERT(memcmp(w1.data, w2.data, w1.size) == 0);
	keel_wbuf_free(&w1);
	keel_wbuf_free(&w2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_request(data, size);

	struct zk_connect_request cr;
	if (zk_connect_request_decode(&cr, data, size) == KEEL_OK) {
		KEEL_ASSERT(cr.passwd.size <= (int32_t)size);
	}
	struct zk_txn txn;
	(void)zk_txn_decode(&txn, data, size);

	if (size >= 1) {
		/* First byte picks a response opcode; the rest is a body. */
		static const int32_t ops[] = {
			ZK_OP_CREATE, ZK_OP_CREATE2, ZK_OP_EXISTS, ZK_OP_GET_DATA, ZK_OP_SET_DATA,
			ZK_OP_GET_ACL, ZK_OP_GET_CHILDREN, ZK_OP_GET_CHILDREN2, ZK_OP_WHO_AM_I,
			ZK_OP_GET_EPHEMERALS, ZK_OP_MULTI, ZK_OP_GET_ALL_CHILDREN_NUMBER, ZK_OP_SYNC,
		};
		int32_t op = ops[data[0] % (sizeof(ops) / sizeof(ops[0]))];
		struct zk_response rsp;
		if (zk_response_decode(&rsp, op, data + 1, size - 1) == KEEL_OK &&
		    op == ZK_OP_MULTI) {
			struct zk_multi_result_iter it;
			struct zk_multi_result r;
			zk_multi_result_iter_init(&it, rsp.multi, rsp.multi_size);
			while (zk_multi_result_next(&it, &r)) {
			}
		}
	}
	return 0;
}
