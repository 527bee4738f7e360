// SPDX-License-Identifier: Apache-2.0
/*
 * The weft command line.  Placeholder: subcommands land with the compiler front end.
 */
#include <stdio.h>

int main(int argc, char **argv)
{
	printf("weft %s\n", WEFT_VERSION);
	return 0;
}
