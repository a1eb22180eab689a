/* cli: the subcommands of the vktrain program. Each takes the arguments
 * after its name (argv[0] is the subcommand) and returns the exit status. */
#ifndef VKTRAIN_CLI_H
#define VKTRAIN_CLI_H

int cli_devices(int argc, char **argv);
int cli_train(int argc, char **argv);
int cli_generate(int argc, char **argv);
int cli_tokenize(int argc, char **argv);

#endif
