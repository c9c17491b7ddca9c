/* onnxep native code, included by onnxep/_k_conv_nhwc.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_DIRECT_CONV_H
#define ONNXEP_NATIVE_DIRECT_CONV_H

/* onnxep_dconv_uk: the direct-conv micro-kernel (A not packed). Row i < mr of the C tile is an output pixel whose
   inputs start at x + xo + i*rs; the K loop walks `runs`: run r covers n consecutive k whose A value for row i is
   x[xo + i*rs + a + kk] and whose packed-B rows start at bp + b + jp*sb (NR floats per k; sb: the run's K block's
   panel stride, so panel jp of a K-blocked packed weight is reached through the same runs). Products are added
   in k order with one FMA each, as in onnxep_sgemm_uk; the epilogue is onnxep_uk_store.
   pfo: the packed-B floats to fetch into L2 along the K loop, as onnxep_sgemm_uk's pf (the lines of the NR floats of
   each k at b + pfo): 0 none, -1 each run's sb (the same k rows of the next panel, jp + 1), else that offset (the
   Winograd path: the next plane's panel). The direct path reads a weight panel in place, K x NR floats (64 KiB at
   K 512: past L1), once per tile; without a fetch ahead the first tile over each panel waits on L3 for every line
   (ResNet-50's 7x7 1x1 convs, weight rotated over 8 copies as in a model: 1.2x the packed path's time).
   pfc: nonzero to fetch the tile's C rows (and the residual's, res) into L1 before the K loop, as onnxep_sgemm_uk
   does: the epilogue then neither waits on their lines (a 56x56 conv's output and residual, 3 MiB each, are past
   the L2 by the time a tile is stored) nor on the stores' read-for-ownership. */
typedef struct { Py_ssize_t a, b, n, sb; } onnxep_drun;
#if ONNXEP_SGEMM_SIMD
#if defined(__AVX512F__)
#define ONNXEP_DV __m512
#define ONNXEP_DV_SET1 _mm512_set1_ps
#define ONNXEP_DV_LOAD _mm512_loadu_ps
#define ONNXEP_DV_FMA _mm512_fmadd_ps
#define ONNXEP_DV_ZERO _mm512_setzero_ps
#define ONNXEP_DV_W 16
#else
#define ONNXEP_DV __m256
#define ONNXEP_DV_SET1 _mm256_set1_ps
#define ONNXEP_DV_LOAD _mm256_loadu_ps
#define ONNXEP_DV_FMA _mm256_fmadd_ps
#define ONNXEP_DV_ZERO _mm256_setzero_ps
#define ONNXEP_DV_W 8
#endif
#define ONNXEP_DUK_ARGS const float* x, Py_ssize_t xo, Py_ssize_t rs, const onnxep_drun* runs, Py_ssize_t nruns,                         const float* bp, Py_ssize_t jp, Py_ssize_t pfo, int pfc, ONNXEP_ST_ARGS
#define ONNXEP_DUK_PASS x, xo, rs, runs, nruns, bp, jp, pfo, pfc, ONNXEP_ST_PASS
/* one k step of the direct micro-kernel: c0 / c1[i] += a[i * rs] times B's one or two vectors at b; a and b move on */
#define ONNXEP_DUK_STEP(MRV, NV) do {                                                                   \
        ONNXEP_DV b0 = ONNXEP_DV_LOAD(b), b1 = (NV) == 2 ? ONNXEP_DV_LOAD(b + ONNXEP_DV_W) : b0;       \
        _Pragma("GCC unroll 12")                                                                        \
        for (i = 0; i < (MRV); i++) {                                                                   \
            ONNXEP_DV ai = ONNXEP_DV_SET1(a[i * rs]);                                                   \
            c0[i] = ONNXEP_DV_FMA(ai, b0, c0[i]);                                                       \
            if ((NV) == 2) c1[i] = ONNXEP_DV_FMA(ai, b1, c1[i]);                                        \
        }                                                                                               \
        a += 1;                                                                                         \
        b += 2 * ONNXEP_DV_W;                                                                           \
    } while (0)
static inline __attribute__((always_inline)) void onnxep_duk_body(const int MRV, const int NV, ONNXEP_DUK_ARGS)
{
    ONNXEP_DV c0[ONNXEP_SGEMM_MR], c1[ONNXEP_SGEMM_MR];
    Py_ssize_t r, k;
    int i;
    #pragma GCC unroll 12
    for (i = 0; i < MRV; i++) { c0[i] = ONNXEP_DV_ZERO(); c1[i] = ONNXEP_DV_ZERO(); }
    if (pfc) {
        #pragma GCC unroll 12
        for (i = 0; i < MRV; i++) {
            _mm_prefetch((const char*)(c + i * rsc), _MM_HINT_T0);
            _mm_prefetch((const char*)(c + i * rsc + (nr > 0 ? nr - 1 : 0)), _MM_HINT_T0);
            if (res) {
                _mm_prefetch((const char*)(res + i * rsc), _MM_HINT_T0);
                _mm_prefetch((const char*)(res + i * rsc + (nr > 0 ? nr - 1 : 0)), _MM_HINT_T0);
            }
        }
    }
    for (r = 0; r < nruns; r++) {
        const float* a = x + (xo + runs[r].a);
        const float* b = bp + (runs[r].b + jp * runs[r].sb);
        Py_ssize_t n = runs[r].n;
        if (pfo) {
            const float* q = b + (pfo < 0 ? runs[r].sb : pfo);
            for (k = 0; k < n; k++) {
                _mm_prefetch((const char*)q, _MM_HINT_T1);
                if (2 * ONNXEP_DV_W > 16) _mm_prefetch((const char*)(q + 16), _MM_HINT_T1);
                ONNXEP_DUK_STEP(MRV, NV);
                q += 2 * ONNXEP_DV_W;
            }
            continue;
        }
        for (k = 0; k < n; k++)
            ONNXEP_DUK_STEP(MRV, NV);
    }
    onnxep_uk_store(MRV, c0, c1, ONNXEP_ST_PASS);
}
#define ONNXEP_DUK_CASE(M) case M: if (nr <= ONNXEP_DV_W) onnxep_duk_body(M, 1, ONNXEP_DUK_PASS);                                    else onnxep_duk_body(M, 2, ONNXEP_DUK_PASS); break;
static void onnxep_dconv_uk(Py_ssize_t mr, ONNXEP_DUK_ARGS)
{
    switch (mr) {
#if ONNXEP_SGEMM_MR == 12
    ONNXEP_DUK_CASE(12) ONNXEP_DUK_CASE(11) ONNXEP_DUK_CASE(10) ONNXEP_DUK_CASE(9) ONNXEP_DUK_CASE(8)
    ONNXEP_DUK_CASE(7)
#endif
    ONNXEP_DUK_CASE(6) ONNXEP_DUK_CASE(5) ONNXEP_DUK_CASE(4) ONNXEP_DUK_CASE(3) ONNXEP_DUK_CASE(2)
    ONNXEP_DUK_CASE(1)
    default: break;
    }
}
#else
/* generic variant: never called (convs take the packed path there) */
static inline void onnxep_dconv_uk(Py_ssize_t mr, const float* x, Py_ssize_t xo, Py_ssize_t rs,
                                   const onnxep_drun* runs, Py_ssize_t nruns, const float* bp, Py_ssize_t jp,
                                   Py_ssize_t pfo, int pfc, Py_ssize_t nr,
                                   float* c, Py_ssize_t rsc, float alpha, float beta, const float* bias_col,
                                   const float* bias_row, const float* res, const onnxep_act* act) { }
#endif

#endif /* ONNXEP_NATIVE_DIRECT_CONV_H */
