/* Unit tests: per-address connection counts (maxClientCnxns), the
 * descriptor reserve rule and the partial-frame byte budget (net/limits.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <uv.h>

#include "net/limits.h"

static struct net_ip ip4(uint8_t last)
{
	struct net_ip ip;
	memset(&ip, 0, sizeof(ip));
	ip.bytes[0] = 10;
	ip.bytes[3] = last;
	ip.size = 4;
	return ip;
}

static void test_per_address_counts(void **state)
{
	(void)state;
	struct net_addr_counts t;
	assert_int_equal(net_addr_counts_init(&t, 7), KEEL_OK);
	struct net_ip a = ip4(1), b = ip4(2);
	for (int i = 0; i < 3; i++) {
		assert_true(net_addr_counts_acquire(&t, &a, 3));
	}
	assert_false(net_addr_counts_acquire(&t, &a, 3)); /* the 4th from a */
	assert_int_equal(net_addr_counts_get(&t, &a), 3);
	assert_true(net_addr_counts_acquire(&t, &b, 3)); /* b has its own */
	net_addr_counts_release(&t, &a);
	assert_true(net_addr_counts_acquire(&t, &a, 3)); /* room again */
	/* An IPv6 address with the same first bytes is another address. */
	struct net_ip v6 = a;
	v6.size = 16;
	assert_int_equal(net_addr_counts_get(&t, &v6), 0);
	/* 0 = unlimited, as ZooKeeper's maxClientCnxns=0. */
	for (int i = 0; i < 1000; i++) {
		assert_true(net_addr_counts_acquire(&t, &v6, 0));
	}
	assert_int_equal(net_addr_counts_get(&t, &v6), 1000);
	for (int i = 0; i < 1000; i++) {
		net_addr_counts_release(&t, &v6);
	}
	assert_int_equal(net_addr_counts_get(&t, &v6), 0);
	assert_int_equal(keel_hmap_count(&t.map), 2); /* a and b; v6's entry is gone */
	/* Unknown addresses are admitted and not counted. */
	struct net_ip none;
	memset(&none, 0, sizeof(none));
	assert_true(net_addr_counts_acquire(&t, &none, 1));
	assert_true(net_addr_counts_acquire(&t, &none, 1));
	net_addr_counts_release(&t, &none);
	net_addr_counts_close(&t);
}

static void test_read_budget(void **state)
{
	(void)state;
	struct net_byte_budget b = {100, 0, 0};
	assert_true(net_byte_budget_take(&b, 60));
	assert_false(net_byte_budget_take(&b, 41));
	assert_int_equal(b.used_bytes, 60);
	assert_true(net_byte_budget_take(&b, 40));
	assert_false(net_byte_budget_take(&b, 1));
	net_byte_budget_give(&b, 100);
	assert_int_equal(b.used_bytes, 0);
	struct net_byte_budget unlimited = {0, 0, 0};
	assert_true(net_byte_budget_take(&unlimited, SIZE_MAX / 2));
}

static void test_fd_reserve(void **state)
{
	(void)state;
	struct net_fd_budget b;
	uint64_t limit = net_fd_budget_init(&b, 64);
	assert_true(limit >= 64);
	assert_int_equal(b.limit, limit);
	/* A real socket: its number against a limit we pretend to have. */
	uv_loop_t loop;
	uv_loop_init(&loop);
	uv_tcp_t tcp;
	uv_tcp_init(&loop, &tcp);
	assert_true(net_fd_budget_allows(&b, &tcp)); /* no socket yet: holds nothing */
	assert_int_equal(uv_tcp_bind(&tcp, (const struct sockaddr *)&(struct sockaddr_in){
						   .sin_family = AF_INET}, 0),
			 0);
	uv_os_fd_t fd;
	assert_int_equal(uv_fileno((uv_handle_t *)&tcp, &fd), 0);
	struct net_fd_budget fake = {(uint64_t)fd + 64 + 1, 64};
	assert_true(net_fd_budget_allows(&fake, &tcp));
	fake.limit = (uint64_t)fd + 64; /* fd is the first number of the reserve */
	assert_false(net_fd_budget_allows(&fake, &tcp));
	uv_close((uv_handle_t *)&tcp, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_per_address_counts),
		cmocka_unit_test(test_read_budget),
		cmocka_unit_test(test_fd_reserve),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
