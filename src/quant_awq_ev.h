/* quant_awq_ev.h - the error sum and codes of the AWQ/GPTQ group search (quant_awq.c), included
 * once by quant_awq.c (generic build) and once by quant_awq_avx2.c (compiled with -mavx2), each
 * time with EV_SUM, EV_CODES and EV_REFINE3 naming the functions (and EV_WIDE for eight-lane
 * registers), and once by quant_awq_avx512.c (EV_WIDE16: sixteen float lanes, eight double). GCC/Clang vector extensions: every operation is element-wise IEEE (no contraction
 * under -ffp-contract=off), and the squares are summed in double in eight lanes (element j into
 * lane j mod 8: one register of eight, or two of four) added in one fixed order, so every build
 * gives the same value bit for bit.
 *
 * Inputs: x, the group's values padded with zeros to n, a multiple of 16, and xd the same values
 * in double (made once per group: every candidate would convert them again). A padding value
 * has code z and decodes to 0 exactly, so it adds +0 to the sum. */
#ifndef EV_SUM
#error "define EV_SUM before including quant_awq_ev.h"
#endif

#include <stdint.h>
#include <string.h>

#if defined(EV_WIDE16) /* sixteen float lanes, the eight double lanes in one register (AVX-512) */
typedef float ev_wf __attribute__((vector_size(64)));
typedef int32_t ev_wi __attribute__((vector_size(64)));
typedef double ev_hd __attribute__((vector_size(64)));
#define EV_SPLAT(a) { a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a }
#define EV_SPLAT8(a) { a, a, a, a, a, a, a, a }
#elif defined(EV_WIDE) /* eight lanes in one register (AVX2) */
typedef float ev_wf __attribute__((vector_size(32)));
typedef int32_t ev_wi __attribute__((vector_size(32)));
typedef double ev_hd __attribute__((vector_size(32)));
#define EV_SPLAT(a) { a, a, a, a, a, a, a, a }
#else /* two halves of four (SSE2, NEON, plain C) */
typedef float ev_wf __attribute__((vector_size(16)));
typedef int32_t ev_wi __attribute__((vector_size(16)));
typedef double ev_wd __attribute__((vector_size(32)));
typedef uint8_t ev_wb __attribute__((vector_size(4)));
#define EV_SPLAT(a) { a, a, a, a }
#endif
#define EV_W ((uint32_t)(sizeof(ev_wf) / sizeof(float)))
#if !defined(EV_WIDE) && !defined(EV_WIDE16)
/* codes (integer-valued floats in [0, 255]) to bytes */
#define EV_STORE_CODES(p, q)                                                                       \
    do {                                                                                           \
        const ev_wb b_ = __builtin_convertvector(__builtin_convertvector((q), ev_wi), ev_wb);      \
        memcpy((p), &b_, sizeof b_);                                                               \
    } while (0)
#endif

/* Clamps: EV_LO(c, v) is v < c ? c : v and EV_HI(c, v) is v > c ? c : v, lane by lane (NaN and
 * -0 kept as v). On x86, MAXPS(c, v) and MINPS(c, v), which return their second operand unless
 * c > v (resp. c < v): the very same results in one instruction. */
#if defined(EV_LO) /* the including file's (AVX-512) */
#elif defined(EV_WIDE) && defined(__AVX__) && !defined(QTK_QV_PLAIN)
#define EV_LO(c, v) __builtin_ia32_maxps256((c), (v))
#define EV_HI(c, v) __builtin_ia32_minps256((c), (v))
#elif !defined(EV_WIDE) && defined(__SSE2__) && !defined(QTK_QV_PLAIN)
#define EV_LO(c, v) __builtin_ia32_maxps((c), (v))
#define EV_HI(c, v) __builtin_ia32_minps((c), (v))
#else
#define EV_LO(c, v) ((ev_wf)((((v) < (c)) & (ev_wi)(c)) | (~((v) < (c)) & (ev_wi)(v))))
#define EV_HI(c, v) ((ev_wf)((((v) > (c)) & (ev_wi)(c)) | (~((v) > (c)) & (ev_wi)(v))))
#endif

/* The search's rounding of one register, as k = q - z (the decoded value is k * s): the nearest
 * step count round(x/s) within [klo, khi] = [-z, maxq - z] (ev_round), then its neighbour on the
 * side of the residual when that decodes closer (ev_fix).
 *
 * ev_round: clamping t = x * (1/s) to [-z, maxq - z] before rounding gives the same k as rounding
 * first and clamping the code to [0, maxq] after (-z and maxq - z are integers and rounding is
 * monotone), and k stays within 2^22, where adding and subtracting 1.5 * 2^23 rounds half to
 * even. far gets the lanes whose clamped t is within EV_FAR of k (t - k is exact there).
 *
 * ev_fix can change only those lanes' k: for a far lane, |x/s - k| < 0.4962 (t's rounding adds
 * at most 256 * 2^-23 to 0.49609375), so k*s decodes within 0.4962 s of x and both neighbours
 * beyond 0.5038 s, after the roundings of k*s, the differences and the squares (each within
 * 256 * 2^-24 relative, and monotone) - the neighbour never decodes closer. A clamped lane has t
 * = k exactly; its only neighbour lies inside the range, about s away, while x is within
 * 2^-15 s of k*s or beyond it. Values are finite (sanitised), s is at least 2^-24. */
#define EV_FAR 0.49609375f /* 0.5 - 2^-8 */
static inline ev_wf ev_round_t(ev_wf t, ev_wf klo, ev_wf khi, ev_wi *far)
{
    const ev_wf magic = EV_SPLAT(12582912.f), lim = EV_SPLAT(EV_FAR), nlim = EV_SPLAT(-EV_FAR);
    t = EV_LO(klo, t);
    t = EV_HI(khi, t);
    const ev_wf k = (t + magic) - magic, d = t - k;
    *far = (d <= lim) & (d >= nlim);
    return k;
}

static inline ev_wf ev_round(ev_wf xv, ev_wf vinv, ev_wf klo, ev_wf khi, ev_wi *far)
{
    return ev_round_t(xv * vinv, klo, khi, far);
}

static inline ev_wf ev_fix(ev_wf xv, ev_wf k, ev_wf vs, ev_wf klo, ev_wf khi)
{
    const ev_wf v0 = EV_SPLAT(0.f), v1 = EV_SPLAT(1.f);
    const ev_wf e = xv - k * vs;
    const ev_wi up = (e > v0) & (k < khi), dn = (e < v0) & (k > klo);
    const ev_wf dir = (ev_wf)((up & (ev_wi)v1) | (dn & (ev_wi)-v1));
    const ev_wf e2 = xv - (k + dir) * vs;
    return k + (ev_wf)((e2 * e2 < e * e) & (ev_wi)dir);
}

/* whether some lane of a mask is clear */
#ifndef EV_ANY_CLEAR
static inline int ev_any_clear(ev_wi m)
{
    uint64_t u[sizeof m / 8];
    memcpy(u, &m, sizeof m);
    uint64_t a = ~(uint64_t)0;
    for (size_t i = 0; i < sizeof m / 8; i++)
        a &= u[i];
    return a != ~(uint64_t)0;
}
#define EV_ANY_CLEAR(m) ev_any_clear(m)
#endif

#define EV_SETUP(s, zf, mf)                                                                        \
    const ev_wf vinv = EV_SPLAT(1.f / (s)), vs = EV_SPLAT(s), vz = EV_SPLAT(zf);                   \
    const ev_wf klo = EV_SPLAT(-(zf)), khi = EV_SPLAT((mf) - (zf));                                \
    (void)vz

#if defined(EV_WIDE16)
/* the squares of x - y for elements j..j+16: elements j..j+8 into lanes 0-7 (lo), then j+8..j+16
 * into the same lanes (lane l gets elements l, l + 8, ... in that order, as in the other builds);
 * hi is not used */
#define EV_ACC(xd, y, lo, hi)                                                                      \
    do {                                                                                           \
        ev_hd xl_, xh_;                                                                            \
        memcpy(&xl_, (xd), sizeof xl_);                                                            \
        memcpy(&xh_, (xd) + 8, sizeof xh_);                                                        \
        const ev_hd dl_ = xl_ - EV_PD_LO(y), dh_ = xh_ - EV_PD_HI(y);                              \
        (lo) += dl_ * dl_;                                                                         \
        (lo) += dh_ * dh_;                                                                         \
        (void)(hi);                                                                                \
    } while (0)
#define EV_ACC_INIT ev_hd alo = EV_SPLAT8(0.0), ahi = alo
#define EV_FOLD (((alo[0] + alo[1]) + (alo[2] + alo[3])) + ((alo[4] + alo[5]) + (alo[6] + alo[7])))
/* the cheap fold: lanes i and i + 4 added, then (0 + 2) + (1 + 3), as the other builds */
#define EV_CHEAP_T ev_hd
#define EV_CHEAP(alo, ahi)                                                                         \
    ((((alo)[0] + (alo)[4]) + ((alo)[2] + (alo)[6])) + (((alo)[1] + (alo)[5]) + ((alo)[3] + (alo)[7])))
#elif defined(EV_WIDE)
/* the squares of x - y for elements j..j+8 into lanes 0-3 (lo) and 4-7 (hi) */
#define EV_ACC(xd, y, lo, hi)                                                                      \
    do {                                                                                           \
        ev_hd xl_, xh_;                                                                            \
        memcpy(&xl_, (xd), sizeof xl_);                                                            \
        memcpy(&xh_, (xd) + 4, sizeof xh_);                                                        \
        const ev_hd dl_ = xl_ - EV_PD_LO(y), dh_ = xh_ - EV_PD_HI(y);                              \
        (lo) += dl_ * dl_;                                                                         \
        (hi) += dh_ * dh_;                                                                         \
    } while (0)
#define EV_ACC_INIT ev_hd alo = { 0.0, 0.0, 0.0, 0.0 }, ahi = alo
#define EV_CHEAP_T ev_hd
#define EV_FOLD (((alo[0] + alo[1]) + (alo[2] + alo[3])) + ((ahi[0] + ahi[1]) + (ahi[2] + ahi[3])))
#else
/* the squares of x - y for elements j..j+4 into acc */
#define EV_ACC4(xd, y, acc)                                                                        \
    do {                                                                                           \
        ev_wd x_;                                                                                  \
        memcpy(&x_, (xd), sizeof x_);                                                              \
        const ev_wd d_ = x_ - __builtin_convertvector((y), ev_wd);                                 \
        (acc) += d_ * d_;                                                                          \
    } while (0)
#define EV_ACC_INIT ev_wd alo = EV_SPLAT(0.0), ahi = alo
#define EV_CHEAP_T ev_wd
#define EV_FOLD (((alo[0] + alo[1]) + (alo[2] + alo[3])) + ((ahi[0] + ahi[1]) + (ahi[2] + ahi[3])))
#endif

/* Squared error of (s, z) over the n values (n a multiple of 16); may return early, with a value
 * >= limit, once the error is sure to reach limit; else the error, lanes folded as EV_FOLD.
 *
 * The test, after every 64 values but not after the last (a group of 32 is summed whole: its
 * test cost more than the half it could skip), folds the lanes in a cheaper order (alo + ahi,
 * then across). Any fold
 * of eight non-negative doubles is within 3 * 2^-53 (relative, and a little more) of their exact
 * sum, and lanes only grow, so a cheap fold at or above limit * (1 + 2^-48) puts the final
 * EV_FOLD at or above limit: the early return happens only where the full sum would lose. */
double EV_SUM(const float *x, const double *xd, uint32_t n, float s, float zf, float mf,
              double limit)
{
    EV_SETUP(s, zf, mf);
    EV_ACC_INIT;
    const double stop = limit * (1.0 + 0x1p-48);
    for (uint32_t j = 0; j < n; j += 16) {
        enum { R = 16 / EV_W };
        ev_wf xv[R], kv[R];
        ev_wi far = { 0 }, f;
        for (uint32_t r = 0; r < R; r++) {
            memcpy(&xv[r], x + j + r * EV_W, sizeof xv[r]);
            kv[r] = ev_round(xv[r], vinv, klo, khi, &f);
            far = r ? far & f : f;
        }
        if (EV_ANY_CLEAR(far))
            for (uint32_t r = 0; r < R; r++)
                kv[r] = ev_fix(xv[r], kv[r], vs, klo, khi);
        for (uint32_t r = 0; r < R; r++) {
            const ev_wf y = kv[r] * vs;
#ifdef EV_WIDE
            EV_ACC(xd + j + r * EV_W, y, alo, ahi);
#else
            if (r % 2 == 0)
                EV_ACC4(xd + j + r * EV_W, y, alo);
            else
                EV_ACC4(xd + j + r * EV_W, y, ahi);
#endif
        }
        if (((j + 16) & 63) != 0 || j + 16 == n)
            continue; /* the test after every 64 values, not after the last */
#ifdef EV_WIDE16
        (void)ahi;
        const double cheap = EV_CHEAP(alo, ahi);
#else
        EV_CHEAP_T t_ = alo + ahi;
        const double cheap = (t_[0] + t_[2]) + (t_[1] + t_[3]);
#endif
        if (cheap >= stop)
            return cheap;
    }
    return EV_FOLD;
}

/* The codes of (s, z) for the n values (n a multiple of 16) into codes[0..n). */
void EV_CODES(const float *x, const double *xd, uint32_t n, float s, float zf, float mf,
              uint8_t *codes)
{
    EV_SETUP(s, zf, mf);
    (void)xd;
    for (uint32_t j = 0; j < n; j += EV_W) {
        ev_wf xv;
        memcpy(&xv, x + j, sizeof xv);
        ev_wi far;
        ev_wf k = ev_round(xv, vinv, klo, khi, &far);
        if (EV_ANY_CLEAR(far))
            k = ev_fix(xv, k, vs, klo, khi);
        EV_STORE_CODES(codes + j, k + vz);
    }
}

/* A refinement round's sums for the zeros zf - 1, zf, zf + 1 (d = 0, 1, 2) at scale s, from the
 * codes (h, zf + d - 1) assigns (not stored): sxq[d] = sum of k_j x_j in element order (each
 * product exact in double, added one after the other), sqq[d] = sum of k_j^2 (exact), where
 * k_j = code - zero; err[0] and err[1], the squared errors of (s, zf -+ 1) as EV_SUM gives them
 * in full. One pass for all. Zeros outside [0, mf] give values to ignore.
 *
 * sxq in lanes when that is the element-order sum: a value with k != 0 has |x| >= s/4 (|x/s|
 * rounds to at least 1/2, or the neighbour test moves it from 0), so its exponent is at least
 * s's minus 2 and each product k*x is a whole multiple of U = ulp(s) / 4 (ulp of a float). When
 * maxq * sum|x| < 2^52 U, every partial sum in any order is such a multiple below 2^53 U: exact,
 * so the order cannot change it. abs_sum is sum|x| rounded up enough (quant_awq.c). Otherwise
 * (huge outliers beside a small step) the three chains run in element order. */
__attribute__((always_inline)) static inline void
ev_refine3_impl(const float *x, const double *xd, uint32_t n, float s, float zf, float mf,
                double sxq[3], double sqq[3], double err[2], int lanes)
{
    const ev_wf vinv = EV_SPLAT(1.f / s), vs = EV_SPLAT(s);
    ev_wf klo[3], khi[3];
    for (int d = 0; d < 3; d++) {
        const float z = zf + (float)(d - 1);
        const ev_wf lo = EV_SPLAT(-z), hi = EV_SPLAT(mf - z);
        klo[d] = lo;
        khi[d] = hi;
    }
    double c[3] = { 0, 0, 0 };
#ifdef EV_WIDE
    ev_hd elo[2] = { { 0 }, { 0 } }, ehi[2] = { { 0 }, { 0 } };
    ev_hd q2[3] = { { 0 }, { 0 }, { 0 } }, cv[3] = { { 0 }, { 0 }, { 0 } };
#else
    ev_wd elo[2] = { EV_SPLAT(0.0), EV_SPLAT(0.0) }, ehi[2] = { EV_SPLAT(0.0), EV_SPLAT(0.0) };
    ev_wd q2[3] = { EV_SPLAT(0.0), EV_SPLAT(0.0), EV_SPLAT(0.0) },
          cv[3] = { EV_SPLAT(0.0), EV_SPLAT(0.0), EV_SPLAT(0.0) };
#endif
    for (uint32_t j = 0; j < n; j += EV_W) {
        ev_wf xv;
        memcpy(&xv, x + j, sizeof xv);
        /* rounded once over the three zeros' joint range, then clamped to each (the same k:
         * clamping to integer bounds commutes with rounding); a lane is far for every zero when
         * it is far in the joint range (unclamped there: the same t - k; clamped: ev_fix cannot
         * move it) */
        ev_wi far;
        const ev_wf r = ev_round_t(xv * vinv, klo[2], khi[0], &far);
        ev_wf k[3];
        for (int d = 0; d < 3; d++)
            k[d] = EV_HI(khi[d], EV_LO(klo[d], r));
        if (EV_ANY_CLEAR(far))
            for (int d = 0; d < 3; d++)
                k[d] = ev_fix(xv, k[d], vs, klo[d], khi[d]);
#ifdef EV_WIDE /* HD doubles a register: four (AVX2) or eight (AVX-512) */
        enum { HD = sizeof(ev_hd) / sizeof(double) };
        ev_hd xl, xh;
        memcpy(&xl, xd + j, sizeof xl);
        memcpy(&xh, xd + j + HD, sizeof xh);
        for (int d = 0; d < 3; d++) {
            const ev_hd kl = EV_PD_LO(k[d]), kh = EV_PD_HI(k[d]);
            const ev_hd pl = kl * xl, ph = kh * xh;
            q2[d] += kl * kl + kh * kh;
            if (lanes) {
                cv[d] += pl + ph;
            } else {
                for (int i = 0; i < HD; i++)
                    c[d] += pl[i];
                for (int i = 0; i < HD; i++)
                    c[d] += ph[i];
            }
        }
        for (int d = 0; d < 2; d++)
            EV_ACC(xd + j, k[2 * d] * vs, elo[d], ehi[d]);
#else
        ev_wd xw;
        memcpy(&xw, xd + j, sizeof xw);
        for (int d = 0; d < 3; d++) {
            const ev_wd kw = __builtin_convertvector(k[d], ev_wd);
            const ev_wd p = kw * xw;
            q2[d] += kw * kw;
            if (lanes) {
                cv[d] += p;
            } else {
                for (int i = 0; i < 4; i++)
                    c[d] += p[i];
            }
        }
        for (int d = 0; d < 2; d++) {
            if (j % 8 == 0)
                EV_ACC4(xd + j, k[2 * d] * vs, elo[d]);
            else
                EV_ACC4(xd + j, k[2 * d] * vs, ehi[d]);
        }
#endif
    }
#if defined(EV_WIDE16)
    /* eight lanes to four (lanes i and i + 4): both sums are exact in any order (above) */
    for (int d = 0; d < 3; d++)
        for (int i = 0; i < 4; i++) {
            cv[d][i] += cv[d][i + 4];
            q2[d][i] += q2[d][i + 4];
        }
    (void)ehi;
#endif
    for (int d = 0; d < 3; d++) {
        sxq[d] = lanes ? (cv[d][0] + cv[d][1]) + (cv[d][2] + cv[d][3]) : c[d];
        sqq[d] = (q2[d][0] + q2[d][1]) + (q2[d][2] + q2[d][3]);
    }
    for (int d = 0; d < 2; d++) {
#if defined(EV_WIDE16)
        const EV_CHEAP_T alo = elo[d];
#else
        const EV_CHEAP_T alo = elo[d], ahi = ehi[d];
#endif
        err[d] = EV_FOLD;
    }
}

void EV_REFINE3(const float *x, const double *xd, uint32_t n, float s, float zf, float mf,
                double abs_sum, double sxq[3], double sqq[3], double err[2])
{
    uint32_t sb;
    memcpy(&sb, &s, sizeof sb);
    const int es = (int)((sb >> 23) & 0xff) - 127; /* s in [2^es, 2^(es+1)), a normal float */
    /* 2^52 U = 2^(es - 25 + 52) */
    const uint64_t lim_bits = (uint64_t)(es + 27 + 1023) << 52;
    double lim;
    memcpy(&lim, &lim_bits, sizeof lim);
    if ((double)mf * abs_sum < lim)
        ev_refine3_impl(x, xd, n, s, zf, mf, sxq, sqq, err, 1);
    else
        ev_refine3_impl(x, xd, n, s, zf, mf, sxq, sqq, err, 0);
}

#undef EV_SPLAT
#undef EV_SETUP
#undef EV_FOLD
#undef EV_ACC_INIT
#undef EV_CHEAP_T
#undef EV_CHEAP
#undef EV_SPLAT8
