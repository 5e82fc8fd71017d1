/* fuzz_zst.c - zstd-compressed single model files, through qtk_open and the
 * whole read path. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path;
	fz_materialize(data, size, "model.gguf.zst", &path);
	fz_open_and_exercise(path);
	fz_clear();
	return 0;
}
