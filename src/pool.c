/* pool.c - run n independent jobs on up to nthreads threads.
 *
 * Jobs are handed out through an atomic counter; each job writes only its
 * own slot, so results never depend on the thread count or on timing.
 *
 * The helper threads persist between calls: a conversion runs one parallel loop per window of
 * every tensor (hundreds of loops of a few milliseconds each), and a thread created for each
 * loop started late (creation, then a new task's place at the back of the scheduler's queue
 * behind the file hash's thread), so the calling thread had done most of a small tensor's
 * chunks by the time its helper began. Helpers sleep on a condition variable between loops.
 * One loop at a time uses the pool; a loop started while another runs creates its own threads,
 * as before, and so does qtk_parallel_for_spawn (the record's source digests: one long loop
 * beside the conversion's many short ones, which should have the pool).
 */
#include "internal.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#define POOL_MAX 255

typedef struct pool_run {
	void (*fn)(void *ctx, size_t i);
	void *ctx;
	size_t n;
	atomic_size_t next;
} pool_run;

static void run_jobs(pool_run *r)
{
	for (;;) {
		size_t i = atomic_fetch_add(&r->next, 1);
		if (i >= r->n)
			break;
		r->fn(r->ctx, i);
	}
}

static void *spawned(void *arg)
{
	run_jobs(arg);
	return NULL;
}

/* The persistent helpers. A loop posts its run with the number of helpers it wants; a helper
 * that wakes takes one of those places (want) and counts itself active while it runs the
 * jobs. The loop's thread, done with the jobs itself, withdraws the places nobody took and
 * waits until no helper is active before its run (on its stack) goes away. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t work; /* a run was posted */
	pthread_cond_t idle; /* the last active helper finished */
	pool_run *run;
	int want;            /* places not yet taken */
	int active;          /* helpers running the current run's jobs */
	int threads;         /* helpers created */
	bool busy;           /* a loop owns the pool */
} g_pool = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0,
	     false };

static void *helper(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&g_pool.mu);
	for (;;) {
		while (!g_pool.want)
			pthread_cond_wait(&g_pool.work, &g_pool.mu);
		pool_run *r = g_pool.run;
		g_pool.want--;
		g_pool.active++;
		pthread_mutex_unlock(&g_pool.mu);
		run_jobs(r);
		pthread_mutex_lock(&g_pool.mu);
		if (--g_pool.active == 0)
			pthread_cond_signal(&g_pool.idle);
	}
	return NULL;
}

int qtk_cpu_count(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

/* The old way, for a loop that finds the pool owned by another: threads of its own. */
static void run_spawned(pool_run *r, int nthreads)
{
	pthread_t th[POOL_MAX];
	int started = 0;
	for (int t = 1; t < nthreads && t <= POOL_MAX; t++) {
		if (pthread_create(&th[started], NULL, spawned, r) != 0)
			break; /* fewer threads: same results, just slower */
		started++;
	}
	run_jobs(r);
	for (int t = 0; t < started; t++)
		pthread_join(th[t], NULL);
}

/* the threads a loop of n jobs can use: at least 1, at most n (0 for no jobs) */
static int loop_threads(int nthreads, size_t n)
{
	if (nthreads < 1)
		nthreads = 1;
	return (size_t)nthreads > n ? (int)n : nthreads;
}

void qtk_parallel_for_spawn(int nthreads, size_t n, void (*fn)(void *ctx, size_t i), void *ctx)
{
	pool_run r = {fn, ctx, n, 0};
	run_spawned(&r, loop_threads(nthreads, n));
}

void qtk_parallel_for(int nthreads, size_t n, void (*fn)(void *ctx, size_t i), void *ctx)
{
	pool_run r = {fn, ctx, n, 0};
	nthreads = loop_threads(nthreads, n);
	if (nthreads <= 1) {
		run_jobs(&r);
		return;
	}
	int helpers = nthreads - 1 > POOL_MAX ? POOL_MAX : nthreads - 1;
	pthread_mutex_lock(&g_pool.mu);
	if (g_pool.busy) {
		pthread_mutex_unlock(&g_pool.mu);
		run_spawned(&r, nthreads);
		return;
	}
	g_pool.busy = true;
	while (g_pool.threads < helpers) {
		pthread_t th;
		pthread_attr_t at;
		bool ok = pthread_attr_init(&at) == 0;
		if (ok) {
			ok = pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED) == 0 &&
			     pthread_create(&th, &at, helper, NULL) == 0;
			pthread_attr_destroy(&at);
		}
		if (!ok)
			break; /* fewer helpers: same results, just slower */
		g_pool.threads++;
	}
	if (helpers > g_pool.threads)
		helpers = g_pool.threads;
	g_pool.run = &r;
	g_pool.want = helpers;
	if (helpers)
		pthread_cond_broadcast(&g_pool.work);
	pthread_mutex_unlock(&g_pool.mu);

	run_jobs(&r);

	pthread_mutex_lock(&g_pool.mu);
	g_pool.want = 0; /* places not taken by now are not needed: every job has been handed out */
	while (g_pool.active)
		pthread_cond_wait(&g_pool.idle, &g_pool.mu);
	g_pool.run = NULL;
	g_pool.busy = false;
	pthread_mutex_unlock(&g_pool.mu);
}
