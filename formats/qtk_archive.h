/* qtk_archive.h - pieces shared by the archive reader (archive_read.c), the
 * bundle writer (archive_write.c) and the .zst plugin (zst.c), and the limits
 * tests can tighten. (Not "archive.h":
 * with -Iformats that name would shadow libarchive's <archive.h>.)
 *
 * Nothing is extracted to disk. Members of an uncompressed tar are read in
 * place (windows of the archive file); everything that has to be decompressed
 * (tar.gz, tar.zst, zip members, .zst files) is decompressed once, with caps,
 * into anonymous memory (a sealed memfd), and read from there. The inner
 * readers (gguf, safetensors, hf, qpk) run unchanged through a qtk_vfs mount.
 */
#ifndef QTK_QTK_ARCHIVE_H
#define QTK_QTK_ARCHIVE_H

#include "internal.h"

/* Caps against hostile archives (docs/cli.md, "Hostile input"). */
typedef struct qtk_ar_limits {
	uint64_t mem;         /* decompressed bytes held in memory, all members together */
	uint64_t entry;       /* one member held in memory */
	uint64_t entries;     /* members in one archive */
	uint32_t depth;       /* path components of a member name */
	uint32_t name;        /* bytes of a member name */
	uint32_t ratio;       /* decompressed : compressed bytes, per member and per stream */
	uint64_t ratio_slack; /* the ratio is checked once this many bytes are out */
	uint32_t window_log;  /* zstd window limit (log2 bytes) */
} qtk_ar_limits;

/* The limits in force: defaults (memory: half the RAM, at most 64 GiB;
 * QTK_ARCHIVE_MAX_MEM=<bytes> overrides) unless tests set others. */
const qtk_ar_limits *qtk_ar_limits_get(void);
/* Replace the limits (tests); NULL restores the defaults. Not thread-safe. */
void qtk_ar_limits_set(const qtk_ar_limits *l);

/* A new anonymous in-memory file (memfd), or a negative code with err set. */
int qtk_ar_memfd(const char *label, const char *path, qtk_err *err);
/* Append n bytes to a memfd being filled. */
int qtk_ar_memfd_write(int fd, const void *d, size_t n, const char *path, qtk_err *err);
/* Make a filled memfd read-only for good (seals). */
int qtk_ar_memfd_seal(int fd, const char *path, qtk_err *err);

/* Decompress the single zstd frame of file fd (size bytes) into a new sealed
 * memfd under the limits: window <= 2^window_log, no dictionary, content size
 * (declared or not) <= limits, ratio capped, checksum verified when present,
 * no skippable or extra frames, no trailing bytes. zst.c. */
int qtk_ar_unzstd(int fd, const char *path, uint64_t size, int *out_fd, uint64_t *out_size, qtk_err *err);

/* Open the model held in decompressed bytes (fd, size; the caller keeps fd):
 * a tar archive (kind names the container in messages, e.g. "tar.zst"),
 * else a single model file called `name` inside m->path. archive_read.c. */
int qtk_ar_open_stream(qtk_model *m, int fd, uint64_t size, const char *kind, const char *name);

/* True when the 512-byte block at h is a tar header with a valid checksum. */
bool qtk_ar_is_tar(const uint8_t *h, size_t n);

/* The bundle writer (archive_write.c): its capability and operations. */
int qtk_ar_can_store(const qtk_tensor *t, bool with_name, const char *path, const char *subject, qtk_err *err);
extern const qtk_writer_ops qtk_archive_writer_ops;

#endif
