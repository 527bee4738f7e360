#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what weft needs to build, test and trace on Debian 12, and prepares the host
# (tracefs).  Idempotent: installs only what is missing; runs `apt-get update` at most once.
# Sourced by quickstart.sh and check.sh; may be run on its own.
set -euo pipefail

WEFT_PACKAGES=(
	build-essential cmake pkg-config clang clang-format llvm libclang-rt-14-dev
	libbpf-dev libelf-dev zlib1g-dev libcapstone-dev bpftool
	libzmq3-dev libprotobuf-c-dev protobuf-c-compiler libsqlite3-dev libjansson-dev
	libbabeltrace2-dev babeltrace2 lttng-tools libcurl4-openssl-dev
	liblttng-ust-dev systemtap-sdt-dev libcmocka-dev
	python3 redis-server bpftrace procps iproute2
)

weft_deps_install() {
	if [ "$(id -u)" != 0 ]; then
		echo "weft: run this as root (it installs packages and loads eBPF programs)" >&2
		return 1
	fi
	local missing=()
	for p in "${WEFT_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "weft: installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
	# tracefs: weft mounts it itself too, but tests and bpftrace like it present.
	if [ ! -e /sys/kernel/tracing/events ]; then
		mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
	fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	weft_deps_install
fi
