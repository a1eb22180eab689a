/* placeholder until the config helper lands its version */
#include <stdio.h>
#include "vktrain/cli.h"
int cli_train(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "vktrain: training is not implemented yet\n"); return 1; }
