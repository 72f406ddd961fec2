/* Unit tests: peer links among three servers in one loop — everyone connects
 * to everyone exactly once (duplicate dials resolved the same way on both
 * ends), messages flow both ways, a dropped server is re-dialed; a server
 * with another secret, or an id that is not a member, never links. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <uv.h>

#include "node/peers.h"

#define N 3

struct srv {
	struct peers ps;
	int received[N + 1];
	int ups;
	int downs;
	char addr[64];
};

#define SECRET "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define OTHER_SECRET "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

static uv_loop_t loop;
static struct net_loop nl;
static struct srv srvs[N + 1];
static int base_port;

static void on_message(void *ctx, uint64_t from, uint8_t type, const uint8_t *body, size_t size)
{
	struct srv *s = ctx;
	assert_int_equal(type, PEER_FRAME_RAFT);
	assert_int_equal(size, 8);
	assert_int_equal(keel_load_be64(body), from * 1000);
	s->received[from]++;
}

static void on_link(void *ctx, uint64_t id, bool up)
{
	(void)id;
	struct srv *s = ctx;
	if (up) {
		s->ups++;
	} else {
		s->downs++;
	}
}

static uint64_t now_ms(void)
{
	return uv_now(&loop);
}

static void spin(int ms)
{
	uint64_t until = now_ms() + (uint64_t)ms;
	while (now_ms() < until) {
		for (int i = 1; i <= N; i++) {
			if (!srvs[i].ps.closing) {
				peers_tick(&srvs[i].ps, now_ms());
			}
		}
		uv_run(&loop, UV_RUN_NOWAIT);
		uv_sleep(1);
		uv_update_time(&loop);
	}
}

static bool members_1_to_n(void *ctx, uint64_t id)
{
	(void)ctx;
	return id >= 1 && id <= N;
}

static void set_secret(struct peers *ps, const char *secret)
{
	struct peer_auth_keys keys;
	char err[128];
	assert_int_equal(peer_auth_parse_secret(secret, strlen(secret), &keys, err, sizeof(err)),
			 KEEL_OK);
	peers_set_auth(ps, &keys, members_1_to_n, 1000, 8);
}

static void start(int i)
{
	char err[128];
	memset(&srvs[i], 0, sizeof(srvs[i]));
	snprintf(srvs[i].addr, sizeof(srvs[i].addr), "127.0.0.1:%d", base_port + i);
	assert_int_equal(peers_init(&srvs[i].ps, &nl, (uint64_t)i, srvs[i].addr, 1 << 20,
				    on_message, on_link, &srvs[i], err, sizeof(err)),
			 KEEL_OK);
	set_secret(&srvs[i].ps, SECRET);
	for (int j = 1; j <= N; j++) {
		char a[64];
		snprintf(a, sizeof(a), "127.0.0.1:%d", base_port + j);
		assert_int_equal(peers_set(&srvs[i].ps, (uint64_t)j, a), KEEL_OK);
	}
}

static void send_to(int from, int to)
{
	size_t mark;
	struct keel_wbuf *w = peers_send_begin(&srvs[from].ps, (uint64_t)to, PEER_FRAME_RAFT, &mark);
	assert_non_null(w);
	keel_wbuf_u64(w, (uint64_t)from * 1000);
	peers_send_end(&srvs[from].ps, (uint64_t)to, mark);
}

/* A base port whose next N ports are free now: in [10000, 19990), below
 * the range the integration harness picks from ([20000, 32768)) and the
 * kernel's ephemeral ports (32768 and up). */
static int pick_base_port(void)
{
	for (int attempt = 0; attempt < 100; attempt++) {
		int base = 10000 + (int)((uv_hrtime() / 1000 + (uint64_t)attempt * 7919) % 9990);
		bool free_all = true;
		for (int i = 1; i <= N && free_all; i++) {
			uv_tcp_t probe;
			struct sockaddr_in sa;
			uv_tcp_init(&loop, &probe);
			uv_ip4_addr("127.0.0.1", base + i, &sa);
			free_all = uv_tcp_bind(&probe, (const struct sockaddr *)&sa, 0) == 0 &&
			           uv_listen((uv_stream_t *)&probe, 1, NULL) == 0;
			uv_close((uv_handle_t *)&probe, NULL);
			uv_run(&loop, UV_RUN_NOWAIT);
		}
		if (free_all) {
			return base;
		}
	}
	fail_msg("no %d free ports in [10000, 20000)", N);
	return 0;
}

static void test_full_mesh(void **state)
{
	(void)state;
	uv_loop_init(&loop);
	net_loop_init(&nl, &loop);
	base_port = pick_base_port();
	for (int i = 1; i <= N; i++) {
		start(i);
	}
	spin(500);
	for (int i = 1; i <= N; i++) {
		for (int j = 1; j <= N; j++) {
			if (i != j) {
				assert_true(peers_connected(&srvs[i].ps, (uint64_t)j));
			}
		}
		/* Exactly one link per peer survives; ups may include a loser
		 * only if it was never established, so ups == N - 1. */
		assert_int_equal(srvs[i].ups, N - 1);
	}
	for (int i = 1; i <= N; i++) {
		for (int j = 1; j <= N; j++) {
			if (i != j) {
				for (int k = 0; k < 10; k++) {
					send_to(i, j);
				}
			}
		}
	}
	spin(200);
	for (int i = 1; i <= N; i++) {
		for (int j = 1; j <= N; j++) {
			assert_int_equal(srvs[i].received[j], i == j ? 0 : 10);
		}
	}

	/* Server 3 goes away: the others see the link drop and cannot send. */
	peers_close(&srvs[3].ps);
	spin(300);
	assert_false(peers_connected(&srvs[1].ps, 3));
	assert_true(srvs[1].downs >= 1);
	size_t mark;
	assert_null(peers_send_begin(&srvs[1].ps, 3, PEER_FRAME_RAFT, &mark));

	/* It comes back on the same address: re-dialed within the back-off. */
	start(3);
	spin(3000);
	assert_true(peers_connected(&srvs[1].ps, 3));
	assert_true(peers_connected(&srvs[3].ps, 2));
	send_to(3, 1);
	spin(100);
	assert_int_equal(srvs[1].received[3], 11);

	/* An impostor with another secret, claiming to be server 2 (which
	 * server 1 dials anyway), and a non-member id 9: neither links. */
	struct srv impostor, stranger;
	char err[128];
	memset(&impostor, 0, sizeof(impostor));
	memset(&stranger, 0, sizeof(stranger));
	char a1[64];
	snprintf(a1, sizeof(a1), "127.0.0.1:%d", base_port + 1);
	assert_int_equal(peers_init(&impostor.ps, &nl, 2, "127.0.0.1:0", 1 << 20, on_message,
				    on_link, &impostor, err, sizeof(err)),
			 KEEL_OK);
	set_secret(&impostor.ps, OTHER_SECRET);
	assert_int_equal(peers_set(&impostor.ps, 1, a1), KEEL_OK);
	assert_int_equal(peers_init(&stranger.ps, &nl, 9, "127.0.0.1:0", 1 << 20, on_message,
				    on_link, &stranger, err, sizeof(err)),
			 KEEL_OK);
	set_secret(&stranger.ps, SECRET);
	assert_int_equal(peers_set(&stranger.ps, 1, a1), KEEL_OK);
	uint64_t refused_before = srvs[1].ps.refused;
	uint64_t until = now_ms() + 500;
	while (now_ms() < until) {
		peers_tick(&impostor.ps, now_ms());
		peers_tick(&stranger.ps, now_ms());
		spin(10);
	}
	assert_int_equal(impostor.ups, 0);
	assert_int_equal(stranger.ups, 0);
	assert_true(srvs[1].ps.refused >= refused_before + 2);
	assert_true(peers_connected(&srvs[1].ps, 2)); /* the real server 2 still */
	peers_close(&impostor.ps);
	peers_close(&stranger.ps);
	spin(50);

	for (int i = 1; i <= N; i++) {
		peers_close(&srvs[i].ps);
	}
	net_loop_close(&nl);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_mesh),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
