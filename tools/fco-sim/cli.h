/*
 * cli.h — fco-sim's command line, callable in-process (the end-to-end test runs it on the
 * shipped configuration and calibration and compares the output with tools/fco-sim/expected/).
 */
#ifndef FCO_SIM_CLI_H_
#define FCO_SIM_CLI_H_

#include <stdio.h>

/* Run `fco-sim argv[1..]`: table to out, diagnostics to err. Returns the exit status:
 * 0 ok, 1 a file could not be read or written, 2 a usage error. */
int sim_cli(int argc, char** argv, FILE* out, FILE* err);

#endif /* FCO_SIM_CLI_H_ */
