/* quant_iq4_avx2.c - the IQ4_NL/IQ4_XS search's code assignment for 32 values (quant_iq4.c's
 * assign) built for AVX2; the Makefile compiles this file with -mavx2 on x86 and quant_iq4.c
 * picks it at run time when the CPU has AVX2. Each element goes through the same float
 * operations as the scalar code (the cell table's start, then the two neighbours compared by
 * their float squared differences) and the error terms are added in element order, so the codes
 * and the error are the scalar code's bit for bit. */
#include "quant.h"

#include <stdbool.h>
#include <stdint.h>

bool qtk_iq4_have_avx2(void);
double qtk_iq4_assign32_avx2(const float *x, const float *w, float dl, const float *v,
                             const int32_t *cell, uint8_t *L);

#if defined(__AVX2__)
#include <immintrin.h>

bool qtk_iq4_have_avx2(void) { return true; }

/* v[k] for eight codes k in 0..15 (v in two registers of eight): a permute of each half and a
 * blend on bit 3, cheaper than a gather */
static inline __m256 lut16(__m256 vlo, __m256 vhi, __m256i k)
{
    const __m256 a = _mm256_permutevar8x32_ps(vlo, k), b = _mm256_permutevar8x32_ps(vhi, k);
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(k, 28)));
}

double qtk_iq4_assign32_avx2(const float *x, const float *w, float dl, const float *v,
                             const int32_t *cell, uint8_t *L)
{
    const __m256 vid = _mm256_set1_ps(1.f / dl);
    const __m256 lo = _mm256_set1_ps(-128.f), hi = _mm256_set1_ps(114.f), off = _mm256_set1_ps(128.f);
    const __m256i one = _mm256_set1_epi32(1), zero = _mm256_setzero_si256();
    const __m256i fifteen = _mm256_set1_epi32(15);
    const __m256 vlo = _mm256_loadu_ps(v), vhi = _mm256_loadu_ps(v + 8);
    double terms[32];
    int32_t kbs[32];
    for (int j = 0; j < 32; j += 8) {
        const __m256 xv = _mm256_loadu_ps(x + j);
        __m256 t = _mm256_mul_ps(vid, xv);
        t = _mm256_blendv_ps(t, lo, _mm256_cmp_ps(t, lo, _CMP_LT_OQ));
        t = _mm256_blendv_ps(t, hi, _mm256_cmp_ps(t, hi, _CMP_GT_OQ));
        const __m256i k0 = _mm256_i32gather_epi32(cell, _mm256_cvttps_epi32(_mm256_add_ps(t, off)), 4);
        const __m256i km = _mm256_max_epi32(_mm256_sub_epi32(k0, one), zero);
        const __m256i kp = _mm256_min_epi32(_mm256_add_epi32(k0, one), fifteen);
        __m256 e = _mm256_sub_ps(xv, lut16(vlo, vhi, k0));
        __m256 be = _mm256_mul_ps(e, e);
        __m256i kb = k0;
        e = _mm256_sub_ps(xv, lut16(vlo, vhi, km));
        __m256 e2 = _mm256_mul_ps(e, e);
        __m256 m = _mm256_and_ps(_mm256_cmp_ps(e2, be, _CMP_LT_OQ),
                                 _mm256_castsi256_ps(_mm256_cmpgt_epi32(k0, zero)));
        be = _mm256_blendv_ps(be, e2, m);
        kb = _mm256_blendv_epi8(kb, km, _mm256_castps_si256(m));
        e = _mm256_sub_ps(xv, lut16(vlo, vhi, kp));
        e2 = _mm256_mul_ps(e, e);
        m = _mm256_and_ps(_mm256_cmp_ps(e2, be, _CMP_LT_OQ),
                          _mm256_castsi256_ps(_mm256_cmpgt_epi32(fifteen, k0)));
        kb = _mm256_blendv_epi8(kb, kp, _mm256_castps_si256(m));
        _mm256_storeu_si256((__m256i *)(kbs + j), kb);
        /* (double)w * (ed * ed), ed = (double)x - (double)v[kb] */
        const __m256 vb = lut16(vlo, vhi, kb);
        for (int h = 0; h < 2; h++) {
            const __m128 xh = h ? _mm256_extractf128_ps(xv, 1) : _mm256_castps256_ps128(xv);
            const __m128 vh = h ? _mm256_extractf128_ps(vb, 1) : _mm256_castps256_ps128(vb);
            const __m256d ed = _mm256_sub_pd(_mm256_cvtps_pd(xh), _mm256_cvtps_pd(vh));
            const __m256d wd = _mm256_cvtps_pd(_mm_loadu_ps(w + j + 4 * h));
            _mm256_storeu_pd(terms + j + 4 * h, _mm256_mul_pd(wd, _mm256_mul_pd(ed, ed)));
        }
    }
    double err = 0;
    for (int j = 0; j < 32; j++) {
        L[j] = (uint8_t)kbs[j];
        err += terms[j];
    }
    return err;
}
#else
bool qtk_iq4_have_avx2(void) { return false; }
double qtk_iq4_assign32_avx2(const float *x, const float *w, float dl, const float *v,
                             const int32_t *cell, uint8_t *L)
{
    (void)x, (void)w, (void)dl, (void)v, (void)cell, (void)L;
    return 0; /* never called: qtk_iq4_have_avx2() is false */
}
#endif
