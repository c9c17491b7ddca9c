/* onnxep channel-last quantized conv (issue 29, QLinearConv / a folded QDQ conv): NHWC 8-bit activations, 8-bit
   weights, int32 bias, per-tensor or per-output-channel weight scale / zero point, requantized to 8 bits:

     y[p, m] = saturate(rint(float(acc[p, m] + bias[m]) * mult[m]) + y_zp),  acc = sum_k (x - x_zp)(w - w_zp[m])

   acc exact in int32 (wraparound), mult = x_scale * w_scale[m] / y_scale (float32, the caller's), rounding half to even
   (the current mode, as rintf), saturation to [qlo, qhi] (the type's range, narrowed by a fused Relu / Clip): the
   requantization of onnxruntime's MLAS (and of ops/quant/_common.py requantize).

   Dense convs (group 1): im2col of a block of QG_MB output pixels straight into qgemm's packed A layout (rows of
   K4 * 4 u8 bytes, an s8 input flipped by ^ 0x80, the padding filled with x_zp so it contributes nothing, plus the
   row sums), then qgemm's micro-kernels (VNNI / AVX2 / generic, onnxep/_native/qgemm.h) against the weights packed
   once by qg_pack_b (K = kh * kw * C in (ki, kj, c) order, N = M), then the zero-point correction and the
   requantization epilogue on the int32 tile. A 1x1 conv is the same with one tap (the copy is the packing the GEMM
   needs anyway). Depthwise convs (group == C == M): their own loop over channels, int16 centred weights
   (w - w_zp, (kh * kw, C)), int32 sums.

   Needs qgemm.h first (the Cython module includes it before this header). */
#ifndef ONNXEP_QCONV_H
#define ONNXEP_QCONV_H
#ifndef ONNXEP_QGEMM_H
#error "qconv.h needs qgemm.h included first"
#endif

typedef struct {
    const uint8_t* X; int x_signed;
    int64_t N, H, W, C, OH, OW, M;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    const uint8_t* Bp; const int32_t* cs; int64_t K, K4;
    int32_t za;                      /* x's zero point in the u8 domain (x_zp + 128 for an int8 x) */
    const int32_t* zb; int zb_stride;  /* w's zero points shifted as qgemm's (w_zp - 128 for a uint8 w) */
    const int16_t* wdw;              /* depthwise: (kh * kw, C) centred weights */
    const int32_t* bias;             /* M or NULL */
    const float* mult; int mult_stride;
    float yzp, qlo, qhi; int y_signed;
    uint8_t* Y;
    int kern;
    int64_t nmb, nnb;
} qc_args;

/* acc (w int32) -> y bytes: rint(float(acc) * mult) + zp, clamped to [lo, hi] (int8 when y_signed, else uint8).
   AVX-512 / AVX2: the same float32 operations 16 / 8 lanes at a time (cvtdq2ps, mulps, round to nearest even, addps,
   max / min, cvtps2dq: bit-identical to the scalar loop), which gcc does not vectorize itself. */
static inline void qc_requant(const int32_t* __restrict acc, int64_t w, const float* __restrict mult, int mst,
                              float zp, float lo, float hi, int y_signed, uint8_t* __restrict y) {
    int64_t j = 0;
#if defined(__AVX512F__)
    {
        const __m512 vz = _mm512_set1_ps(zp), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi),
                     vm0 = _mm512_set1_ps(mult[0]);
        for (; j + 16 <= w; j += 16) {
            __m512 f = _mm512_cvtepi32_ps(_mm512_loadu_si512((const void*)(acc + j)));
            f = _mm512_mul_ps(f, mst ? _mm512_loadu_ps(mult + j) : vm0);
            f = _mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            f = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(f, vz), vlo), vhi);
            _mm_storeu_si128((__m128i*)(y + j), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(f)));   /* the low bytes */
        }
    }
#elif defined(__AVX2__)
    {
        const __m256 vz = _mm256_set1_ps(zp), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi),
                     vm0 = _mm256_set1_ps(mult[0]), off = _mm256_set1_ps(y_signed ? 128.f : 0.f);
        const __m128i flip = _mm_set1_epi8((char)(y_signed ? 0x80 : 0));
        for (; j + 8 <= w; j += 8) {
            __m256 f = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i*)(acc + j)));
            f = _mm256_mul_ps(f, mst ? _mm256_loadu_ps(mult + j) : vm0);
            f = _mm256_round_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            f = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(f, vz), vlo), vhi);
            __m256i q = _mm256_cvtps_epi32(_mm256_add_ps(f, off));                  /* 0 .. 255, exact */
            __m128i p16 = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
            _mm_storel_epi64((__m128i*)(y + j), _mm_xor_si128(_mm_packus_epi16(p16, p16), flip));
        }
    }
#endif
    for (; j < w; j++) {
        float r = rintf((float)acc[j] * mult[mst ? j : 0]) + zp;
        r = r > lo ? r : lo; r = r < hi ? r : hi;
        y[j] = y_signed ? (uint8_t)(int8_t)(int32_t)r : (uint8_t)(int32_t)r;
    }
}

/* im2col of output pixels p0 .. p0 + mr - 1 into packed A rows (K4 * 4 bytes each) and their sums: x's own bytes
   first (a kernel row of in-bounds taps one copy of kw * C bytes when dw == 1; the padding x_zp's byte), then one
   pass flipping an int8 x to u8 and summing */
static void qc_pack_pixels(const qc_args* a, int64_t p0, int mr, uint8_t* Ap, int32_t* rs) {
    const int64_t C = a->C, lda4 = a->K4 * 4, ohw = a->OH * a->OW, K = a->K;
    const int64_t H = a->H, W = a->W, kh = a->kh, kw = a->kw, sh = a->sh, sw = a->sw, ph = a->ph, pw = a->pw,
                  dh = a->dh, dw = a->dw, OW = a->OW;
    const uint8_t flip = a->x_signed ? 0x80 : 0, pad = (uint8_t)(a->za ^ flip);   /* x_zp's own byte */
    const uint8_t* X = a->X;
    for (int r = 0; r < mr; r++) {
        int64_t p = p0 + r, n = p / ohw, q = p % ohw, oy = q / OW, ox = q % OW;
        uint8_t* __restrict o = Ap + r * lda4;
        const int64_t ix0 = ox * sw - pw, ix1 = ix0 + (kw - 1) * dw;
        const int row_in = ix0 >= 0 && ix1 < W && dw == 1;
        for (int64_t ki = 0; ki < kh; ki++) {
            int64_t iy = oy * sh - ph + ki * dh;
            uint8_t* d = o + ki * kw * C;
            if (iy < 0 || iy >= H) { memset(d, pad, (size_t)(kw * C)); continue; }
            const uint8_t* srow = X + (n * H + iy) * W * C;
            if (row_in) { memcpy(d, srow + ix0 * C, (size_t)(kw * C)); continue; }
            for (int64_t kj = 0; kj < kw; kj++) {
                int64_t ix = ix0 + kj * dw;
                if (ix < 0 || ix >= W) memset(d + kj * C, pad, (size_t)C);
                else memcpy(d + kj * C, srow + ix * C, (size_t)C);
            }
        }
        uint32_t sum = 0;
        if (flip) for (int64_t k = 0; k < K; k++) { uint8_t v = o[k] ^ 0x80; o[k] = v; sum += v; }
        else for (int64_t k = 0; k < K; k++) sum += o[k];
        for (int64_t k = K; k < lda4; k++) o[k] = 0;
        rs[r] = (int32_t)sum;
    }
}

#define QC_STACK_A 32768

/* one work item: QG_MB output pixels x QG_NB output channels */
static void qc_item(void* ctx, Py_ssize_t item, int tid) {
    const qc_args* a = (const qc_args*)ctx;
    int64_t nb = item / a->nmb, mb = item % a->nmb;
    int64_t P = a->N * a->OH * a->OW;
    int64_t m0 = mb * QG_MB, m1 = m0 + QG_MB < P ? m0 + QG_MB : P;
    int64_t n0 = nb * QG_NB, n1 = n0 + QG_NB < a->M ? n0 + QG_NB : a->M;
    int np = (int)((n1 - n0 + QG_NR - 1) / QG_NR);
    int mr = (int)(m1 - m0);
    int64_t lda4 = a->K4 * 4, pstride = QG_NR * a->K4 * 4;
    int32_t buf[QG_MB * QG_NB];
    int32_t rs[QG_MB];
    uint8_t stackA[QC_STACK_A];
    uint8_t* Ap = (size_t)(mr * lda4) <= sizeof stackA ? stackA : (uint8_t*)malloc((size_t)(mr * lda4));
    (void)tid;
    if (Ap == NULL) return;      /* (the caller checked the size: only a failed malloc of a huge K lands here) */
    qc_pack_pixels(a, m0, mr, Ap, rs);
    const uint8_t* Bp = a->Bp + (n0 / QG_NR) * pstride;
#if QG_X86
    if (a->kern == QG_VNNI) qg_micro_vnni(Ap, lda4, Bp, pstride, a->K4, mr, np, buf, QG_NB);
    else
#endif
#if defined(__AVX2__)
    if (a->kern == QG_AVX2) qg_micro_avx2(Ap, lda4, Bp, pstride, a->K4, mr, np, buf, QG_NB);
    else
#endif
    qg_micro_generic(Ap, lda4, Bp, pstride, a->K4, mr, np, buf, QG_NB);
    if (Ap != stackA) free(Ap);
    const uint32_t K = (uint32_t)a->K, za = (uint32_t)a->za, kza = K * za;
    const int32_t* __restrict zbp = a->zb + (a->zb_stride ? n0 : 0);
    const int32_t* __restrict csp = a->cs + n0;
    const int32_t* __restrict bp = a->bias ? a->bias + n0 : NULL;
    const int zst = a->zb_stride;
    const int64_t w = n1 - n0, M = a->M;
    const float* mp = a->mult + (a->mult_stride ? n0 : 0);
    for (int64_t r = 0; r < mr; r++) {
        uint32_t* __restrict c = (uint32_t*)(buf + r * QG_NB);
        const uint32_t rsv = (uint32_t)rs[r];
        if (zst) {
            for (int64_t j = 0; j < w; j++) {
                uint32_t zb = (uint32_t)zbp[j];
                c[j] = c[j] - zb * rsv - za * (uint32_t)csp[j] + kza * zb;
            }
        } else {
            const uint32_t zb0 = (uint32_t)zbp[0], off = zb0 * rsv - kza * zb0;
            for (int64_t j = 0; j < w; j++) c[j] = c[j] - off - za * (uint32_t)csp[j];
        }
        if (bp) for (int64_t j = 0; j < w; j++) c[j] += (uint32_t)bp[j];
        qc_requant((const int32_t*)c, w, mp, a->mult_stride, a->yzp, a->qlo, a->qhi, a->y_signed,
                   a->Y + (m0 + r) * M + n0);
    }
}

/* depthwise (group == C == M, one weight per tap and channel): one item per output row (n, oy); the taps' loops with
   the fields in locals (Python's -fno-strict-aliasing would reload them after every store) */
#define QC_DW_CB 256
#define QC_DW_TAPS(T)                                                                                               \
    for (int64_t ki = 0; ki < kh; ki++) {                                                                          \
        int64_t iy = oy * sh - ph + ki * dh;                                                                       \
        if (iy < 0 || iy >= H) continue;                                                                           \
        const T* __restrict srow = (const T*)X + ((n * H + iy) * W) * C + c0;                                      \
        for (int64_t kj = 0; kj < kw; kj++) {                                                                      \
            int64_t ix = ox * sw - pw + kj * dw;                                                                   \
            if (ix < 0 || ix >= W) continue;                                                                       \
            const T* __restrict s = srow + ix * C;                                                                 \
            const int16_t* __restrict wv = wdw + (ki * kw + kj) * C + c0;                                          \
            for (int64_t c = 0; c < cw; c++) acc[c] += ((int32_t)s[c] - za) * (int32_t)wv[c];                     \
        }                                                                                                          \
    }
static void qc_dw_item(void* ctx, Py_ssize_t item, int tid) {
    const qc_args* a = (const qc_args*)ctx;
    const int64_t C = a->C, OH = a->OH, OW = a->OW, H = a->H, W = a->W, kh = a->kh, kw = a->kw, sh = a->sh,
                  sw = a->sw, ph = a->ph, pw = a->pw, dh = a->dh, dw = a->dw;
    const int64_t n = item / OH, oy = item % OH;
    const uint8_t* X = a->X;
    const int16_t* wdw = a->wdw;
    const int32_t* bias = a->bias;
    const int32_t za = a->za;
    const int xs = a->x_signed, mst = a->mult_stride, ys = a->y_signed;
    const float yzp = a->yzp, qlo = a->qlo, qhi = a->qhi;
    const float* mult = a->mult;
    int32_t acc[QC_DW_CB];
    (void)tid;
    for (int64_t ox = 0; ox < OW; ox++) {
        uint8_t* yrow = a->Y + ((n * OH + oy) * OW + ox) * C;
        for (int64_t c0 = 0; c0 < C; c0 += QC_DW_CB) {
            const int64_t cw = C - c0 < QC_DW_CB ? C - c0 : QC_DW_CB;
            if (bias) for (int64_t c = 0; c < cw; c++) acc[c] = bias[c0 + c];
            else for (int64_t c = 0; c < cw; c++) acc[c] = 0;
            if (xs) { QC_DW_TAPS(int8_t) } else { QC_DW_TAPS(uint8_t) }
            qc_requant(acc, cw, mult + (mst ? c0 : 0), mst, yzp, qlo, qhi, ys, yrow + c0);
        }
    }
}
#endif
