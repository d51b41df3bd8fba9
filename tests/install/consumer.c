/*
 * consumer.c — a program outside the tree, built against an installed fco (`pkg-config fco`):
 * tests/install/check.sh builds it once against libfco.so and once statically against libfco.a.
 * The cpu transport, two ranks in one process (fco_comm_init_all), fco_gemv_allreduce with
 * fresh random inputs and a poisoned y against a float64 loop. argv[1]: the version pkg-config
 * reports, which must be the header's, as must the loaded library's (fco_get_version).
 */
#include <fco.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define P 2
#define CHECK(call)                                                                       \
  do {                                                                                    \
    fco_result_t r_ = (call);                                                             \
    if (r_ != FCO_OK) {                                                                   \
      fprintf(stderr, "consumer: %s failed: %s (%s)\n", #call, fco_result_string(r_),     \
              fco_last_error(NULL));                                                      \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

static float frand(unsigned* s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

int main(int argc, char** argv) {
  char version[32];
  snprintf(version, sizeof version, "%d.%d.%d", FCO_VERSION_MAJOR, FCO_VERSION_MINOR,
           FCO_VERSION_PATCH);
  if (argc < 2 || strcmp(argv[1], version) != 0) {
    fprintf(stderr, "consumer: pkg-config says version %s, fco.h says %s\n",
            argc < 2 ? "(none)" : argv[1], version);
    return 1;
  }
  int lib_version = 0;
  CHECK(fco_get_version(&lib_version));
  if (lib_version != FCO_VERSION_CODE) {
    fprintf(stderr, "consumer: the loaded libfco is version code %d, fco.h says %d\n",
            lib_version, FCO_VERSION_CODE);
    return 1;
  }
  fco_config_t cfg;
  CHECK(fco_config_init(&cfg));
  cfg.transport = FCO_TRANSPORT_CPU;
  fco_comm_t comms[P];
  CHECK(fco_comm_init_all(comms, P, NULL, &cfg));

  unsigned seed = (unsigned)time(NULL);
  enum { M = 3, N = 37 };
  const int K[P] = {19, 24};
  float *x[P], *w[P], *y[P], bias[N];
  for (int n = 0; n < N; n++) bias[n] = frand(&seed);
  for (int r = 0; r < P; r++) {
    x[r] = malloc(sizeof(float) * M * K[r]);
    w[r] = malloc(sizeof(float) * N * K[r]);
    y[r] = malloc(sizeof(float) * M * N);
    if (!x[r] || !w[r] || !y[r]) return 1;
    for (int i = 0; i < M * K[r]; i++) x[r][i] = frand(&seed);
    for (int i = 0; i < N * K[r]; i++) w[r][i] = frand(&seed);
    for (int i = 0; i < M * N; i++) y[r][i] = NAN;
  }
  CHECK(fco_group_start());
  for (int r = 0; r < P; r++)
    CHECK(fco_gemv_allreduce(comms[r], x[r], w[r], bias, y[r], M, N, K[r], FCO_F32,
                             FCO_IMPL_AUTO, NULL));
  CHECK(fco_group_end());

  int wrong = 0;
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double ref = bias[n];
      for (int r = 0; r < P; r++)
        for (int k = 0; k < K[r]; k++) ref += (double)x[r][m * K[r] + k] * w[r][n * K[r] + k];
      for (int r = 0; r < P; r++) {
        double got = y[r][m * N + n];
        if (!(fabs(got - ref) <= 1e-5 * (1.0 + fabs(ref)))) {
          if (wrong++ < 5)
            fprintf(stderr, "consumer: rank %d y[%d][%d] = %g, expected %g\n", r, m, n, got, ref);
        }
      }
    }
  for (int r = 0; r < P; r++) {
    CHECK(fco_comm_destroy(comms[r]));
    free(x[r]);
    free(w[r]);
    free(y[r]);
  }
  if (wrong) {
    fprintf(stderr, "consumer: %d wrong elements (seed %u)\n", wrong, seed);
    return 1;
  }
  printf("consumer: fco %s, gemv_allreduce on the cpu transport, %d ranks, %d×%d outputs "
         "correct\n", version, P, M, N);
  return 0;
}
