/* qpk_write.c - QPK, qtk's packed-group container: the streaming writer (the
 * reader and the checks both sides share are in qpk_read.c and qpk_int.h).
 *
 * The byte layout is specified in formats/qpk.md. The index comes after the
 * data so that a file is written in one pass through an append-only qtk_ofile;
 * the fixed-size trailer at the end says where the index is. A part is stored
 * as chunks of 2^Chunk_Log raw bytes, each either raw or one zstd frame, so
 * that memory stays bounded while writing.
 */
#include "qpk_int.h"
#include <openssl/evp.h>
#include "lc.h"
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <pthread.h>

typedef struct wpart {
	uint64_t off;
	uint64_t chunk0, nchunks;
	uint8_t sha[32];
} wpart;

typedef struct wchunk {
	uint64_t stored;
	uint8_t codec;
} wchunk;

/* A chunk on its way out: filled by the caller's thread, compressed and added to its part's
 * digest by a worker (inline when there is none; the digests in chunk order), written by the
 * caller's thread in the order the chunks were filled, so the file is the same bytes for any
 * number of workers. */
typedef struct zslot {
	uint8_t *buf, *zbuf;
	size_t blen, zn;      /* raw bytes; the frame's bytes when z */
	bool z;               /* store the frame (it saves >= 1/16) */
	bool done;            /* compressed and hashed (under zmu with workers) */
	bool last;            /* its part's last chunk: the worker finishes the digest (under zmu) */
	uint64_t seq;         /* the chunk's index */
	size_t part;          /* s->parts index of its part */
	bool first;           /* its part's padding and offset go before it */
	EVP_MD_CTX *md;       /* its part's digest */
} zslot;

struct qw;
typedef struct zworker {
	struct qw *s;
	ZSTD_CCtx *cc;
	pthread_t th;
	bool on;
} zworker;

typedef struct qw {
	qtk_ofile f;
	uint32_t align;
	unsigned chunk_log;
	size_t csz;           /* raw bytes per chunk */
	uint8_t hdr[QPK_HEADER_SIZE];
	uint64_t data_off;
	wpart *parts;         /* every tensor's parts, tensor t's from pfirst[t] on */
	size_t *pfirst;       /* ntensors + 1 */
	wchunk *chunks;
	size_t nchunks, cap_chunks;
	uint8_t *buf;         /* the chunk being filled (its slot's) */
	size_t blen, bcap, zcap;
	zslot *zs;            /* a ring of nzs slots; chunk k is in zs[k % nzs] */
	unsigned nzs;
	uint64_t zsub, zout;  /* chunks handed on; chunks written */
	uint64_t ztake;       /* the next chunk a worker takes */
	zworker *zw;          /* nzw_alloc entries, nzw of them compressing threads (none: the
	                       * caller compresses) */
	unsigned nzw, nzw_alloc;
	bool zsync;           /* zmu and the conditions are initialised */
	bool zstop;
	pthread_mutex_t zmu;
	pthread_cond_t zwork, zdone;
	uint64_t zhash;       /* chunks added to their parts' digests (under zmu with workers) */
	bool zfail;           /* a digest call failed (under zmu with workers) */
	EVP_MD_CTX **mds;     /* every digest context made; nmd of them, the idle ones on mfree */
	size_t nmd, nfree;
	EVP_MD_CTX **mfree;
	bool pend;            /* the open part has no chunk yet and its offset waits for the ones before */
	ZSTD_CCtx *cc;
	EVP_MD_CTX *md;       /* digest of the part being written (one of mds) */
	bool open;            /* a part is being written */
	size_t ct;
	int cp;
	gchk g;               /* g_idx check for the part being written */
	bool gon;
	qpk_cc pcc;           /* content rule of the part being written (§8.13) */
	uint8_t small[QPK_WHOLE_MAX]; /* a QPK_CC_WHOLE part's bytes */
	size_t slen;
	uint64_t ppos;        /* bytes of the part being written so far */
	uint64_t meta_stored; /* metadata section bytes (raw when a record may be patched) */
	bool meta_raw;
	/* the "qtk.provenance" string in the raw metadata section: its offset in the section (its
	 * length: w->record_len), and the section's SHA-256 over the bytes before it */
	uint64_t rec_moff;
	size_t rec_len;
	const uint8_t *rec; /* the description's record: written between the section's pieces */
	EVP_MD_CTX *rec_pre;
	EVP_MD_CTX *rec_c;   /* the final record's placing: the section's digest so far */
	EVP_MD_CTX *sect_md; /* the metadata section's writing, with a record: its digest so far */
	unsigned minor;      /* the lowest minor version whose features the file uses */
} qw;

static int woom(qtk_writer *w) { return qtk_err_set(w->err, QTK_E_IO, w->path, -1, NULL, "out of memory"); }

static void b64(qtk_buf *b, uint64_t v) { uint8_t x[8]; qtk_wr64(x, v); qtk_buf_put(b, x, 8); }
static void b32(qtk_buf *b, uint32_t v) { uint8_t x[4]; qtk_wr32(x, v); qtk_buf_put(b, x, 4); }
static void bstr(qtk_buf *b, const void *s, uint64_t n) { b64(b, n); qtk_buf_put(b, s, (size_t)n); }

static void b_scalar(qtk_buf *b, const qtk_value *v)
{
	uint8_t x[8];
	switch (v->type) {
	case QTK_V_F32: {
		float f = (float)v->v.f;
		uint32_t u;
		memcpy(&u, &f, 4);
		qtk_wr32(x, u);
		break;
	}
	case QTK_V_F64: {
		uint64_t u;
		memcpy(&u, &v->v.f, 8);
		qtk_wr64(x, u);
		break;
	}
	case QTK_V_I8: case QTK_V_I16: case QTK_V_I32: case QTK_V_I64:
		qtk_wr64(x, (uint64_t)v->v.i);
		break;
	default:
		qtk_wr64(x, v->v.u);
	}
	qtk_buf_put(b, x, qtk_value_size(v->type));
}

/* A kv the reader would accept (§6.2, §6.3); 0 or QTK_E_DATA. */
static int check_kv(qtk_writer *w, const qtk_kv *kv)
{
	const qtk_value *v = &kv->val;
	size_t kl = strlen(kv->key);
	const char *why = NULL;
	if (!kl || kl > QTK_CAP_KEY || !qtk_utf8_valid(kv->key, kl))
		why = "key is empty, too long or not UTF-8";
	else if (v->type >= QTK_V_MAX)
		why = "unknown value type";
	else if (v->type == QTK_V_STR && v->v.str.len > QTK_CAP_STR)
		why = "string too long";
	else if (v->type == QTK_V_BOOL && v->v.u > 1)
		why = "bool value is not 0 or 1";
	else if (v->type == QTK_V_ARR && (v->elem >= QTK_V_MAX || v->elem == QTK_V_ARR || v->n > QTK_CAP_ARRAY))
		why = "array element type or length not supported";
	for (uint64_t i = 0; !why && v->type == QTK_V_ARR && i < v->n; i++)
		if ((v->elem == QTK_V_STR && ((const qtk_str *)v->arr)[i].len > QTK_CAP_STR) ||
		    (v->elem == QTK_V_BOOL && ((const uint8_t *)v->arr)[i] > 1))
			why = "array element out of range";
	return why ? qtk_err_set(w->err, QTK_E_DATA, w->path, -1, kv->key, "%s", why) : 0;
}

/* The raw metadata section (§6). */
static int build_meta(qtk_writer *w, qtk_buf *b)
{
	const qtk_model *d = w->desc;
	qtk_strset keys = {0};
	int rc = 0;
	b32(b, d->alignment);
	b32(b, 0);
	b64(b, d->nkv);
	for (size_t i = 0; i < d->nkv && !rc; i++) {
		const qtk_kv *kv = &d->kv[i];
		if ((rc = check_kv(w, kv)))
			break;
		int added = qtk_strset_add(&keys, kv->key);
		if (added <= 0) {
			rc = added < 0 ? woom(w) : qtk_err_set(w->err, QTK_E_DATA, w->path, -1, kv->key, "duplicate key");
			break;
		}
		const qtk_value *v = &kv->val;
		bstr(b, kv->key, strlen(kv->key));
		b32(b, v->type);
		if (v->type == QTK_V_STR && !strcmp(kv->key, "qtk.provenance")) {
			/* the record (tens of MB at 100,000 tensors) is not copied here: the section is
			 * b's bytes up to rec_moff, the record, b's bytes after it */
			qw *s = w->priv;
			s->rec_moff = b->len + 8; /* after the string's length (u64) */
			s->rec_len = w->opts.record_gen ? w->opts.record_len : (size_t)v->v.str.len;
			s->rec = w->opts.record_gen ? NULL : (const uint8_t *)v->v.str.s; /* NULL: generated */
			b64(b, s->rec_len);
		} else if (v->type == QTK_V_STR)
			bstr(b, v->v.str.s, v->v.str.len);
		else if (v->type != QTK_V_ARR)
			b_scalar(b, v);
		else {
			b32(b, v->elem);
			b64(b, v->n);
			if (v->elem == QTK_V_STR)
				for (uint64_t k = 0; k < v->n; k++)
					bstr(b, ((const qtk_str *)v->arr)[k].s, ((const qtk_str *)v->arr)[k].len);
			else
				qtk_buf_put(b, v->arr, (size_t)(v->n * qtk_value_size(v->elem)));
		}
	}
	qtk_strset_free(&keys);
	if (rc)
		return rc;
	if (d->nblobs > QPK_CAP_BLOBS)
		return qtk_err_set(w->err, QTK_E_DATA, w->path, -1, NULL, "more than %u side files", QPK_CAP_BLOBS);
	b64(b, d->nblobs);
	for (size_t i = 0; i < d->nblobs; i++) {
		const qtk_blob *bl = &d->blobs[i];
		if (!qtk_qpk_blob_name_ok(bl->name, strlen(bl->name)) || bl->len > QTK_CAP_BLOB)
			return qtk_err_set(w->err, QTK_E_DATA, w->path, -1, bl->name,
					   "side file name is not a plain file name or the file is too large");
		for (size_t k = 0; k < i; k++)
			if (strcmp(d->blobs[k].name, bl->name) == 0)
				return qtk_err_set(w->err, QTK_E_DATA, w->path, -1, bl->name, "duplicate side file");
		if (!qtk_side_file_allowed(bl->name, &w->opts))
			return qtk_err_set(w->err, QTK_E_USAGE, w->path, -1, bl->name,
					   "not a known side file and not asked for: not carried");
		bstr(b, bl->name, strlen(bl->name));
		bstr(b, bl->data, bl->len);
	}
	if (b->failed)
		return woom(w);
	if (b->len + ((qw *)w->priv)->rec_len > QPK_CAP_META)
		return qtk_err_set(w->err, QTK_E_DATA, w->path, -1, NULL, "metadata section exceeds %llu bytes",
				   (unsigned long long)QPK_CAP_META);
	return 0;
}

/* Compress a section when that saves at least 1/16 and stays within the
 * reader's ratio limit (§4). out, on: the stored form; owned: set when it is new. */
static int pack_section(qtk_writer *w, const uint8_t *raw, size_t n, uint8_t **owned, const uint8_t **out,
			size_t *on, uint8_t *codec)
{
	*owned = NULL;
	*out = raw;
	*on = n;
	*codec = CODEC_RAW;
	qw *s = w->priv;
	size_t cap = ZSTD_compressBound(n);
	uint8_t *z = n ? qtk_malloc(cap) : NULL;
	if (!z)
		return n ? woom(w) : 0;
	size_t zn = ZSTD_CCtx_setParameter(s->cc, ZSTD_c_compressionLevel, QPK_ZSTD_LEVEL_META);
	if (!ZSTD_isError(zn))
		zn = ZSTD_compress2(s->cc, z, cap, raw, n);
	if (!ZSTD_isError(zn) && zn < n - n / 16 && n / QPK_RATIO <= zn + QPK_RATIO_SLACK / QPK_RATIO) {
		*owned = z;
		*out = z;
		*on = zn;
		*codec = CODEC_ZSTD;
		return 0;
	}
	qtk_free(z);
	return 0;
}

int qtk_qpk_can_store(const qtk_tensor *t, bool with_name, const char *path, const char *subject, qtk_err *err)
{
	const char *subj = subject ? subject : t->name;
	size_t nl = strlen(t->name);
	char why[300];
	if (with_name && (!nl || nl > QTK_CAP_NAME || !qtk_utf8_valid(t->name, nl)))
		return qtk_err_set(err, QTK_E_DATA, path, -1, subj, "tensor name is empty, too long or not UTF-8");
	if (qtk_qpk_check_tensor(t, why, sizeof why))
		return qtk_err_set(err, QTK_E_DATA, path, -1, subj, "cannot be stored in QPK: %s", why);
	return 0;
}

/* Names unique, sizes (what QPK cannot store was refused by qtk_qpk_can_store). */
static int check_desc(qtk_writer *w, uint64_t *maxraw)
{
	const qtk_model *d = w->desc;
	qtk_strset names = {0};
	int rc = 0;
	*maxraw = 0;
	for (size_t i = 0; i < d->ntensors && !rc; i++) {
		const qtk_tensor *t = &d->tensors[i];
		{
			int added = qtk_strset_add(&names, t->name);
			if (added <= 0)
				rc = added < 0 ? woom(w)
					       : qtk_err_set(w->err, QTK_E_DATA, w->path, -1, t->name, "duplicate tensor name");
		}
		for (int p = 0; p < t->nparts && !rc; p++)
			if (t->parts[p].nbytes > *maxraw)
				*maxraw = t->parts[p].nbytes;
	}
	qtk_strset_free(&names);
	if (!rc && d->ntensors > QTK_CAP_TENSORS)
		rc = qtk_err_set(w->err, QTK_E_DATA, w->path, -1, NULL, "too many tensors");
	return rc;
}

static ZSTD_CCtx *new_cctx(void)
{
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	if (cc && (ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1)) ||
		   ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1)))) {
		ZSTD_freeCCtx(cc);
		cc = NULL;
	}
	return cc;
}

/* Whether compressing a chunk of more than QPK_TRIAL_MIN bytes can pay: one trial frame of
 * four QPK_TRIAL_SLICE slices (the first at the chunk's start, the last ending at its end, the
 * others at 1/3 and 2/3 of the way, rounded down) must save at least 1/8 of their bytes.
 * Weights whose frames would save less (F16 about 1/12, k-quants and q8_0 1/30 or less) are
 * stored raw without spending the whole chunk's compression on finding that out. out: at least
 * ZSTD_compressBound(4 slices). */
static bool trial_pays(ZSTD_CCtx *cc, const uint8_t *buf, size_t n, uint8_t *out, size_t cap)
{
	if (n <= QPK_TRIAL_MIN)
		return true;
	ZSTD_outBuffer o = {out, cap, 0};
	size_t step = (n - QPK_TRIAL_SLICE) / 3;
	for (int i = 0; i < 4; i++) {
		ZSTD_inBuffer in = {buf + (i == 3 ? n - QPK_TRIAL_SLICE : step * (size_t)i), QPK_TRIAL_SLICE, 0};
		ZSTD_EndDirective e = i == 3 ? ZSTD_e_end : ZSTD_e_continue;
		size_t r;
		do {
			r = ZSTD_compressStream2(cc, &o, &in, e);
			if (ZSTD_isError(r)) {
				ZSTD_CCtx_reset(cc, ZSTD_reset_session_only);
				return true; /* the whole chunk's compression decides */
			}
		} while (e == ZSTD_e_end ? r != 0 : in.pos < in.size);
	}
	return o.pos <= 4 * QPK_TRIAL_SLICE - 4 * QPK_TRIAL_SLICE / 8;
}

/* Compress a filled slot: zstd when a trial says it can pay and the frame saves >= 1/16, else
 * raw (§9.2, §14). */
static void zslot_pack(ZSTD_CCtx *cc, zslot *z, size_t zcap)
{
	size_t zn = ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, QPK_ZSTD_LEVEL_DATA);
	bool pays = !ZSTD_isError(zn) && trial_pays(cc, z->buf, z->blen, z->zbuf, zcap);
	if (pays)
		zn = ZSTD_compress2(cc, z->zbuf, zcap, z->buf, z->blen);
	z->z = pays && !ZSTD_isError(zn) && zn < z->blen - z->blen / 16;
	z->zn = z->z ? zn : z->blen;
}

/* A part's digest context: an idle one, or a new one (the lists grow under zmu: a worker may
 * be putting a finished one back). NULL: out of memory. */
static EVP_MD_CTX *md_take(qw *s)
{
	EVP_MD_CTX *c = NULL;
	if (s->zsync)
		pthread_mutex_lock(&s->zmu);
	if (s->nfree) {
		c = s->mfree[--s->nfree];
	} else {
		EVP_MD_CTX **a = qtk_realloc(s->mds, (s->nmd + 1) * sizeof *a);
		EVP_MD_CTX **f = a ? qtk_realloc(s->mfree, (s->nmd + 1) * sizeof *f) : NULL;
		if (a)
			s->mds = a;
		if (f)
			s->mfree = f;
		if (f && (c = EVP_MD_CTX_new()))
			s->mds[s->nmd++] = c;
	}
	if (s->zsync)
		pthread_mutex_unlock(&s->zmu);
	return c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1 ? c : NULL;
}

/* Finish a part's digest into sha and make its context idle (any thread; nothing else holds
 * the context). false: the digest call failed. */
static bool md_finish(qw *s, EVP_MD_CTX *c, uint8_t sha[32])
{
	unsigned len = 0;
	bool ok = EVP_DigestFinal_ex(c, sha, &len) == 1;
	if (s->zsync)
		pthread_mutex_lock(&s->zmu);
	s->mfree[s->nfree++] = c; /* mfree has room for every context */
	if (s->zsync)
		pthread_mutex_unlock(&s->zmu);
	return ok;
}

static void *zworker_run(void *a)
{
	zworker *x = a;
	qw *s = x->s;
	pthread_mutex_lock(&s->zmu);
	for (;;) {
		while (!s->zstop && s->ztake == s->zsub)
			pthread_cond_wait(&s->zwork, &s->zmu);
		if (s->zstop)
			break;
		zslot *z = &s->zs[s->ztake++ % s->nzs];
		pthread_mutex_unlock(&s->zmu);
		zslot_pack(x->cc, z, s->zcap);
		pthread_mutex_lock(&s->zmu);
		while (s->zhash != z->seq) /* the part's digest takes its chunks in order */
			pthread_cond_wait(&s->zdone, &s->zmu);
		pthread_mutex_unlock(&s->zmu);
		bool ok = EVP_DigestUpdate(z->md, z->buf, z->blen) == 1;
		pthread_mutex_lock(&s->zmu);
		s->zhash++;
		if (z->last) { /* set by close_part before this chunk was hashed */
			pthread_mutex_unlock(&s->zmu);
			ok = ok && md_finish(s, z->md, s->parts[z->part].sha);
			pthread_mutex_lock(&s->zmu);
		}
		s->zfail |= !ok;
		z->done = true;
		pthread_cond_broadcast(&s->zdone);
	}
	pthread_mutex_unlock(&s->zmu);
	return NULL;
}

/* The slots and, with threads > 1, threads - 1 compressing workers (at most 2: 3 slots of a
 * chunk and its frame, <= 24 MiB) beside the caller, who fills one slot while they compress
 * the others. Nonzero: out of memory. */
static int zring_start(qw *s, int threads)
{
	unsigned nw = threads > 3 ? 2u : threads > 1 ? (unsigned)threads - 1 : 0;
	s->nzs = nw + 1;
	s->zs = qtk_calloc(s->nzs, sizeof *s->zs);
	if (!s->zs)
		return 1;
	for (unsigned i = 0; i < s->nzs; i++) {
		s->zs[i].buf = qtk_malloc(s->bcap ? s->bcap : 1);
		s->zs[i].zbuf = qtk_malloc(s->zcap);
		if (!s->zs[i].buf || !s->zs[i].zbuf)
			return 1;
	}
	s->buf = s->zs[0].buf;
	if (!nw)
		return 0;
	if (pthread_mutex_init(&s->zmu, NULL))
		return 1;
	if (pthread_cond_init(&s->zwork, NULL)) {
		pthread_mutex_destroy(&s->zmu);
		return 1;
	}
	if (pthread_cond_init(&s->zdone, NULL)) {
		pthread_cond_destroy(&s->zwork);
		pthread_mutex_destroy(&s->zmu);
		return 1;
	}
	s->zsync = true;
	s->zw = qtk_calloc(nw, sizeof *s->zw);
	if (!s->zw)
		return 1;
	s->nzw_alloc = nw;
	for (unsigned i = 0; i < nw; i++) { /* a worker that cannot start leaves the others the work */
		s->zw[i].s = s;
		if (!(s->zw[i].cc = new_cctx()))
			return 1;
		s->zw[i].on = pthread_create(&s->zw[i].th, NULL, zworker_run, &s->zw[i]) == 0;
		s->nzw += s->zw[i].on;
	}
	for (; s->nzs > s->nzw + 1; s->nzs--) { /* slots for the workers that started only */
		qtk_free(s->zs[s->nzs - 1].buf);
		qtk_free(s->zs[s->nzs - 1].zbuf);
	}
	return 0;
}

/* Stop the workers (a chunk being compressed is finished first) and free the ring. */
static void zring_end(qw *s)
{
	if (s->zsync) {
		pthread_mutex_lock(&s->zmu);
		s->zstop = true;
		pthread_cond_broadcast(&s->zwork);
		pthread_mutex_unlock(&s->zmu);
	}
	for (unsigned i = 0; s->zw && i < s->nzw_alloc; i++) {
		if (s->zw[i].on)
			pthread_join(s->zw[i].th, NULL);
		ZSTD_freeCCtx(s->zw[i].cc);
	}
	if (s->zsync) {
		pthread_cond_destroy(&s->zdone);
		pthread_cond_destroy(&s->zwork);
		pthread_mutex_destroy(&s->zmu);
		s->zsync = false;
	}
	for (unsigned i = 0; s->zs && i < s->nzs; i++) {
		qtk_free(s->zs[i].buf);
		qtk_free(s->zs[i].zbuf);
	}
	qtk_free(s->zw);
	qtk_free(s->zs);
	s->zw = NULL;
	s->zs = NULL;
}

/* Write the oldest chunk handed on once it is compressed: its part's padding and offset first
 * when it opens its part. */
static int zslot_write(qtk_writer *w)
{
	qw *s = w->priv;
	zslot *z = &s->zs[s->zout % s->nzs];
	bool fail;
	if (s->nzw) {
		pthread_mutex_lock(&s->zmu);
		while (!z->done)
			pthread_cond_wait(&s->zdone, &s->zmu);
		fail = s->zfail;
		pthread_mutex_unlock(&s->zmu);
	} else {
		fail = s->zfail;
	}
	if (fail)
		return qtk_err_set(w->err, QTK_E_IO, w->path, -1, NULL, "SHA-256 of a part failed");
	int rc = 0;
	if (z->first) {
		rc = qtk_ofile_pad(&s->f, qpk_align_up(s->f.written, s->align) - s->f.written);
		s->parts[z->part].off = s->f.written;
	}
	rc = rc ? rc : qtk_ofile_write(&s->f, z->z ? z->zbuf : z->buf, z->zn);
	s->chunks[z->seq].stored = z->zn;
	s->chunks[z->seq].codec = z->z ? CODEC_ZSTD : CODEC_RAW;
	s->zout++;
	return rc;
}

/* Write every chunk handed on. */
static int zring_drain(qtk_writer *w)
{
	qw *s = w->priv;
	int rc = 0;
	while (!rc && s->zout < s->zsub)
		rc = zslot_write(w);
	return rc;
}

/* Bytes of the metadata section after the record's start: into the file and the section's
 * digest (sect_md). */
static int sect_put(void *ctx, const uint8_t *p, size_t n)
{
	qtk_writer *w = ctx;
	qw *s = w->priv;
	int rc = qtk_ofile_write(&s->f, p, n);
	return rc ? rc : EVP_DigestUpdate(s->sect_md, p, n) == 1 ? 0 : woom(w);
}

static int qpk_w_begin(qtk_writer *w)
{
	qw *s = qtk_calloc(1, sizeof *s);
	if (!s)
		return woom(w);
	s->f.fd = -1;
	w->priv = s;
	s->align = QPK_DEFAULT_ALIGN;
	s->chunk_log = QPK_DEFAULT_CHUNK_LOG;
	s->csz = (size_t)1 << s->chunk_log;
	uint64_t maxraw;
	int rc = check_desc(w, &maxraw);
	if (rc)
		return rc;
	s->minor = QPK_MINOR;
	for (size_t i = 0; i < w->desc->ntensors; i++)
		if (qpk_minor_of(w->desc->tensors[i].layout.kind) > s->minor)
			s->minor = qpk_minor_of(w->desc->tensors[i].layout.kind);
	s->bcap = maxraw < s->csz ? (size_t)maxraw : s->csz;
	s->zcap = ZSTD_compressBound(s->bcap);
	/* each tensor's parts from pfirst[t] on: exactly as many as the tensors have (a table of
	 * QTK_MAX_PARTS a tensor took 45 MB at 100,000 one-part tensors) */
	s->pfirst = qtk_calloc(w->desc->ntensors + 1, sizeof *s->pfirst);
	for (size_t i = 0; s->pfirst && i < w->desc->ntensors; i++)
		s->pfirst[i + 1] = s->pfirst[i] + (size_t)w->desc->tensors[i].nparts;
	s->parts = s->pfirst ? qtk_calloc(s->pfirst[w->desc->ntensors] + 1, sizeof *s->parts) : NULL;
	s->cc = new_cctx();
	if (!s->parts || !s->cc || zring_start(s, w->opts.threads))
		return woom(w);
	qtk_buf meta = {0};
	uint8_t *owned = NULL, codec;
	const uint8_t *st = NULL;
	size_t sn = 0;
	/* a provenance record may be patched in place at finish: keep the section raw then */
	s->meta_raw = qtk_kv_find(w->desc, "qtk.provenance") != NULL;
	size_t full = 0; /* the section's length, the record's bytes included */
	if (!(rc = build_meta(w, &meta))) {
		full = meta.len + s->rec_len;
		if (s->meta_raw) {
			st = meta.p;
			sn = full;
			codec = CODEC_RAW;
			/* the section's digest up to the record, for placing the final record later
			 * without reading the section back */
			if (s->rec_len && !((s->rec_pre = EVP_MD_CTX_new()) &&
					    EVP_DigestInit_ex(s->rec_pre, EVP_sha256(), NULL) == 1 &&
					    EVP_DigestUpdate(s->rec_pre, meta.p, (size_t)s->rec_moff) == 1))
				rc = woom(w);
			w->record_len = s->rec_pre ? s->rec_len : 0;
		} else {
			rc = pack_section(w, meta.p, meta.len, &owned, &st, &sn, &codec);
		}
	}
	s->meta_stored = sn;
	const size_t cut = s->rec_len ? (size_t)s->rec_moff : meta.len; /* where the record goes */
	if (!rc) {
		uint8_t *h = s->hdr;
		memcpy(h, qpk_magic, 8);
		qtk_wr16(h + 8, QPK_MAJOR);
		qtk_wr16(h + 10, (uint16_t)s->minor);
		qtk_wr32(h + 12, QPK_HEADER_SIZE);
		qtk_wr32(h + 16, s->align);
		h[20] = (uint8_t)s->chunk_log;
		h[21] = codec;
		qtk_wr64(h + 24, sn);
		qtk_wr64(h + 32, full);
		/* the section's digest now, or, with a record, as the section goes out (carried on
		 * from the digest up to the record) */
		if (s->rec_pre ? !(s->sect_md = EVP_MD_CTX_new()) || EVP_MD_CTX_copy_ex(s->sect_md, s->rec_pre) != 1
			       : qtk_qpk_sha256(st, sn, NULL, 0, h + 40) != 0)
			rc = woom(w);
	}
	if (!rc && !(rc = qtk_ofile_open(&s->f, w->path, w->err))) {
		qtk_ofile_list(&s->f, w->opts.outs);
		s->f.defer_hash = w->opts.patch_pending;
		rc = qtk_ofile_write(&s->f, s->hdr, sizeof s->hdr);
		if (!rc && s->sect_md) { /* up to the record, the record (the description's, or
					  * generated here), the rest; then the header with the digest */
			unsigned hl = 0;
			rc = qtk_ofile_write(&s->f, meta.p, cut);
			rc = rc ? rc : s->rec ? sect_put(w, s->rec, s->rec_len) : qtk_writer_gen_record(w, sect_put, w);
			rc = rc ? rc : sect_put(w, meta.p + cut, meta.len - cut);
			if (!rc && (EVP_DigestFinal_ex(s->sect_md, s->hdr + 40, &hl) != 1 || hl != 32))
				rc = woom(w);
			rc = rc ? rc : qtk_ofile_write_at(&s->f, 0, s->hdr, sizeof s->hdr);
		} else if (!rc) {
			rc = qtk_ofile_write(&s->f, st, sn);
		}
		if (!rc)
			rc = qtk_ofile_pad(&s->f, qpk_align_up(s->f.written, s->align) - s->f.written);
		s->data_off = s->f.written;
	}
	EVP_MD_CTX_free(s->sect_md);
	s->sect_md = NULL;
	qtk_free(owned);
	qtk_buf_free(&meta);
	return rc;
}

/* Hand the filled chunk on to be compressed and written. */
static int emit_chunk(qtk_writer *w)
{
	qw *s = w->priv;
	if (!s->blen)
		return 0;
	if (s->gon || s->pcc == QPK_CC_VALUES) {
		char why[300];
		const qtk_tensor *t = &w->desc->tensors[s->ct];
		if (s->gon ? qtk_qpk_gchk_feed(&s->g, s->buf, s->blen, why, sizeof why)
			   : qtk_qpk_check_values(t, s->cp, s->ppos - s->blen, s->buf, s->blen, why, sizeof why))
			return qtk_err_set(w->err, QTK_E_DATA, w->path, -1, t->name, "%s", why);
	}
	if (s->nchunks == s->cap_chunks) {
		size_t nc = s->cap_chunks ? s->cap_chunks * 2 : 256;
		wchunk *c = qtk_realloc(s->chunks, nc * sizeof *c);
		if (!c)
			return woom(w);
		s->chunks = c;
		s->cap_chunks = nc;
	}
	zslot *z = &s->zs[s->zsub % s->nzs];
	z->blen = s->blen;
	z->seq = s->nchunks++;
	z->first = s->pend;
	z->part = s->pfirst[s->ct] + (size_t)s->cp;
	z->md = s->md;
	z->last = false;
	s->pend = false;
	s->blen = 0;
	if (s->nzw) {
		pthread_mutex_lock(&s->zmu);
		z->done = false;
		s->zsub++;
		pthread_cond_signal(&s->zwork);
		pthread_mutex_unlock(&s->zmu);
	} else {
		zslot_pack(s->cc, z, s->zcap);
		s->zfail |= EVP_DigestUpdate(z->md, z->buf, z->blen) != 1;
		s->zhash++;
		z->done = true;
		s->zsub++;
	}
	/* the next slot to fill: the oldest chunk's, written first when it is still out */
	int rc = s->zout + s->nzs == s->zsub ? zslot_write(w) : 0;
	s->buf = s->zs[s->zsub % s->nzs].buf;
	return rc;
}

static int close_part(qtk_writer *w)
{
	qw *s = w->priv;
	if (!s->open)
		return 0;
	s->open = false;
	int rc = emit_chunk(w);
	wpart *wp = &s->parts[s->pfirst[s->ct] + (size_t)s->cp];
	if (!rc && s->pend) { /* no chunk: the part starts after those still out */
		s->pend = false;
		if (!(rc = zring_drain(w)))
			rc = qtk_ofile_pad(&s->f, qpk_align_up(s->f.written, s->align) - s->f.written);
		wp->off = s->f.written;
	}
	/* the digest is finished by the worker that hashes the part's last chunk, or here when
	 * that chunk was hashed already (or the part has none) */
	bool here = true;
	if (s->nchunks > wp->chunk0 && s->nzw) {
		pthread_mutex_lock(&s->zmu);
		if (s->zhash < s->nchunks) {
			s->zs[(s->nchunks - 1) % s->nzs].last = true;
			here = false;
		}
		pthread_mutex_unlock(&s->zmu);
	}
	if (here && !md_finish(s, s->md, wp->sha) && !rc)
		rc = woom(w);
	s->md = NULL;
	wp->nchunks = s->nchunks - wp->chunk0;
	if (!rc && s->gon && s->g.act)
		for (uint64_t g = 0; g < s->g.ngroups && !rc; g++)
			if (s->g.cnt[g] != s->g.group)
				rc = qtk_err_set(w->err, QTK_E_DATA, w->path, -1, w->desc->tensors[s->ct].name,
						 "g_idx is not a group map: group %llu has %u members, not %u",
						 (unsigned long long)g, s->g.cnt[g], s->g.group);
	qtk_free(s->g.cnt);
	s->g.cnt = NULL;
	s->gon = false;
	if (!rc && s->pcc == QPK_CC_WHOLE) {
		char why[400];
		const qtk_tensor *t = &w->desc->tensors[s->ct];
		if (qtk_qpk_check_whole(t, s->cp, s->small, s->slen, why, sizeof why))
			rc = qtk_err_set(w->err, QTK_E_DATA, w->path, -1, t->name, "%s", why);
	}
	s->pcc = QPK_CC_NONE;
	return rc;
}

static int qpk_w_part_begin(qtk_writer *w)
{
	qw *s = w->priv;
	int rc = close_part(w);
	if (rc)
		return rc;
	s->ct = w->cur_tensor;
	s->cp = w->cur_part;
	const qtk_tensor *t = &w->desc->tensors[s->ct];
	wpart *wp = &s->parts[s->pfirst[s->ct] + (size_t)s->cp];
	/* the part starts after the chunks still out: its padding and offset go with its first */
	s->pend = true;
	wp->chunk0 = s->nchunks;
	if (!(s->md = md_take(s)))
		return woom(w);
	s->open = true;
	s->pcc = qtk_qpk_content_kind(t, s->cp);
	s->slen = 0;
	s->ppos = 0;
	if (s->pcc == QPK_CC_GIDX) {
		if (qtk_qpk_gchk_init(&s->g, t))
			return woom(w);
		s->gon = true;
	}
	return 0;
}

/* A QPK_CC_WHOLE part's bytes, kept for its content check at close_part (the layout bounds
 * these parts by QPK_WHOLE_MAX, §8.13). */
static int keep_whole(qtk_writer *w, const uint8_t *p, size_t n)
{
	qw *s = w->priv;
	if (s->pcc != QPK_CC_WHOLE)
		return 0;
	if (n > sizeof s->small - s->slen)
		return qtk_err_set(w->err, QTK_E_INTERNAL, w->path, -1, w->desc->tensors[s->ct].name,
				   "part larger than its description");
	memcpy(s->small + s->slen, p, n);
	s->slen += n;
	return 0;
}

/* k bytes placed at the end of the chunk being filled: count them, hand the chunk on when full. */
static int filled(qtk_writer *w, size_t k)
{
	qw *s = w->priv;
	s->blen += k;
	s->ppos += k;
	return s->blen == s->bcap ? emit_chunk(w) : 0;
}

static int qpk_w_put(qtk_writer *w, const void *buf, size_t n)
{
	qw *s = w->priv;
	const uint8_t *p = buf;
	int rc = keep_whole(w, p, n);
	while (!rc && n) {
		size_t k = s->bcap - s->blen < n ? s->bcap - s->blen : n;
		memcpy(s->buf + s->blen, p, k);
		p += k;
		n -= k;
		rc = filled(w, k);
	}
	return rc;
}

/* Bytes of file fd read straight into the chunk being filled, with no caller's buffer between
 * (qtk_writer_put_file, for sources read with pread); back, when not NULL, is given them too
 * (for the tee: the bytes the output takes). */
static int qpk_w_put_file(qtk_writer *w, int fd, const char *path, uint64_t off, uint64_t n, void *back)
{
	qw *s = w->priv;
	uint8_t *b = back;
	while (n) {
		size_t k = s->bcap - s->blen < n ? s->bcap - s->blen : (size_t)n;
		uint8_t *at = s->buf + s->blen;
		int rc = qtk_pread_full(fd, path, at, k, off, w->err);
		if (rc || (rc = keep_whole(w, at, k)))
			return rc;
		if (b) {
			memcpy(b, at, k);
			b += k;
		}
		off += k;
		n -= k;
		if ((rc = filled(w, k)))
			return rc;
	}
	return 0;
}

/* The raw index section (§7). */
/* The index's length as build_index writes it: its buffer taken once at that size (at
 * 100,000 tensors ~17 MB, which doubling took twice over). */
static size_t index_bytes(const qw *s, const qtk_model *d)
{
	size_t n = 8;
	for (size_t i = 0; i < d->ntensors; i++) {
		const qtk_tensor *t = &d->tensors[i];
		n += 8 + strlen(t->name) + 4 + 4 * 4 + (qpk_has_params(t->layout.kind) ? QPK_PARAMS_SIZE : 0) +
		     8 * (size_t)t->ndim + 32;
		for (int p = 0; p < t->nparts; p++)
			n += 8 + 4 + 4 + 8 * (size_t)t->parts[p].ndim + 8 + 32 + 8 +
			     16 * (size_t)s->parts[s->pfirst[i] + (size_t)p].nchunks;
	}
	return n;
}

static int build_index(qtk_writer *w, qtk_buf *b)
{
	qw *s = w->priv;
	const qtk_model *d = w->desc;
	const size_t want = index_bytes(s, d);
	if (qtk_buf_reserve(b, want))
		return woom(w);
	b64(b, d->ntensors);
	for (size_t i = 0; i < d->ntensors; i++) {
		const qtk_tensor *t = &d->tensors[i];
		const qtk_layout *l = &t->layout;
		size_t rec = b->len;
		bstr(b, t->name, strlen(t->name));
		uint8_t x[4] = {(uint8_t)l->kind, l->bits, l->gptq_version,
				(uint8_t)((l->sym ? TF_SYM : 0) | (l->act_order ? TF_ACT_ORDER : 0))};
		qtk_buf_put(b, x, 4);
		b32(b, l->type);
		b32(b, l->group_size);
		b32(b, (uint32_t)t->ndim);
		b32(b, (uint32_t)t->nparts);
		if (qpk_has_params(l->kind)) { /* Layout_Params (§7.2) */
			uint8_t lp[QPK_PARAMS_SIZE] = {l->strategy, l->code_kind};
			qtk_wr16(lp + 2, l->scale_type);
			qtk_wr16(lp + 4, l->meta_len);
			qtk_wr32(lp + 8, l->nested_group);
			qtk_buf_put(b, lp, sizeof lp);
		}
		for (int k = 0; k < t->ndim; k++)
			b64(b, t->shape[k]);
		for (int p = 0; p < t->nparts; p++) {
			const qtk_part *q = &t->parts[p];
			char role[8] = {0};
			memcpy(role, q->role, strnlen(q->role, sizeof role));
			qtk_buf_put(b, role, 8);
			b32(b, q->type);
			b32(b, (uint32_t)q->ndim);
			for (int k = 0; k < q->ndim; k++)
				b64(b, q->shape[k]);
			b64(b, q->nbytes);
			qtk_buf_put(b, s->parts[s->pfirst[i] + (size_t)p].sha, 32);
		}
		uint8_t tsha[32];
		if (b->failed)
			return woom(w);
		if (qtk_qpk_sha256(tensor_tag, sizeof tensor_tag, b->p + rec, b->len - rec, tsha))
			return woom(w);
		qtk_buf_put(b, tsha, 32);
		for (int p = 0; p < t->nparts; p++) {
			const wpart *wp = &s->parts[s->pfirst[i] + (size_t)p];
			b64(b, wp->off);
			for (uint64_t c = 0; c < wp->nchunks; c++) {
				uint8_t e[16] = {0};
				qtk_wr64(e, s->chunks[wp->chunk0 + c].stored);
				e[8] = s->chunks[wp->chunk0 + c].codec;
				qtk_buf_put(b, e, 16);
			}
		}
	}
	if (b->failed)
		return woom(w);
	if (b->len != want)
		return qtk_err_set(w->err, QTK_E_INTERNAL, w->path, -1, NULL, "index of %zu bytes, %zu counted", b->len, want);
	if (b->len > QPK_CAP_INDEX)
		return qtk_err_set(w->err, QTK_E_DATA, w->path, -1, NULL, "index section exceeds %llu bytes",
				   (unsigned long long)QPK_CAP_INDEX);
	return 0;
}

typedef struct qpatch {
	qw *s;
	int (*fn)(void *ctx, uint8_t *buf, size_t n);
	void *ctx;
} qpatch;

/* Patch the raw metadata section, then its digest in the header (the trailer's
 * Header_SHA256 is computed from s->hdr at finish). */
static int qpatch_meta(void *ctx, uint8_t *buf, size_t n)
{
	qpatch *q = ctx;
	int rc = q->fn(q->ctx, buf, n);
	if (!rc && qtk_qpk_sha256(buf, n, NULL, 0, q->s->hdr + 40))
		rc = QTK_E_IO;
	return rc;
}

static int qpatch_hdr(void *ctx, uint8_t *buf, size_t n)
{
	memcpy(buf, ((qw *)ctx)->hdr, n);
	return 0;
}

static int qpk_w_patch(qtk_writer *w, int (*fn)(void *ctx, uint8_t *buf, size_t n), void *ctx)
{
	qw *s = w->priv;
	if (!s->meta_raw)
		return qtk_err_set(w->err, QTK_E_USAGE, w->path, -1, NULL, "no provenance record reserved to patch");
	qpatch q = {s, fn, ctx};
	int rc = zring_drain(w);
	rc = rc ? rc : qtk_ofile_patch(&s->f, QPK_HEADER_SIZE, s->meta_stored, qpatch_meta, &q);
	return rc ? rc : qtk_ofile_patch(&s->f, 0, QPK_HEADER_SIZE, qpatch_hdr, s);
}

static int qpk_w_finish(qtk_writer *w)
{
	qw *s = w->priv;
	int rc = close_part(w);
	rc = rc ? rc : zring_drain(w);
	qtk_buf idx = {0};
	uint8_t *owned = NULL, codec = 0, tr[QPK_TRAILER_SIZE] = {0};
	const uint8_t *st = NULL;
	size_t sn = 0;
	if (!rc && !(rc = build_index(w, &idx)))
		rc = pack_section(w, idx.p, idx.len, &owned, &st, &sn, &codec);
	if (!rc) {
		qtk_wr64(tr, s->f.written);
		qtk_wr64(tr + 8, sn);
		qtk_wr64(tr + 16, idx.len);
		tr[24] = codec;
		qtk_wr64(tr + 32, s->data_off);
		if (qtk_qpk_sha256(st, sn, NULL, 0, tr + 40) || qtk_qpk_sha256(s->hdr, sizeof s->hdr, NULL, 0, tr + 72))
			rc = woom(w);
		qtk_wr16(tr + 104, QPK_MAJOR);
		qtk_wr16(tr + 106, (uint16_t)s->minor);
		qtk_wr32(tr + 108, QPK_TRAILER_SIZE);
		memcpy(tr + 120, qpk_end_magic, 8);
	}
	if (!rc && !(rc = qtk_ofile_write(&s->f, st, sn)) && !(rc = qtk_ofile_write(&s->f, tr, sizeof tr)))
		rc = qtk_ofile_commit(&s->f);
	qtk_free(owned);
	qtk_buf_free(&idx);
	return rc;
}

/* The final record over the reserved one in the raw metadata section, a piece at a time
 * (qtk_writer_record_piece checked the bounds; pieces in order), the section's digest carried
 * on from the digest up to the record. */
static int qpk_w_record_piece(qtk_writer *w, uint64_t at, const void *p, size_t n)
{
	qw *s = w->priv;
	int rc = at ? 0 : zring_drain(w); /* the chunks still being compressed land first */
	rc = rc ? rc : qtk_ofile_write_at(&s->f, QPK_HEADER_SIZE + s->rec_moff + at, p, n);
	if (!rc && !at) {
		EVP_MD_CTX_free(s->rec_c);
		if (!(s->rec_c = EVP_MD_CTX_new()) || EVP_MD_CTX_copy_ex(s->rec_c, s->rec_pre) != 1)
			rc = woom(w);
	}
	if (!rc && (!s->rec_c || EVP_DigestUpdate(s->rec_c, p, n) != 1))
		rc = woom(w);
	return rc;
}

/* The header's digest of the section: the bytes after the record read back (side files, a few
 * MB at most; the record itself is not). */
static int qpk_w_record_end(qtk_writer *w)
{
	qw *s = w->priv;
	EVP_MD_CTX *c = s->rec_c;
	s->rec_c = NULL;
	uint8_t *buf = c ? qtk_malloc((size_t)1 << 20) : NULL;
	int rc = buf ? 0 : woom(w);
	for (uint64_t at = s->rec_moff + s->rec_len; !rc && at < s->meta_stored;) {
		size_t k = s->meta_stored - at < ((uint64_t)1 << 20) ? (size_t)(s->meta_stored - at) : (size_t)1 << 20;
		rc = qtk_pread_full(s->f.fd, s->f.tmp_path, buf, k, QPK_HEADER_SIZE + at, w->err);
		if (!rc && EVP_DigestUpdate(c, buf, k) != 1)
			rc = woom(w);
		at += k;
	}
	unsigned len = 0;
	if (!rc && (EVP_DigestFinal_ex(c, s->hdr + 40, &len) != 1 || len != 32))
		rc = woom(w);
	EVP_MD_CTX_free(c);
	qtk_free(buf);
	return rc ? rc : qtk_ofile_write_at(&s->f, 0, s->hdr, QPK_HEADER_SIZE);
}

static void qpk_w_abort(qtk_writer *w)
{
	qw *s = w->priv;
	if (!s)
		return;
	EVP_MD_CTX_free(s->rec_pre);
	EVP_MD_CTX_free(s->rec_c);
	zring_end(s);
	qtk_ofile_abort(&s->f);
	qtk_free(s->parts);
	qtk_free(s->pfirst);
	qtk_free(s->chunks);
	qtk_free(s->g.cnt);
	ZSTD_freeCCtx(s->cc);
	for (size_t i = 0; i < s->nmd; i++)
		EVP_MD_CTX_free(s->mds[i]);
	qtk_free(s->mds);
	qtk_free(s->mfree);
	qtk_free(s);
	w->priv = NULL;
}

static int qpk_w_finish_free(qtk_writer *w)
{
	int rc = qpk_w_finish(w);
	if (!rc)
		qpk_w_abort(w); /* committed: this only frees */
	return rc;
}

const qtk_writer_ops qtk_qpk_writer_ops = {
	.begin = qpk_w_begin,
	.part_begin = qpk_w_part_begin,
	.put = qpk_w_put,
	.put_file = qpk_w_put_file,
	.finish = qpk_w_finish_free,
	.abort = qpk_w_abort,
	.patch_header = qpk_w_patch,
	.record_piece = qpk_w_record_piece,
	.record_end = qpk_w_record_end,
	.record_gen = true,
};
