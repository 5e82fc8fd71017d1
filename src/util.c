/* util.c - small helpers: capped growable buffers, UTF-8, parsing. */
#include "internal.h"
#include "text.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define BUF_CAP ((size_t)1 << 34)

/* Room for more bytes and the NUL: doubling (appends), or exactly (a known length). */
static int buf_grow(qtk_buf *b, size_t more, bool exact)
{
	if (b->failed)
		return QTK_E_IO;
	if (more > BUF_CAP - b->len) {
		b->failed = 1;
		return QTK_E_IO;
	}
	size_t need = b->len + more + 1;
	if (need <= b->cap)
		return 0;
	if (b->flush && b->len) {
		if (qtk_buf_flush(b))
			return QTK_E_IO;
		if ((need = more + 1) <= b->cap)
			return 0;
	}
	if (b->fixed) {
		b->failed = 1;
		return QTK_E_IO;
	}
	size_t nc = exact ? need : b->cap ? b->cap : 256;
	while (nc < need)
		nc *= 2;
	uint8_t *p = qtk_realloc(b->p, nc);
	if (!p) {
		b->failed = 1;
		return QTK_E_IO;
	}
	b->p = p;
	b->cap = nc;
	return 0;
}

static int buf_reserve(qtk_buf *b, size_t more) { return buf_grow(b, more, false); }

/* n bytes handed to b's flush (a failure sticks). */
static int hand_on(qtk_buf *b, const void *p, size_t n)
{
	if (b->flush(b->flush_ctx, p, n)) {
		b->failed = 1;
		return QTK_E_IO;
	}
	b->flushed += n;
	return 0;
}

int qtk_buf_flush(qtk_buf *b)
{
	if (b->failed)
		return QTK_E_IO;
	if (!b->flush || !b->len || hand_on(b, b->p, b->len))
		return b->failed ? QTK_E_IO : 0;
	b->len = 0;
	return 0;
}

int qtk_buf_reserve(qtk_buf *b, size_t n) { return buf_grow(b, n, true); }

int qtk_buf_put(qtk_buf *b, const void *d, size_t n)
{
	if (b->flush && !b->failed && b->len + n + 1 > b->cap) {
		if (qtk_buf_flush(b))
			return QTK_E_IO;
		if (n + 1 > b->cap) /* larger than the buffer: handed on as it is, not copied */
			return hand_on(b, d, n);
	}
	if (buf_reserve(b, n))
		return QTK_E_IO;
	if (n)
		memcpy(b->p + b->len, d, n);
	b->len += n;
	b->p[b->len] = 0;
	return 0;
}

int qtk_buf_putc(qtk_buf *b, char c) { return qtk_buf_put(b, &c, 1); }
int qtk_buf_puts(qtk_buf *b, const char *s) { return qtk_buf_put(b, s, strlen(s)); }

int qtk_buf_printf(qtk_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || buf_reserve(b, (size_t)n))
		return QTK_E_IO;
	va_start(ap, fmt);
	vsnprintf((char *)b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

void qtk_buf_free(qtk_buf *b)
{
	qtk_free(b->p);
	memset(b, 0, sizeof *b);
}

bool qtk_utf8_valid(const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		if ((unsigned char)s[i] < 0x80) {
			i++;
			continue;
		}
		uint32_t cp;
		int k = qtk_utf8_decode(s + i, n - i, &cp);
		if (!k)
			return false;
		i += (size_t)k;
	}
	return true;
}

int qtk_strcasecmp(const char *a, const char *b)
{
	for (;; a++, b++) {
		int x = (unsigned char)*a, y = (unsigned char)*b;
		if (x >= 'A' && x <= 'Z') x += 32;
		if (y >= 'A' && y <= 'Z') y += 32;
		if (x != y || !x)
			return x - y;
	}
}

bool qtk_parse_u64(const char *s, uint64_t *out)
{
	if (!*s)
		return false;
	uint64_t v = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		if (!qtk_mul_u64(v, 10, &v) || !qtk_add_u64(v, (uint64_t)(*s - '0'), &v))
			return false;
	}
	*out = v;
	return true;
}

/* ---- keyed string hashing, string set and string map -------------------- */

atomic_size_t qtk_lookup_steps;

static pthread_once_t hash_once = PTHREAD_ONCE_INIT;
static uint64_t hash_k0 = 0x0706050403020100ull, hash_k1 = 0x0f0e0d0c0b0a0908ull;

static void hash_seed(void)
{
	uint64_t k[2];
	if (getrandom(k, sizeof k, GRND_NONBLOCK) == (ssize_t)sizeof k) {
		hash_k0 = k[0];
		hash_k1 = k[1];
	} else { /* no entropy yet: the clock and an address still vary per process */
		hash_k0 ^= (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
		hash_k1 ^= (uint64_t)(uintptr_t)&hash_k0;
	}
}

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                         \
	do {                                                                             \
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                   \
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                   \
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                \
	} while (0)

/* SipHash-1-3 under the process key. */
uint64_t qtk_str_hash(const void *s, size_t n)
{
	pthread_once(&hash_once, hash_seed);
	const uint8_t *p = s;
	uint64_t v0 = hash_k0 ^ 0x736f6d6570736575ull, v1 = hash_k1 ^ 0x646f72616e646f6dull;
	uint64_t v2 = hash_k0 ^ 0x6c7967656e657261ull, v3 = hash_k1 ^ 0x7465646279746573ull;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w = qtk_rd64(p + i);
		v3 ^= w;
		SIPROUND;
		v0 ^= w;
	}
	uint64_t b = (uint64_t)n << 56;
	for (size_t k = 0; i + k < n; k++)
		b |= (uint64_t)p[i + k] << (8 * k);
	v3 ^= b;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}
#undef SIPROUND
#undef ROTL

int qtk_strset_add(qtk_strset *set, const char *s)
{
	if ((set->n + 1) * 2 > set->cap) {
		size_t nc = set->cap ? set->cap * 2 : 64;
		const char **ns = qtk_calloc(nc, sizeof *ns);
		if (!ns)
			return QTK_E_IO;
		for (size_t i = 0; i < set->cap; i++) {
			if (!set->slots[i])
				continue;
			size_t j = (size_t)qtk_str_hash(set->slots[i], strlen(set->slots[i])) & (nc - 1);
			while (ns[j])
				j = (j + 1) & (nc - 1);
			ns[j] = set->slots[i];
		}
		qtk_free(set->slots);
		set->slots = ns;
		set->cap = nc;
	}
	size_t j = (size_t)qtk_str_hash(s, strlen(s)) & (set->cap - 1);
	while (set->slots[j]) {
		atomic_fetch_add_explicit(&qtk_lookup_steps, 1, memory_order_relaxed);
		if (strcmp(set->slots[j], s) == 0)
			return 0;
		j = (j + 1) & (set->cap - 1);
	}
	set->slots[j] = s;
	set->n++;
	return 1;
}

void qtk_strset_free(qtk_strset *set)
{
	qtk_free(set->slots);
	memset(set, 0, sizeof *set);
}

static int strmap_rehash(qtk_strmap *map, size_t nc)
{
	qtk_strmap_slot *ns = qtk_calloc(nc, sizeof *ns);
	if (!ns)
		return QTK_E_IO;
	for (size_t i = 0; i < map->cap; i++) {
		if (!map->slots[i].key)
			continue;
		size_t j = (size_t)qtk_str_hash(map->slots[i].key, strlen(map->slots[i].key)) & (nc - 1);
		while (ns[j].key)
			j = (j + 1) & (nc - 1);
		ns[j] = map->slots[i];
	}
	qtk_free(map->slots);
	map->slots = ns;
	map->cap = nc;
	return 0;
}

int qtk_strmap_reserve(qtk_strmap *map, size_t n)
{
	if (n > SIZE_MAX / 4 || (n + 1) * 2 <= map->cap)
		return 0;
	size_t nc = map->cap ? map->cap : 64;
	while ((n + 1) * 2 > nc)
		nc *= 2;
	return strmap_rehash(map, nc);
}

int qtk_strmap_put(qtk_strmap *map, const char *key, size_t val, size_t *old)
{
	if ((map->n + 1) * 2 > map->cap && strmap_rehash(map, map->cap ? map->cap * 2 : 64))
		return QTK_E_IO;
	size_t j = (size_t)qtk_str_hash(key, strlen(key)) & (map->cap - 1);
	while (map->slots[j].key) {
		atomic_fetch_add_explicit(&qtk_lookup_steps, 1, memory_order_relaxed);
		if (strcmp(map->slots[j].key, key) == 0) {
			if (old)
				*old = map->slots[j].val;
			return 0;
		}
		j = (j + 1) & (map->cap - 1);
	}
	map->slots[j].key = key;
	map->slots[j].val = val;
	map->n++;
	return 1;
}

bool qtk_strmap_get(const qtk_strmap *map, const char *key, size_t *val)
{
	if (!map->cap)
		return false;
	size_t j = (size_t)qtk_str_hash(key, strlen(key)) & (map->cap - 1);
	while (map->slots[j].key) {
		atomic_fetch_add_explicit(&qtk_lookup_steps, 1, memory_order_relaxed);
		if (strcmp(map->slots[j].key, key) == 0) {
			*val = map->slots[j].val;
			return true;
		}
		j = (j + 1) & (map->cap - 1);
	}
	return false;
}

void qtk_strmap_free(qtk_strmap *map)
{
	qtk_free(map->slots);
	memset(map, 0, sizeof *map);
}

/* The interned copies: an index over them and the copies, kept until exit. */
static pthread_mutex_t intern_mu = PTHREAD_MUTEX_INITIALIZER;
static qtk_strmap intern_map;
static char **interned;
static size_t ninterned, cap_interned;

const char *qtk_intern(const char *s)
{
	const char *r = NULL;
	size_t k;
	pthread_mutex_lock(&intern_mu);
	if (qtk_strmap_get(&intern_map, s, &k)) {
		r = interned[k];
	} else {
		if (ninterned == cap_interned) {
			const size_t nc = cap_interned ? 2 * cap_interned : 16;
			char **n = qtk_realloc(interned, nc * sizeof *n);
			if (n) {
				interned = n;
				cap_interned = nc;
			}
		}
		char *c = ninterned < cap_interned ? qtk_strdup(s) : NULL;
		if (c && qtk_strmap_put(&intern_map, c, ninterned, NULL) == 1)
			r = interned[ninterned++] = c;
		else
			qtk_free(c);
	}
	pthread_mutex_unlock(&intern_mu);
	return r;
}

void qtk_shape_text(char *b, size_t n, int nd, const uint64_t *shape)
{
	if (!n)
		return;
	size_t k = (size_t)snprintf(b, n, "[");
	for (int d = 0; d < nd && k < n; d++)
		k += (size_t)snprintf(b + k, n - k, "%s%llu", d ? ", " : "", (unsigned long long)shape[d]);
	if (k < n)
		snprintf(b + k, n - k, "]");
}

int qtk_why(char *why, size_t wn, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, wn, fmt, ap);
	va_end(ap);
	return QTK_E_DATA;
}

bool qtk_str_ends(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && memcmp(s + a - b, suf, b) == 0;
}
