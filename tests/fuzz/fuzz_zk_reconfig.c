/*
 * Fuzz target: ZooKeeper reconfig text (zk/zk_reconfig.h) — server strings
 * and the plans a ReconfigRequest's three strings make.
 *
 * Input: byte 0 picks the form (joining / leaving / newMembers), the rest
 * is the text. Properties: no crash, no out-of-bounds read; a server string
 * that parses renders to a line that parses back to the same server; a
 * plan has at most its bound of steps, adds before removals, and only
 * removes members.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/assert.h"
#include "zk/zk_reconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_round_trip(const char *text, size_t len)
{
	struct zk_server_spec s;
	if (zk_server_spec_parse(text, len, &s) != KEEL_OK) {
		return;
	}
	struct zk_config_member m = {s.id, s.role, s.peer_addr, s.tail};
	uint8_t mem[1024];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, mem, sizeof(mem));
	zk_config_render(&m, 1, 1, &w);
	KEEL_ASSERT(keel_wbuf_ok(&w));
	const char *nl = memchr(w.data, '\n', w.size);
	KEEL_ASSERT(nl != NULL);
	struct zk_server_spec back;
	KEEL_ASSERT(zk_server_spec_parse((const char *)w.data, (size_t)(nl - (const char *)w.data),
					 &back) == KEEL_OK);
	KEEL_ASSERT(back.id == s.id);
	KEEL_ASSERT(back.role == s.role);
	KEEL_ASSERT(strcmp(back.peer_addr, s.peer_addr) == 0);
	KEEL_ASSERT(strcmp(back.tail, s.tail) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 8192) {
		return 0;
	}
	const char *text = (const char *)data + 1;
	size_t len = size - 1;
	check_round_trip(text, len);
	static const struct zk_member_role members[] = {
		{1, ZK_ROLE_PARTICIPANT}, {2, ZK_ROLE_PARTICIPANT}, {3, ZK_ROLE_OBSERVER}};
	struct zk_bytes t = zk_bytes_of(text, len), none = zk_bytes_of(NULL, 0);
	struct zk_reconfig_step steps[8];
	size_t count = 0;
	uint8_t form = data[0] % 3;
	enum keel_err rc = zk_reconfig_plan(members, 3, form == 0 ? t : none, form == 1 ? t : none,
					    form == 2 ? t : none, steps, 8, &count);
	KEEL_ASSERT(rc == KEEL_OK || count == 0);
	KEEL_ASSERT(count <= 8);
	for (size_t i = 0; i < count; i++) {
		KEEL_ASSERT(i == 0 || steps[i - 1].kind <= steps[i].kind);
		if (steps[i].kind == ZK_STEP_REMOVE) {
			KEEL_ASSERT(steps[i].server.id >= 1 && steps[i].server.id <= 3);
		}
	}
	return 0;
}
