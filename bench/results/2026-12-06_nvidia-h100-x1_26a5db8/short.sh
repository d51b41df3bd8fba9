#!/bin/bash
# cmd.sh PART=short's one step (tests/gpu/run.sh FCO_GPU_EXTRA): the changed code's tests, local then nccl P = 1.
env FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=150 VERBOSE=1 \
  tests/run.sh test_lifecycle test_bad_args test_embedding_alltoall test_random_shapes
r1=$?
env FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=100 VERBOSE=1 tests/run.sh test_lifecycle test_random_shapes
r2=$?
exit $((r1 | r2))
