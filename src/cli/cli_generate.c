/* cli_generate: `vktrain generate` (placeholder until it lands). */
#include <stdio.h>

#include "vktrain/cli.h"

int cli_generate(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "vktrain: error: `generate` is not implemented yet\n");
    return 1;
}
