/* test_pool.c - qtk_parallel_for (src/pool.c): every job runs exactly once whatever the thread
 * count, for loops one after another (the persistent helpers), loops started from a job
 * (nested: the pool is owned, so the inner loop spawns its own threads), and loops started
 * from two threads at once (one owns the pool, the other spawns). A lost wakeup or a helper
 * left running on a finished loop's stack shows as a hang, a wrong count or (under the
 * sanitizers' builds) a report. qtk_parallel_for_spawn always uses threads of its own. */
#include "t.h"
#include "qtk_util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct {
	atomic_uint *hits; /* per job */
	size_t n;
	int inner_threads; /* > 0: each job runs an inner loop of inner_n jobs */
	size_t inner_n;
	atomic_ulong inner_total;
} loop_ctx;

static void job(void *ctx, size_t i);

static void inner_job(void *ctx, size_t i)
{
	(void)i;
	atomic_fetch_add((atomic_ulong *)ctx, 1);
}

static void job(void *ctx, size_t i)
{
	loop_ctx *c = ctx;
	atomic_fetch_add(&c->hits[i], 1);
	if (c->inner_threads)
		qtk_parallel_for(c->inner_threads, c->inner_n, inner_job, &c->inner_total);
}

typedef void (*loop_fn)(int nthreads, size_t n, void (*fn)(void *ctx, size_t i), void *ctx);

/* one loop of n jobs on nthreads through run: 1 when every job ran exactly once */
static int once_with(loop_fn run, int nthreads, size_t n, int inner_threads, size_t inner_n)
{
	loop_ctx c = { NULL, n, inner_threads, inner_n, 0 };
	c.hits = calloc(n ? n : 1, sizeof *c.hits);
	if (!c.hits)
		return 0;
	run(nthreads, n, job, &c);
	int ok = 1;
	for (size_t i = 0; i < n; i++)
		ok &= atomic_load(&c.hits[i]) == 1;
	if (inner_threads)
		ok &= atomic_load(&c.inner_total) == (unsigned long)n * inner_n;
	free(c.hits);
	return ok;
}

static int once(int nthreads, size_t n, int inner_threads, size_t inner_n)
{
	return once_with(qtk_parallel_for, nthreads, n, inner_threads, inner_n);
}

typedef struct {
	int loops, ok;
} racer;

static void *race(void *arg)
{
	racer *r = arg;
	r->ok = 1;
	for (int k = 0; k < r->loops; k++)
		r->ok &= once(3, (size_t)(k % 7) + 1, 0, 0);
	return NULL;
}

int main(void)
{
	static const size_t ns[] = { 0, 1, 2, 3, 17, 1000 };
	static const int ts[] = { 1, 2, 3, 8, 300 };
	for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
		for (size_t b = 0; b < sizeof ts / sizeof ts[0]; b++)
			CHECK(once(ts[b], ns[a], 0, 0), "%zu jobs on %d threads", ns[a], ts[b]);

	/* many short loops back to back: the helpers sleep and wake each time */
	int ok = 1;
	for (int k = 0; k < 5000 && ok; k++)
		ok = once(2 + k % 3, (size_t)(k % 5), 0, 0);
	CHECK(ok, "5000 short loops one after another");

	CHECK(once(3, 40, 2, 9), "loops started from the jobs of a loop (nested)");

	/* threads of its own (the record's digests), beside pool loops from another thread */
	{
		racer r = { 2000, 0 };
		pthread_t t;
		int st = pthread_create(&t, NULL, race, &r);
		int ok2 = 1;
		for (size_t n = 0; n < 300 && ok2; n += 7)
			ok2 = once_with(qtk_parallel_for_spawn, 1 + (int)(n % 4), n, 0, 0);
		if (!st)
			pthread_join(t, NULL);
		CHECK(!st && ok2 && r.ok, "qtk_parallel_for_spawn beside pool loops");
	}

	racer r1 = { 2000, 0 }, r2 = { 2000, 0 };
	pthread_t t1, t2;
	int s1 = pthread_create(&t1, NULL, race, &r1), s2 = pthread_create(&t2, NULL, race, &r2);
	if (!s1)
		pthread_join(t1, NULL);
	if (!s2)
		pthread_join(t2, NULL);
	CHECK(!s1 && !s2 && r1.ok && r2.ok, "2 x 2000 loops from two threads at once");
	return T_DONE();
}
