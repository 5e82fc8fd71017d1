/* fuzz_archive.c - archives (tar, tar.gz, tar.zst, zip; detected from content) holding a
 * model, through qtk_open and the whole read path.
 *
 * tar headers carry a checksum that both qtk's probe and libarchive verify, so most mutations
 * of a header would stop there. Unless the input's size is a multiple of 7, the target first
 * recomputes the checksum of every 512-byte block that carries the "ustar" magic, so
 * mutations reach the member checks behind it; the other inputs exercise the checksum test. */
#include "fuzz.h"
#include <stdlib.h>
#include <string.h>

static void fix_tar_checksums(uint8_t *b, size_t n)
{
	for (size_t at = 0; at + 512 <= n; at += 512) {
		uint8_t *h = b + at;
		if (memcmp(h + 257, "ustar", 5) != 0)
			continue;
		unsigned sum = 0;
		for (size_t i = 0; i < 512; i++)
			sum += (i >= 148 && i < 156) ? (unsigned)' ' : h[i];
		for (int i = 5; i >= 0; i--) { /* six octal digits, NUL, space */
			h[148 + i] = (uint8_t)('0' + (sum & 7));
			sum >>= 3;
		}
		h[154] = 0;
		h[155] = ' ';
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path;
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	if (size % 7 != 0)
		fix_tar_checksums(copy, size);
	fz_materialize(copy, size, "model.tar", &path);
	free(copy);
	fz_open_and_exercise(path);
	fz_clear();
	return 0;
}
