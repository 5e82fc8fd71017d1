# qtk - one non-recursive Makefile.
CC      ?= cc
PKGS    := libzstd libcjson libarchive ncursesw libcrypto
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# The programs link neither libarchive nor libcrypto: formats/la.c and src/lc.c load them when
# an archive, a digest or a key is first needed (start-up). Tests and fuzz drivers that call
# them themselves link them.
PKG_LIBS   := $(shell pkg-config --libs $(filter-out libarchive libcrypto,$(PKGS)) 2>/dev/null)
LA_LIBS    := $(shell pkg-config --libs libarchive 2>/dev/null)
LC_LIBS    := $(shell pkg-config --libs libcrypto 2>/dev/null)
soname      = $(shell objdump -p "$$(pkg-config --variable=libdir $(1) 2>/dev/null)/$(1).so" 2>/dev/null | awk '$$1 == "SONAME" { print $$2 }')
LA_SONAME  := $(call soname,libarchive)
LC_SONAME  := $(call soname,libcrypto)
OPT     ?= -O2 -g
WARN    := -Wall -Wextra -Wpedantic -Wshadow -Wconversion
ifeq ($(WERROR),1)
WARN    += -Werror
endif
SAN     ?=
CFLAGS_ALL := -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) -ffp-contract=off -pthread $(SAN) \
	$(PKG_CFLAGS) -Isrc -Iformats -Icli
LDLIBS_ALL := $(PKG_LIBS) -ldl -lm -pthread $(SAN)
# 32-bit x86: SSE maths, so float and double expressions round in their own types (quant.h)
ifneq ($(filter i686% i386%,$(shell $(CC) -dumpmachine)),)
CFLAGS_ALL += -msse2 -mfpmath=sse
endif

B := build

LIB_SRC := $(sort $(wildcard src/*.c) $(wildcard src/*/*.c) $(wildcard formats/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o)
CLI_OBJ  := $(patsubst %.c,$(B)/%.o,$(sort $(wildcard cli/*.c)))
CONV_OBJ := $(patsubst %.c,$(B)/%.o,$(sort $(wildcard convert/*.c))) $(CLI_OBJ)
INSP_OBJ := $(patsubst %.c,$(B)/%.o,$(sort $(wildcard inspect/*.c))) $(CLI_OBJ)
VER_OBJ  := $(patsubst %.c,$(B)/%.o,$(sort $(wildcard verify/*.c))) $(CLI_OBJ)
TEST_SRC := $(sort $(wildcard tests/test_*.c))
TEST_BIN := $(TEST_SRC:tests/%.c=$(B)/tests/%)
PROGS := bin/qconvert bin/qinspect bin/qverify

.PHONY: all test demo clean deps samples man-lint asan ubsan tsan bench
all: $(PROGS) $(B)/samples/gen

# each object depends on the headers it includes (-MMD -MP: build/**/*.d)
$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(B)/formats/la.o: CFLAGS_ALL += $(if $(LA_SONAME),-DQTK_LA_SONAME='"$(LA_SONAME)"')
$(B)/src/lc.o: CFLAGS_ALL += $(if $(LC_SONAME),-DQTK_LC_SONAME='"$(LC_SONAME)"')

-include $(shell find $(B) -name '*.d' 2>/dev/null)

# the AVX2 builds of the k-quant search, the q4_1/q5_1 search, the AWQ/GPTQ error sum and the
# IQ4 code assignment (chosen at run time; identical results)
ifneq ($(filter x86_64% i686% i386%,$(shell $(CC) -dumpmachine)),)
$(B)/src/quant_k_avx2.o: CFLAGS_ALL += -mavx2
$(B)/src/quant_awq_avx2.o: CFLAGS_ALL += -mavx2
$(B)/src/quant_awq_avx512.o: CFLAGS_ALL += -mavx2 -mavx512f -mavx512dq
$(B)/src/quant_iq4_avx2.o: CFLAGS_ALL += -mavx2
$(B)/src/quant_asym_avx2.o: CFLAGS_ALL += -mavx2 -mf16c
$(B)/src/quant_sym_avx2.o: CFLAGS_ALL += -mavx2 -mf16c
$(B)/src/dequant_f16c.o: CFLAGS_ALL += -mavx -mf16c
endif

$(B)/libqtk.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

bin/qconvert: $(CONV_OBJ) $(B)/libqtk.a
	@mkdir -p bin
	$(CC) -o $@ $(CONV_OBJ) $(B)/libqtk.a $(LDLIBS_ALL)

bin/qinspect: $(INSP_OBJ) $(B)/libqtk.a
	@mkdir -p bin
	$(CC) -o $@ $(INSP_OBJ) $(B)/libqtk.a $(LDLIBS_ALL)

bin/qverify: $(VER_OBJ) $(B)/libqtk.a
	@mkdir -p bin
	$(CC) -o $@ $(VER_OBJ) $(B)/libqtk.a $(LDLIBS_ALL)

$(B)/samples/gen: $(B)/samples/gen.o $(B)/libqtk.a
	$(CC) -o $@ $< $(B)/libqtk.a $(LDLIBS_ALL)

# qconvert with the encoders built on plain-C lanes (QTK_QV_PLAIN), for tests/test_simd.sh:
# the SIMD builds must give the same bytes
PLAIN_OBJ := $(B)/plain/quant.o $(B)/plain/quant_k.o $(B)/plain/quant_awq.o $(B)/plain/quant_iq4.o
$(B)/plain/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -DQTK_QV_PLAIN -fno-tree-vectorize -c $< -o $@

$(B)/plain/qconvert: $(CONV_OBJ) $(PLAIN_OBJ) $(B)/libqtk.a
	$(CC) -o $@ $(CONV_OBJ) $(PLAIN_OBJ) $(B)/libqtk.a $(LDLIBS_ALL)

# tests/simd_digest.c (tests/test_simd.sh): the encoders' output digests from the library as
# built, from the sources on the compiler's lanes (SSE2, NEON), and on plain-C lanes without
# auto-vectorization. With CC=aarch64-linux-gnu-gcc the last two cross-build for qemu.
SIMD_SRC := src/quant.c src/quant_asym_avx2.c src/quant_sym_avx2.c src/quant_k.c src/quant_k_avx2.c src/quant_iq4.c \
	src/quant_iq4_avx2.c \
	src/quant_awq.c src/quant_awq_avx2.c src/quant_awq_avx512.c src/dequant.c src/dequant_f16c.c src/dequant_iq.c src/alloc.c
$(B)/tests/simd_digest_src: tests/simd_digest.c $(SIMD_SRC) $(wildcard src/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ tests/simd_digest.c $(SIMD_SRC) -lm

$(B)/tests/simd_digest_plain: tests/simd_digest.c $(SIMD_SRC) $(wildcard src/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -DQTK_QV_PLAIN -fno-tree-vectorize -o $@ tests/simd_digest.c $(SIMD_SRC) -lm

# the programs' code other than their main(), for the tests of qinspect's model and views
PROG_LIB_OBJ := $(filter-out %/main.o,$(CONV_OBJ) $(INSP_OBJ) $(VER_OBJ))
$(B)/libprogs.a: $(PROG_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# tests link the library (and the programs' objects); none includes a .c file
$(B)/tests/%: tests/%.c tests/t.h $(B)/libprogs.a $(B)/libqtk.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -Itests -o $@ $< $(B)/libprogs.a $(B)/libqtk.a $(LDLIBS_ALL) $(LA_LIBS) $(LC_LIBS)

# Sample models generated by the project's own deterministic generator.
samples: $(B)/samples/gen
	$(B)/samples/gen $(B)/samples

test: all $(TEST_BIN) fuzz-drivers $(B)/plain/qconvert $(B)/tests/simd_digest $(B)/tests/simd_digest_src $(B)/tests/simd_digest_plain
	@QTK_BUILD=$(B) sh tests/run.sh

# Quick start: install missing build dependencies, build, convert a sample, inspect it. The
# sample's Hugging Face directory has a SentencePiece tokenizer (samples/gen.c), so the Q4_K_M
# GGUF carries its vocabulary; the AWQ directory uses the usual groups of 128.
demo:
	@sh tests/deps.sh
	@$(MAKE) --no-print-directory all
	@$(B)/samples/gen $(B)/samples >/dev/null
	bin/qconvert $(B)/samples/tiny-llama/ $(B)/samples/tiny-llama-Q4_K_M.gguf --to Q4_K_M
	bin/qconvert $(B)/samples/tiny-llama/ $(B)/samples/tiny-llama-awq/ --to awq --group-size 128
	bin/qinspect --summary $(B)/samples/tiny-llama-awq/

deps:
	@sh tests/deps.sh

man-lint:
	mandoc -Tlint -W warning man/*.1

# Benchmarks (not tests): BENCH_MPARAMS, BENCH_THREADS, LLAMA_QUANTIZE, LLAMA_PERPLEXITY; see docs/benchmarks.md.
bench: all $(B)/bench/enc
	@QTK_BUILD=$(B) sh bench/run.sh

# bench/enc.c: each encoder's speed on one thread, without I/O or the record (make bench)
$(B)/bench/enc: bench/enc.c $(B)/libqtk.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ bench/enc.c $(B)/libqtk.a $(LDLIBS_ALL)

# Sanitizer builds go entirely into their build directory, programs included ($(B)/bin, see
# san-test below), so they never replace the programs in bin/.
asan:
	$(MAKE) B=build-asan OPT="-O1 -g" SAN="-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer" san-test

ubsan:
	$(MAKE) B=build-ubsan OPT="-O1 -g" SAN="-fsanitize=undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer" san-test

# data races in the threaded paths (pool workers, the writer's tee thread, source hashing beside
# the conversion): the suite under ThreadSanitizer
tsan:
	$(MAKE) B=build-tsan OPT="-O1 -g" SAN="-fsanitize=thread" san-test

clean:
	rm -rf build build-asan build-ubsan build-tsan build-aarch64 build-asan-aarch64 build-ubsan-aarch64 bin

# ---- fuzzing (tests/fuzz/, docs/fuzzing.md) -------------------------------------------------
# Replay drivers (any C11 compiler): $(B)/fuzz/replay_<target>, run over the seed corpus and the
# regression inputs by tests/fuzz_replay.sh (`make fuzz-replay`). libFuzzer binaries (clang):
# `make fuzz` builds build-fuzz/fuzz/fuzz_<target> with ASan+UBSan and runs each for
# FUZZ_TIME seconds (tests/fuzz/run.sh; FUZZ_JOBS, FUZZ_TARGETS override).
FUZZ_TARGETS := gguf safetensors st_index hfdir qpk archive zst spm imatrix prov hfmap ct mlx bnb mxfp4
FUZZ_TARGETS += sigbundle jsonfmt
FUZZ_COMMON  := tests/fuzz/fuzz_common.c tests/fuzz/scheme_common.c
FUZZ_DEPS    := $(FUZZ_COMMON) tests/fuzz/fuzz.h $(B)/libqtk.a
FUZZ_CFLAGS  := -Itests/fuzz
FUZZ_B       ?= build-fuzz
FUZZ_CC      ?= clang
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fsanitize=fuzzer-no-link
FUZZ_TIME    ?= 60

.PHONY: fuzz fuzz-build fuzz-libfuzzer fuzz-drivers fuzz-replay fuzz-corpus
fuzz-drivers: $(FUZZ_TARGETS:%=$(B)/fuzz/replay_%)

$(B)/fuzz/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c $(FUZZ_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_COMMON) tests/fuzz/replay.c \
		$(B)/libqtk.a $(LDLIBS_ALL) $(LC_LIBS)

$(B)/fuzz/mkseed: tests/fuzz/mkseed.c $(B)/libqtk.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(B)/libqtk.a $(LDLIBS_ALL) $(LC_LIBS)

# Generate the seed corpora ($(B)/fuzz/corpus/) from the project's own generator and tools.
fuzz-corpus: all $(B)/fuzz/mkseed
	QTK_BUILD=$(B) sh tests/fuzz/mkcorpus.sh && touch $(B)/fuzz/corpus/.done

fuzz-replay: fuzz-drivers
	@QTK_BUILD=$(B) sh tests/fuzz_replay.sh

fuzz-libfuzzer: $(FUZZ_TARGETS:%=$(B)/fuzz/fuzz_%)

$(B)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_COMMON) \
		$(B)/libqtk.a $(LDLIBS_ALL) $(LC_LIBS) -fsanitize=fuzzer

fuzz-build:
	$(MAKE) B=$(FUZZ_B) CC=$(FUZZ_CC) OPT="-O1 -g" SAN="$(FUZZ_SAN)" fuzz-libfuzzer

fuzz: fuzz-build
	FUZZ_B=$(FUZZ_B) FUZZ_TIME=$(FUZZ_TIME) sh tests/fuzz/run.sh
# ---- end of fuzzing -----------------------------------------------------------------------------

# ---- sanitizer test runs (make asan / make ubsan) ----------------------------------------------
# The programs of a sanitizer build are linked into $(B)/bin and the tests run against them
# (QTK_BIN), with the replay drivers built too; bin/ is left alone.
.PHONY: san-test
$(B)/bin/qconvert: $(CONV_OBJ) $(B)/libqtk.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(CONV_OBJ) $(B)/libqtk.a $(LDLIBS_ALL)

$(B)/bin/qinspect: $(INSP_OBJ) $(B)/libqtk.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(INSP_OBJ) $(B)/libqtk.a $(LDLIBS_ALL)

$(B)/bin/qverify: $(VER_OBJ) $(B)/libqtk.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(VER_OBJ) $(B)/libqtk.a $(LDLIBS_ALL)

san-test: $(B)/bin/qconvert $(B)/bin/qinspect $(B)/bin/qverify $(B)/samples/gen $(TEST_BIN) fuzz-drivers $(B)/plain/qconvert $(B)/tests/simd_digest $(B)/tests/simd_digest_src $(B)/tests/simd_digest_plain
	@QTK_BUILD=$(B) QTK_BIN=$(B)/bin UBSAN_OPTIONS=$${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
		sh tests/run.sh
# ---- end of sanitizer test runs -----------------------------------------------------------------
