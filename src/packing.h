/* packing.h - the AWQ and GPTQ bit layouts, shared by the encoders (quant_awq.c), the decoder
 * (dequant_awq.c) and the exact repacks (scheme/qgroups.c). Internal. */
#ifndef QTK_PACKING_H
#define QTK_PACKING_H

#include <stddef.h>
#include <stdint.h>

/* AutoAWQ GEMM: column j (0..7) of an 8-column int32 word sits at this bit shift (AutoAWQ packs
 * the columns in the order 0, 2, 4, 6, 1, 3, 5, 7, so column j is nibble (j%2)*4 + j/2). */
static inline unsigned qtk_awq_shift(unsigned j)
{
    return 4u * ((j & 1u) * 4u + (j >> 1));
}

/* GPTQ: LSB-first bit streams of little-endian 32-bit words, word k of a stream at w[k*stride]
 * (a qweight column: stride out; a qzeros row: stride 1). A 3-bit field may straddle two
 * words; streams hold a multiple of 32 fields, so a straddle never passes the stream's end. */
static inline unsigned qtk_bits_get(const uint32_t *w, size_t stride, uint64_t pos, unsigned bits)
{
    const uint64_t wi = pos / 32;
    const unsigned sh = (unsigned)(pos % 32);
    uint64_t v = w[wi * stride] >> sh;
    if (sh + bits > 32)
        v |= (uint64_t)w[(wi + 1) * stride] << (32 - sh);
    return (unsigned)v & ((1u << bits) - 1u);
}

/* OR v (bits wide) into the stream at pos. */
static inline void qtk_bits_put(uint32_t *w, size_t stride, uint64_t pos, unsigned bits, unsigned v)
{
    const uint64_t wi = pos / 32;
    const unsigned sh = (unsigned)(pos % 32);
    w[wi * stride] |= (uint32_t)((uint64_t)v << sh);
    if (sh + bits > 32)
        w[(wi + 1) * stride] |= (uint32_t)(v >> (32 - sh));
}

#endif
