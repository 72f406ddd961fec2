/* server.c — `keel server`: parse the configuration and run a node. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "node/config.h"
#include "node/node.h"
#include "os/log.h"

/* Locks DIR/keel.lock for the life of the process, so that two servers
 * never share a data directory and tools (keel log dump) can tell that a
 * directory is in use. Returns the fd (kept open on purpose) or -1 with a
 * message on stderr. */
static int lock_data_dir(const char *dir)
{
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "keel server: cannot create the data directory %s: %s\n", dir,
			strerror(errno));
		return -1;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/keel.lock", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "keel server: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	/* A POSIX record lock, not flock(): it is not inherited by the forked
	 * snapshot writer, so a kill -9 of the server frees the directory at
	 * once even while that child finishes. */
	struct flock lk;
	memset(&lk, 0, sizeof(lk));
	lk.l_type = F_WRLCK;
	lk.l_whence = SEEK_SET;
	if (fcntl(fd, F_SETLK, &lk) != 0) {
		fprintf(stderr,
			"keel server: the data directory %s is in use by another keel server (%s is "
			"locked)\n",
			dir, path);
		close(fd);
		return -1;
	}
	char pid[32];
	int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
		/* Only informational: the lock is what counts. */
	}
	return fd;
}

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
	if (lock_data_dir(cfg.data_dir) < 0) {
		return 1;
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
