#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The layer check (tools/check-layers.py): the real tree is clean, and the check itself
# catches an upward include, an include cycle, and a relative include that climbs up, naming
# the file and line.
set -euo pipefail
src=${WEFT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
check="$src/tools/check-layers.py"
python3 "$check"

t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/base" "$t/kernel" "$t/agent" "$t/aggregator"
printf '#include "base/log.h"\n' >"$t/kernel/ok.c"
printf '/* log */\n' >"$t/base/log.h"
python3 "$check" --root "$t" >/dev/null

fail() { # expected-text
	local out
	if out=$(python3 "$check" --root "$t" 2>&1); then
		echo "FAIL: the check passed a tree with: $1" >&2
		exit 1
	fi
	grep -qF -- "$1" <<<"$out" || {
		echo "FAIL: expected '$1' in: $out" >&2
		exit 1
	}
}
printf '#include <stdio.h>\n\n#include "aggregator/aggd.h"\n' >"$t/agent/up.c"
printf '/* aggd */\n' >"$t/aggregator/aggd.h"
fail "agent/up.c:3: includes aggregator/aggd.h"
rm "$t/agent/up.c"
printf '#include "../aggregator/aggd.h"\n' >"$t/kernel/rel.c"
fail "kernel/rel.c:1: includes ../aggregator/aggd.h"
rm "$t/kernel/rel.c"
printf '#include "agent/b.h"\n' >"$t/agent/a.h"
printf '#include "a.h"\n' >"$t/agent/b.h"
fail "include cycle"
rm "$t/agent/a.h" "$t/agent/b.h"
# include/ (weft/trace.h, installed for traced programs) is the bottom: it includes nothing of
# weft, and everything may include it, as <weft/x.h> too
mkdir -p "$t/include/weft"
printf '#include "base/log.h"\n' >"$t/include/weft/x.h"
fail "include/weft/x.h:1: includes base/log.h"
printf '/* x */\n' >"$t/include/weft/x.h"
printf '#include <weft/x.h>\n' >"$t/base/uses.c"
python3 "$check" --root "$t" >/dev/null
rm "$t/base/uses.c"
echo "layers check: 6 passed, 0 failed"
