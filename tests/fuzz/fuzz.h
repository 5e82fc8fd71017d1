/* fuzz.h - shared pieces of the fuzz targets (tests/fuzz/fuzz_*.c).
 *
 * Every target defines LLVMFuzzerTestOneInput. Built with clang
 * -fsanitize=fuzzer it is a libFuzzer binary; built with replay.c (any C11
 * compiler) it is a replay driver that runs the function over the files and
 * directories named on its command line.
 *
 * Inputs reach the readers through files in a per-process temporary
 * directory (qtk_open takes paths). An input may describe several files:
 *
 *   [#QF#name1\n]bytes of the first file\n#QF#name2\nbytes of the second ...
 *
 * The first file is called `defname` unless the input starts with a
 * "#QF#name\n" line. Names are 1..64 bytes of [A-Za-z0-9._-], not starting
 * with '.'; a section with any other name is dropped. At most FZ_MAX_FILES.
 */
#ifndef QTK_FUZZ_H
#define QTK_FUZZ_H

#include "internal.h"

#define FZ_MAX_FILES 16
#define FZ_MARK "#QF#"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Tighter archive limits, deterministic environment. Idempotent. */
void fz_init(void);

/* Write the input's files into a fresh input directory. *primary receives
 * the path of the first file (valid until the next call). Returns the number
 * of files written (0 when none). */
int fz_materialize(const uint8_t *d, size_t n, const char *defname, const char **primary);
/* The input directory of the last fz_materialize. */
const char *fz_indir(void);
/* Remove the input directory's files. */
void fz_clear(void);

/* Open path with qtk_open and run the whole read path over the model:
 * metadata, blobs, every part of every tensor (bounded), decoding of small
 * tensors, QPK digest checks, content digests and the provenance record. */
void fz_open_and_exercise(const char *path);
void fz_exercise(qtk_model *m);

/* A library call returned QTK_E_INTERNAL (exit status 5: a bug) or an error
 * code outside the documented range: print and abort so the fuzzer keeps
 * the input. */
void fz_check_rc(int rc, const qtk_err *e, const char *what);

#endif
