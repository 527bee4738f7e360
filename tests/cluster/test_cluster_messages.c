// SPDX-License-Identifier: Apache-2.0
/*
 * Honest messages between the tools and the aggregator, with real processes on loopback:
 *
 *   query checks  `weft submit` of a query over WIRE_MAX_QUERY bytes, or not valid UTF-8,
 *                 says so (exit 3) before it connects (the aggregator sees no client); it
 *                 used to send nothing and report "no answer ... Invalid argument"
 *   wrong role    `weft submit` and `weft status` with an agent's key are refused at once
 *                 with the aggregator's reason (the key's role), exit 1, instead of waiting
 *                 out their timeout; a raw agent that was welcomed and sends a Submit, and
 *                 a raw client that sends a Partial, each get an Error in reply to that
 *                 message naming the role that may send it, and each is counted in
 *                 `rejected`
 *
 * Needs root (weft submit compiles through the probe catalog); skipped otherwise.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/cluster/cluster_util.h"

/* `weft submit --timeout 20s QUERY` with key KEYNAME: its status, output in p. */
static int submit(struct cl *cl, struct wr_proc *p, const char *keyname, const char *query)
{
	char key[64];

	snprintf(key, sizeof(key), "%s.key", keyname);
	return cl_weft(p, (char *)"submit", (char *)"--to", cl->endpoint, (char *)"--server-key",
		       (char *)cl_pub(cl, cl->client_server), (char *)"--key",
		       (char *)cl_path(cl, key), (char *)"--timeout", (char *)"20s",
		       (char *)"--no-follow", (char *)query);
}

static void expect(struct wr_proc *p, int rc, int status, const char *const *want, const char *what)
{
	bool ok = rc == status && !strstr(p->err.p, "no answer");

	for (int i = 0; want[i]; i++)
		ok = ok && strstr(p->err.p, want[i]);
	if (!ok) {
		wr_dump(p, what);
		fail_msg("%s: status %d (%d expected), or its message is not the expected one",
			 what, rc, status);
	}
	wr_free(p);
}

static void test_query_checks(void **state)
{
	struct cl *cl = *state;
	struct cl_proc *agg;
	struct wr_proc p;
	size_t pad = WIRE_MAX_QUERY + 100;
	char *big, want[128];
	int rc;

	if (!cl->dir[0])
		skip();
	agg = cl_aggregator(cl, "agg", NULL, NULL, NULL);

	/* a valid query made long by spaces: it compiles, but the wire carries 64 KiB */
	big = malloc(pad + 64);
	assert_non_null(big);
	snprintf(big, pad + 64, "from syscall:getppid select count() as n every 1s");
	memset(big + strlen(big), ' ', pad);
	big[strlen("from syscall:getppid select count() as n every 1s") + pad] = 0;
	rc = submit(cl, &p, "me", big);
	snprintf(want, sizeof(want), "the query is %zu bytes", strlen(big));
	expect(&p, rc, 3, (const char *const[]){ want, "at most 65536 bytes", NULL },
	       "a 64 KiB+ query");
	free(big);

	/* 0xff can begin no UTF-8 sequence: byte 36 of this query */
	rc = submit(cl, &p, "me",
		    "from syscall:getppid where comm = '\xff' select count() as n every 1s");
	expect(&p, rc, 3, (const char *const[]){ "the query is not valid UTF-8 at byte 36", NULL },
	       "a query not in UTF-8");

	/* both were refused before connecting: the aggregator never saw a client */
	assert_int_equal(cl_file_count(agg->err, "joined"), 0);
	cl->passed = true;
}

/* The next Error within the bounded wait, or a failure. */
static Weft__Envelope *expect_error(struct cl_raw *r, uint64_t seq, const char *const *want)
{
	Weft__Envelope *m = cl_raw_expect(r, WEFT__ENVELOPE__BODY_ERROR, CL_WAIT_MS);

	if (!m)
		fail_msg("no Error in reply to seq %llu", (unsigned long long)seq);
	assert_true(m->error->has_in_reply_to);
	assert_int_equal(m->error->in_reply_to, seq);
	for (int i = 0; want[i]; i++)
		if (!strstr(m->error->message, want[i]))
			fail_msg("the Error '%s' does not say '%s'", m->error->message, want[i]);
	return m;
}

static void test_wrong_role(void **state)
{
	struct cl *cl = *state;
	struct wr_proc p;
	struct cl_raw raw;
	Weft__Envelope e, *m;
	long long r0;
	int rc;

	if (!cl->dir[0])
		skip();
	cl_keygen(cl, "agent", "a", true);
	cl_aggregator(cl, "agg", NULL, NULL, NULL);
	r0 = cl_rejected(cl, NULL);

	/* the tools with an agent's key: refused, with the reason, not a timeout */
	rc = submit(cl, &p, "a", "from syscall:getppid select count() as n every 1s");
	expect(&p, rc, 1,
	       (const char *const[]){ "refused this client", "allow-listed as agent \"a\"",
				      "use a key allow-listed as client", NULL },
	       "weft submit with an agent's key");
	rc = cl_weft(&p, (char *)"status", (char *)"--to", cl->endpoint, (char *)"--server-key",
		     (char *)cl_pub(cl, cl->client_server), (char *)"--key",
		     (char *)cl_path(cl, "a.key"), (char *)"--timeout", (char *)"20s");
	expect(&p, rc, 1,
	       (const char *const[]){ "refused this client", "allow-listed as agent", NULL },
	       "weft status with an agent's key");

	/* a welcomed agent sending what only clients send */
	cl_raw_open(&raw, cl, cl->endpoint, "a");
	cl_raw_hello(&raw, "agent", "a");
	{
		Weft__Submit sub;
		uint8_t one = 1;

		weft__submit__init(&sub);
		sub.query = (char *)"from syscall:getppid select count()";
		sub.manifest.data = &one;
		sub.manifest.len = 1;
		sub.object.data = &one;
		sub.object.len = 1;
		cl_raw_env(&raw, &e, WEFT__ENVELOPE__BODY_SUBMIT, &sub);
		cl_raw_send(&raw, &e);
	}
	m = expect_error(&raw, raw.seq,
			 (const char *const[]){ "allow-listed as agent \"a\"",
						"may not send submit", "as client", NULL });
	wire_free(m);
	cl_raw_close(&raw);

	/* a client sending what only agents and child aggregators send */
	cl_raw_open(&raw, cl, cl->endpoint, "me");
	cl_raw_hello(&raw, "client", "");
	{
		Weft__Partial pt;

		weft__partial__init(&pt);
		pt.query_id = 1;
		pt.host = (char *)"x";
		cl_raw_env(&raw, &e, WEFT__ENVELOPE__BODY_PARTIAL, &pt);
		cl_raw_send(&raw, &e);
	}
	m = expect_error(&raw, raw.seq,
			 (const char *const[]){ "allow-listed as client", "may not send partial",
						"as agent or aggregator", NULL });
	wire_free(m);
	cl_raw_close(&raw);

	/* the two Hellos of the wrong role and the two bodies: counted */
	assert_true(CL_WAIT(cl_rejected(cl, NULL) == r0 + 4, CL_WAIT_MS));
	cl->passed = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_query_checks, cl_test_setup, cl_test_teardown),
		cmocka_unit_test_setup_teardown(test_wrong_role, cl_test_setup, cl_test_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
