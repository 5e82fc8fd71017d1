/* alloc.c - allocation wrappers; tests can make the Nth allocation fail. */
#include "qtk.h"
#include <stdatomic.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

void qtk_mem_release(void)
{
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}

/* Tables. From TABLE_MAP bytes up a table has a mapping of its own, aligned to 2 MiB and advised
 * for transparent huge pages, so filling it costs one page fault per 2 MiB instead of one per
 * 4 KiB where the kernel allows that (madvise mode). A page fault is most of what a header-only
 * run does in a virtual machine: ~11 us each on the machine this was measured on, a thousand
 * tensor descriptions ~240 of them. Tables under 128 KiB come from malloc. A header before the
 * table holds the mapping's length (0: malloc'd). Growing copies the used bytes only: the
 * room beyond them is never touched, so never faulted in. */
#define TABLE_HDR 64
#define TABLE_MAP ((size_t)128 << 10)
#define TABLE_ALIGN ((size_t)2 << 20)

static void table_unmap(void *p)
{
	uint8_t *h = (uint8_t *)p - TABLE_HDR;
	size_t len;
	memcpy(&len, h, sizeof len);
	if (len)
		munmap(h, len);
	else
		free(h);
}

void *qtk_table_realloc(void *p, size_t used, size_t n)
{
	if (should_fail())
		return NULL;
	note(n);
	if (n > SIZE_MAX - TABLE_HDR - 2 * TABLE_ALIGN)
		return NULL;
	uint8_t *h = NULL;
	size_t len = 0;
	if (n + TABLE_HDR < TABLE_MAP) {
		h = malloc(n + TABLE_HDR);
	} else {
		len = (n + TABLE_HDR + TABLE_ALIGN - 1) & ~(TABLE_ALIGN - 1);
		uint8_t *r = mmap(NULL, len + TABLE_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (r == MAP_FAILED)
			return NULL;
		h = (uint8_t *)(((uintptr_t)r + TABLE_ALIGN - 1) & ~(uintptr_t)(TABLE_ALIGN - 1));
		if (h > r)
			munmap(r, (size_t)(h - r));
		if (h + len < r + len + TABLE_ALIGN)
			munmap(h + len, (size_t)(r + len + TABLE_ALIGN - (h + len)));
#ifdef MADV_HUGEPAGE
		madvise(h, len, MADV_HUGEPAGE); /* advice: without it, ordinary pages */
#endif
	}
	if (!h)
		return NULL;
	memcpy(h, &len, sizeof len);
	if (p) {
		memcpy(h + TABLE_HDR, p, used < n ? used : n);
		table_unmap(p);
	}
	return h + TABLE_HDR;
}

void qtk_table_free(void *p)
{
	if (p)
		table_unmap(p);
}
