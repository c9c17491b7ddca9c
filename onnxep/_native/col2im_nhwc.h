/* onnxep native code, included by onnxep/_k_resample.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_COL2IM_NHWC_H
#define ONNXEP_NATIVE_COL2IM_NHWC_H

/* Channel-last col2im of one image row-band: y (OH, OW, M) := bias + for each input pixel p = ih * IW + iw and tap
   (kh, kw) inside the output, cols[p, (kh * KW + kw) * M .. + M] added at y[ih * sh + kh * dh - ph,
   iw * sw + kw * dw - pw, :] -- the M channels contiguous on both sides (vectorised). cols rows have ld floats.
   Output rows [oh0, oh1) only (a task's band: no two tasks write one row). */
static void onnxep_col2im_nhwc_rows(const float* cols, Py_ssize_t ld, float* y, const float* bias, Py_ssize_t M,
                                    Py_ssize_t KH, Py_ssize_t KW, Py_ssize_t IH, Py_ssize_t IW, Py_ssize_t OW,
                                    Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t ph, Py_ssize_t pw, Py_ssize_t dh,
                                    Py_ssize_t dw, Py_ssize_t oh0, Py_ssize_t oh1)
{
    Py_ssize_t oh, ow, ih, iw, kh, kw, m, t;
    for (oh = oh0; oh < oh1; oh++) {
        float* yr = y + oh * OW * M;
        for (ow = 0; ow < OW; ow++) {
            if (bias) { for (m = 0; m < M; m++) yr[ow * M + m] = bias[m]; }
            else { for (m = 0; m < M; m++) yr[ow * M + m] = 0.0f; }
        }
        for (kh = 0; kh < KH; kh++) {
            t = oh + ph - kh * dh;                      /* = ih * sh */
            if (t < 0 || t % sh) continue;
            ih = t / sh;
            if (ih >= IH) continue;
            for (iw = 0; iw < IW; iw++) {
                const float* c = cols + (ih * IW + iw) * ld + kh * KW * M;
                for (kw = 0; kw < KW; kw++) {
                    ow = iw * sw + kw * dw - pw;
                    if (ow < 0 || ow >= OW) continue;
                    float* yo = yr + ow * M;
                    const float* ck = c + kw * M;
                    #pragma omp simd
                    for (m = 0; m < M; m++) yo[m] += ck[m];
                }
            }
        }
    }
}
typedef struct {
    const float* cols; float* y; const float* bias; Py_ssize_t ld, M, KH, KW, IH, IW, OH, OW, sh, sw, ph, pw, dh,
        dw, band;
} onnxep_col2im_nhwc_job;
static void onnxep_col2im_nhwc_task(void* p, Py_ssize_t item, int tid)
{
    onnxep_col2im_nhwc_job* j = (onnxep_col2im_nhwc_job*)p;
    Py_ssize_t bands = (j->OH + j->band - 1) / j->band, n = item / bands, oh0 = (item % bands) * j->band;
    Py_ssize_t oh1 = oh0 + j->band < j->OH ? oh0 + j->band : j->OH;
    onnxep_col2im_nhwc_rows(j->cols + n * j->IH * j->IW * j->ld, j->ld, j->y + n * j->OH * j->OW * j->M, j->bias,
                            j->M, j->KH, j->KW, j->IH, j->IW, j->OW, j->sh, j->sw, j->ph, j->pw, j->dh, j->dw,
                            oh0, oh1);
}

#endif /* ONNXEP_NATIVE_COL2IM_NHWC_H */
