/*
 * gate.h — the bounded entry of the nccl transport's collective setup steps (workspace growth,
 * fco_mem_alloc). Those steps agree through NCCL all-reduces, which FCO_TIMEOUT_MS does not
 * bound: a rank whose peer never takes the step (its call needed no growth, another rank
 * refused its call on the host, a rank is gone) used to wait there forever. Before any NCCL
 * call of such a step every rank passes this gate, a one-block kernel:
 *   1. thread p stores (value, generation) into peer p's gate words;
 *   2. thread 0 adds one to the arrival counter C (rank 0's words) and waits, bounded by the
 *      timeout, for all P ranks of this generation (C ≥ generation · P); then it decides with
 *      one compare-and-swap on the decision word D (rank 0's): from "generation − 1 decided,
 *      went" to "generation went" if all had arrived, else to "generation abandoned". The
 *      first CAS of a generation wins and every rank reads the same D, so either every rank
 *      takes the step (then all P are there: the NCCL calls after the gate cannot miss a rank)
 *      or none does — a rank that arrives after its peers gave up finds D abandoned;
 *   3. on "went", thread p reads peer p's value: the result holds their maximum and minimum
 *      (growth passes its size, so ranks that grow together agree on one).
 * An abandoned gate leaves the ranks out of step for good (C counts arrivals since creation):
 * the transport makes their communicators unusable (a sticky error) and never enters the gate
 * of such a communicator again.
 *
 * The gate words live in each rank's signal window past the signal rows (dev.h), from word
 * FCO_GATE_WORD: [2·src] src's value, [2·src + 1] src's generation (gates entered, from 1),
 * then C and D (used on rank 0). Generations only grow, so nothing is ever reset.
 */
#ifndef FCO_CUDA_GATE_H_
#define FCO_CUDA_GATE_H_

#include "dev.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FCO_GATE_WORD ((size_t)FCO_MAX_GPU_RANKS * FCO_SIG_SLOTS) /* uint64 index in the area */
#define FCO_GATE_WORDS (2 * FCO_MAX_GPU_RANKS + 2)
#define FCO_GATE_BYTES ((size_t)FCO_GATE_WORDS * sizeof(uint64_t))

typedef struct {
  int32_t went;        /* 1: every rank arrived in time, take the step; 0: abandoned            */
  int32_t missing;     /* lowest peer whose arrival this rank has not seen, -1: none (with
                        * went = 1 a fault: its count came, its words did not)                 */
  uint64_t decided;    /* D as read: generation << 2 | (0 went, 1 abandoned)                    */
  uint64_t max_value;  /* went: over every rank's value                                         */
  uint64_t min_value;
} fco_gate_result_t;

/* Launch the gate of the rank whose device state is `dev` (its peer_sig, rank, nranks: the
 * table must be written) for generation `gen` (≥ 1, one more than its last) with `value`, on
 * `stream`. The result lands in *result (device memory) when the kernel ends, within about
 * 2·timeout_ns of its start. A result whose D holds another generation means the ranks are out
 * of step. Errors: bad arguments or a launch failure, message in err[FCO_ERRMSG_LEN]. */
fco_result_t fco_cuda_gate(const fco_dev_rank_t* dev, uint64_t gen, uint64_t value,
                           uint64_t timeout_ns, fco_gate_result_t* result, void* stream,
                           char* err);

/* Load the gate's kernel on the current device now (at communicator set-up), so its first
 * launch never loads a module while a kernel of ours spins on a peer (launch.cuh says why). */
fco_result_t fco_cuda_gate_preload(char* err);

#ifdef __cplusplus
}
#endif
#endif /* FCO_CUDA_GATE_H_ */
