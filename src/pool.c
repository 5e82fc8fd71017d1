/* pool.c - run n independent jobs on up to nthreads threads.
 *
 * Jobs are handed out through an atomic counter; each job writes only its
 * own slot, so results never depend on the thread count or on timing.
 */
#include "internal.h"
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

typedef struct pool_run {
	void (*fn)(void *ctx, size_t i);
	void *ctx;
	size_t n;
	atomic_size_t next;
} pool_run;

static void *worker(void *arg)
{
	pool_run *r = arg;
	for (;;) {
		size_t i = atomic_fetch_add(&r->next, 1);
		if (i >= r->n)
			break;
		r->fn(r->ctx, i);
	}
	return NULL;
}

int qtk_cpu_count(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

void qtk_parallel_for(int nthreads, size_t n, void (*fn)(void *ctx, size_t i), void *ctx)
{
	pool_run r = {fn, ctx, n, 0};
	if (nthreads < 1)
		nthreads = 1;
	if ((size_t)nthreads > n)
		nthreads = (int)n;
	pthread_t th[256];
	int started = 0;
	for (int t = 1; t < nthreads && t < 256; t++) {
		if (pthread_create(&th[started], NULL, worker, &r) != 0)
			break; /* fewer threads: same results, just slower */
		started++;
	}
	worker(&r);
	for (int t = 0; t < started; t++)
		pthread_join(th[t], NULL);
}
