/* fuzz_hfdir.c - Hugging Face directory: config.json (with quantization_config)
 * first, then model.safetensors / quantize_config.json / quant_config.json /
 * index and shards / tokenizer files as further sections; the directory is
 * opened with qtk_open (AWQ/GPTQ folding, side files) and read. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path;
	fz_materialize(data, size, "config.json", &path);
	fz_open_and_exercise(fz_indir());
	fz_clear();
	return 0;
}
