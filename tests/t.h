/* t.h - the test harness: CHECK counts, T_DONE prints "N passed, N failed". */
#ifndef QTK_T_H
#define QTK_T_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_pass, t_fail;

#define CHECK(cond, ...)                                                        \
	do {                                                                    \
		if (cond) {                                                     \
			t_pass++;                                               \
		} else {                                                        \
			t_fail++;                                               \
			printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);  \
			printf(__VA_ARGS__);                                    \
			printf("\n");                                           \
		}                                                               \
	} while (0)

/* The tests' pseudo-random source: xorshift64 (13, 7, 17), advancing *s. */
static inline uint64_t t_xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

#define T_DONE() (printf("%d passed, %d failed\n", t_pass, t_fail), fflush(stdout), t_fail ? 1 : 0)

/* Fixture root: $QTK_FIXTURES or ../shared/fixtures; NULL when absent. */
static inline const char *t_fixtures(void)
{
	const char *e = getenv("QTK_FIXTURES");
	static const char def[] = "../shared/fixtures";
	const char *p = e && *e ? e : def;
	FILE *f;
	char probe[1024];
	snprintf(probe, sizeof probe, "%s/README.md", p);
	f = fopen(probe, "r");
	if (!f)
		return NULL;
	fclose(f);
	return p;
}

#define T_SKIP(why) printf("skipped: %s\n", why)

/* Make the temporary directory tmpl ("...XXXXXX", rewritten in place) and generate the
 * project's samples into it with $QTK_BUILD/samples/gen (default build/); a failed generator
 * counts as a failed check. -1 when the directory could not be made, else 0. */
static inline int t_samples(char *tmpl)
{
	if (!mkdtemp(tmpl)) {
		CHECK(0, "mkdtemp");
		return -1;
	}
	const char *b = getenv("QTK_BUILD");
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "%s/samples/gen %s >/dev/null", b && *b ? b : "build", tmpl);
	CHECK(system(cmd) == 0, "sample generator: %s", cmd);
	return 0;
}
#endif
