/* alloc.c - allocation wrappers; tests can make the Nth allocation fail. */
#include "qtk.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Test hook: the largest single request seen since the hook was last reset. */
static atomic_size_t max_req;
size_t qtk_test_max_alloc(bool reset) { return reset ? atomic_exchange(&max_req, 0) : atomic_load(&max_req); }

static void note(size_t n)
{
	size_t m = atomic_load_explicit(&max_req, memory_order_relaxed);
	while (n > m && !atomic_compare_exchange_weak_explicit(&max_req, &m, n, memory_order_relaxed,
							       memory_order_relaxed))
		;
}

static long fail_at; /* 0: never; else countdown to the failing call */

void qtk_test_fail_alloc_at(long n) { fail_at = n; }

static bool should_fail(void)
{
	if (fail_at <= 0)
		return false;
	if (--fail_at == 0)
		return true;
	return false;
}

void *qtk_malloc(size_t n)
{
	if (should_fail())
		return NULL;
	note(n);
	return malloc(n ? n : 1);
}

void *qtk_calloc(size_t a, size_t b)
{
	if (should_fail())
		return NULL;
	note(b && a > SIZE_MAX / b ? SIZE_MAX : a * b);
	return calloc(a ? a : 1, b ? b : 1);
}

void *qtk_realloc(void *p, size_t n)
{
	if (should_fail())
		return NULL;
	note(n);
	return realloc(p, n ? n : 1);
}

char *qtk_strndup(const char *s, size_t n)
{
	char *d = qtk_malloc(n + 1);
	if (!d)
		return NULL;
	memcpy(d, s, n);
	d[n] = 0;
	return d;
}

char *qtk_strdup(const char *s) { return qtk_strndup(s, strlen(s)); }

void qtk_free(void *p) { free(p); }
