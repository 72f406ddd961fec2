/* server.c — `keel server`: parse the configuration and run a node. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "cli/cli.h"
#include "node/config.h"
#include "node/node.h"
#include "os/log.h"

int cli_server(int argc, char **argv)
{
	static struct node_config cfg;
	node_config_defaults(&cfg);
	bool help = false;
	char err[512];
	if (node_config_parse(&cfg, argc, argv, &help, err, sizeof(err)) != KEEL_OK) {
		fprintf(stderr, "keel server: %s\n(see keel server --help)\n", err);
		return 2;
	}
	if (help) {
		node_config_help(stdout);
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	/* Many clients: raise the descriptor limit as far as allowed. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	static struct node n;
	uv_loop_t loop;
	uv_loop_init(&loop);
	if (node_init(&n, &loop, &cfg, err, sizeof(err)) != KEEL_OK) {
		KEEL_ERROR("cannot start: %s", err);
		node_close(&n);
		uv_loop_close(&loop);
		return 1;
	}
	int code = node_run(&n);
	node_close(&n);
	uv_loop_close(&loop);
	return code;
}
