/*
 * main.c — fco-sim: projects fco's fused operators to clusters larger than any test machine.
 *
 *   fco-sim dlrm --config tools/fco-sim/configs/dlrm-dcnv2.cfg --nodes 1-128 \
 *                --gpus-per-node 8 --calib calib/h200-x2-allreduce.json [-J out.json] [--svg p.svg]
 *   fco-sim decode|moe --config ... ;  fco-sim validate --calib ... ;  fco-sim params
 *
 * See tools/fco-sim/README.md and docs/fco-sim.md. Everything is in cli.c; this file only
 * binds it to the process.
 */
#include "cli.h"

int main(int argc, char** argv) { return sim_cli(argc, argv, stdout, stderr); }
