// SPDX-License-Identifier: Apache-2.0
/*
 * The window schedule of a running query (agent/schedule.h): window arithmetic that
 * saturates instead of wrapping (an epoch and `every` come from the wire), and the order of
 * what is due: a query's end before a window's close when the window reaches past the end,
 * a close before a flip (a close flips too).
 */
#include <string.h>
#include "agent/schedule.h"

static uint64_t sched_add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t sched_mul_sat(uint64_t a, uint64_t b)
{
	if (a && b > UINT64_MAX / a)
		return UINT64_MAX;
	return a * b;
}

uint64_t agent_sched_window_of(const struct agent_sched *s, uint64_t t)
{
	if (!s->every || t < s->epoch)
		return 0;
	return (t - s->epoch) / s->every;
}

void agent_sched_set_window(struct agent_sched *s, uint64_t w)
{
	s->window = w;
	s->close_at =
		s->every ? sched_add_sat(s->epoch, sched_mul_sat(w + 1, s->every)) : UINT64_MAX;
}

void agent_sched_init(struct agent_sched *s, uint64_t epoch, uint64_t every, uint64_t end,
		      bool catch_up, uint64_t now, uint64_t mono)
{
	memset(s, 0, sizeof(*s));
	s->epoch = epoch;
	s->every = every;
	s->end = end;
	s->flip_max = AGENT_FLIP_MAX_NS;
	s->catch_up = catch_up;
	s->last_flip = mono;
	agent_sched_set_window(s, agent_sched_window_of(s, now));
}

enum agent_sched_due agent_sched_due(const struct agent_sched *s, uint64_t now, uint64_t mono)
{
	if (now >= s->end && s->end <= s->close_at)
		return AGENT_SCHED_END;
	if (now >= s->close_at)
		return AGENT_SCHED_CLOSE;
	if (mono < s->last_flip || mono - s->last_flip >= s->flip_max)
		return AGENT_SCHED_FLIP;
	return AGENT_SCHED_NONE;
}

uint64_t agent_sched_close(struct agent_sched *s, uint64_t now, uint64_t mono)
{
	uint64_t next = agent_sched_window_of(s, now), skipped = 0;

	s->last_flip = mono;
	if (s->catch_up || next <= s->window + 1) {
		agent_sched_set_window(s, s->window + 1);
		return 0;
	}
	skipped = next - s->window - 1;
	agent_sched_set_window(s, next);
	return skipped;
}

void agent_sched_flipped(struct agent_sched *s, uint64_t mono)
{
	s->last_flip = mono;
}

uint64_t agent_sched_wait_ns(const struct agent_sched *s, uint64_t now, uint64_t mono)
{
	uint64_t due = s->close_at < s->end ? s->close_at : s->end, wait = 0;

	if (mono >= s->last_flip && mono - s->last_flip < s->flip_max)
		wait = s->flip_max - (mono - s->last_flip);
	if (due != UINT64_MAX)
		wait = due <= now ? 0 : (due - now < wait ? due - now : wait);
	return wait;
}
