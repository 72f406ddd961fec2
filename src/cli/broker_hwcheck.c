/*
 * broker_hwcheck.c — writes the high-watermark checkpoint on a timer and
 * at a clean stop (broker_hwcheck.h).
 *
 *   IDLE --timer--> DUE --no sync in flight, an image--> WRITING (worker)
 *        <-------------------------------------------- written or failed
 */
#include "cli/broker_hwcheck.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/assert.h"
#include "base/buf.h"
#include "os/log.h"
#include "wal/vfs.h"

struct broker_hw_writer {
	uv_loop_t *loop;
	struct broker_core *core;
	const bool *sync_in_flight;
	uv_timer_t timer;
	uv_work_t work;
	bool due;
	bool writing;
	bool failing; /* the last write failed (logged once per run of failures) */
	struct keel_wbuf buf;
	enum keel_err err;
	char errmsg[WAL_VFS_ERRMSG_SIZE];
	uint64_t written;
	uint64_t failures;
};

static void write_work(uv_work_t *req)
{
	struct broker_hw_writer *w = req->data;
	w->err = broker_hw_checkpoint_store(w->core->config.vfs, w->core->data_dir, w->buf.data,
	                                    w->buf.size, w->errmsg);
}

static void note_result(struct broker_hw_writer *w)
{
	if (w->err == KEEL_OK) {
		w->written++;
		if (w->failing) {
			KEEL_INFO("the high-watermark checkpoint is written again");
		}
		w->failing = false;
		return;
	}
	w->failures++;
	if (!w->failing) {
		KEEL_WARN("cannot write the high-watermark checkpoint: %s (retried every interval)",
		          w->errmsg);
	}
	w->failing = true;
}

static void write_done(uv_work_t *req, int status)
{
	(void)status;
	struct broker_hw_writer *w = req->data;
	w->writing = false;
	note_result(w);
}

void broker_hw_writer_poke(struct broker_hw_writer *w)
{
	/* Before the first image the core holds no partitions: writing then
	 * would replace a good checkpoint with an empty one. */
	if (w == NULL || !w->due || w->writing || *w->sync_in_flight || !w->core->has_image) {
		return;
	}
	w->due = false;
	if (broker_hw_checkpoint_encode(w->core, &w->buf) != KEEL_OK) {
		w->err = KEEL_NOMEM;
		snprintf(w->errmsg, sizeof(w->errmsg), "out of memory");
		note_result(w);
		return;
	}
	w->writing = true;
	w->work.data = w;
	int rc = uv_queue_work(w->loop, &w->work, write_work, write_done);
	KEEL_ASSERT(rc == 0);
}

static void timer_fired(uv_timer_t *t)
{
	struct broker_hw_writer *w = t->data;
	w->due = true;
	broker_hw_writer_poke(w);
}

struct broker_hw_writer *broker_hw_writer_start(uv_loop_t *loop, struct broker_core *core,
                                                const bool *sync_in_flight, int interval_ms)
{
	struct broker_hw_writer *w = calloc(1, sizeof(*w));
	if (w == NULL) {
		return NULL;
	}
	w->loop = loop;
	w->core = core;
	w->sync_in_flight = sync_in_flight;
	keel_wbuf_init_dynamic(&w->buf, 4096, 256u << 20);
	uint32_t n = 0;
	char why[512];
	enum keel_err err = broker_hw_checkpoint_load(core, &n, why, sizeof(why));
	if (err == KEEL_OK) {
		KEEL_INFO("high-watermark checkpoint: %u partitions to start from it", n);
	} else if (err != KEEL_NOENT) {
		KEEL_WARN("ignoring the high-watermark checkpoint %s/%s: %s; partitions start from "
		          "their log start until their leader says more",
		          core->data_dir, BROKER_HW_CHECKPOINT_FILE, why);
	}
	uv_timer_init(loop, &w->timer);
	w->timer.data = w;
	uv_timer_start(&w->timer, timer_fired, (uint64_t)interval_ms, (uint64_t)interval_ms);
	return w;
}

void broker_hw_writer_close(struct broker_hw_writer *w)
{
	uv_close((uv_handle_t *)&w->timer, NULL);
}

void broker_hw_writer_finish(struct broker_hw_writer *w)
{
	KEEL_ASSERT(!w->writing); /* the loop ran until every work request was done */
	if (!w->core->has_image) {
		KEEL_INFO("no image yet: the high-watermark checkpoint is left as it was");
		keel_wbuf_free(&w->buf);
		free(w);
		return;
	}
	w->err = broker_hw_checkpoint_encode(w->core, &w->buf);
	if (w->err == KEEL_OK) {
		w->err = broker_hw_checkpoint_store(w->core->config.vfs, w->core->data_dir,
		                                    w->buf.data, w->buf.size, w->errmsg);
	} else {
		snprintf(w->errmsg, sizeof(w->errmsg), "out of memory");
	}
	w->failing = false;
	note_result(w);
	if (w->err == KEEL_OK) {
		KEEL_INFO("wrote the high-watermark checkpoint (%" PRIu64 " written this run)",
		          w->written);
	}
	keel_wbuf_free(&w->buf);
	free(w);
}

uint64_t broker_hw_writer_count(const struct broker_hw_writer *w, uint64_t *failures)
{
	*failures = w->failures;
	return w->written;
}
