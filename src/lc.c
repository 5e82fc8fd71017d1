/* lc.c - loading libcrypto on first use (lc.h says why). */
#define QTK_LC_IMPL
#include "lc.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef QTK_LC_SONAME
#define QTK_LC_SONAME "libcrypto.so.3"
#endif

static qtk_lc_api lc;
static pthread_once_t lc_once = PTHREAD_ONCE_INIT;

/* May run on any thread (a pool worker's first digest): no atexit handlers or stdio flushing
 * while other threads go on, so the message is flushed and the process ends at once. */
static _Noreturn void lc_die(void)
{
	fflush(stderr);
	_exit(127);
}

static void lc_open(void)
{
	void *h = dlopen(QTK_LC_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		fprintf(stderr, "qtk: cannot load %s (OpenSSL's libcrypto, for SHA-256 and signatures): %s\n",
		        QTK_LC_SONAME, e ? e : "unknown error");
		lc_die();
	}
	/* dlsym gives a data pointer; POSIX guarantees it converts to the function's */
#define QTK_LC_GET(f)                                                                              \
	{                                                                                              \
		void *p = dlsym(h, #f);                                                                    \
		if (!p) {                                                                                  \
			fprintf(stderr, "qtk: %s has no %s: libcrypto 3 is needed\n", QTK_LC_SONAME, #f);      \
			lc_die();                                                                              \
		}                                                                                          \
		memcpy(&lc.f, &p, sizeof p);                                                               \
	}
	QTK_LC_SYMS(QTK_LC_GET)
#undef QTK_LC_GET
}

const qtk_lc_api *qtk_lc(void)
{
	pthread_once(&lc_once, lc_open);
	return &lc;
}
