/* qpk_int.h - what the QPK reader (qpk_read.c) and writer (qpk_write.c) share:
 * the constants of the byte layout (formats/qpk.md), the structural check of a
 * tensor description, the streaming g_idx check and a SHA-256 helper. */
#ifndef QTK_QPK_INT_H
#define QTK_QPK_INT_H

#include "internal.h"

#define QPK_MAJOR 1
#define QPK_MINOR 0     /* what a file without newer features says */
#define QPK_MINOR_MLX 1 /* layout kind 7, MLX (formats/qpk.md §8.6) */
#define QPK_MINOR_PARAMS 2 /* layout kinds 3-6, 8, 9 with their Layout_Params (§8.7-§8.12) */
#define QPK_PARAMS_SIZE 12u /* Layout_Params: strategy, code kind, scale type, meta len, reserved, nested group */
#define QPK_WHOLE_MAX 4096u /* the largest part whose content is checked whole (a bnb4 quant_state) */
#define QPK_HEADER_SIZE 128u
#define QPK_TRAILER_SIZE 128u
#define QPK_DEFAULT_ALIGN 64u
#define QPK_DEFAULT_CHUNK_LOG 22u  /* 4 MiB */
#define QPK_MIN_CHUNK_LOG 16u
#define QPK_MAX_CHUNK_LOG 26u
#define QPK_CAP_META (2ull << 30)  /* raw metadata section */
#define QPK_CAP_INDEX (1ull << 30) /* raw index section */
#define QPK_CAP_BLOBS 4096u
#define QPK_CAP_BLOB_NAME 255u
#define QPK_RATIO 1024u            /* raw <= stored * 1024 + 1 MiB for zstd sections */
#define QPK_RATIO_SLACK (1ull << 20)
#define QPK_WINDOW_LOG_MAX 27
#define QPK_ZSTD_LEVEL_META 3 /* metadata and index sections */
#define QPK_ZSTD_LEVEL_DATA 1 /* tensor chunks: level 3's ratio on weights at 3x the speed */
#define QPK_TRIAL_SLICE 16384u /* a chunk's trial frame: 4 slices of this, spread over it */
#define QPK_TRIAL_MIN (256u << 10) /* chunks up to this size are compressed whole, no trial */
#define QPK_ZSTD_MAGIC 0xFD2FB528u

enum { CODEC_RAW = 0, CODEC_ZSTD = 1 };
enum { TF_SYM = 1, TF_ACT_ORDER = 2 };

/* smallest encodings, used to bound counts by the bytes that follow */
#define MIN_KV 14u     /* u64 key length, 1 byte key, u32 type, u8 value */
#define MIN_BLOB 17u   /* u64 name length, 1 byte name, u64 data length */
#define MIN_TENSOR 125u

static const uint8_t qpk_magic[8] = {0x89, 'Q', 'P', 'K', '\r', '\n', 0x1a, '\n'};
static const uint8_t qpk_end_magic[8] = {'Q', 'P', 'K', '_', 'E', 'N', 'D', '\n'};
static const char tensor_tag[] = "qpk/v1/tensor"; /* hashed with its NUL */

static inline uint64_t qpk_align_up(uint64_t x, uint32_t a) { return (x + a - 1) / a * a; }

/* SHA-256 of a then b (bn may be 0) into out; 0 or QTK_E_IO. */
int qtk_qpk_sha256(const void *a, size_t an, const void *b, size_t bn, uint8_t out[32]);

/* A valid carried-file name: 1..255 bytes of UTF-8, no '/', '\\' or NUL, no leading '.'. */
bool qtk_qpk_blob_name_ok(const char *s, size_t len);

/* Every structural rule on a tensor description (§7.2, §8): 0 or QTK_E_DATA with
 * the problem (naming the field) in why. */
int qtk_qpk_check_tensor(const qtk_tensor *t, char *why, size_t wn);

/* Does layout kind k carry Layout_Params in its record (§7.2)? */
static inline bool qpk_has_params(unsigned k)
{
	return k == QTK_LAYOUT_CT_INT || k == QTK_LAYOUT_FP8 || k == QTK_LAYOUT_NVFP4 || k == QTK_LAYOUT_MXFP4 ||
	       k == QTK_LAYOUT_BNB4 || k == QTK_LAYOUT_BNB8;
}
/* The minor version a file holding a tensor of layout kind k needs (§16). */
static inline unsigned qpk_minor_of(unsigned k)
{
	return qpk_has_params(k) ? QPK_MINOR_PARAMS : k == QTK_LAYOUT_MLX ? QPK_MINOR_MLX : QPK_MINOR;
}

/* Content rules (§8.5, §8.13): which parts of a valid tensor description have their bytes
 * checked when a file is opened and while it is written. */
typedef enum {
	QPK_CC_NONE = 0,
	QPK_CC_GIDX,   /* a g_idx group map (§8.5): gchk below */
	QPK_CC_WHOLE,  /* a small part (<= QPK_WHOLE_MAX bytes) checked whole: qtk_qpk_check_whole */
	QPK_CC_VALUES, /* F32 values each checked on its own, in any pieces of whole values */
} qpk_cc;
qpk_cc qtk_qpk_content_kind(const qtk_tensor *t, int p);
/* The bytes of part p (a QPK_CC_WHOLE part; n its size): 0 or QTK_E_DATA with why. */
int qtk_qpk_check_whole(const qtk_tensor *t, int p, const uint8_t *b, size_t n, char *why, size_t wn);
/* Bytes [off, off + n) of part p (a QPK_CC_VALUES part; off and n multiples of 4). */
int qtk_qpk_check_values(const qtk_tensor *t, int p, uint64_t off, const uint8_t *b, size_t n, char *why, size_t wn);

/* Streaming check of g_idx values (C.2 row 41, §8.5): each value is a group
 * index; without act-order it is exactly i / group; with act-order every
 * group has exactly group_size members (counted in cnt). */
typedef struct gchk {
	uint64_t i, ngroups;
	uint32_t group;
	bool act;
	uint32_t *cnt;
} gchk;
/* Start checking the g_idx part of t (0 or QTK_E_IO); free g->cnt when done. */
int qtk_qpk_gchk_init(gchk *g, const qtk_tensor *t);
/* Check the next n bytes of g_idx values; 0 or QTK_E_DATA with why. */
int qtk_qpk_gchk_feed(gchk *g, const uint8_t *b, size_t n, char *why, size_t wn);
/* The writer's capability (qtk_format.can_store) and operations (qpk_write.c). */
int qtk_qpk_can_store(const qtk_tensor *t, bool with_name, const char *path, const char *subject, qtk_err *err);
extern const qtk_writer_ops qtk_qpk_writer_ops;

#endif
