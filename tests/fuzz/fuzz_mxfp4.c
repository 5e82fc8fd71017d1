/* fuzz_mxfp4.c - gpt-oss MXFP4 experts (quant_method "mxfp4": <prefix>_blocks and
 * <prefix>_scales, modules_to_not_convert; src/scheme/mxfp4.c). Input: fuzz.h,
 * "Scheme targets". */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_scheme_run(data, size);
	return 0;
}
