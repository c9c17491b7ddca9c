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

/* dst := len bytes of src / len bytes of v: AVX-512 (BW) masked 64-byte moves (a kernel row of a small-channel
   conv is a few dozen bytes: a memcpy call per row cost more than the copy), else memcpy / memset */
static inline void qc_copy(uint8_t* d, const uint8_t* s, int64_t len) {
#if defined(__AVX512BW__)
    for (; len >= 64; len -= 64, d += 64, s += 64) _mm512_storeu_si512((void*)d, _mm512_loadu_si512((const void*)s));
    if (len) {
        __mmask64 k = (__mmask64)((1ULL << len) - 1);
        _mm512_mask_storeu_epi8(d, k, _mm512_maskz_loadu_epi8(k, s));
    }
#else
    memcpy(d, s, (size_t)len);
#endif
}

static inline void qc_fill(uint8_t* d, uint8_t v, int64_t len) {
#if defined(__AVX512BW__)
    const __m512i vv = _mm512_set1_epi8((char)v);
    for (; len >= 64; len -= 64, d += 64) _mm512_storeu_si512((void*)d, vv);
    if (len) _mm512_mask_storeu_epi8(d, (__mmask64)((1ULL << len) - 1), vv);
#else
    memset(d, v, (size_t)len);
#endif
}

static inline void qc_requant(const int32_t* __restrict acc, int64_t w, const float* __restrict mult, int mst,
                              float zp, float lo, float hi, int y_signed, uint8_t* __restrict y) {
    qg_requant_add(acc, NULL, 0, w, mult, mst, zp, lo, hi, y_signed, y);
}

/* im2col of output pixels p0 .. p0 + mr - 1 into packed A rows (K4 * 4 bytes each) and their sums: x's own bytes
   first (a kernel row of in-bounds taps one copy of kw * C bytes when dw == 1; the padding x_zp's byte), then one
   pass flipping an int8 x to u8 and summing */
static void qc_pack_pixels(const qc_args* a, int64_t p0, int mr, uint8_t* Ap, int32_t* rs, int sums) {
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
            if (iy < 0 || iy >= H) { qc_fill(d, pad, kw * C); continue; }
            const uint8_t* srow = X + (n * H + iy) * W * C;
            if (row_in) { qc_copy(d, srow + ix0 * C, kw * C); continue; }
            for (int64_t kj = 0; kj < kw; kj++) {
                int64_t ix = ix0 + kj * dw;
                if (ix < 0 || ix >= W) qc_fill(d + kj * C, pad, C);
                else qc_copy(d + kj * C, srow + ix * C, C);
            }
        }
        uint32_t sum = 0;
        if (!sums) { if (flip) for (int64_t k = 0; k < K; k++) o[k] ^= 0x80; }
        else if (flip) for (int64_t k = 0; k < K; k++) { uint8_t v = o[k] ^ 0x80; o[k] = v; sum += v; }
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
    /* a zero weight zero point (symmetric weights) needs no row sums; then the correction and the bias are one
       int32 per column (-x_zp * colsum + bias) added in the requantization */
    const int zb_zero = !a->zb_stride && a->zb[0] == 0;
    qc_pack_pixels(a, m0, mr, Ap, rs, !zb_zero);
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
    if (zb_zero) {
        int32_t corr[QG_NB];
        for (int64_t j = 0; j < w; j++)
            corr[j] = (int32_t)((bp ? (uint32_t)bp[j] : 0u) - za * (uint32_t)csp[j]);
        for (int64_t r = 0; r < mr; r++)
            qg_requant_add(buf + r * QG_NB, corr, 0, w, mp, a->mult_stride, a->yzp, a->qlo, a->qhi, a->y_signed,
                           a->Y + (m0 + r) * M + n0);
        return;
    }
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

/* depthwise (group == C == M, one weight per tap and channel): one item per output row (n, oy). Per output pixel
   the in-bounds taps are listed once (their x offsets), then each block of channels sums over them: with AVX-512
   16 channels in one register (masked loads at the tail) and the requantization on that register; else the scalar
   loop over up to QC_DW_CB channels, then qc_requant. The fields live in locals (Python's -fno-strict-aliasing would
   reload them after every store). */
#define QC_DW_CB 256
#define QC_DW_MAXT 64
static void qc_dw_generic_block(const uint8_t* X, int xs, const int64_t* offs, const int64_t* taps, int nt,
                                const int16_t* wdw, int64_t C, int64_t c0, int64_t cw, int32_t za, const int32_t* bias,
                                int32_t* __restrict acc) {
    if (bias) for (int64_t c = 0; c < cw; c++) acc[c] = bias[c0 + c];
    else for (int64_t c = 0; c < cw; c++) acc[c] = 0;
    for (int t = 0; t < nt; t++) {
        const int16_t* __restrict wv = wdw + taps[t] * C + c0;
        if (xs) {
            const int8_t* __restrict sx = (const int8_t*)X + offs[t] + c0;
            for (int64_t c = 0; c < cw; c++) acc[c] += ((int32_t)sx[c] - za) * (int32_t)wv[c];
        } else {
            const uint8_t* __restrict sx = X + offs[t] + c0;
            for (int64_t c = 0; c < cw; c++) acc[c] += ((int32_t)sx[c] - za) * (int32_t)wv[c];
        }
    }
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
    int64_t offs[QC_DW_MAXT], taps[QC_DW_MAXT];
    (void)tid;
    for (int64_t ox = 0; ox < OW; ox++) {
        uint8_t* yrow = a->Y + ((n * OH + oy) * OW + ox) * C;
        int64_t c_done = 0;
        int nt = 0, big = kh * kw > QC_DW_MAXT;
        if (!big) {
            for (int64_t ki = 0; ki < kh; ki++) {
                int64_t iy = oy * sh - ph + ki * dh;
                if (iy < 0 || iy >= H) continue;
                for (int64_t kj = 0; kj < kw; kj++) {
                    int64_t ix = ox * sw - pw + kj * dw;
                    if (ix < 0 || ix >= W) continue;
                    offs[nt] = ((n * H + iy) * W + ix) * C;
                    taps[nt++] = ki * kw + kj;
                }
            }
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
            const __m512i vza = _mm512_set1_epi32(za);
            const __m512 vz = _mm512_set1_ps(yzp), vlo = _mm512_set1_ps(qlo), vhi = _mm512_set1_ps(qhi),
                         vm0 = _mm512_set1_ps(mult[0]);
            for (int64_t c0 = 0; c0 < C; c0 += 16) {
                const __mmask16 k = C - c0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (C - c0)) - 1);
                __m512i s = bias ? _mm512_maskz_loadu_epi32(k, bias + c0) : _mm512_setzero_si512();
                for (int t = 0; t < nt; t++) {
                    __m128i xb = _mm_maskz_loadu_epi8(k, X + offs[t] + c0);
                    __m512i xv = xs ? _mm512_cvtepi8_epi32(xb) : _mm512_cvtepu8_epi32(xb);
                    __m512i wv = _mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(k, wdw + taps[t] * C + c0));
                    s = _mm512_add_epi32(s, _mm512_mullo_epi32(_mm512_sub_epi32(xv, vza), wv));
                }
                __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(s), mst ? _mm512_maskz_loadu_ps(k, mult + c0) : vm0);
                f = _mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                f = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(f, vz), vlo), vhi);
                _mm512_mask_cvtepi32_storeu_epi8(yrow + c0, k, _mm512_cvtps_epi32(f));
            }
            c_done = C;
#endif
        }
        for (int64_t c0 = c_done; c0 < C; c0 += QC_DW_CB) {
            const int64_t cw = C - c0 < QC_DW_CB ? C - c0 : QC_DW_CB;
            if (!big) {
                qc_dw_generic_block(X, xs, offs, taps, nt, wdw, C, c0, cw, za, bias, acc);
            } else {
                if (bias) for (int64_t c = 0; c < cw; c++) acc[c] = bias[c0 + c];
                else for (int64_t c = 0; c < cw; c++) acc[c] = 0;
                for (int64_t ki = 0; ki < kh; ki++) {
                    int64_t iy = oy * sh - ph + ki * dh;
                    if (iy < 0 || iy >= H) continue;
                    for (int64_t kj = 0; kj < kw; kj++) {
                        int64_t ix = ox * sw - pw + kj * dw, t = ki * kw + kj, o = ((n * H + iy) * W + ix) * C;
                        if (ix < 0 || ix >= W) continue;
                        for (int64_t c = 0; c < cw; c++)
                            acc[c] += ((xs ? (int32_t)(int8_t)X[o + c0 + c] : (int32_t)X[o + c0 + c]) - za)
                                      * (int32_t)wdw[t * C + c0 + c];
                    }
                }
            }
            qc_requant(acc, cw, mult + (mst ? c0 : 0), mst, yzp, qlo, qhi, ys, yrow + c0);
        }
    }
}
#endif
