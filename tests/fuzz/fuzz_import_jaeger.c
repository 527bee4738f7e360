// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: graph_import_buffer() of arbitrary bytes as the jaeger format, with the
 * properties tests/fuzz/fuzz_import.h states (refusals leave the graph as it was; what is
 * accepted exports to OTLP, Jaeger and Chrome JSON and imports back with the same counts).
 * Seeds: tests/fuzz/corpus/import_jaeger/, small real files of the format and near misses.
 */
#include "fuzz_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_import(data, size, GRAPH_FMT_JAEGER);
}
