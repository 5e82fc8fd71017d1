/* fuzz_bnb.c - bitsandbytes 4-bit (NF4/FP4: absmax, quant_map, nested absmax and quant map,
 * the quant_state JSON part; src/scheme/bnb.c) and LLM.int8 (SCB, weight_format;
 * src/scheme/bnb8.c). Input: fuzz.h, "Scheme targets". */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_scheme_run(data, size);
	return 0;
}
