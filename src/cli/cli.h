/*
 * cli.h — the `keel` command's subcommands.
 *
 * Each subcommand is a function taking the arguments after its name
 * (argv[0] is the subcommand name) and returning the process exit status.
 */
#ifndef KEEL_CLI_CLI_H
#define KEEL_CLI_CLI_H

#include <stdint.h>

struct cli_command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

/* The table in main.c; NULL-terminated. */
extern const struct cli_command cli_commands[];

int cli_version(int argc, char **argv);
int cli_server(int argc, char **argv);
int cli_wal(int argc, char **argv);
int cli_log(int argc, char **argv);
int cli_dump_log(int argc, char **argv);
int cli_broker(int argc, char **argv);
int cli_brokers(int argc, char **argv);
int cli_produce(int argc, char **argv);
int cli_consume(int argc, char **argv);
int cli_topics(int argc, char **argv);
int cli_groups(int argc, char **argv);
int cli_configs(int argc, char **argv);
int cli_leader_election(int argc, char **argv);
int cli_partitions(int argc, char **argv);

/* What a failed connect means for the operator: for ConnectionLoss and
 * OperationTimeout, that no server answered with a working quorum (none
 * reachable, or fewer than a majority up, so no session can be created);
 * "" for other errors. */
const char *cli_quorum_hint(int32_t zk_err);
int cli_import_zookeeper(int argc, char **argv);
int cli_secret(int argc, char **argv);

/* ZooKeeper-client commands (zkcli.c, zkcli_shell.c; docs/cli.md). */
int cli_get(int argc, char **argv);
int cli_set(int argc, char **argv);
int cli_create(int argc, char **argv);
int cli_delete(int argc, char **argv);
int cli_ls(int argc, char **argv);
int cli_stat(int argc, char **argv);
int cli_watch(int argc, char **argv);
int cli_acl(int argc, char **argv);
int cli_shell(int argc, char **argv);

#endif
