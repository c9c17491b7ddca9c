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

/* acc (w int32) -> y bytes: rint(float(acc) * mult) + zp, clamped to [lo, hi] (int8 when y_signed, else uint8). */
static inline void qc_requant(const int32_t* __restrict acc, int64_t w, const float* __restrict mult, int mst,
                              float zp, float lo, float hi, int y_signed, uint8_t* __restrict y) {
    if (y_signed) {
        int8_t* __restrict ys = (int8_t*)y;
        if (mst) for (int64_t j = 0; j < w; j++) {
            float r = rintf((float)acc[j] * mult[j]) + zp;
            r = r > lo ? r : lo; r = r < hi ? r : hi;
            ys[j] = (int8_t)(int32_t)r;
        } else { const float m0 = mult[0]; for (int64_t j = 0; j < w; j++) {
            float r = rintf((float)acc[j] * m0) + zp;
            r = r > lo ? r : lo; r = r < hi ? r : hi;
            ys[j] = (int8_t)(int32_t)r;
        } }
    } else {
        if (mst) for (int64_t j = 0; j < w; j++) {
            float r = rintf((float)acc[j] * mult[j]) + zp;
            r = r > lo ? r : lo; r = r < hi ? r : hi;
            y[j] = (uint8_t)(int32_t)r;
        } else { const float m0 = mult[0]; for (int64_t j = 0; j < w; j++) {
            float r = rintf((float)acc[j] * m0) + zp;
            r = r > lo ? r : lo; r = r < hi ? r : hi;
            y[j] = (uint8_t)(int32_t)r;
        } }
    }
}

/* im2col of output pixels p0 .. p0 + mr - 1 into packed A rows (K4 * 4 bytes each) and their sums */
static void qc_pack_pixels(const qc_args* a, int64_t p0, int mr, uint8_t* Ap, int32_t* rs) {
    const int64_t C = a->C, lda4 = a->K4 * 4, ohw = a->OH * a->OW;
    const uint8_t flip = a->x_signed ? 0x80 : 0, pad = (uint8_t)a->za;
    for (int r = 0; r < mr; r++) {
        int64_t p = p0 + r, n = p / ohw, q = p % ohw, oy = q / a->OW, ox = q % a->OW;
        uint8_t* __restrict o = Ap + r * lda4;
        for (int64_t ki = 0; ki < a->kh; ki++) {
            int64_t iy = oy * a->sh - a->ph + ki * a->dh;
            for (int64_t kj = 0; kj < a->kw; kj++) {
                int64_t ix = ox * a->sw - a->pw + kj * a->dw;
                uint8_t* __restrict d = o + (ki * a->kw + kj) * C;
                if (iy < 0 || iy >= a->H || ix < 0 || ix >= a->W) {
                    memset(d, pad, (size_t)C);
                } else {
                    const uint8_t* __restrict s = a->X + ((n * a->H + iy) * a->W + ix) * C;
                    for (int64_t c = 0; c < C; c++) d[c] = s[c] ^ flip;
                }
            }
        }
        uint32_t sum = 0;
        for (int64_t k = 0; k < a->K; k++) sum += o[k];
        for (int64_t k = a->K; k < lda4; k++) o[k] = 0;
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

/* depthwise (group == C == M, one weight per tap and channel): one item per output row (n, oy) */
#define QC_DW_CB 256
static void qc_dw_item(void* ctx, Py_ssize_t item, int tid) {
    const qc_args* a = (const qc_args*)ctx;
    const int64_t C = a->C, n = item / a->OH, oy = item % a->OH;
    int32_t acc[QC_DW_CB];
    (void)tid;
    for (int64_t ox = 0; ox < a->OW; ox++) {
        uint8_t* yrow = a->Y + ((n * a->OH + oy) * a->OW + ox) * C;
        for (int64_t c0 = 0; c0 < C; c0 += QC_DW_CB) {
            const int64_t cw = C - c0 < QC_DW_CB ? C - c0 : QC_DW_CB;
            if (a->bias) for (int64_t c = 0; c < cw; c++) acc[c] = a->bias[c0 + c];
            else for (int64_t c = 0; c < cw; c++) acc[c] = 0;
            for (int64_t ki = 0; ki < a->kh; ki++) {
                int64_t iy = oy * a->sh - a->ph + ki * a->dh;
                if (iy < 0 || iy >= a->H) continue;
                for (int64_t kj = 0; kj < a->kw; kj++) {
                    int64_t ix = ox * a->sw - a->pw + kj * a->dw;
                    if (ix < 0 || ix >= a->W) continue;
                    const uint8_t* __restrict s = a->X + ((n * a->H + iy) * a->W + ix) * C + c0;
                    const int16_t* __restrict wv = a->wdw + (ki * a->kw + kj) * C + c0;
                    const int32_t za = a->za;
                    if (a->x_signed) {
                        const int8_t* __restrict ss = (const int8_t*)s;
                        for (int64_t c = 0; c < cw; c++) acc[c] += ((int32_t)ss[c] - za) * (int32_t)wv[c];
                    } else {
                        for (int64_t c = 0; c < cw; c++) acc[c] += ((int32_t)s[c] - za) * (int32_t)wv[c];
                    }
                }
            }
            qc_requant(acc, cw, a->mult + (a->mult_stride ? c0 : 0), a->mult_stride, a->yzp, a->qlo, a->qhi,
                       a->y_signed, yrow + c0);
        }
    }
}
#endif
