/*
 * cli.h — the `keel` command's subcommands.
 *
 * Each subcommand is a function taking the arguments after its name
 * (argv[0] is the subcommand name) and returning the process exit status.
 */
#ifndef KEEL_CLI_CLI_H
#define KEEL_CLI_CLI_H

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
int cli_broker(int argc, char **argv);
int cli_brokers(int argc, char **argv);
int cli_topics(int argc, char **argv);

#endif
