/* hard_state.c — saving and loading the hard state file (see hard_state.h). */
#include "wal/hard_state.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "wal/internal.h"

#define HARD_STATE_MAX_FILE                                                                     \
	(WAL_HARD_STATE_FIXED_SIZE + WAL_HARD_STATE_BODY_V1 + WAL_HARD_STATE_MAX_EXTRA + 4)

enum keel_err wal_hard_state_save(const struct wal_config *config, const struct wal_hard_state *hs,
				  char errmsg[WAL_ERRMSG_SIZE])
{
	if (hs->extra_size > WAL_HARD_STATE_MAX_EXTRA) {
		return wal_fail(errmsg, KEEL_TOOBIG, "wal: hard state extra blob of %u bytes is over %u",
				hs->extra_size, WAL_HARD_STATE_MAX_EXTRA);
	}
	size_t size = wal_hard_state_encoded_size(hs);
	uint8_t *buf = malloc(size);
	if (buf == NULL) {
		return wal_fail(errmsg, KEEL_NOMEM, "wal: no memory to encode the hard state");
	}
	wal_hard_state_encode(buf, hs);
	enum keel_err err = wal_write_atomic(config->vfs, config->dir, WAL_HARD_STATE_NAME,
					     WAL_HARD_STATE_TMP_NAME, buf, size, errmsg);
	free(buf);
	return err;
}

enum keel_err wal_hard_state_load(const struct wal_config *config, struct keel_arena *arena,
				  struct wal_hard_state *out, bool *found,
				  char errmsg[WAL_ERRMSG_SIZE])
{
	memset(out, 0, sizeof(*out));
	*found = false;
	char path[WAL_VFS_PATH_MAX];
	wal_path(path, config->dir, WAL_HARD_STATE_NAME);
	uint8_t *data = NULL;
	struct wal_hard_state hs;
	/* Read twice before calling a checksum failure corruption: a bit
	 * flipped on the way from the disk is gone on the second read. */
	for (int attempt = 0;; attempt++) {
		size_t size = 0;
		enum keel_err err = wal_read_whole(config->vfs, path, HARD_STATE_MAX_FILE, &data,
						   &size, errmsg);
		if (err == KEEL_NOENT) {
			return KEEL_OK;
		}
		if (err == KEEL_TOOBIG) {
			return wal_fail(errmsg, KEEL_CORRUPT,
					"wal: %s is larger than any hard state; the file is damaged. "
					"Restore this server from a peer (see docs/storage-format.md)",
					path);
		}
		if (err != KEEL_OK) {
			return err;
		}
		char why[128];
		err = wal_hard_state_decode(data, size, &hs, why, sizeof(why));
		if (err == KEEL_OK) {
			break;
		}
		free(data);
		if (err == KEEL_UNSUPPORTED || attempt == 1) {
			return wal_fail(errmsg, err == KEEL_UNSUPPORTED ? KEEL_UNSUPPORTED : KEEL_CORRUPT,
					"wal: %s: %s. The server cannot know its term and vote: "
					"restore this server from a peer (see docs/storage-format.md)",
					path, why);
		}
	}
	if (hs.extra_size > 0) {
		uint8_t *copy = keel_arena_dup(arena, hs.extra, hs.extra_size);
		if (copy == NULL) {
			free(data);
			return wal_fail(errmsg, KEEL_NOMEM, "wal: no memory for the hard state");
		}
		hs.extra = copy;
	}
	free(data);
	*out = hs;
	*found = true;
	return KEEL_OK;
}
