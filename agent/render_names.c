// SPDX-License-Identifier: Apache-2.0
/*
 * Names and times at output (issue 15, lang-a): how the agent shows the values of sysname(),
 * signame(), errname(), enumname(), unit() and walltime (compiler/sema_names.c types them;
 * the kernel keeps plain numbers).
 *
 * How it works: agent_slot_value() (agent/table.c) asks agent_names_text() for the text of a
 * name render: the syscall, signal or errno name (probes/names.c), or the enumerator of the
 * slot's enum in this host's kernel BTF; a number without a name is shown as the number, so a
 * group is never lost.  Names are the canonical key of a group, which is what merges across
 * hosts in the cluster.  walltime arrives as the event's CLOCK_MONOTONIC time and becomes ns
 * since the Unix epoch here (agent_names_walltime(): the offset between the two clocks, read
 * now); sb_kv() (agent/output.c) prints it in RFC 3339 with nanoseconds, UTC, in text, and as
 * that number in JSON.  unit(e, 1ms) is printed as 12.345ms in text and 12.345 in JSON.
 *
 * Limits: an enum the agent's kernel lacks prints numbers; a clock step between an event and
 * its output moves its walltime by the step.
 */
#include <inttypes.h>
#include <time.h>
#include "agent/table_int.h"
#include "probes/names.h"

bool agent_names_is_text(enum render r)
{
	return r == RENDER_SYSNAME || r == RENDER_SIGNAME || r == RENDER_ERRNAME ||
	       r == RENDER_ENUM;
}

void agent_names_text(const struct plan_slot *s, int64_t v, struct sbuf *txt)
{
	const char *name = NULL;
	char buf[32];

	switch (s->render) {
	case RENDER_SYSNAME:
		name = names_syscall(v);
		break;
	case RENDER_SIGNAME:
		if (names_signal(v, buf, sizeof(buf)))
			name = buf;
		break;
	case RENDER_ERRNAME:
		name = names_errno(v);
		if (!name && v == 0)
			name = "0";
		break;
	case RENDER_ENUM: {
		const struct btf *btf = names_btf();
		char en[sizeof(s->arg) + 1];
		uint32_t id;

		snprintf(en, sizeof(en), "%.*s", (int)sizeof(s->arg), s->arg);
		id = btf ? names_enum_find(btf, en) : 0;
		if (id)
			name = names_enum_value(btf, id, v);
		break;
	}
	default:
		break;
	}
	if (name)
		sb_puts(txt, name);
	else
		sb_printf(txt, "%" PRId64, v);
}

int64_t agent_names_walltime(int64_t mono_ns)
{
	struct timespec rt, mt;

	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mt);
	return mono_ns + ((int64_t)rt.tv_sec - (int64_t)mt.tv_sec) * 1000000000LL +
	       ((int64_t)rt.tv_nsec - (int64_t)mt.tv_nsec);
}

bool agent_names_kv(struct sbuf *b, enum render r, int64_t v, bool json)
{
	static const struct {
		enum render r;
		int64_t ns;
		const char *unit;
	} units[] = { { RENDER_NS, 1, "ns" },
		      { RENDER_US, 1000, "us" },
		      { RENDER_MS, 1000000, "ms" },
		      { RENDER_S, 1000000000, "s" } };

	if (r == RENDER_WALLTIME) {
		time_t sec = (time_t)(v / 1000000000LL);
		struct tm tm;
		char day[40];

		if (json || v < 0 || !gmtime_r(&sec, &tm) ||
		    !strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm)) {
			sb_printf(b, "%" PRId64, v);
			return true;
		}
		sb_printf(b, "%s.%09" PRId64 "Z", day, v % (int64_t)1000000000);
		return true;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		uint64_t u = (uint64_t)v, whole, frac;

		if (units[i].r != r)
			continue;
		if (units[i].ns == 1) {
			sb_printf(b, json ? "%" PRIu64 : "%" PRIu64 "ns", u);
			return true;
		}
		whole = u / (uint64_t)units[i].ns;
		/* three decimals, truncated: the integer arithmetic the kernel's value allows */
		frac = u % (uint64_t)units[i].ns / (uint64_t)(units[i].ns / 1000);
		sb_printf(b, "%" PRIu64 ".%03" PRIu64 "%s", whole, frac, json ? "" : units[i].unit);
		return true;
	}
	return false;
}
