/* secret.c — `keel secret generate`: print a fresh cluster secret
 * (node/peer_auth.h) for `--cluster-secret-file`. */
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "cli/cli.h"
#include "node/peer_auth.h"

int cli_secret(int argc, char **argv)
{
	const char *usage = "usage: keel secret generate > FILE\n"
			    "Prints a new random cluster secret (32 bytes, hex). Keep FILE private\n"
			    "(chmod 600) and give every server and operator of the cluster the same\n"
			    "one with --cluster-secret-file FILE (docs/security.md).\n";
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("%s", usage);
		return 0;
	}
	if (argc != 2 || strcmp(argv[1], "generate") != 0) {
		fprintf(stderr, "%s", usage);
		return 2;
	}
	uint8_t secret[PEER_AUTH_SECRET_SIZE];
	if (peer_auth_random(secret, sizeof(secret)) != KEEL_OK) {
		fprintf(stderr, "keel secret: no random bytes available\n");
		return 1;
	}
	char hex[2 * PEER_AUTH_SECRET_SIZE + 1];
	peer_auth_hex(secret, sizeof(secret), hex);
	printf("%s\n", hex);
	OPENSSL_cleanse(secret, sizeof(secret));
	OPENSSL_cleanse(hex, sizeof(hex));
	return fflush(stdout) == 0 ? 0 : 1;
}
