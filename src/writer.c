/* writer.c - output kind selection and the streaming writer front end. */
#include "internal.h"
#include <pthread.h>
#include <string.h>

/* ---- the asynchronous tee (opts.tee_async) ----
 * The bytes of every put are copied into a FIFO that one thread hands to the tee in order, so
 * the tee (content digests: hashing, decoding) overlaps the caller's next compute and I/O.
 * The tee sees exactly the bytes and order it would see synchronously. */
#define TEEQ_CAP ((size_t)8 << 20)   /* bytes queued at most */
#define TEEQ_PIECE ((size_t)2 << 20) /* a put is queued in pieces of at most this */

typedef struct teeq_item {
	struct teeq_item *next;
	size_t tensor, n;
	int refs;          /* consumers that have not seen it yet */
	bool full;         /* room for TEEQ_PIECE bytes: kept for reuse */
	uint8_t data[];
} teeq_item;

/* One or two consumers (opts.tee, opts.tee2), each on its own thread with its own cursor into
 * the one FIFO; an item is freed when the last consumer is done with it. Both take items in
 * order, so the item whose count reaches zero is always the head. */
typedef struct teeq_cons {
	pthread_t th;
	struct qtk_teeq *q;
	teeq_item *cur;    /* next item this consumer has not seen; NULL: none queued */
	bool busy, live;
	int rc;            /* this consumer's first failure */
	int (*tee)(void *ctx, size_t tensor, const void *buf, size_t n);
	void *ctx;
	qtk_err *err;
} teeq_cons;

struct qtk_teeq {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* items queued, items done, or stop */
	teeq_item *head, *tail;
	size_t bytes;      /* queued, not yet seen by every consumer */
	bool stop;
	int ncons;
	teeq_cons c[2];
	teeq_item *spare;  /* freed items of TEEQ_PIECE bytes, reused: no fresh pages per put */
	int nspare;
};

#define TEEQ_SPARE 6

/* Give an item back (call with q->mu held). */
static void teeq_release(struct qtk_teeq *q, teeq_item *it)
{
	if (it->full && q->nspare < TEEQ_SPARE) {
		it->next = q->spare;
		q->spare = it;
		q->nspare++;
	} else {
		qtk_free(it);
	}
}

static int teeq_rc(const struct qtk_teeq *q)
{
	for (int i = 0; i < q->ncons; i++)
		if (q->c[i].rc)
			return q->c[i].rc;
	return 0;
}

static void *teeq_main(void *arg)
{
	teeq_cons *c = arg;
	struct qtk_teeq *q = c->q;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		while (!c->cur && !q->stop)
			pthread_cond_wait(&q->cv, &q->mu);
		if (!c->cur)
			break;
		teeq_item *it = c->cur;
		c->busy = true;
		int rc = 0;
		bool failed = teeq_rc(q) != 0; /* after a failure items are only released */
		pthread_mutex_unlock(&q->mu);
		if (!failed)
			rc = c->tee(c->ctx, it->tensor, it->data, it->n);
		pthread_mutex_lock(&q->mu);
		c->cur = it->next;
		c->busy = false;
		if (rc && !c->rc)
			c->rc = rc;
		if (--it->refs == 0) { /* the head: every consumer has seen all items before it */
			q->head = it->next;
			if (!q->head)
				q->tail = NULL;
			q->bytes -= it->n;
			teeq_release(q, it);
		}
		pthread_cond_broadcast(&q->cv);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

/* The tee's failure (its message copied into the writer's error). Call with q->mu held. */
static int teeq_failed(qtk_writer *w, struct qtk_teeq *q)
{
	for (int i = 0; i < q->ncons; i++)
		if (q->c[i].rc) {
			if (q->c[i].err && q->c[i].err != w->err)
				*w->err = *q->c[i].err;
			return q->c[i].rc;
		}
	return 0;
}

static int teeq_push_piece(qtk_writer *w, size_t tensor, const void *buf, size_t n)
{
	struct qtk_teeq *q = w->teeq;
	teeq_item *it = NULL;
	const bool full = n >= TEEQ_PIECE / 8; /* small pieces: exactly their size, not kept */
	if (full) {
		pthread_mutex_lock(&q->mu);
		if (q->spare) {
			it = q->spare;
			q->spare = it->next;
			q->nspare--;
		}
		pthread_mutex_unlock(&q->mu);
	}
	if (!it)
		it = qtk_malloc(sizeof *it + (full ? TEEQ_PIECE : n));
	if (!it)
		return qtk_err_set(w->err, QTK_E_IO, w->path, -1, NULL, "out of memory");
	it->full = full;
	it->next = NULL;
	it->tensor = tensor;
	it->n = n;
	it->refs = q->ncons;
	memcpy(it->data, buf, n);
	pthread_mutex_lock(&q->mu);
	while (!teeq_rc(q) && q->bytes && q->bytes + n > TEEQ_CAP)
		pthread_cond_wait(&q->cv, &q->mu);
	int rc = teeq_failed(w, q);
	if (rc) {
		teeq_release(q, it);
		pthread_mutex_unlock(&q->mu);
		return rc;
	}
	if (q->tail)
		q->tail->next = it;
	else
		q->head = it;
	q->tail = it;
	for (int i = 0; i < q->ncons; i++)
		if (!q->c[i].cur)
			q->c[i].cur = it;
	q->bytes += n;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	return 0;
}

static int teeq_push(qtk_writer *w, size_t tensor, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	int rc = 0;
	while (n && !rc) {
		size_t k = n < TEEQ_PIECE ? n : TEEQ_PIECE;
		rc = teeq_push_piece(w, tensor, p, k);
		p += k;
		n -= k;
	}
	return rc;
}

int qtk_writer_scratch(const qtk_writer *w, qtk_err *err)
{
	return qtk_scratch_open(w->path, err);
}

int qtk_writer_drain(qtk_writer *w)
{
	const int arc = qtk_writer_put_pending(w);
	if (arc)
		return arc;
	struct qtk_teeq *q = w->teeq;
	if (!q)
		return 0;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		bool busy = q->head != NULL;
		for (int i = 0; i < q->ncons; i++)
			busy = busy || q->c[i].busy;
		if (!busy)
			break;
		pthread_cond_wait(&q->cv, &q->mu);
	}
	int rc = teeq_failed(w, q);
	pthread_mutex_unlock(&q->mu);
	return rc;
}

/* Stop the threads (after the queue has run dry) and free the queue. */
static void teeq_end(qtk_writer *w)
{
	struct qtk_teeq *q = w->teeq;
	if (!q)
		return;
	pthread_mutex_lock(&q->mu);
	q->stop = true;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	for (int i = 0; i < q->ncons; i++)
		if (q->c[i].live)
			pthread_join(q->c[i].th, NULL);
	while (q->head) { /* a consumer that never started: nothing else holds these */
		teeq_item *it = q->head;
		q->head = it->next;
		qtk_free(it);
	}
	while (q->spare) {
		teeq_item *it = q->spare;
		q->spare = it->next;
		qtk_free(it);
	}
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->cv);
	qtk_free(q);
	w->teeq = NULL;
}

static int teeq_start(qtk_writer *w)
{
	struct qtk_teeq *q = qtk_calloc(1, sizeof *q);
	if (!q)
		return qtk_err_set(w->err, QTK_E_IO, w->path, -1, NULL, "out of memory");
	q->ncons = w->opts.tee2 ? 2 : 1;
	q->c[0].tee = w->opts.tee;
	q->c[0].ctx = w->opts.tee_ctx;
	q->c[0].err = w->opts.tee_err;
	q->c[1].tee = w->opts.tee2;
	q->c[1].ctx = w->opts.tee2_ctx;
	q->c[1].err = w->opts.tee2_err;
	if (pthread_mutex_init(&q->mu, NULL)) {
		qtk_free(q);
		return qtk_err_set(w->err, QTK_E_IO, w->path, -1, NULL, "cannot start the digest thread");
	}
	if (pthread_cond_init(&q->cv, NULL)) {
		pthread_mutex_destroy(&q->mu);
		qtk_free(q);
		return qtk_err_set(w->err, QTK_E_IO, w->path, -1, NULL, "cannot start the digest thread");
	}
	w->teeq = q;
	for (int i = 0; i < q->ncons; i++) {
		q->c[i].q = q;
		if (pthread_create(&q->c[i].th, NULL, teeq_main, &q->c[i])) {
			teeq_end(w);
			return qtk_err_set(w->err, QTK_E_IO, w->path, -1, NULL, "cannot start the digest thread");
		}
		q->c[i].live = true;
	}
	return 0;
}

/* Move to the next part that has bytes; false when none are left. */
static bool seek_part(qtk_writer *w)
{
	const qtk_model *d = w->desc;
	while (w->cur_tensor < d->ntensors) {
		const qtk_tensor *t = &d->tensors[w->cur_tensor];
		if (w->cur_part < t->nparts) {
			w->cur_left = t->parts[w->cur_part].nbytes;
			return true;
		}
		w->cur_tensor++;
		w->cur_part = 0;
	}
	return false;
}

static int start_part(qtk_writer *w)
{
	while (seek_part(w)) {
		int rc = w->ops->part_begin ? w->ops->part_begin(w) : 0;
		if (rc || w->cur_left)
			return rc;
		w->cur_part++; /* empty part: nothing to wait for */
	}
	return 0;
}

qtk_writer *qtk_writer_open(const char *path, qtk_out_kind kind, const qtk_model *desc,
			    const qtk_write_opts *o, qtk_err *err)
{
	qtk_err_clear(err);
	const qtk_format *f = qtk_format_for_out(kind);
	if (!f) {
		qtk_err_set(err, QTK_E_USAGE, path, -1, NULL, "output format not supported yet");
		return NULL;
	}
	/* what the container cannot store is refused here, before a byte is written */
	for (size_t i = 0; i < desc->ntensors; i++)
		if (qtk_out_can_store(kind, &desc->tensors[i], true, path, NULL, err))
			return NULL;
	const qtk_writer_ops *ops = f->writer;
	qtk_writer *w = qtk_calloc(1, sizeof *w);
	if (!w || !(w->path = qtk_strdup(path))) {
		qtk_free(w);
		qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
		return NULL;
	}
	w->ops = ops;
	w->desc = desc;
	if (o)
		w->opts = *o;
	w->err = err;
	if (w->opts.record_gen && !ops->record_gen) {
		qtk_err_set(err, QTK_E_USAGE, path, -1, NULL, "this output kind cannot write a generated record");
		qtk_free(w->path);
		qtk_free(w);
		return NULL;
	}
	if (ops->begin(w) || (w->opts.tee && w->opts.tee_async && teeq_start(w)) || start_part(w)) {
		qtk_writer_abort(w);
		return NULL;
	}
	return w;
}

/* The tee's share of k bytes of the current part. */
static int tee_bytes(qtk_writer *w, const void *p, size_t k)
{
	if (w->teeq)
		return teeq_push(w, w->cur_tensor, p, k);
	if (w->opts.tee)
		return w->opts.tee(w->opts.tee_ctx, w->cur_tensor, p, k);
	return 0;
}

/* k bytes of the current part are written: on to the next part when it is complete. */
static int consumed(qtk_writer *w, uint64_t k)
{
	w->cur_left -= k;
	if (w->cur_left)
		return 0;
	w->cur_part++;
	return start_part(w);
}

/* qtk_writer_put's work, now or for a deferred put. */
static int put_now(qtk_writer *w, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	while (n) {
		if (w->cur_tensor >= w->desc->ntensors)
			return qtk_err_set(w->err, QTK_E_INTERNAL, w->path, -1, NULL, "more data than described");
		size_t k = n < w->cur_left ? n : (size_t)w->cur_left;
		int rc = k ? w->ops->put(w, p, k) : 0;
		rc = rc || !k ? rc : tee_bytes(w, p, k);
		rc = rc ? rc : consumed(w, k);
		if (rc)
			return rc;
		p += k;
		n -= k;
	}
	return 0;
}

/* ---- deferred puts (qtk_writer_put_later) ----
 * A put the caller hands over and that runs later: as one job of the caller's next parallel
 * loop (qtk_writer_put_pending), beside the encoding of the next window, or at the next call
 * on the writer. Puts run in the order given, one at a time, so the container and the tee see
 * the same calls, bytes and order as with qtk_writer_put. Two buffers alternate: the one being
 * filled is never the one waiting. */
struct qtk_wdefer {
	uint8_t *buf[2];
	size_t cap[2];
	int next;          /* the buffer qtk_writer_defer_buf hands out next */
	const uint8_t *jb; /* the put waiting; NULL: none */
	size_t jn;
	int rc;            /* a failed put's code (its message in the writer's error) */
};

int qtk_writer_put_pending(qtk_writer *w)
{
	struct qtk_wdefer *a = w->defer;
	if (!a)
		return 0;
	if (a->jb && !a->rc)
		a->rc = put_now(w, a->jb, a->jn);
	a->jb = NULL;
	return a->rc;
}

static void defer_end(qtk_writer *w)
{
	struct qtk_wdefer *a = w->defer;
	if (!a)
		return;
	qtk_free(a->buf[0]);
	qtk_free(a->buf[1]);
	qtk_free(a);
	w->defer = NULL;
}

int qtk_writer_defer_done(qtk_writer *w)
{
	const int rc = qtk_writer_put_pending(w);
	if (!rc) /* a failure stays, for the calls after */
		defer_end(w);
	return rc;
}

uint8_t *qtk_writer_defer_buf(qtk_writer *w, size_t n, qtk_err *err)
{
	if (!w->defer && !(w->defer = qtk_calloc(1, sizeof *w->defer))) {
		qtk_err_set(err, QTK_E_IO, w->path, -1, NULL, "out of memory");
		return NULL;
	}
	struct qtk_wdefer *a = w->defer;
	const int i = a->next;
	if (a->jb && a->jb == a->buf[i]) { /* only when the last one was not given back */
		const int rc = qtk_writer_put_pending(w);
		if (rc) {
			if (err != w->err)
				*err = *w->err;
			return NULL;
		}
	}
	if (a->cap[i] < n || !a->buf[i]) {
		qtk_free(a->buf[i]);
		a->cap[i] = 0;
		if (!(a->buf[i] = qtk_malloc(n ? n : 1))) {
			qtk_err_set(err, QTK_E_IO, w->path, -1, NULL, "out of memory");
			return NULL;
		}
		a->cap[i] = n;
	}
	a->next = 1 - i;
	return a->buf[i];
}

int qtk_writer_put_later(qtk_writer *w, const uint8_t *buf, size_t n)
{
	struct qtk_wdefer *a = w->defer;
	if (!a)
		return qtk_writer_put(w, buf, n);
	const int rc = qtk_writer_put_pending(w);
	if (rc)
		return rc;
	a->jb = buf;
	a->jn = n;
	return 0;
}

int qtk_writer_put(qtk_writer *w, const void *buf, size_t n)
{
	const int rc = qtk_writer_put_pending(w);
	return rc ? rc : put_now(w, buf, n);
}

int qtk_writer_put_file(qtk_writer *w, int fd, const char *path, uint64_t off, uint64_t n, void *back)
{
	const int arc = qtk_writer_put_pending(w);
	if (arc)
		return arc;
	const bool tee = w->teeq || w->opts.tee;
	if (!w->ops->put_file || (tee && !back))
		return 1;
	uint8_t *b = tee ? back : NULL;
	while (n) {
		if (w->cur_tensor >= w->desc->ntensors)
			return qtk_err_set(w->err, QTK_E_INTERNAL, w->path, -1, NULL, "more data than described");
		uint64_t k = n < w->cur_left ? n : w->cur_left;
		int rc = k ? w->ops->put_file(w, fd, path, off, k, b) : 0;
		/* the tee sees what the output holds: the bytes read back from it */
		rc = rc || !k || !b ? rc : tee_bytes(w, b, (size_t)k);
		rc = rc ? rc : consumed(w, k);
		if (rc)
			return rc;
		if (b)
			b += k;
		off += k;
		n -= k;
	}
	return 0;
}

int qtk_writer_patch_header(qtk_writer *w, int (*fn)(void *ctx, uint8_t *buf, size_t n), void *ctx)
{
	if (!w->ops->patch_header)
		return qtk_err_set(w->err, QTK_E_USAGE, w->path, -1, NULL, "this output kind cannot rewrite its header");
	int rc = qtk_writer_drain(w);
	return rc ? rc : w->ops->patch_header(w, fn, ctx);
}

typedef struct gen_put {
	qtk_writer *w;
	int (*put)(void *ctx, const uint8_t *p, size_t n);
	void *ctx;
	uint64_t n;
} gen_put;

static int gen_piece(void *c, const uint8_t *p, size_t n)
{
	gen_put *g = c;
	if (n > g->w->opts.record_len - g->n)
		return qtk_err_set(g->w->err, QTK_E_INTERNAL, g->w->path, -1, "qtk.provenance",
				   "the generated record is longer than its length");
	g->n += n;
	return g->put(g->ctx, p, n);
}

int qtk_writer_gen_record(qtk_writer *w, int (*put)(void *ctx, const uint8_t *p, size_t n), void *ctx)
{
	gen_put g = {w, put, ctx, 0};
	int rc = w->opts.record_gen(w->opts.record_ctx, gen_piece, &g);
	if (!rc && g.n != w->opts.record_len)
		rc = qtk_err_set(w->err, QTK_E_INTERNAL, w->path, -1, "qtk.provenance",
				 "the generated record is not its length");
	return rc;
}

bool qtk_writer_has_put_record(const qtk_writer *w) { return w && w->ops->record_piece && w->record_len; }

int qtk_writer_record_piece(qtk_writer *w, uint64_t at, const void *p, size_t n)
{
	if (!qtk_writer_has_put_record(w))
		return qtk_err_set(w->err, QTK_E_USAGE, w->path, -1, NULL, "this output cannot place its record");
	if (at > w->record_len || n > w->record_len - at)
		return qtk_err_set(w->err, QTK_E_INTERNAL, w->path, -1, "qtk.provenance",
				   "the record to place is longer than the reserved one");
	int rc = at ? 0 : qtk_writer_drain(w);
	return rc ? rc : w->ops->record_piece(w, at, p, n);
}

int qtk_writer_record_end(qtk_writer *w, uint64_t total)
{
	if (!qtk_writer_has_put_record(w))
		return qtk_err_set(w->err, QTK_E_USAGE, w->path, -1, NULL, "this output cannot place its record");
	if (total != w->record_len)
		return qtk_err_set(w->err, QTK_E_INTERNAL, w->path, -1, "qtk.provenance",
				   "the record to place is not the reserved one's length");
	return w->ops->record_end ? w->ops->record_end(w) : 0;
}

int qtk_writer_put_record(qtk_writer *w, const void *rec, size_t n)
{
	if (!qtk_writer_has_put_record(w))
		return qtk_err_set(w->err, QTK_E_USAGE, w->path, -1, NULL, "this output cannot place its record");
	if (n != w->record_len)
		return qtk_err_set(w->err, QTK_E_INTERNAL, w->path, -1, "qtk.provenance",
				   "the record to place is not the reserved one's length");
	int rc = qtk_writer_record_piece(w, 0, rec, n);
	return rc ? rc : qtk_writer_record_end(w, n);
}

int qtk_writer_finish(qtk_writer *w)
{
	int rc = qtk_writer_drain(w);
	defer_end(w);
	teeq_end(w);
	if (!rc && w->cur_tensor < w->desc->ntensors)
		rc = qtk_err_set(w->err, QTK_E_INTERNAL, w->path, -1, w->desc->tensors[w->cur_tensor].name,
				 "tensor data missing");
	else if (!rc)
		rc = w->ops->finish(w);
	if (rc) {
		qtk_writer_abort(w);
		return rc;
	}
	qtk_free(w->path);
	qtk_free(w);
	return 0;
}

void qtk_writer_abort(qtk_writer *w)
{
	if (!w)
		return;
	defer_end(w);
	teeq_end(w);
	if (w->ops && w->ops->abort)
		w->ops->abort(w);
	qtk_free(w->path);
	qtk_free(w);
}
