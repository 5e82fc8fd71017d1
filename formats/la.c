/* la.c - loading libarchive on first use (la.h says why). */
#define QTK_LA_IMPL
#include "la.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#ifndef QTK_LA_SONAME
#define QTK_LA_SONAME "libarchive.so.13"
#endif

qtk_la_api qtk_la;

static pthread_once_t la_once = PTHREAD_ONCE_INIT;
static int la_rc = -1;
static char la_msg[300];

static void la_open(void)
{
	void *h = dlopen(QTK_LA_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(la_msg, sizeof la_msg, "archives need libarchive (%s), which cannot be loaded: %s",
		         QTK_LA_SONAME, e ? e : "unknown error");
		return;
	}
	/* dlsym gives a data pointer; POSIX guarantees it converts to the function's */
#define QTK_LA_GET(f)                                                                              \
	{                                                                                              \
		void *p = dlsym(h, #f);                                                                    \
		if (!p) {                                                                                  \
			snprintf(la_msg, sizeof la_msg, "%s has no %s: too old a libarchive", QTK_LA_SONAME, #f); \
			return;                                                                                \
		}                                                                                          \
		memcpy(&qtk_la.f, &p, sizeof p);                                                           \
	}
	QTK_LA_SYMS(QTK_LA_GET)
#undef QTK_LA_GET
	la_rc = 0;
}

int qtk_la_load(void)
{
	pthread_once(&la_once, la_open);
	return la_rc;
}

const char *qtk_la_error(void)
{
	return la_rc == 0 ? "" : la_msg;
}
