/* fuzz_qpk.c - QPK reader, through qtk_open, the whole read path and
 * qtk_qpk_verify_tensor.
 *
 * QPK covers its header, metadata and index with SHA-256 digests (formats/qpk.md §11), so
 * almost every mutation would stop at a digest check. Unless the input's size is a multiple
 * of 4, the target first recomputes Meta_SHA256, Index_SHA256 and Header_SHA256 from the
 * input's own offsets (where they lie inside the input), so mutations reach the parsers
 * behind the digests; the other inputs keep their digests and exercise the checks. */
#include "fuzz.h"
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

static void sha(const uint8_t *d, size_t n, uint8_t *out)
{
	unsigned len = 32;
	if (!EVP_Digest(d, n, out, &len, EVP_sha256(), NULL))
		abort();
}

static void fix_digests(uint8_t *b, size_t n)
{
	static const uint8_t magic[8] = {0x89, 'Q', 'P', 'K', '\r', '\n', 0x1a, '\n'};
	if (n < 256 || memcmp(b, magic, 8) != 0)
		return;
	uint8_t *tr = b + n - 128;
	uint64_t ms = qtk_rd64(b + 24), io = qtk_rd64(tr), is = qtk_rd64(tr + 8), end;
	if (ms <= n - 256)
		sha(b + 128, (size_t)ms, b + 40);
	if (qtk_add_u64(io, is, &end) && end <= n - 128)
		sha(b + io, (size_t)is, tr + 40);
	sha(b, 128, tr + 72);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path;
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	if (size % 4 != 0)
		fix_digests(copy, size);
	fz_materialize(copy, size, "model.qpk", &path);
	free(copy);
	fz_open_and_exercise(path);
	fz_clear();
	return 0;
}
