/* qtk_util.h - support of libqtk's extension interface (qtk_ext.h): the caps
 * on hostile input, file helpers, little-endian helpers, capped buffers,
 * atomic output files, string sets, metadata as text, threads and small
 * string helpers. Used by the library's layers and, through qtk_ext.h, by the
 * programs; nothing here knows a container, a model family or a packed scheme. */
#ifndef QTK_UTIL_H
#define QTK_UTIL_H

#include "qtk.h"
#include <stdio.h>
#include <stdatomic.h>

/* ---- Caps (hostile input) -------------------------------------------- */
#define QTK_CAP_TENSORS      (1u << 20)          /* tensors in one model */
#define QTK_CAP_KV           (1u << 20)          /* metadata entries */
#define QTK_CAP_KEY          65535u              /* key length */
#define QTK_CAP_STR          (64ull << 20)       /* one metadata string */
#define QTK_CAP_ARRAY        (1ull << 30)        /* array elements */
#define QTK_CAP_META_TOTAL   (1ull << 30)        /* all metadata bytes held */
#define QTK_CAP_ST_HEADER    (100000000ull)      /* safetensors header bytes */
#define QTK_CAP_JSON         (64ull << 20)       /* a side JSON file */
#define QTK_CAP_BLOB         (256ull << 20)      /* a carried side file */
#define QTK_CAP_FILES        4096u               /* shards in one model */
#define QTK_CAP_ALIGN        (1u << 20)          /* GGUF alignment */
#define QTK_CAP_NAME         4096u               /* tensor name bytes */

/* ---- Files ------------------------------------------------------------ */

/* Open a regular file read-only (refuses FIFOs, devices, directories).
 * Returns an fd or a negative code with err set; *size receives its size. */
int qtk_file_open(const char *path, uint64_t *size, qtk_err *err);
/* Read exactly n bytes at off (loops over short reads). */
int qtk_pread_full(int fd, const char *path, void *buf, size_t n, uint64_t off,
		   qtk_err *err);
/* Write exactly n bytes at off (loops over short writes). */
int qtk_pwrite_full(int fd, const char *path, const void *buf, size_t n, uint64_t off, qtk_err *err);
/* An unnamed read-write file in the directory of path (O_TMPFILE, else a name unlinked at once):
 * gone when closed, also when the process dies. Its descriptor, or a negative code with err
 * set. */
int qtk_scratch_open(const char *near, qtk_err *err);
/* SHA-256 update of md (an EVP_MD_CTX) with n bytes of fd at off, the reads on a second thread
 * beside the hashing: 0, 1 (a read failed, or *cancel became non-zero: err set) or -1 (the
 * digest failed). cancel may be NULL. */
int qtk_sha256_fd_range(int fd, const char *path, void *md, uint64_t off, uint64_t n, const int *cancel,
			qtk_err *err);
/* The same, with a tap: fn(ctx, at, bytes, len) is called with every buffer read, in file
 * order, on a thread of its own (the caller's when it cannot start), from the one read that
 * feeds the hash; a read starts at each of the ascending offsets cuts[] (the rest are up to
 * 1 MiB). It sees every byte of the range when 0 is returned, a prefix otherwise. */
typedef struct qtk_fd_tap {
	void (*fn)(void *ctx, uint64_t at, const uint8_t *p, size_t n);
	void *ctx;
	const uint64_t *cuts;
	size_t ncuts;
} qtk_fd_tap;
int qtk_sha256_fd_tap(int fd, const char *path, void *md, uint64_t off, uint64_t n, const int *cancel,
		      const qtk_fd_tap *tap, qtk_err *err);
/* The SHA-256 of a whole file of `size` bytes into out, through qtk_sha256_fd_tap (tap may be
 * NULL): 0, or a QTK_E_* code with err set (QTK_E_INTERNAL: the digest failed; a read's own
 * error, "cancelled", or out of memory otherwise). */
int qtk_sha256_file(int fd, const char *path, uint64_t size, const int *cancel, const qtk_fd_tap *tap, uint8_t out[32],
		    qtk_err *err);
/* Slurp a small regular file (<= cap bytes) into a NUL-terminated buffer. */
int qtk_slurp(const char *path, uint64_t cap, uint8_t **out, size_t *len, qtk_err *err);
/* Close an fd from qtk_file_open or qtk_window_open (forgets its window). */
void qtk_file_close(int fd);
bool qtk_is_dir(const char *path);
bool qtk_path_exists(const char *path);
/* Join dir and name into a new string. */
char *qtk_path_join(const char *dir, const char *name);
/* Directory part of a path (new string; "." when none). */
char *qtk_path_dir(const char *path);
const char *qtk_path_base(const char *path);

/* ---- Little-endian helpers ------------------------------------------- */
static inline uint16_t qtk_rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t qtk_rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t qtk_rd64(const uint8_t *p)
{
	return (uint64_t)qtk_rd32(p) | (uint64_t)qtk_rd32(p + 4) << 32;
}
static inline void qtk_wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void qtk_wr32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void qtk_wr64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- Growable byte buffer (capped) ----------------------------------- */
typedef struct qtk_buf {
	uint8_t *p;
	size_t len, cap;
	int failed; /* sticky allocation failure */
	int fixed;  /* p is the caller's memory of cap bytes: growing past it fails instead */
	/* set: a put that would grow past cap hands the bytes so far to flush first (then len is
	 * 0 and `flushed` counts them), and one larger than cap goes to flush as it is: text
	 * written out as it is made, never held whole */
	int (*flush)(void *ctx, const uint8_t *p, size_t n);
	void *flush_ctx;
	uint64_t flushed;
} qtk_buf;
/* The bytes still held handed to flush (a buffer with one). */
int qtk_buf_flush(qtk_buf *b);
/* Room for n more bytes (and the terminating NUL) in one allocation of that size: for text of
 * a known length, which then never grows by doubling. */
int qtk_buf_reserve(qtk_buf *b, size_t n);
int qtk_buf_put(qtk_buf *b, const void *d, size_t n);
int qtk_buf_putc(qtk_buf *b, char c);
int qtk_buf_puts(qtk_buf *b, const char *s);
int qtk_buf_printf(qtk_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void qtk_buf_free(qtk_buf *b);

/* ---- Atomic output file ----------------------------------------------- */

/* A file written to "<dir>/.<base>.qtk-XXXXXX" and renamed on commit.
 * The SHA-256 of everything written is computed on the way out. */
typedef struct qtk_ofile {
	int fd;
	char *final_path;
	char *tmp_path;
	uint64_t written;
	uint8_t *buf;
	size_t blen;
	qtk_err *err;
	void *md;            /* EVP_MD_CTX */
	qtk_outlist *outs;   /* optional: committed files are recorded here */
	bool synced;         /* flushed, fsynced and closed; only the rename is left */
	bool rehash;         /* bytes were patched: recompute the SHA-256 from the file */
	bool defer_hash;     /* a patch will come: no SHA-256 while writing, one pass at sync */
	void *hq;            /* the hashing thread and its buffers (SHA-256 beside the writes) */
	uint64_t wb_from;    /* bytes from here on have not been handed to writeback yet */
	bool no_kcopy;       /* copy_file_range failed once: qtk_ofile_copy_from reads and writes */
	bool skip_hash;      /* nothing takes sha256: no SHA-256 from here on (qtk_ofile_list) */
	uint8_t sha256[32];  /* valid once synced, unless skip_hash */
} qtk_ofile;

int qtk_ofile_open(qtk_ofile *f, const char *path, qtk_err *err);
/* Once committed, f is recorded in outs; with no list nothing takes its SHA-256, which is then
 * not computed (skip_hash). Call it before the first write. */
void qtk_ofile_list(qtk_ofile *f, qtk_outlist *outs);
int qtk_ofile_write(qtk_ofile *f, const void *d, size_t n);
/* qtk_ofile_write in the shape of a piece callback (ctx: the qtk_ofile). */
int qtk_ofile_put(void *ctx, const uint8_t *p, size_t n);
/* Append n bytes of the file fd (src_path, for messages) from offset off: copied in the kernel
 * where it can (copy_file_range: no pass through user memory), else read and written; the
 * file's SHA-256 reads the copied bytes back, on its thread. back (or NULL): the n bytes as
 * the output now holds them, read back from it. */
int qtk_ofile_copy_from(qtk_ofile *f, int fd, const char *src_path, uint64_t off, uint64_t n, void *back);
int qtk_ofile_pad(qtk_ofile *f, uint64_t n); /* n zero bytes */
/* Overwrite bytes [off, off+n) already written with buf (no read back); the file's SHA-256
 * is then taken again from the file. */
int qtk_ofile_write_at(qtk_ofile *f, uint64_t off, const void *buf, size_t n);
/* Rewrite bytes [off, off+n) already written: fn gets them in a buffer and may change them. */
int qtk_ofile_patch(qtk_ofile *f, uint64_t off, uint64_t n, int (*fn)(void *ctx, uint8_t *buf, size_t n),
		    void *ctx);
/* Done writing to f for now (a sharded writer moving to its next file): the SHA-256 thread
 * catches up and ends, freeing its buffers. Writing may go on (hashing restarts as needed).
 * 0, or the hash's failure. */
int qtk_ofile_idle(qtk_ofile *f);
/* Flush, fsync and close (the temporary stays until commit). */
int qtk_ofile_sync(qtk_ofile *f);
/* Sync if needed, then rename into place. */
int qtk_ofile_commit(qtk_ofile *f);
/* Close and unlink the temporary. Safe on a zeroed or committed ofile. */
void qtk_ofile_abort(qtk_ofile *f);
/* Inputs no output may replace: qtk_protect_input records the file's identity (st_dev, st_ino;
 * a path that does not exist is ignored); qtk_ofile_open then refuses, with QTK_E_USAGE naming
 * both paths, an output that resolves to any of them. qtk_protected_input: the recorded path
 * of the input that path resolves to, or NULL. qtk_protect_clear forgets them all. */
int qtk_protect_input(const char *path);
const char *qtk_protected_input(const char *path);
void qtk_protect_clear(void);
/* Register a temporary path to unlink from a signal handler (async-safe list). */
void qtk_cleanup_register(const char *tmp_path);
void qtk_cleanup_unregister(const char *tmp_path);
/* Register a temporary directory whose every entry is ours: on a signal its files (one level)
 * are unlinked, then the directory removed. Unregister with qtk_cleanup_unregister. */
void qtk_cleanup_register_dir(const char *tmp_dir);
/* Unlink all registered temporaries (async-signal-safe). */
void qtk_cleanup_run(void);

/* ---- String set: duplicate detection (stores pointers, not copies) ---- */
/* Hashing is keyed with a per-process random key (SipHash-1-3), so names an input chooses
 * cannot be made to collide: adding and finding are O(1) expected whatever the input. */
typedef struct qtk_strset {
	const char **slots;
	size_t cap, n;
} qtk_strset;
/* 1 when added, 0 when already present, QTK_E_IO when out of memory. */
int qtk_strset_add(qtk_strset *set, const char *s);
void qtk_strset_free(qtk_strset *set);
/* The keyed hash of the n bytes at s. */
uint64_t qtk_str_hash(const void *s, size_t n);

/* ---- String map: string (pointer, not copied) -> index ---- */
typedef struct qtk_strmap_slot {
	const char *key;
	size_t val;
} qtk_strmap_slot;
typedef struct qtk_strmap {
	qtk_strmap_slot *slots;
	size_t cap, n;
} qtk_strmap;
/* Add key -> val; 1 when added, 0 when key was present (its value kept, *old set when old is
 * not NULL), QTK_E_IO when out of memory. */
int qtk_strmap_put(qtk_strmap *map, const char *key, size_t val, size_t *old);
/* Room for n keys in all without growing (one table instead of doublings); QTK_E_IO when out
 * of memory. */
int qtk_strmap_reserve(qtk_strmap *map, size_t n);
/* True with *val set when key is present. */
bool qtk_strmap_get(const qtk_strmap *map, const char *key, size_t *val);
void qtk_strmap_free(qtk_strmap *map);
/* One copy of s for the whole process, shared by every caller that interns an equal string
 * and never freed: for the few distinct values many records point at (encoding and layout ids;
 * a hostile file has one a tensor at most). Thread-safe; NULL when out of memory. */
const char *qtk_intern(const char *s);
/* Test hook: the number of key comparisons (strcmp) lookups made, and of linear-scan steps the
 * model's finders took without an index (counted only in this process, never reset). */
extern atomic_size_t qtk_lookup_steps;

/* A scalar metadata value from its little-endian bytes (qtk_value_size(type) of them;
 * bools are taken as stored: callers check 0/1). */
void qtk_value_from_le(qtk_value *v, unsigned type, const uint8_t *b);

/* ---- Typed metadata in string-only containers (metatypes.c) ------------ */
#define QTK_META_TYPES_KEY "qtk.metadata_types"
/* Exact text of a value (scalars; arrays as JSON). Caller frees; NULL when out of memory. */
char *qtk_value_to_text(const qtk_value *v);
/* "u32", "[f32]" ... */
void qtk_value_type_tag(const qtk_value *v, char *buf, size_t n);
/* ---- Threads ------------------------------------------------------------- */
int qtk_cpu_count(void);
/* Call fn(ctx, i) for i in [0, n) on up to nthreads threads; returns when all are done. */
void qtk_parallel_for(int nthreads, size_t n, void (*fn)(void *ctx, size_t i), void *ctx);
/* The same on threads created for this call alone, leaving the persistent helpers to the many
 * short loops that run beside it (a whole model's digests beside a conversion's windows). */
void qtk_parallel_for_spawn(int nthreads, size_t n, void (*fn)(void *ctx, size_t i), void *ctx);

/* ---- Misc --------------------------------------------------------------- */
bool qtk_utf8_valid(const char *s, size_t n);
/* Case-insensitive ASCII compare. */
int qtk_strcasecmp(const char *a, const char *b);
/* True when s ends with suf (bytewise). */
bool qtk_str_ends(const char *s, const char *suf);
/* "[4096, 11008]": a shape as text into b (always terminated when n > 0). */
void qtk_shape_text(char *b, size_t n, int nd, const uint64_t *shape);
/* Format a problem into why (wn bytes) and return QTK_E_DATA: for checks that report a
 * reason to their caller, who names the file and the subject. */
int qtk_why(char *why, size_t wn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Parse a decimal unsigned integer (whole string). */
bool qtk_parse_u64(const char *s, uint64_t *out);

#endif
