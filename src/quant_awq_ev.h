/* quant_awq_ev.h - the error sum of the AWQ/GPTQ group search (quant_awq.c), included once by
 * quant_awq.c (generic build) and once by quant_awq_avx2.c (compiled with -mavx2), each time
 * with EV_SUM naming the function (and EV_WIDE for eight-lane registers). GCC/Clang vector
 * extensions: every operation is element-wise IEEE (no contraction under -ffp-contract=off),
 * and the squares are summed in double in eight lanes (element j into lane j mod 8: one
 * register of eight, or two of four) added in one fixed order, so every build gives the same
 * value bit for bit. */
#ifndef EV_SUM
#error "define EV_SUM before including quant_awq_ev.h"
#endif

#include <stdint.h>
#include <string.h>

/* One step of the search's rounding for a vector of V lanes (as ev_codes in quant_awq.c):
 * q = round(x/s) + z in [0, maxq], then the neighbour on the side of the residual when it
 * decodes closer; the squared difference of the decoded value in double. */
#define EV_STEP(VF, VI, VD, xv, out) EV_CODE(VF, VI, xv, const VF y_ = (q_ - vz) * vs;                 \
        const VD d_ = __builtin_convertvector((xv), VD) - __builtin_convertvector(y_, VD);          \
        (out) = d_ * d_)

/* Clamps: EV_LO(VF, VI, c, v) is v < c ? c : v and EV_HI(VF, VI, c, v) is v > c ? c : v, lane by
 * lane (NaN and -0 kept as v). On x86, MAXPS(c, v) and MINPS(c, v), which return their
 * second operand unless c > v (resp. c < v): the very same results in one instruction. */
#if defined(EV_WIDE) && defined(__AVX__) && !defined(QTK_QV_PLAIN)
#define EV_LO(VF, VI, c, v) __builtin_ia32_maxps256((c), (v))
#define EV_HI(VF, VI, c, v) __builtin_ia32_minps256((c), (v))
#elif !defined(EV_WIDE) && defined(__SSE2__) && !defined(QTK_QV_PLAIN)
#define EV_LO(VF, VI, c, v) __builtin_ia32_maxps((c), (v))
#define EV_HI(VF, VI, c, v) __builtin_ia32_minps((c), (v))
#else
#define EV_LO(VF, VI, c, v) ((VF)((((v) < (c)) & (VI)(c)) | (~((v) < (c)) & (VI)(v))))
#define EV_HI(VF, VI, c, v) ((VF)((((v) > (c)) & (VI)(c)) | (~((v) > (c)) & (VI)(v))))
#endif

/* the codes step alone; tail: statements run with the codes in q_ */
#define EV_CODE(VF, VI, xv, ...)                                                                    \
    do {                                                                                           \
        VF t_ = (xv) * vinv;                                                                       \
        t_ = EV_LO(VF, VI, -big, t_);                                                              \
        t_ = EV_HI(VF, VI, big, t_);                                                               \
        VF q_ = ((t_ + magic) - magic) + vz;                                                       \
        q_ = EV_LO(VF, VI, v0, q_);                                                                \
        q_ = EV_HI(VF, VI, vm, q_);                                                                \
        const VF e_ = (xv) - (q_ - vz) * vs;                                                       \
        const VI up_ = (e_ > v0) & (q_ < vm), dn_ = (e_ < v0) & (q_ > v0);                         \
        const VF dir_ = (VF)((up_ & (VI)v1) | (dn_ & (VI)-v1));                                    \
        const VF e2_ = (xv) - ((q_ + dir_) - vz) * vs;                                             \
        q_ = q_ + (VF)((e2_ * e2_ < e_ * e_) & (VI)dir_);                                          \
        __VA_ARGS__;                                                                               \
    } while (0)

#ifdef EV_WIDE /* eight lanes in one register (AVX2) */
typedef float ev_wf __attribute__((vector_size(32)));
typedef int32_t ev_wi __attribute__((vector_size(32)));
typedef float ev_hf __attribute__((vector_size(16)));
typedef double ev_hd __attribute__((vector_size(32)));
#define EV_SPLAT(a) { a, a, a, a, a, a, a, a }
/* EV_STEP with the squares of lanes 0-3 added to lo and of lanes 4-7 to hi: two registers of
 * four doubles (a vector of eight doubles went through the stack on every step) */
#define EV_STEP_WIDE(xv, lo, hi)                                                                   \
    EV_CODE(ev_wf, ev_wi, xv, const ev_wf y_ = (q_ - vz) * vs; ev_hf xl_, xh_, yl_, yh_;           \
            memcpy(&xl_, &(xv), sizeof xl_); memcpy(&xh_, (const char *)&(xv) + 16, sizeof xh_);   \
            memcpy(&yl_, &y_, sizeof yl_); memcpy(&yh_, (const char *)&y_ + 16, sizeof yh_);       \
            const ev_hd dl_ =                                                                      \
                __builtin_convertvector(xl_, ev_hd) - __builtin_convertvector(yl_, ev_hd);         \
            const ev_hd dh_ =                                                                      \
                __builtin_convertvector(xh_, ev_hd) - __builtin_convertvector(yh_, ev_hd);         \
            (lo) += dl_ * dl_; (hi) += dh_ * dh_)
#else /* two halves of four (SSE2, NEON, plain C) */
typedef float ev_wf __attribute__((vector_size(16)));
typedef int32_t ev_wi __attribute__((vector_size(16)));
typedef double ev_wd __attribute__((vector_size(32)));
#define EV_SPLAT(a) { a, a, a, a }
#endif

/* Squared error of (s, z) over x[0..n), elements past n counting as 0; returns once a partial
 * sum (every 16 elements) reaches limit. Element j goes to lane j mod 8 of the sum. */
double EV_SUM(const float *x, uint32_t n, float s, float zf, float mf, double limit)
{
    const float inv = 1.f / s, B = 4194303.f, M = 12582912.f;
    const ev_wf vinv = EV_SPLAT(inv), vs = EV_SPLAT(s), vz = EV_SPLAT(zf), vm = EV_SPLAT(mf);
    const ev_wf v0 = EV_SPLAT(0.f), v1 = EV_SPLAT(1.f), big = EV_SPLAT(B), magic = EV_SPLAT(M);
#ifdef EV_WIDE
    ev_hd alo = { 0.0, 0.0, 0.0, 0.0 }, ahi = alo;
#else
    ev_wd lo = EV_SPLAT(0.0), hi = EV_SPLAT(0.0);
#endif
    double err = 0;
    for (uint32_t j = 0; j < n; j += 16) {
        float xb[16];
        const float *xp = x + j;
        if (n - j < 16) {
            memset(xb, 0, sizeof xb);
            memcpy(xb, xp, (n - j) * sizeof *xb);
            xp = xb;
        }
        ev_wf xv;
#ifdef EV_WIDE
        for (int k = 0; k < 16; k += 8) {
            memcpy(&xv, xp + k, sizeof xv);
            EV_STEP_WIDE(xv, alo, ahi);
        }
        err = ((alo[0] + alo[1]) + (alo[2] + alo[3])) + ((ahi[0] + ahi[1]) + (ahi[2] + ahi[3]));
#else
        ev_wd d2;
        for (int k = 0; k < 16; k += 8) {
            memcpy(&xv, xp + k, sizeof xv);
            EV_STEP(ev_wf, ev_wi, ev_wd, xv, d2);
            lo += d2;
            memcpy(&xv, xp + k + 4, sizeof xv);
            EV_STEP(ev_wf, ev_wi, ev_wd, xv, d2);
            hi += d2;
        }
        err = ((lo[0] + lo[1]) + (lo[2] + lo[3])) + ((hi[0] + hi[1]) + (hi[2] + hi[3]));
#endif
        if (err >= limit)
            return err;
    }
    return err;
}

#ifdef EV_CODES
/* The codes of (s, z) for x[0..n) (the values EV_SUM's error is of) into codes. */
void EV_CODES(const float *x, uint32_t n, float s, float zf, float mf, uint8_t *codes)
{
    const float inv = 1.f / s, B = 4194303.f, M = 12582912.f;
    const ev_wf vinv = EV_SPLAT(inv), vs = EV_SPLAT(s), vz = EV_SPLAT(zf), vm = EV_SPLAT(mf);
    const ev_wf v0 = EV_SPLAT(0.f), v1 = EV_SPLAT(1.f), big = EV_SPLAT(B), magic = EV_SPLAT(M);
    const uint32_t W = (uint32_t)(sizeof(ev_wf) / sizeof(float));
    for (uint32_t j = 0; j < n; j += W) {
        float xb[8], qb[8];
        const float *xp = x + j;
        if (n - j < W) {
            memset(xb, 0, sizeof xb);
            memcpy(xb, xp, (n - j) * sizeof *xb);
            xp = xb;
        }
        ev_wf xv;
        memcpy(&xv, xp, sizeof xv);
        EV_CODE(ev_wf, ev_wi, xv, memcpy(qb, &q_, sizeof q_));
        for (uint32_t k = 0; k < W && j + k < n; k++)
            codes[j + k] = (uint8_t)(int)qb[k];
    }
}
#endif

#undef EV_STEP
#undef EV_CODE
#undef EV_SPLAT
