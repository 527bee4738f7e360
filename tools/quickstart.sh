#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# weft's main job, from a fresh Debian 12 machine: installs what is missing, builds, and
# runs a real query.  (Until `weft run` lands this explains the query against this
# machine's kernel; see README.md.)
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/deps.sh
weft_deps_install
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target weft >/dev/null
query='from tracepoint:raw_syscalls:sys_enter
group by comm select count() as calls
order by calls desc limit 10 every 1s'
echo "\$ weft explain '$query'"
build/tools/weft explain "$query"
