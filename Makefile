# Makefile — builds libfco (shared + static), tools/fco-bench and the tests.
#   make            build everything into build/
#   make test       build and run the test suite (cpu transport without a GPU; see tests/run.sh)
#   make bench      build and run the A/B benchmark (fco-bench) of every operator with defaults
#   make install    install fco.h, libfco (.so, .a), fco.pc (pkg-config), fco-bench and fco-sim
#                   under PREFIX (default /usr/local; DESTDIR for staging); make uninstall
# CUDA code is built when nvcc is found ($(CUDA_HOME)/bin/nvcc); otherwise a CPU-only library.
# Overridable: CUDA_HOME, NCCL_HOME, NVCC, FCO_CUDA=0|1, CUDA_ARCH, BUILD, SANITIZE=address|thread.

CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
FCO_CUDA  ?= $(shell test -x $(NVCC) && echo 1 || echo 0)
NCCL_HOME ?= $(CUDA_HOME)
NCCL_LIBDIR ?= $(firstword $(dir $(wildcard $(NCCL_HOME)/lib64/libnccl.so.2 $(NCCL_HOME)/lib/libnccl.so.2)) $(NCCL_HOME)/lib)
NCCL_INC  ?= $(NCCL_HOME)/include
CUDA_ARCH ?= -gencode=arch=compute_90,code=sm_90
BUILD     ?= build
# Tools and tests are run as $(BENCH) etc.: keep BUILD a path (relative → ./ prefix added).
BUILD_RUN := $(if $(filter /%,$(BUILD)),$(BUILD),./$(BUILD))

CC      ?= cc
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -Wall -Wextra -Wno-unused-parameter -fPIC -D_GNU_SOURCE -Iinclude
NVFLAGS ?= -O3 -g -lineinfo
NVFLAGS += -std=c++17 $(CUDA_ARCH) -Xcompiler -fPIC,-Wall -Iinclude -I$(NCCL_INC) -I$(CUDA_HOME)/include
LDLIBS  := -lpthread -lrt -lm

C_SRC := $(wildcard src/core/*.c src/ops/*.c src/cpu/*.c) src/transport/cpu.c
CUDA_C_SRC := src/transport/local.c src/transport/gpu_common.c
CU_SRC := $(wildcard src/cuda/*.cu src/transport/*.cu)

ifeq ($(FCO_CUDA),1)
  CFLAGS += -DFCO_HAVE_CUDA -I$(NCCL_INC) -I$(CUDA_HOME)/include
  NVFLAGS += -DFCO_HAVE_CUDA
  C_SRC += $(CUDA_C_SRC)
  CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcudart -lcublas -lcublasLt -L$(NCCL_LIBDIR) -l:libnccl.so.2 \
               -Wl,-rpath,$(abspath $(NCCL_LIBDIR)) -Wl,-rpath,$(CUDA_HOME)/lib64
  LD := g++
else
  CU_SRC :=
  CUDA_LIBS :=
  LD := $(CC)
endif

# SANITIZE=address (AddressSanitizer + UndefinedBehaviorSanitizer) or SANITIZE=thread
# (ThreadSanitizer: the cpu transport's worlds of threads) in every C object and link, for the C
# tests (`make FCO_CUDA=0 SANITIZE=address BUILD=build-san all`, then `BUILD=build-san
# tests/run.sh`; .ci/run runs both). CPU-only builds; not for `make test` as a whole: its install
# check and pytest load libfco into programs built without the sanitizer runtime.
SANITIZE ?=
ifneq ($(SANITIZE),)
  ifeq ($(FCO_CUDA),1)
    $(error SANITIZE=$(SANITIZE) is for CPU-only builds: add FCO_CUDA=0)
  endif
  ifeq ($(SANITIZE),address)
    SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
  else ifeq ($(SANITIZE),thread)
    SAN_FLAGS := -fsanitize=thread
  else
    $(error SANITIZE=$(SANITIZE): want address or thread)
  endif
  CFLAGS += $(SAN_FLAGS)
  LDLIBS += $(SAN_FLAGS)
endif

OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(C_SRC)) $(patsubst %.cu,$(BUILD)/obj/%.o,$(CU_SRC))
LIB_SO := $(BUILD)/lib/libfco.so
LIB_A  := $(BUILD)/lib/libfco.a
RPATH  := -Wl,-rpath,$(abspath $(BUILD)/lib)

# "-dirty" when the tree differs from HEAD (e.g. a device copy whose .git lags the files it runs)
FCO_GIT_COMMIT ?= $(shell git describe --always --dirty --abbrev=12 2>/dev/null)
BENCH := $(BUILD)/bin/fco-bench
BENCH_SRC := $(wildcard tools/fco-bench/*.c)
TEST_COMMON := $(wildcard tests/common/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
TESTS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))

# examples/c: built as a user would (the public header, -lfco) into $(BUILD)/examples, and once
# more as a test program of the suite (tests/run.sh runs it; unset FCO_TRANSPORT = cpu there).
EXAMPLE_SRC := $(wildcard examples/c/*.c)
EXAMPLES := $(patsubst examples/c/%.c,$(BUILD)/examples/%,$(EXAMPLE_SRC))
TESTS += $(patsubst examples/c/%.c,$(BUILD)/tests/test_example_%,$(EXAMPLE_SRC))

.PHONY: all lib tools tests examples test bench clean install uninstall fuzz FORCE
all: lib tools tests examples
examples: $(EXAMPLES)
lib: $(LIB_SO) $(LIB_A)
tools: $(BENCH)
tests: $(TESTS)

# Header dependencies: each compile writes the headers its source included next to the object
# (-MMD -MP: $(BUILD)/obj/<path>.d, read below), so a header change rebuilds only the objects that
# include it. An object built before it had a .d file depends on every header, as all did before.
HDRS := $(wildcard include/*.h src/*/*.h src/*/*.cuh)
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -MMD -MP -MF $(@:.o=.d) -c $< -o $@

NODEP_OBJ := $(foreach o,$(OBJ),$(if $(wildcard $(o:.o=.d)),,$(o)))
$(NODEP_OBJ): $(HDRS)
-include $(wildcard $(OBJ:.o=.d))

# impl 1's wgmma tile (src/cuda/gemm_tile_wgmma.cuh) needs the arch-specific sm_90a: the fused
# GEMM file gets it in place of sm_90 (same GPUs); its launcher checks which image was loaded.
comma := ,
$(BUILD)/obj/src/cuda/gemm_alltoall_fused.o: CUDA_ARCH := $(subst arch=compute_90$(comma)code=sm_90,arch=compute_90a$(comma)code=sm_90a,$(CUDA_ARCH))
# the grouped GEMV tile (src/cuda/gemv_group_wgmma.cuh) as well.
$(BUILD)/obj/src/cuda/gemv_allreduce.o: CUDA_ARCH := $(subst arch=compute_90$(comma)code=sm_90,arch=compute_90a$(comma)code=sm_90a,$(CUDA_ARCH))

# FCO_GEMV_TRACE, a diagnostic build of the fused GEMV kernels (src/cuda/gemv_group_tma.cuh: the
# first 288 blocks of the TMA tile record a call's stages with %globaltimer, a kernel after every
# FCO_GEMV_TRACE_EVERY-th launch prints them — use 8 in graphs: a print after every call perturbs
# the next; bench/probe/gtrace_summary.py reads the output): `make gemv-trace` builds
# $(BUILD)/obj/trace/gemv_allreduce.o; copy it over
# $(BUILD)/obj/src/cuda/gemv_allreduce.o, touch it and `make` to relink (as the session-24 runs'
# cmd.sh do, e.g. bench/results/2026-12-02_nvidia-h200_fe80fc1-tmapf); to go back, delete that
# object and `make`.
.PHONY: gemv-trace
gemv-trace: $(BUILD)/obj/trace/gemv_allreduce.o
$(BUILD)/obj/trace/gemv_allreduce.o: src/cuda/gemv_allreduce.cu $(wildcard include/*.h src/*/*.h src/*/*.cuh)
	@test "$(FCO_CUDA)" = 1 || { echo "gemv-trace: needs nvcc (FCO_CUDA=1)"; exit 1; }
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -DFCO_GEMV_TRACE -c $< -o $@
$(BUILD)/obj/trace/gemv_allreduce.o: CUDA_ARCH := $(subst arch=compute_90$(comma)code=sm_90,arch=compute_90a$(comma)code=sm_90a,$(CUDA_ARCH))

$(LIB_SO): $(OBJ)
	@mkdir -p $(dir $@)
	$(LD) -shared -o $@ $(OBJ) $(CUDA_LIBS) $(LDLIBS)

$(LIB_A): $(OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $(OBJ)

# fco-bench records the commit it was built from (-DFCO_GIT_COMMIT): a stamp holding it, rewritten
# only when it changes, rebuilds fco-bench after a commit (or an edit that makes the tree dirty).
COMMIT_STAMP := $(BUILD)/commit.stamp
$(COMMIT_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(FCO_GIT_COMMIT)' | cmp -s - $@ || echo '$(FCO_GIT_COMMIT)' > $@
FORCE:

$(BENCH): $(BENCH_SRC) $(LIB_SO) include/fco.h $(wildcard tools/fco-bench/*.h) $(COMMIT_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(if $(FCO_GIT_COMMIT),-DFCO_GIT_COMMIT=$(FCO_GIT_COMMIT)) -o $@ $(BENCH_SRC) -L$(BUILD)/lib -lfco $(RPATH) $(CUDA_LIBS) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(TEST_COMMON) $(LIB_SO) $(wildcard tests/common/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/common -o $@ $< $(TEST_COMMON) -L$(BUILD)/lib -lfco $(RPATH) $(CUDA_LIBS) $(LDLIBS)

$(BUILD)/examples/%: examples/c/%.c $(LIB_SO) include/fco.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -L$(BUILD)/lib -lfco $(RPATH) $(CUDA_LIBS) $(LDLIBS)

$(BUILD)/tests/test_example_%: examples/c/%.c $(LIB_SO) include/fco.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DFCO_EXAMPLE_AS_TEST -o $@ $< -L$(BUILD)/lib -lfco $(RPATH) $(CUDA_LIBS) $(LDLIBS)

# fco-sim (tools/fco-sim): a plain C tool, no libfco, no GPU. Its tests (tests/test_sim_*.c)
# link the simulator's objects (all but main.o) instead of libfco's operators.
SIM := $(BUILD)/bin/fco-sim
SIM_SRC := $(wildcard tools/fco-sim/*.c)
SIM_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out tools/fco-sim/main.c,$(SIM_SRC)))
tools: $(SIM)

$(BUILD)/obj/tools/fco-sim/%.o: tools/fco-sim/%.c $(wildcard tools/fco-sim/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(SIM): $(SIM_OBJ) $(BUILD)/obj/tools/fco-sim/main.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ -lm

$(BUILD)/tests/test_sim_%: tests/test_sim_%.c $(SIM_OBJ) $(TEST_COMMON) $(LIB_SO) $(wildcard tests/common/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/common -Itools/fco-sim -DFCO_SRC_DIR='"$(CURDIR)"' -o $@ $< $(SIM_OBJ) $(TEST_COMMON) -L$(BUILD)/lib -lfco $(RPATH) $(CUDA_LIBS) $(LDLIBS)

test: all
	BUILD=$(BUILD) ./tests/run.sh
	+BUILD=$(BUILD) MAKE="$(MAKE)" ./tests/install/check.sh
	BUILD=$(BUILD) ./tests/python/run.sh

# Every operator, one fco-bench table each, fco-bench's defaults (transport auto: nccl with a GPU,
# else the cpu transport, which the tables' header says; fco-bench -h). BENCH_OPS / BENCH_ARGS
# narrow it, e.g. make bench BENCH_OPS=embedding_alltoall BENCH_ARGS="-d bf16 -G 1".
# BENCH_JSON=DIR writes each op's JSON to DIR/bench-<op>.json (a -J in BENCH_ARGS is refused:
# each op's run would replace the file, leaving only the last op's results).
BENCH_OPS ?= gemv_allreduce embedding_alltoall gemm_alltoall allreduce
bench: all
	@case " $(BENCH_ARGS)" in *" -J"*) echo "make bench: no -J in BENCH_ARGS (one fco-bench" \
	  "run per op: the file would keep the last op's only); BENCH_JSON=DIR writes" \
	  "DIR/bench-<op>.json" >&2; exit 2;; esac
	@$(if $(BENCH_JSON),mkdir -p $(BENCH_JSON) &&) for op in $(BENCH_OPS); do \
	  $(BUILD_RUN)/bin/fco-bench $$op $(BENCH_ARGS) \
	  $(if $(BENCH_JSON),-J $(BENCH_JSON)/bench-$$op.json) || exit 1; done

# libFuzzer builds of the tests/test_fuzz_*.c harnesses (their suite builds run in `make test`):
# clang, ASan + UBSan, the library's CPU-only sources compiled in. `make fuzz`, then e.g.
# build/fuzz/fuzz_embedding -max_total_time=600.
FUZZ_CC ?= clang
FUZZ_SRC := $(wildcard src/core/*.c src/ops/*.c src/cpu/*.c) src/transport/cpu.c
FUZZ_BINS := $(patsubst tests/test_fuzz_%.c,$(BUILD)/fuzz/fuzz_%,$(wildcard tests/test_fuzz_*.c))
fuzz: $(FUZZ_BINS)
$(BUILD)/fuzz/fuzz_%: tests/test_fuzz_%.c $(FUZZ_SRC) $(TEST_COMMON) $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  -std=c11 -D_GNU_SOURCE -DFCO_LIBFUZZER -Iinclude -Itests/common -o $@ $< $(FUZZ_SRC) \
	  $(TEST_COMMON) -lpthread -lrt -lm

# Installation. fco.pc's Libs.private lists what the static library needs (CUDA, cuBLAS, NCCL
# and the C++ runtime of the CUDA objects in a CUDA build); `pkg-config --libs fco` is -lfco with
# an rpath to the installed lib/ (a program starts without LD_LIBRARY_PATH for any PREFIX),
# libfco.so carrying its own dependencies (and their rpath, as built). fco-bench is linked again
# for the prefix (the build's carries an rpath to the build tree's lib/); fco-sim needs no libfco.
PREFIX  ?= /usr/local
DESTDIR ?=
FCO_VERSION := $(shell awk '/^\#define FCO_VERSION_(MAJOR|MINOR|PATCH) /{v = v s $$3; s = "."} END {print v}' include/fco.h)
PC_PRIVATE := $(strip $(CUDA_LIBS) $(if $(filter 1,$(FCO_CUDA)),-lstdc++) $(LDLIBS))
INSTALLED := include/fco.h lib/libfco.so lib/libfco.a lib/pkgconfig/fco.pc bin/fco-bench bin/fco-sim

install: lib tools
	@case '$(PREFIX)' in /*) ;; *) echo "make install: PREFIX=$(PREFIX) must be an absolute path (fco.pc names it)" >&2; exit 2 ;; esac
	@mkdir -p $(BUILD)
	printf '%s\n' 'prefix=$(PREFIX)' 'exec_prefix=$${prefix}' 'libdir=$${prefix}/lib' \
	  'includedir=$${prefix}/include' '' 'Name: fco' \
	  'Description: fused compute + collective operators for NVIDIA GPUs' \
	  'Version: $(FCO_VERSION)' 'Cflags: -I$${includedir}' \
	  'Libs: -L$${libdir} -Wl,-rpath,$${libdir} -lfco' \
	  'Libs.private: $(PC_PRIVATE)' > $(BUILD)/fco.pc
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/fco.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 $(BUILD)/fco.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/
	@mkdir -p $(BUILD)/install
	$(CC) $(CFLAGS) $(if $(FCO_GIT_COMMIT),-DFCO_GIT_COMMIT=$(FCO_GIT_COMMIT)) \
	  -o $(BUILD)/install/fco-bench $(BENCH_SRC) -L$(BUILD)/lib -lfco -Wl,-rpath,$(PREFIX)/lib \
	  $(CUDA_LIBS) $(LDLIBS)
	install -m 755 $(BUILD)/install/fco-bench $(SIM) $(DESTDIR)$(PREFIX)/bin/

uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/,$(INSTALLED))

clean:
	rm -rf $(BUILD)
