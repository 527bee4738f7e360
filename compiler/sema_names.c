// SPDX-License-Identifier: Apache-2.0
/*
 * Names and times (issue 15, lang-a): the checks of sysname(e), signame(e), errname(e),
 * enumname(e, 'ENUM'), unit(e, U) and the built-in walltime, and the render each asks of the
 * plan.
 *
 * How it works: each of these keeps a number in the kernel (the code generator emits the
 * argument as it is, like usym()) and tells the plan how the agent shows it (enum render,
 * compiler/plan.h): sysname as the syscall's name, signame as SIGNAME, errname as ENAME,
 * enumname as the enumerator of a kernel BTF enum, unit(e, 1ms) as a number of that unit with
 * the unit written after it, walltime (the event's CLOCK_MONOTONIC time, to which the agent
 * adds the wall clock's offset at output) in RFC 3339.  The names come from probes/names.c.
 *
 * So they are values for output only: group keys and stream columns.  Where the kernel needs
 * the value itself (a `where`, a span's key or filter, an aggregate's argument) the name or the
 * wall-clock time does not exist yet, and E_NAME_PLACE says so with the number to use instead.
 * enumname()'s enum is checked against the compiling host's BTF (E_ENUM_UNKNOWN); the agent
 * resolves the value against its own kernel's BTF, and prints an unknown value as a number.
 *
 * Limits: walltime is as exact as the agent's reading of the clock offset (a clock step
 * between an event and its output moves it); unit() shows three decimals.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "compiler/diag.h"
#include "compiler/plan.h"
#include "compiler/sema.h"
#include "probes/names.h"

static const char *fn_text(const struct expr *e)
{
	return func_name(e->fn);
}

static int place_error(struct diag_list *dl, const struct expr *e, const char *what)
{
	struct diag *d =
		diag_error(dl, DIAG_E_NAME_PLACE, e->loc,
			   "%s is resolved at output, and the kernel needs this value", what);

	if (e->kind == EXPR_NAME)
		diag_fix(d,
			 "filter on `time` (CLOCK_MONOTONIC ns) instead, or select walltime as a "
			 "column");
	else if (e->fn == FN_UNIT)
		diag_fix(d, "use the number itself here (duration > 10ms, hist(duration / 1us)); "
			    "unit() is for columns and group keys");
	else
		diag_fix(d,
			 "compare the number itself here (e.g. args.id = 257, args.sig = 9); "
			 "%s() is for columns and group keys",
			 fn_text(e));
	return -EINVAL;
}

/* Whether e is a duration literal of exactly one of the units unit() shows; its render. */
static int unit_render(const struct expr *u)
{
	static const struct {
		int64_t ns;
		enum render r;
	} units[] = { { 1, RENDER_NS },
		      { 1000, RENDER_US },
		      { 1000000, RENDER_MS },
		      { 1000000000, RENDER_S } };

	if (u->kind != EXPR_INT || u->unit != UNIT_DURATION)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (u->ival == units[i].ns)
			return units[i].r;
	return -1;
}

int sema_names_check_call(struct diag_list *dl, struct expr *e, bool kernel)
{
	struct expr *a0 = e->args[0];
	char buf[32];

	if (kernel)
		return place_error(dl, e, e->fn == FN_UNIT ? "unit()" : "a name");
	if (e->fn == FN_UNIT) {
		if (a0->ty.kind != TY_INT) {
			diag_fix(diag_error(dl, DIAG_E_UNIT_ARG, a0->loc,
					    "unit() shows a number of nanoseconds, not %s",
					    type_name(&a0->ty, buf, sizeof(buf))),
				 "e.g. unit(duration, 1ms)");
			return -EINVAL;
		}
		if (unit_render(e->args[1]) < 0) {
			diag_fix(diag_error(dl, DIAG_E_UNIT_ARG, e->args[1]->loc,
					    "unit(e, U): U must be one of 1ns, 1us, 1ms, 1s"),
				 "e.g. unit(duration, 1ms) shows 12.345ms");
			return -EINVAL;
		}
		e->ty = a0->ty;
		e->ty.size = 8;
		return 0;
	}
	if (a0->ty.kind != TY_INT) {
		diag_fix(diag_error(dl, DIAG_E_NAME_ARG, a0->loc, "%s() names a number, not %s",
				    fn_text(e), type_name(&a0->ty, buf, sizeof(buf))),
			 e->fn == FN_SYSNAME ? "e.g. sysname(args.id) on raw_syscalls:sys_enter" :
			 e->fn == FN_SIGNAME ? "e.g. signame(args.sig) on signal:signal_generate" :
			 e->fn == FN_ERRNAME ? "e.g. errname(retval) of a failed syscall" :
					       "e.g. enumname(args.newstate, 'TCP_ESTABLISHED')");
		return -EINVAL;
	}
	if (e->fn == FN_ENUMNAME) {
		const struct expr *n = e->args[1];
		const struct btf *btf;

		if (n->kind != EXPR_STR) {
			diag_fix(
				diag_error(dl, DIAG_E_NAME_ARG, n->loc,
					   "enumname(e, 'ENUM'): the enum is named by a string"),
				"e.g. enumname(args.type, 'sock_type'); for an anonymous enum, one "
				"of its enumerators: enumname(args.newstate, 'TCP_ESTABLISHED')");
			return -EINVAL;
		}
		if (strlen(n->sval) >= sizeof(((struct plan_slot *)0)->arg)) {
			diag_error(dl, DIAG_E_NAME_ARG, n->loc, "the enum's name is too long");
			return -EINVAL;
		}
		btf = names_btf();
		if (!btf) {
			diag_fix(
				diag_error(
					dl, DIAG_E_BTF_NONE, n->loc,
					"enumname() needs the kernel's BTF, which cannot be read "
					"(%s)",
					strerror(errno)),
				"run on a kernel built with CONFIG_DEBUG_INFO_BTF=y, or set WEFT_BTF");
			return -EINVAL;
		}
		if (!names_enum_find(btf, n->sval)) {
			diag_fix(
				diag_error(
					dl, DIAG_E_ENUM_UNKNOWN, n->loc,
					"the kernel has no enum '%s' and no enumerator of that name",
					n->sval),
				"name an enum type ('sock_type') or, for an anonymous enum, one of "
				"its enumerators ('TCP_ESTABLISHED'); `bpftool btf dump file "
				"/sys/kernel/btf/vmlinux` lists them");
			return -EINVAL;
		}
	}
	e->ty = a0->ty;
	e->ty.size = 8;
	return 0;
}

int sema_names_check_walltime(struct diag_list *dl, struct expr *e, bool kernel)
{
	if (kernel)
		return place_error(dl, e, "walltime");
	return 0;
}

static bool is_duration_valued(const struct expr *e)
{
	return e->kind == EXPR_NAME &&
	       (e->bi == BI_DURATION || e->bi == BI_TIME || e->bi == BI_WALLTIME);
}

int sema_names_check_compare(struct diag_list *dl, const struct expr *e)
{
	const struct expr *lit = NULL, *other = NULL;

	if (e->rhs->kind == EXPR_INT && e->rhs->unit == UNIT_SIZE) {
		lit = e->rhs;
		other = e->lhs;
	} else if (e->lhs->kind == EXPR_INT && e->lhs->unit == UNIT_SIZE) {
		lit = e->lhs;
		other = e->rhs;
	}
	if (!lit || !is_duration_valued(other))
		return 0;
	diag_fix(diag_error(dl, DIAG_E_UNIT_MISMATCH, lit->loc,
			    "`%s` is a time in nanoseconds, and this is a size in bytes",
			    builtin_name(other->bi)),
		 "write a duration: ns, us, ms, s, m or h (e.g. %s > 10ms)",
		 builtin_name(other->bi));
	return -EINVAL;
}

int sema_names_render(const struct expr *e)
{
	if (e->kind == EXPR_NAME && e->bi == BI_WALLTIME)
		return RENDER_WALLTIME;
	if (e->kind != EXPR_CALL)
		return -1;
	switch (e->fn) {
	case FN_SYSNAME:
		return RENDER_SYSNAME;
	case FN_SIGNAME:
		return RENDER_SIGNAME;
	case FN_ERRNAME:
		return RENDER_ERRNAME;
	case FN_ENUMNAME:
		return RENDER_ENUM;
	case FN_UNIT:
		return e->nargs == 2 ? unit_render(e->args[1]) : -1;
	default:
		return -1;
	}
}

void sema_names_arg(const struct expr *e, char *buf, size_t sz)
{
	buf[0] = 0;
	if (e->kind == EXPR_CALL && e->fn == FN_ENUMNAME && e->nargs == 2 &&
	    e->args[1]->kind == EXPR_STR)
		snprintf(buf, sz, "%s", e->args[1]->sval);
}
