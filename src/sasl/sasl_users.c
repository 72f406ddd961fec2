/*
 * sasl_users.c — the SASL user table and its two file formats
 * (sasl_users.h).
 */
#include "sasl/sasl_users.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/fmt.h"

void sasl_users_init(struct sasl_users *users)
{
	users->users = NULL;
	users->count = 0;
	users->capacity = 0;
}

void sasl_users_close(struct sasl_users *users)
{
	for (uint32_t i = 0; i < users->count; i++) {
		struct sasl_user *u = &users->users[i];
		volatile char *p = u->password;
		for (size_t k = 0; k < u->password_size; k++) {
			p[k] = 0;
		}
		free(u->name);
	}
	free(users->users);
	sasl_users_init(users);
}

static bool name_valid(const char *name, size_t size)
{
	if (size == 0 || size > SASL_NAME_MAX) {
		return false;
	}
	for (size_t i = 0; i < size; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c <= ' ' || c == ':' || c == 0x7f) {
			return false;
		}
	}
	return true;
}

static bool password_valid(const char *password, size_t size)
{
	return size <= SASL_PASSWORD_MAX && memchr(password, '\0', size) == NULL;
}

const struct sasl_user *sasl_users_find(const struct sasl_users *users, const void *name,
					size_t name_size)
{
	for (uint32_t i = 0; i < users->count; i++) {
		const struct sasl_user *u = &users->users[i];
		if (u->name_size == name_size && memcmp(u->name, name, name_size) == 0) {
			return u;
		}
	}
	return NULL;
}

enum keel_err sasl_users_add(struct sasl_users *users, const char *name, size_t name_size,
			     const char *password, size_t password_size)
{
	if (!name_valid(name, name_size) || !password_valid(password, password_size)) {
		return KEEL_INVAL;
	}
	if (sasl_users_find(users, name, name_size) != NULL) {
		return KEEL_EXIST;
	}
	if (users->count >= SASL_USERS_MAX) {
		return KEEL_LIMIT;
	}
	if (users->count == users->capacity) {
		uint32_t cap = users->capacity == 0 ? 8 : users->capacity * 2;
		struct sasl_user *grown = realloc(users->users, cap * sizeof(*grown));
		if (grown == NULL) {
			return KEEL_NOMEM;
		}
		users->users = grown;
		users->capacity = cap;
	}
	char *block = malloc(name_size + password_size + 2);
	if (block == NULL) {
		return KEEL_NOMEM;
	}
	memcpy(block, name, name_size);
	block[name_size] = '\0';
	memcpy(block + name_size + 1, password, password_size);
	block[name_size + 1 + password_size] = '\0';
	users->users[users->count++] = (struct sasl_user){block, name_size, block + name_size + 1,
							  password_size};
	return KEEL_OK;
}

static enum keel_err add_error(enum keel_err rc, unsigned line, char *err, size_t err_size)
{
	switch (rc) {
	case KEEL_INVAL:
		keel_fmt(err, err_size,
			 "line %u: a user name is 1 to %u bytes without ':', spaces or control "
			 "characters, a password at most %u bytes",
			 line, SASL_NAME_MAX, SASL_PASSWORD_MAX);
		break;
	case KEEL_EXIST:
		keel_fmt(err, err_size, "line %u: the user is given twice", line);
		break;
	case KEEL_LIMIT:
		keel_fmt(err, err_size, "line %u: more than %u users", line, SASL_USERS_MAX);
		break;
	default:
		keel_fmt(err, err_size, "line %u: %s", line, keel_strerror(rc));
		break;
	}
	return rc;
}

enum keel_err sasl_users_parse(struct sasl_users *users, const char *text, size_t size,
			       char *err, size_t err_size)
{
	unsigned line = 0;
	size_t pos = 0;
	while (pos < size) {
		line++;
		const char *start = text + pos;
		const char *nl = memchr(start, '\n', size - pos);
		size_t len = nl != NULL ? (size_t)(nl - start) : size - pos;
		pos += len + (nl != NULL ? 1 : 0);
		if (len > 0 && start[len - 1] == '\r') {
			len--;
		}
		if (len == 0 || start[0] == '#') {
			continue;
		}
		const char *colon = memchr(start, ':', len);
		if (colon == NULL) {
			keel_fmt(err, err_size, "line %u: expected NAME:PASSWORD", line);
			return KEEL_CONFIG;
		}
		size_t name_size = (size_t)(colon - start);
		enum keel_err rc = sasl_users_add(users, start, name_size, colon + 1,
						  len - name_size - 1);
		if (rc != KEEL_OK) {
			return add_error(rc, line, err, err_size);
		}
	}
	return KEEL_OK;
}

/* ---- JAAS ---- */

enum jaas_tok {
	JT_END = 0,
	JT_WORD,   /* an unquoted name: letters, digits, '.', '_', '-', '$' */
	JT_STRING, /* a "quoted" value, escapes removed */
	JT_PUNCT,  /* one of { } ; = */
	JT_ERROR,
};

struct jaas_lexer {
	const char *text;
	size_t size;
	size_t pos;
	unsigned line;
	/* The current token. */
	enum jaas_tok tok;
	char punct;
	char value[SASL_PASSWORD_MAX + 1];
	size_t value_size;
};

static bool word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-' || c == '$';
}

/* Skips blanks and comments; false on an unterminated comment. */
static bool skip_space(struct jaas_lexer *lx)
{
	while (lx->pos < lx->size) {
		char c = lx->text[lx->pos];
		if (c == '\n') {
			lx->line++;
			lx->pos++;
		} else if (c == ' ' || c == '\t' || c == '\r') {
			lx->pos++;
		} else if (c == '/' && lx->pos + 1 < lx->size && lx->text[lx->pos + 1] == '/') {
			while (lx->pos < lx->size && lx->text[lx->pos] != '\n') {
				lx->pos++;
			}
		} else if (c == '/' && lx->pos + 1 < lx->size && lx->text[lx->pos + 1] == '*') {
			lx->pos += 2;
			for (;;) {
				if (lx->pos + 1 >= lx->size) {
					return false;
				}
				if (lx->text[lx->pos] == '*' && lx->text[lx->pos + 1] == '/') {
					lx->pos += 2;
					break;
				}
				lx->line += lx->text[lx->pos] == '\n';
				lx->pos++;
			}
		} else {
			break;
		}
	}
	return true;
}

static bool lex_string(struct jaas_lexer *lx)
{
	lx->pos++; /* the opening quote */
	lx->value_size = 0;
	while (lx->pos < lx->size) {
		char c = lx->text[lx->pos++];
		if (c == '"') {
			lx->value[lx->value_size] = '\0';
			return true;
		}
		if (c == '\\') {
			if (lx->pos >= lx->size) {
				return false;
			}
			c = lx->text[lx->pos++];
		}
		if (c == '\n' || lx->value_size >= SASL_PASSWORD_MAX) {
			return false;
		}
		lx->value[lx->value_size++] = c;
	}
	return false;
}

static enum jaas_tok lex_next(struct jaas_lexer *lx)
{
	if (!skip_space(lx)) {
		return lx->tok = JT_ERROR;
	}
	if (lx->pos >= lx->size) {
		return lx->tok = JT_END;
	}
	char c = lx->text[lx->pos];
	if (c == '{' || c == '}' || c == ';' || c == '=') {
		lx->pos++;
		lx->punct = c;
		return lx->tok = JT_PUNCT;
	}
	if (c == '"') {
		return lx->tok = lex_string(lx) ? JT_STRING : JT_ERROR;
	}
	if (!word_char(c)) {
		return lx->tok = JT_ERROR;
	}
	lx->value_size = 0;
	while (lx->pos < lx->size && word_char(lx->text[lx->pos])) {
		if (lx->value_size >= SASL_PASSWORD_MAX) {
			return lx->tok = JT_ERROR;
		}
		lx->value[lx->value_size++] = lx->text[lx->pos++];
	}
	lx->value[lx->value_size] = '\0';
	return lx->tok = JT_WORD;
}

static bool is_punct(const struct jaas_lexer *lx, char c)
{
	return lx->tok == JT_PUNCT && lx->punct == c;
}

#define JAAS_DIGEST_MODULE "org.apache.zookeeper.server.auth.DigestLoginModule"
#define JAAS_USER_PREFIX "user_"

/* One `KEY=VALUE` option of the wanted section's login module; the lexer is
 * on KEY. */
static enum keel_err jaas_option(struct sasl_users *users, struct jaas_lexer *lx, char *err,
				 size_t err_size)
{
	char key[SASL_NAME_MAX + sizeof(JAAS_USER_PREFIX)];
	if (lx->value_size >= sizeof(key)) {
		keel_fmt(err, err_size, "line %u: option name too long", lx->line);
		return KEEL_CONFIG;
	}
	memcpy(key, lx->value, lx->value_size + 1);
	size_t key_size = lx->value_size;
	if (lex_next(lx) != JT_PUNCT || !is_punct(lx, '=') ||
	    (lex_next(lx) != JT_STRING && lx->tok != JT_WORD)) {
		keel_fmt(err, err_size, "line %u: expected %s=\"VALUE\"", lx->line, key);
		return KEEL_CONFIG;
	}
	size_t prefix = strlen(JAAS_USER_PREFIX);
	if (key_size > prefix && memcmp(key, JAAS_USER_PREFIX, prefix) == 0) {
		enum keel_err rc = sasl_users_add(users, key + prefix, key_size - prefix, lx->value,
						  lx->value_size);
		if (rc != KEEL_OK) {
			return add_error(rc, lx->line, err, err_size);
		}
	}
	return KEEL_OK;
}

/* One login module entry `CLASS FLAG options... ;`; the lexer is on CLASS.
 * Users are taken only when `wanted`. */
static enum keel_err jaas_module(struct sasl_users *users, struct jaas_lexer *lx, bool wanted,
				 char *err, size_t err_size)
{
	if (wanted && strcmp(lx->value, JAAS_DIGEST_MODULE) != 0) {
		keel_fmt(err, err_size, "line %u: login module %s: only %s is supported", lx->line,
			 lx->value, JAAS_DIGEST_MODULE);
		return KEEL_CONFIG;
	}
	if (lex_next(lx) != JT_WORD) {
		keel_fmt(err, err_size, "line %u: expected a control flag (required)", lx->line);
		return KEEL_CONFIG;
	}
	while (lex_next(lx) == JT_WORD) {
		if (wanted) {
			enum keel_err rc = jaas_option(users, lx, err, err_size);
			if (rc != KEEL_OK) {
				return rc;
			}
		} else if (lex_next(lx) != JT_PUNCT || !is_punct(lx, '=') ||
			   (lex_next(lx) != JT_STRING && lx->tok != JT_WORD)) {
			keel_fmt(err, err_size, "line %u: expected KEY=\"VALUE\"", lx->line);
			return KEEL_CONFIG;
		}
	}
	if (!is_punct(lx, ';')) {
		keel_fmt(err, err_size, "line %u: expected ';' after the login module's options",
			 lx->line);
		return KEEL_CONFIG;
	}
	return KEEL_OK;
}

enum keel_err sasl_users_parse_jaas(struct sasl_users *users, const char *text, size_t size,
				    const char *section, char *err, size_t err_size)
{
	struct jaas_lexer *lx = calloc(1, sizeof(*lx));
	if (lx == NULL) {
		return KEEL_NOMEM;
	}
	lx->text = text;
	lx->size = size;
	lx->line = 1;
	enum keel_err rc = KEEL_OK;
	bool found = false;
	while (rc == KEEL_OK && lex_next(lx) == JT_WORD) {
		bool wanted = strcmp(lx->value, section) == 0;
		if (lex_next(lx) != JT_PUNCT || !is_punct(lx, '{')) {
			keel_fmt(err, err_size, "line %u: expected '{' after the section name",
				 lx->line);
			rc = KEEL_CONFIG;
			break;
		}
		while (rc == KEEL_OK && lex_next(lx) == JT_WORD) {
			rc = jaas_module(users, lx, wanted, err, err_size);
		}
		if (rc != KEEL_OK) {
			break;
		}
		if (!is_punct(lx, '}') || lex_next(lx) != JT_PUNCT || !is_punct(lx, ';')) {
			keel_fmt(err, err_size, "line %u: expected '};' to end the section", lx->line);
			rc = KEEL_CONFIG;
			break;
		}
		found = found || wanted;
	}
	if (rc == KEEL_OK && lx->tok != JT_END) {
		keel_fmt(err, err_size, "line %u: expected a section name", lx->line);
		rc = KEEL_CONFIG;
	}
	if (rc == KEEL_OK && !found) {
		keel_fmt(err, err_size, "no section named %s", section);
		rc = KEEL_CONFIG;
	}
	volatile char *v = lx->value;
	for (size_t i = 0; i < sizeof(lx->value); i++) {
		v[i] = 0;
	}
	free(lx);
	return rc;
}

bool sasl_bytes_equal(const void *a, size_t a_size, const void *b, size_t b_size)
{
	if (a_size != b_size) {
		return false;
	}
	const uint8_t *x = a;
	const uint8_t *y = b;
	uint8_t diff = 0;
	for (size_t i = 0; i < a_size; i++) {
		diff |= (uint8_t)(x[i] ^ y[i]);
	}
	return diff == 0;
}
