/* internal.h - interfaces shared by libqtk and the container plugins. */
#ifndef QTK_INTERNAL_H
#define QTK_INTERNAL_H

#include "qtk.h"
#include <stdio.h>

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

/* ---- Virtual files (archive members) ---------------------------------- */

/* A window: a new fd (a dup of fd) whose reads through qtk_pread_full (and so
 * the cursor) see bytes [base, base+size) of fd as offsets 0..size. Returns
 * the fd or a negative code; close it with qtk_file_close. */
int qtk_window_open(int fd, uint64_t base, uint64_t size, const char *path, qtk_err *err);

/* A mount: while entered on a thread, paths "<root>" and "<root>/<rel>" are
 * resolved by lookup instead of the file system in qtk_file_open (which then
 * returns a window), qtk_slurp, qtk_path_exists and qtk_is_dir. The plugins
 * for archives and .zst files use it to run the other readers unchanged on
 * members held in the archive file or in anonymous memory. */
typedef struct qtk_vfs {
	const char *root;
	/* rel: "" for the root. 1 = regular file (*fd, *base, *size set; the fd
	 * stays owned by the mount), 2 = directory, 0 = absent. */
	int (*lookup)(void *ctx, const char *rel, int *fd, uint64_t *base, uint64_t *size);
	void *ctx;
} qtk_vfs;
/* Mount v on the calling thread (NULL unmounts); returns the previous one. */
const qtk_vfs *qtk_vfs_enter(const qtk_vfs *v);

/* ---- Bounded cursor --------------------------------------------------- */

/* Sequential little-endian reads from a file region through a buffer.
 * Every read is bounded by `end`; a short read names the field, offset
 * and file end. */
typedef struct qtk_cur {
	int fd;
	const char *path;
	uint64_t pos;   /* absolute offset of the next byte */
	uint64_t end;   /* file size */
	uint8_t buf[65536];
	uint64_t bpos;  /* file offset of buf[0] */
	size_t blen;    /* valid bytes in buf */
	qtk_err *err;
} qtk_cur;

void qtk_cur_init(qtk_cur *c, int fd, const char *path, uint64_t size, qtk_err *err);
int qtk_cur_bytes(qtk_cur *c, void *dst, size_t n, const char *field);
int qtk_cur_u8(qtk_cur *c, uint8_t *v, const char *field);
int qtk_cur_u16(qtk_cur *c, uint16_t *v, const char *field);
int qtk_cur_u32(qtk_cur *c, uint32_t *v, const char *field);
int qtk_cur_u64(qtk_cur *c, uint64_t *v, const char *field);
int qtk_cur_skip(qtk_cur *c, uint64_t n, const char *field);
static inline uint64_t qtk_cur_remain(const qtk_cur *c) { return c->end - c->pos; }

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
} qtk_buf;
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
	uint8_t sha256[32];  /* valid once synced */
} qtk_ofile;

int qtk_ofile_open(qtk_ofile *f, const char *path, qtk_err *err);
int qtk_ofile_write(qtk_ofile *f, const void *d, size_t n);
int qtk_ofile_pad(qtk_ofile *f, uint64_t n); /* n zero bytes */
/* Rewrite bytes [off, off+n) already written: fn gets them in a buffer and may change them. */
int qtk_ofile_patch(qtk_ofile *f, uint64_t off, uint64_t n, int (*fn)(void *ctx, uint8_t *buf, size_t n),
		    void *ctx);
/* Flush, fsync and close (the temporary stays until commit). */
int qtk_ofile_sync(qtk_ofile *f);
/* Sync if needed, then rename into place. */
int qtk_ofile_commit(qtk_ofile *f);
/* Close and unlink the temporary. Safe on a zeroed or committed ofile. */
void qtk_ofile_abort(qtk_ofile *f);
/* Register a temporary path to unlink from a signal handler (async-safe list). */
void qtk_cleanup_register(const char *tmp_path);
void qtk_cleanup_unregister(const char *tmp_path);
/* Unlink all registered temporaries (async-signal-safe). */
void qtk_cleanup_run(void);

/* ---- Format plugins --------------------------------------------------- */

struct qtk_format {
	const char *name;  /* "gguf" */
	/* Score 0..100 from the first bytes of a file (n may be short). Pure. */
	int (*probe)(const uint8_t *head, size_t n, uint64_t file_size);
	/* For directory-shaped inputs: score a path (may look at files). */
	int (*probe_path)(const char *path);
	/* Parse and validate all headers; fill m. Errors into m->err. */
	int (*open)(qtk_model *m);
	void (*close)(qtk_model *m);
	/* Optional: custom reads (compressed containers). */
	int (*read)(qtk_model *m, const qtk_tensor *t, int part, uint64_t off, void *dst, size_t n);
	bool meta_strings; /* stores metadata only as strings: qtk_open applies QTK_META_TYPES_KEY */
};

extern const qtk_format qtk_format_gguf;
extern const qtk_format qtk_format_safetensors;
extern const qtk_format qtk_format_hf;
extern const qtk_format qtk_format_qpk;
extern const qtk_format qtk_format_archive;
extern const qtk_format qtk_format_zst;

/* QPK: verify every part digest of tensor i (reads the whole tensor). */
int qtk_qpk_verify_tensor(qtk_model *m, size_t i);

/* HF directory: read the known side files (config.json, tokenizer files, ...) of dir into m's blobs. */
int qtk_hf_load_side_files(qtk_model *m, const char *dir);

/* Drop tensors, metadata and files (a plugin restarting its parse). */
void qtk_fmt_reset_model(qtk_model *m);
/* Add a data file to the model; returns its index or negative. */
int qtk_model_add_file(qtk_model *m, const char *path);

/* Writers: one per container kind. */
typedef struct qtk_writer_ops {
	int (*begin)(qtk_writer *w);
	/* Called before the first byte of each part (tensor w->cur_tensor, part w->cur_part). */
	int (*part_begin)(qtk_writer *w);
	int (*put)(qtk_writer *w, const void *buf, size_t n);
	int (*finish)(qtk_writer *w);
	void (*abort)(qtk_writer *w);
	/* optional: qtk_writer_patch_header */
	int (*patch_header)(qtk_writer *w, int (*fn)(void *ctx, uint8_t *buf, size_t n), void *ctx);
} qtk_writer_ops;

struct qtk_writer {
	const qtk_writer_ops *ops;
	char *path;
	const qtk_model *desc;
	qtk_write_opts opts;
	qtk_err *err;
	size_t cur_tensor;  /* index of the tensor being written */
	int cur_part;
	uint64_t cur_left;  /* bytes left in the current part */
	void *priv;
	struct qtk_teeq *teeq; /* opts.tee_async: the tee's queue and thread */
};

extern const qtk_writer_ops qtk_gguf_writer;
extern const qtk_writer_ops qtk_safetensors_writer;
extern const qtk_writer_ops qtk_hf_writer;
extern const qtk_writer_ops qtk_qpk_writer;
extern const qtk_writer_ops qtk_archive_writer;


/* ---- String set: duplicate detection (stores pointers, not copies) ---- */
typedef struct qtk_strset {
	const char **slots;
	size_t cap, n;
} qtk_strset;
/* 1 when added, 0 when already present, QTK_E_IO when out of memory. */
int qtk_strset_add(qtk_strset *set, const char *s);
void qtk_strset_free(qtk_strset *set);

/* A scalar metadata value from its little-endian bytes (qtk_value_size(type) of them;
 * bools are taken as stored: callers check 0/1). */
void qtk_value_from_le(qtk_value *v, unsigned type, const uint8_t *b);

/* ---- Typed metadata in string-only containers (metatypes.c) ------------ */
#define QTK_META_TYPES_KEY "qtk.metadata_types"
/* Exact text of a value (scalars; arrays as JSON). Caller frees; NULL when out of memory. */
char *qtk_value_to_text(const qtk_value *v);
/* "u32", "[f32]" ... */
void qtk_value_type_tag(const qtk_value *v, char *buf, size_t n);
/* Turn string values listed in QTK_META_TYPES_KEY back into their types (after open). */
int qtk_meta_restore(qtk_model *m, qtk_err *err);

/* ---- Threads ------------------------------------------------------------- */
int qtk_cpu_count(void);
/* Call fn(ctx, i) for i in [0, n) on up to nthreads threads; returns when all are done. */
void qtk_parallel_for(int nthreads, size_t n, void (*fn)(void *ctx, size_t i), void *ctx);

/* ---- Misc --------------------------------------------------------------- */
bool qtk_utf8_valid(const char *s, size_t n);
/* Case-insensitive ASCII compare. */
int qtk_strcasecmp(const char *a, const char *b);
/* Parse a decimal unsigned integer (whole string). */
bool qtk_parse_u64(const char *s, uint64_t *out);

#endif
