/* internal.h - interfaces inside libqtk: the container plugins (formats/), the
 * virtual file system, the bounded cursor and the writer framework. Never
 * included by the programs (they use qtk.h and qtk_ext.h). */
#ifndef QTK_INTERNAL_H
#define QTK_INTERNAL_H

#include "qtk_util.h"

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
/* Called once per directory entry (never "." or ".."); nonzero stops the listing and is
 * what the listing returns. */
typedef int (*qtk_dir_fn)(void *arg, const char *name, bool is_dir);
typedef struct qtk_vfs {
	const char *root;
	/* rel: "" for the root. 1 = regular file (*fd, *base, *size set; the fd
	 * stays owned by the mount), 2 = directory, 0 = absent. */
	int (*lookup)(void *ctx, const char *rel, int *fd, uint64_t *base, uint64_t *size);
	void *ctx;
	/* List directory rel (lookup said 2): fn on every entry, each name once, in any
	 * order. 0, fn's nonzero return, or QTK_E_IO when out of memory. */
	int (*list)(void *ctx, const char *rel, qtk_dir_fn fn, void *arg);
} qtk_vfs;
/* Mount v on the calling thread (NULL unmounts); returns the previous one. */
const qtk_vfs *qtk_vfs_enter(const qtk_vfs *v);
/* List directory `path` through the mount when it is below it, else the file system:
 * fn(arg, name, is_dir) on every entry but "." and "..", in any order. 0, fn's nonzero
 * return, or a negative code with err set (not a directory, unreadable, out of memory). */
int qtk_dir_list(const char *path, qtk_dir_fn fn, void *arg, qtk_err *err);

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
	size_t fill;    /* bytes the next refill reads: 16 KiB first (a shard's header is often a
			 * few KiB, and the copy is the cost), doubling to the whole buffer */
	qtk_err *err;
} qtk_cur;

void qtk_cur_init(qtk_cur *c, int fd, const char *path, uint64_t size, qtk_err *err);
int qtk_cur_bytes(qtk_cur *c, void *dst, size_t n, const char *field);
/* Fault in the whole pages of [p, p+n) in one call (Linux; large ranges only): for a buffer
 * a read is about to fill. */
void qtk_prefault(void *p, size_t n);
int qtk_cur_u8(qtk_cur *c, uint8_t *v, const char *field);
int qtk_cur_u16(qtk_cur *c, uint16_t *v, const char *field);
int qtk_cur_u32(qtk_cur *c, uint32_t *v, const char *field);
int qtk_cur_u64(qtk_cur *c, uint64_t *v, const char *field);
int qtk_cur_skip(qtk_cur *c, uint64_t n, const char *field);
static inline uint64_t qtk_cur_remain(const qtk_cur *c) { return c->end - c->pos; }

/* ---- Containers (formats/) ------------------------------------------------ */

typedef struct qtk_writer_ops qtk_writer_ops;

/* One descriptor per container, both directions; the table is in container.c. */
struct qtk_format {
	const char *name;  /* "gguf": also the container name in records */
	/* ---- reading */
	/* Score 0..100 from the first bytes of a file (n may be short). Pure. */
	int (*probe)(const uint8_t *head, size_t n, uint64_t file_size);
	/* For directory-shaped inputs: score a path (may look at files). */
	int (*probe_path)(const char *path);
	/* Parse and validate all headers; fill m. Errors into m->err. */
	int (*open)(qtk_model *m);
	void (*close)(qtk_model *m);
	/* Optional: custom reads (compressed containers). */
	int (*read)(qtk_model *m, const qtk_tensor *t, int part, uint64_t off, void *dst, size_t n);
	/* Optional: check every stored digest of tensor i (reads the whole tensor). */
	int (*verify_tensor)(qtk_model *m, size_t i);
	/* Optional: qtk_read_verify_async and qtk_read_settle (checks that reads make). */
	void (*verify_async)(qtk_model *m);
	int (*settle)(qtk_model *m);
	/* ---- writing (writer NULL: read only) */
	qtk_out_kind out;              /* the public handle of this output */
	const qtk_writer_ops *writer;
	const char *const *out_ext;    /* output path suffixes (ASCII case-insensitive), NULL-terminated */
	bool out_dir;                  /* a path ending in '/' or an existing directory */
	/* Can the container store tensor t (layout, part types, rank; with_name: also t->name
	 * under the container's naming rules)? 0, or QTK_E_DATA with the message the user sees in
	 * err: file `path`, subject `subject` or, when NULL, the container's own naming of t.
	 * err may be NULL (a question only). Called through qtk_out_can_store. */
	int (*can_store)(const qtk_tensor *t, bool with_name, const char *path, const char *subject, qtk_err *err);
	bool meta_strings; /* stores metadata only as strings: qtk_open applies QTK_META_TYPES_KEY */
};

extern const qtk_format qtk_format_gguf;
extern const qtk_format qtk_format_safetensors;
extern const qtk_format qtk_format_hf;
extern const qtk_format qtk_format_qpk;
extern const qtk_format qtk_format_archive;
extern const qtk_format qtk_format_zst;

/* The table, in probe order (n receives its length). */
const qtk_format *const *qtk_formats(size_t *n);
/* The container that writes output kind k; NULL when none. */
const qtk_format *qtk_format_for_out(qtk_out_kind k);
/* True when s ends with suf (ASCII case-insensitive). */
bool qtk_ends_with(const char *s, const char *suf);

/* QPK: verify every part digest of tensor i (reads the whole tensor). */
int qtk_qpk_verify_tensor(qtk_model *m, size_t i);

/* HF directory: read the known side files (config.json, tokenizer files, ...) of dir into m's blobs. */
int qtk_hf_load_side_files(qtk_model *m, const char *dir);

/* Drop tensors, metadata and files (a plugin restarting its parse). */
void qtk_fmt_reset_model(qtk_model *m);
/* Add a data file to the model; returns its index or negative. */
int qtk_model_add_file(qtk_model *m, const char *path);

/* Writers: one per writing container (qtk_format.writer). */
struct qtk_writer_ops {
	int (*begin)(qtk_writer *w);
	/* Called before the first byte of each part (tensor w->cur_tensor, part w->cur_part). */
	int (*part_begin)(qtk_writer *w);
	int (*put)(qtk_writer *w, const void *buf, size_t n);
	/* optional: put n bytes of file fd from off without them passing through the caller
	 * (qtk_writer_put_file); back (or NULL): the bytes read back from the output */
	int (*put_file)(qtk_writer *w, int fd, const char *path, uint64_t off, uint64_t n, void *back);
	int (*finish)(qtk_writer *w);
	void (*abort)(qtk_writer *w);
	/* optional: qtk_writer_patch_header */
	int (*patch_header)(qtk_writer *w, int (*fn)(void *ctx, uint8_t *buf, size_t n), void *ctx);
	/* optional (qtk_writer_record_piece, qtk_writer_put_record): the final record placed over
	 * the reserved one a piece at a time (at: the piece's offset in the record, pieces in
	 * order), then record_end (optional) once all are */
	int (*record_piece)(qtk_writer *w, uint64_t at, const void *p, size_t n);
	int (*record_end)(qtk_writer *w);
	bool record_gen; /* the writer takes qtk_write_opts.record_gen */
};

/* For writers taking qtk_write_opts.record_gen: the record's bytes through put, exactly
 * opts.record_len of them (QTK_E_INTERNAL otherwise). */
int qtk_writer_gen_record(qtk_writer *w, int (*put)(void *ctx, const uint8_t *p, size_t n), void *ctx);

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
	size_t record_len;  /* set by the writer when it knows where the description's
			     * "qtk.provenance" string went: its length (qtk_writer_put_record can place
			     * a final record of that length there); 0: it does not */
	struct qtk_teeq *teeq; /* opts.tee_async: the tee's queue and thread */
	struct qtk_wdefer *defer; /* qtk_writer_put_later's buffers and waiting put, once used */
};



/* Turn string values listed in QTK_META_TYPES_KEY back into their types (after open). */
int qtk_meta_restore(qtk_model *m, qtk_err *err);

#endif
