/* server.c — `keel server`: a placeholder until the server lands (issue 5).
 * It says so and waits for Ctrl-C, so that `make run` already exercises the
 * binary, the data directories and the clean shutdown path. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

int cli_server(int argc, char **argv)
{
	const char *id = "?";
	for (int i = 1; i + 1 < argc; i++) {
		if (strcmp(argv[i], "--id") == 0) {
			id = argv[i + 1];
		}
	}
	fprintf(stderr, "keel server %s: placeholder — the Raft server is not built yet; "
			"waiting for Ctrl-C.\n", id);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	int sig = 0;
	sigwait(&set, &sig);
	fprintf(stderr, "keel server %s: stopped\n", id);
	return 0;
}
