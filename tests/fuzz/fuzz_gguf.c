/* fuzz_gguf.c - GGUF reader (single files and split sets: name the sections
 * model-00001-of-00002.gguf ...), through qtk_open and the whole read path. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path;
	fz_materialize(data, size, "model.gguf", &path);
	fz_open_and_exercise(path);
	fz_clear();
	return 0;
}
