/* vktrain: the command line entry point. It only dispatches to src/cli. */
#include <stdio.h>
#include <string.h>

#include "vktrain/cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: vktrain <command> [options]\n"
            "\n"
            "commands:\n"
            "  train --config RECIPE.yaml [key.sub=value ...] [--print-config] [--data-only]\n"
            "        [--dry-run]\n"
            "                   train a model from a YAML recipe (under mpirun: data parallel);\n"
            "                   --dry-run prints the memory plan and exits\n"
            "  generate --model DIR (--prompt TEXT | --chat TEXT [--system TEXT]\n"
            "           [--chat-template NAME]) [--max-new-tokens N]\n"
            "           [--temperature T] [--top-k K] [--seed S]\n"
            "                   sample text from a trained model (--chat: one user turn\n"
            "                   in the model's chat template)\n"
            "  tokenize --tokenizer PATH --input FILE... --output SHARD [--separator LINE]\n"
            "                   encode text files into an llm.c token shard\n"
            "  devices          list Vulkan devices, their limits, and which one is chosen\n"
            "\n"
            "options:\n"
            "  -h, --help       show this help\n"
            "  --version        show the version\n"
            "\n"
            "environment:\n"
            "  VKTRAIN_DEVICE=N     use Vulkan device N (see `vktrain devices`)\n"
            "  VKTRAIN_VALIDATE=1   enable the Khronos validation layer\n"
            "  VKTRAIN_KERNELS=texel|tiled  force a kernel family\n"
            "(docs/training.md, \"Environment\", says more)\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("vktrain %s\n", VKTRAIN_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "devices"))
        return cli_devices(argc - 1, argv + 1);
    if (!strcmp(cmd, "train"))
        return cli_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "generate"))
        return cli_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize"))
        return cli_tokenize(argc - 1, argv + 1);
    if (cmd[0] == '-')
        fprintf(stderr, "vktrain: error: unknown option '%s'\n", cmd);
    else
        fprintf(stderr, "vktrain: error: unknown command '%s'\n", cmd);
    fprintf(stderr, "run `vktrain --help` for the commands\n");
    return 2;
}
