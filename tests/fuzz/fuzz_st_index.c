/* fuzz_st_index.c - sharded safetensors: model.safetensors.index.json plus its
 * shards as further sections, through qtk_open and the whole read path. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path;
	fz_materialize(data, size, "model.safetensors.index.json", &path);
	fz_open_and_exercise(path);
	fz_clear();
	return 0;
}
