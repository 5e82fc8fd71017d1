/* fuzz_ct.c - compressed-tensors (quant_method "compressed-tensors": config_groups, targets,
 * ignore, format; pack-quantized, int/naive-quantized, float-quantized FP8,
 * nvfp4-pack-quantized), DeepSeek block FP8 ("fp8": weight_scale_inv) and ModelOpt NVFP4
 * ("modelopt": weight_scale_2) in src/scheme/ct.c. Input: fuzz.h, "Scheme targets". */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_scheme_run(data, size);
	return 0;
}
