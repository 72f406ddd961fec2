/*
 * main.c — the `keel` binary: one executable, many subcommands.
 *
 *	keel server ...        run a server (see `keel server --help`)
 *	keel get PATH ...      ZooKeeper client commands (docs/cli.md)
 *	keel shell             an interactive ZooKeeper session
 *	keel version           print the version
 *	keel log dump ...      decode a stopped server's log (logdump.c)
 *	keel dump-log DIR      decode a partition directory's segments (dump_log.c)
 *	keel broker ...        run a broker (broker.c)
 *	keel brokers / topics  cluster metadata from the command line (topics.c)
 *	keel import-zookeeper  build a data dir from ZooKeeper's files (import_zk.c)
 *	keel secret generate   a new cluster secret (secret.c)
 *
 * Unknown subcommands print the list and exit 2.
 */
#include <stdio.h>
#include <string.h>

#include "cli/admin_client.h"
#include "cli/cli.h"

#ifndef KEEL_VERSION
#define KEEL_VERSION "0.1.0"
#endif

const struct cli_command cli_commands[] = {
	{"server", cli_server, "run a keel server (Raft member, ZooKeeper port)"},
	{"status", cli_status, "show every server's role, term, indexes and lag"},
	{"members", cli_members, "add, promote or remove cluster members"},
	{"leader", cli_leader, "leader transfer ID: hand leadership to another voter"},
	{"snapshot", cli_snapshot, "ask servers to write a snapshot now"},
	{"get", cli_get, "print a znode's data"},
	{"set", cli_set, "replace a znode's data"},
	{"create", cli_create, "create a znode (ephemeral, sequential, container, TTL)"},
	{"delete", cli_delete, "delete a znode (or a subtree with --recursive)"},
	{"ls", cli_ls, "list a znode's children"},
	{"stat", cli_stat, "print a znode's Stat"},
	{"watch", cli_watch, "print the events of a persistent watch as they come"},
	{"acl", cli_acl, "acl get|set PATH: read or replace a znode's ACL"},
	{"shell", cli_shell, "interactive ZooKeeper shell (zkCli commands; reads stdin)"},
	{"version", cli_version, "print the version"},
	{"wal", cli_wal, "inspect a write-ahead log (wal dump --data-dir DIR)"},
	{"log", cli_log, "decode a stopped server's log (log dump --data-dir DIR)"},
	{"dump-log", cli_dump_log, "decode a partition directory's segments (dump-log DIR)"},
	{"broker", cli_broker, "run a broker: register, heartbeat, follow the metadata log"},
	{"brokers", cli_brokers, "list the registered brokers and their state"},
	{"produce", cli_produce, "send stdin's lines to a topic through a Kafka broker"},
	{"consume", cli_consume, "print a partition's records from a Kafka broker"},
	{"topics", cli_topics, "create, delete, list or describe topics"},
	{"groups", cli_groups, "list, describe, delete consumer groups; reset their offsets"},
	{"configs", cli_configs, "describe or alter topic, broker and cluster configs"},
	{"leader-election", cli_leader_election,
	 "elect partition leaders now (preferred, or unclean for named partitions)"},
	{"partitions", cli_partitions,
	 "partitions reassign: move replicas between brokers (execute, verify, cancel)"},
	{"import-zookeeper", cli_import_zookeeper,
	 "build a data dir from a stopped Apache ZooKeeper's snapshot and logs"},
	{"secret", cli_secret, "secret generate: print a new cluster secret"},
	{NULL, NULL, NULL},
};

int cli_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("keel %s\n", KEEL_VERSION);
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: keel COMMAND [ARGS...]\n\ncommands:\n");
	for (const struct cli_command *c = cli_commands; c->name != NULL; c++) {
		fprintf(out, "  %-12s %s\n", c->name, c->summary);
	}
	fprintf(out, "\n`keel COMMAND --help` describes one command.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		return cli_version(argc - 1, argv + 1);
	}
	for (const struct cli_command *c = cli_commands; c->name != NULL; c++) {
		if (strcmp(argv[1], c->name) == 0) {
			return c->run(argc - 1, argv + 1);
		}
	}
	fprintf(stderr, "keel: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}
