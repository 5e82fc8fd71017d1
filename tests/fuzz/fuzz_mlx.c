/* fuzz_mlx.c - MLX affine quantization (config.json "quantization": group_size, bits and
 * per-module overrides; src/scheme/mlx.c, fold.c). Input: fuzz.h, "Scheme targets". */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_scheme_run(data, size);
	return 0;
}
