/*
 * broker_hwcheck.h — the broker shell's side of the high-watermark
 * checkpoint (src/broker/hwcheck.c has the format): on the loop thread,
 * every interval, the core's high watermarks are encoded (between syncs)
 * and written on a libuv worker (temp file, fdatasync, rename, directory
 * sync), one write at a time; at a clean stop, once more after the loop
 * has ended.
 */
#ifndef KEEL_CLI_BROKER_HWCHECK_H
#define KEEL_CLI_BROKER_HWCHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "broker/broker.h"

struct broker_hw_writer;

/* Reads the checkpoint into the core (logging what it restored, or why
 * the file was ignored) and starts the timer. `sync_in_flight` is the
 * shell's flag: no encoding while a sync runs. NULL on out of memory. */
struct broker_hw_writer *broker_hw_writer_start(uv_loop_t *loop, struct broker_core *core,
                                                const bool *sync_in_flight, int interval_ms);
/* Loop thread, after a sync: writes a checkpoint that came due meanwhile. */
void broker_hw_writer_poke(struct broker_hw_writer *w);
/* Loop thread: closes the timer (with the other handles at stop). */
void broker_hw_writer_close(struct broker_hw_writer *w);
/* After the loop has ended (clean stop): writes the final checkpoint,
 * logs it, and frees w. */
void broker_hw_writer_finish(struct broker_hw_writer *w);
/* Checkpoints written and failed, for /metrics. */
uint64_t broker_hw_writer_count(const struct broker_hw_writer *w, uint64_t *failures);

#endif
