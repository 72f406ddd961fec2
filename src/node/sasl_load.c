/*
 * sasl_load.c — reading SASL user files (sasl_load.h).
 */
#include "node/sasl_load.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "os/log.h"

#define SASL_FILE_MAX (4u << 20)

enum keel_err node_sasl_load_file(struct sasl_users *users, const char *path, bool jaas,
				  char *err, size_t err_size)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, err_size, "cannot open %s: %s", path, strerror(errno));
		return KEEL_CONFIG;
	}
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077) != 0) {
		KEEL_WARN("SASL users file %s can be read by other users: chmod 600 it", path);
	}
	char *text = malloc(SASL_FILE_MAX);
	if (text == NULL) {
		fclose(f);
		return KEEL_NOMEM;
	}
	size_t n = fread(text, 1, SASL_FILE_MAX, f);
	bool too_big = n == SASL_FILE_MAX;
	fclose(f);
	char msg[256] = "";
	enum keel_err rc = KEEL_CONFIG;
	if (too_big) {
		snprintf(msg, sizeof(msg), "larger than %u bytes", SASL_FILE_MAX - 1);
	} else if (jaas) {
		rc = sasl_users_parse_jaas(users, text, n, NODE_SASL_JAAS_SECTION, msg, sizeof(msg));
	} else {
		rc = sasl_users_parse(users, text, n, msg, sizeof(msg));
	}
	OPENSSL_cleanse(text, n);
	free(text);
	if (rc != KEEL_OK) {
		snprintf(err, err_size, "%s: %s", path, msg);
	}
	return rc;
}

enum keel_err node_sasl_load(const char *users_file, const char *jaas_file,
			     struct sasl_users **out, char *err, size_t err_size)
{
	*out = NULL;
	if (users_file[0] == '\0' && jaas_file[0] == '\0') {
		return KEEL_OK;
	}
	struct sasl_users *users = malloc(sizeof(*users));
	if (users == NULL) {
		return KEEL_NOMEM;
	}
	sasl_users_init(users);
	enum keel_err rc = KEEL_OK;
	if (users_file[0] != '\0') {
		rc = node_sasl_load_file(users, users_file, false, err, err_size);
	}
	if (rc == KEEL_OK && jaas_file[0] != '\0') {
		rc = node_sasl_load_file(users, jaas_file, true, err, err_size);
	}
	if (rc == KEEL_OK && users->count == 0) {
		snprintf(err, err_size, "SASL is configured but no user is given");
		rc = KEEL_CONFIG;
	}
	if (rc != KEEL_OK) {
		node_sasl_free(users);
		return rc;
	}
	*out = users;
	return KEEL_OK;
}

void node_sasl_free(struct sasl_users *users)
{
	if (users != NULL) {
		sasl_users_close(users);
		free(users);
	}
}
