// SPDX-License-Identifier: Apache-2.0
/*
 * `weft keygen`: a CURVE key pair for an agent, a client or an aggregator.  Writes NAME.key
 * (public and secret, mode 0600) and NAME.pub (public only, to hand out), and prints the
 * allow-list line that lets the key in.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "agent/wire.h"
#include "tools/weft.h"

static const char keygen_help[] =
	"Usage: weft keygen [-o DIR] [--role ROLE] [--force] NAME\n"
	"\n"
	"Makes a CURVE key pair (Curve25519, as ZeroMQ uses it) and writes two files:\n"
	"  DIR/NAME.key   the key pair (\"public\" and \"secret\" lines), mode 0600: it stays on\n"
	"                 the machine that uses it (--key of weft agent, submit, status, cancel\n"
	"                 and aggregator)\n"
	"  DIR/NAME.pub   the public key alone: give the aggregator's to agents and clients\n"
	"                 (--server-key), and a parent's to its children (--parent-key)\n"
	"Then prints, on standard output, the line to add to the aggregator's allow-list so\n"
	"that this key may connect:\n"
	"  ROLE PUBLIC-KEY NAME\n"
	"\n"
	"Options:\n"
	"  -o, --output DIR  where to write the files (default: the current directory)\n"
	"  -r, --role ROLE   the role in the printed line: agent (default), client, or\n"
	"                    aggregator (a child aggregator reporting to a parent)\n"
	"  -f, --force       replace existing files (a new key: update the allow-list)\n"
	"  -h, --help        this text\n"
	"\n"
	"NAME names the key in the aggregator's logs and status: letters, digits, '.', '-',\n"
	"'_', at most 63 characters.\n"
	"\n"
	"Example:\n"
	"  weft keygen -o /etc/weft aggregator\n"
	"  weft keygen --role agent web1 >> allow        # on the aggregator's side\n"
	"\n"
	"Exit status: 0 success, 1 the files could not be written, 2 bad command line.\n";

static bool name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63 || s[0] == '.')
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '.' || *s == '-' || *s == '_'))
			return false;
	return true;
}

int cmd_keygen(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "role", required_argument, NULL, 'r' },
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char pub[WIRE_KEY_LEN + 1], sec[WIRE_KEY_LEN + 1];
	char keypath[4096], pubpath[4096];
	const char *dir = ".", *name, *role = "agent";
	bool force = false;
	struct stat st;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:r:fh", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			dir = optarg;
			break;
		case 'r':
			if (wire_role_parse(optarg) == WIRE_ROLE_NONE) {
				fprintf(stderr,
					"weft: --role takes agent, client or aggregator, not "
					"'%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			}
			role = optarg;
			break;
		case 'f':
			force = true;
			break;
		case 'h':
			fputs(keygen_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs(keygen_help, stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "weft: keygen takes one NAME (see `weft keygen --help`)\n");
		return WEFT_EXIT_USAGE;
	}
	name = argv[optind];
	if (!name_ok(name)) {
		fprintf(stderr,
			"weft: keygen: '%s' is not a key name (letters, digits, '.', '-', "
			"'_'; at most 63)\n",
			name);
		return WEFT_EXIT_USAGE;
	}
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "weft: keygen: %s is not a directory\n", dir);
		return WEFT_EXIT_FAIL;
	}
	if (snprintf(keypath, sizeof(keypath), "%s/%s.key", dir, name) >= (int)sizeof(keypath) ||
	    snprintf(pubpath, sizeof(pubpath), "%s/%s.pub", dir, name) >= (int)sizeof(pubpath)) {
		fprintf(stderr, "weft: keygen: the path is too long\n");
		return WEFT_EXIT_USAGE;
	}
	if (!force && (access(keypath, F_OK) == 0 || access(pubpath, F_OK) == 0)) {
		fprintf(stderr,
			"weft: keygen: %s or %s exists already (--force replaces it; then "
			"update the allow-list)\n",
			keypath, pubpath);
		return WEFT_EXIT_FAIL;
	}
	rc = wire_keypair_new(pub, sec);
	if (rc) {
		fprintf(stderr, "weft: keygen: %s\n",
			rc == -ENOTSUP ? "this libzmq was built without CURVE" : strerror(-rc));
		return WEFT_EXIT_FAIL;
	}
	rc = wire_keyfile_write(keypath, pub, sec);
	explicit_bzero(sec, sizeof(sec));
	if (rc) {
		fprintf(stderr, "weft: keygen: writing %s: %s\n", keypath, strerror(-rc));
		return WEFT_EXIT_FAIL;
	}
	rc = wire_keyfile_write(pubpath, pub, NULL);
	if (rc) {
		fprintf(stderr, "weft: keygen: writing %s: %s\n", pubpath, strerror(-rc));
		return WEFT_EXIT_FAIL;
	}
	fprintf(stderr,
		"weft: wrote %s (the key pair, mode 0600: keep it here) and %s (the public key)\n"
		"weft: the allow-list line for this key (as role %s):\n",
		keypath, pubpath, role);
	printf("%s %s %s\n", role, pub, name);
	return WEFT_EXIT_OK;
}
