#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every diagnostic tag of compiler/diag_tags.def is both emitted and tested, so that the
# list (and the table docs/language.md makes of it) names only what weft really says:
#   emitted  the code outside tests/ uses it: DIAG_TAG (a diag_error()/diag_warn() tag) or
#            "[TAG]" in a C string (messages printed outside the compiler: E_VERIFIER,
#            E_ATTACH);
#   tested   tests/compiler/err/TAG.N.wq or tests/compiler/warn/TAG.N.wq exists (driven by
#            tests/compiler/test_compiler_files.c), or a test source (tests/, not its fuzz
#            targets) asserts it: DIAG_TAG, or "[TAG]" in a C string.
# Also: every err/warn file is named after a tag of the .def, and the table in
# docs/language.md is what docs/diag_table.sh makes of the .def.  Then the check is tried
# on small trees of its own, where it must catch a tag never emitted and one never tested.
#   bash tests/test_diag_tags.sh [ROOT]       (ROOT: a source tree, by default this one)
set -euo pipefail

# C text on stdin -> the tags it uses, one per line: DIAG_TAG (a whole word), and TAG of
# "...[TAG]..." in a string literal
used() {
	local text
	text=$(cat)
	{
		grep -oE '\bDIAG_[A-Z][A-Z0-9_]*\b' <<<"$text" | sed 's/^DIAG_//'
		grep -oE '"[^"]*\[[A-Z][A-Z0-9_]*\][^"]*"' <<<"$text" |
			grep -oE '\[[A-Z][A-Z0-9_]*\]' | tr -d '[]'
	} | sort -u
}

# check ROOT: prints each problem, exits 1 if there is any
check() {
	local root=$1 bad=0 tag emitted asserted
	local def="$root/compiler/diag_tags.def"
	local -a tags

	mapfile -t tags < <(sed -n 's/^DIAG(\([A-Z0-9_]*\),.*/\1/p' "$def")
	if [ ${#tags[@]} -eq 0 ]; then
		echo "$def: no DIAG(TAG, ...) lines"
		return 1
	fi
	# the tags used by the C sources that can emit (every layer below tests/) and by the
	# tests' own (not the fuzz targets'), one per line
	emitted=$(cd "$root" && find base kernel probes compiler agent aggregator tools \
		\( -name '*.c' -o -name '*.h' \) -print0 2>/dev/null | xargs -0r cat | used)
	asserted=$(cd "$root" && find tests \( -name '*.c' -o -name '*.h' \) \
		-not -path 'tests/fuzz/*' -print0 2>/dev/null | xargs -0r cat | used)
	declare -A is_emitted=() is_asserted=() is_tag=()
	for tag in $emitted; do is_emitted[$tag]=1; done
	for tag in $asserted; do is_asserted[$tag]=1; done
	for f in "$root"/tests/compiler/err/*.wq "$root"/tests/compiler/warn/*.wq; do
		[ -e "$f" ] || continue
		tag=${f##*/}
		is_asserted[${tag%%.*}]=1
	done
	for tag in "${tags[@]}"; do
		is_tag[$tag]=1
		if [ -z "${is_emitted[$tag]:-}" ]; then
			echo "$tag: never emitted (no DIAG_$tag, and no \"[$tag]\" in a message)"
			bad=1
		fi
		if [ -z "${is_asserted[$tag]:-}" ]; then
			echo "$tag: never tested (no tests/compiler/{err,warn}/$tag.N.wq, and no test" \
				"asserts DIAG_$tag or \"[$tag]\")"
			bad=1
		fi
	done
	for f in "$root"/tests/compiler/err/*.wq "$root"/tests/compiler/warn/*.wq; do
		[ -e "$f" ] || continue
		tag=${f##*/}
		tag=${tag%%.*}
		if [ -z "${is_tag[$tag]:-}" ]; then
			echo "${f#"$root"/}: $tag is not a tag of compiler/diag_tags.def"
			bad=1
		fi
	done
	if [ -f "$root/docs/diag_table.sh" ] && ! sh "$root/docs/diag_table.sh" --check; then
		bad=1
	fi
	return $bad
}

src=${1:-${WEFT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}}
check "$src"
echo "diag tags: every tag of compiler/diag_tags.def is emitted and tested"

# The check itself: a tree with a tag never emitted, then one never tested, then clean.
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/compiler" "$t/agent" "$t/tests/compiler/err" "$t/tests/unit" "$t/tests/fuzz"
cat >"$t/compiler/diag_tags.def" <<'EOF'
DIAG(E_ONE, "emitted by the compiler, tested by a file")
DIAG(E_TWO, "emitted in a message, asserted by a test")
DIAG(W_THREE, "emitted by the compiler, asserted by a test")
EOF
printf 'diag_error(dl, DIAG_E_ONE, loc, "x");\n' >"$t/compiler/a.c"
printf 'fprintf(stderr, "weft: %%s [E_TWO]\\n", msg);\n' >"$t/agent/b.c"
printf 'from x\n' >"$t/tests/compiler/err/E_ONE.1.wq"
printf 'EXPECT(3, "[E_TWO]", q);\n' >"$t/tests/unit/t.c"
printf 'want(DIAG_W_THREE);\n' >"$t/tests/fuzz/f.c" # fuzz targets do not count
expect_fail() { # text
	local out
	if out=$(check "$t"); then
		echo "FAIL: the check passed a tree where: $1" >&2
		exit 1
	fi
	grep -qF -- "$1" <<<"$out" || {
		echo "FAIL: expected '$1' in: $out" >&2
		exit 1
	}
}
expect_fail "W_THREE: never emitted"
printf 'diag_warn(dl, DIAG_W_THREE, loc, "y");\n' >"$t/compiler/c.c"
expect_fail "W_THREE: never tested"
printf 'assert_int_equal(d->tag, DIAG_W_THREE);\n' >>"$t/tests/unit/t.c"
printf 'from y\n' >"$t/tests/compiler/err/E_NOPE.1.wq"
expect_fail "E_NOPE is not a tag"
rm "$t/tests/compiler/err/E_NOPE.1.wq"
check "$t" >/dev/null || {
	echo "FAIL: the check refused a clean tree:" >&2
	check "$t" >&2
	exit 1
}
echo "diag tags: the check catches a tag never emitted, one never tested, and a stray file"
