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

/* Scheme targets (ct, mlx, bnb, mxfp4; scheme_common.c). One input is an HF directory whose
 * model.safetensors is built from structured sections:
 *
 *   config.json text
 *   \n#QF#header\n  a safetensors header as JSON text, without the length prefix
 *   \n#QF#data\n    bytes that fill the tensor data, repeated (zeros when absent)
 *   [\n#QF#name\n   any further file of the directory] ...
 *
 * When the header parses as a JSON object, each tensor entry without "data_offsets" gets
 * them from its dtype and shape (in order, 1 MiB in all), so mutated shapes stay consistent;
 * an entry may carry "fz": a string (its bytes) or an array of numbers (written in the
 * entry's dtype; "dtype" defaults to U8 and "shape" to the count) that fills the tensor,
 * repeated, instead of the data bytes; "fz" is removed from the file. A header that does not
 * parse is written as given, followed by the data bytes. The directory is opened with qtk_open
 * and read by fz_exercise, then every tensor of at most 65536 values takes the paths of
 * qinspect --json --stats (layout, scheme, parts, bits per weight, statistics), qverify (the
 * value cursor) and qconvert's exact transcodes (integer groups and their ggml blocks, MXFP4
 * blocks), with these properties: every folded tensor passes qtk_scheme_check; the value
 * cursor, the whole decode, rows decoded in chunks and MXFP4 blocks give the same values;
 * content digests do not depend on the thread count. */
void fz_scheme_run(const uint8_t *data, size_t size);

#endif
