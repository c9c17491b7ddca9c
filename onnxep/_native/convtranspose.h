/* onnxep native code, included by onnxep/_k_resample.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_CONVTRANSPOSE_H
#define ONNXEP_NATIVE_CONVTRANSPOSE_H

/* One output plane (n, m) of a 2-D ConvTranspose: y := bias + sum over the taps (kh, kw) and input pixels (ih, iw)
   of cols[(m * KH + kh) * KW + kw, col0 + ih * IW + iw] at y[ih * sh + kh * dh - ph, iw * sw + kw * dw - pw] (the
   positions inside the OH x OW output; pads crop). cols rows have ld floats. The input column range of each tap
   is computed, so the inner loop has no test. */
static void onnxep_col2im_plane(const float* cols, Py_ssize_t ld, Py_ssize_t col0, float* y, Py_ssize_t m,
                                Py_ssize_t KH, Py_ssize_t KW, Py_ssize_t IH, Py_ssize_t IW, Py_ssize_t OH,
                                Py_ssize_t OW, Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t ph, Py_ssize_t pw,
                                Py_ssize_t dh, Py_ssize_t dw, float bias)
{
    Py_ssize_t kh, kw, ih, iw, oh, ow0, lo, hi, i;
    for (i = 0; i < OH * OW; i++) y[i] = bias;
    for (kh = 0; kh < KH; kh++) {
        for (kw = 0; kw < KW; kw++) {
            const float* c = cols + ((m * KH + kh) * KW + kw) * ld + col0;
            ow0 = kw * dw - pw;                              /* ow = iw * sw + ow0 */
            lo = ow0 >= 0 ? 0 : (-ow0 + sw - 1) / sw;
            hi = OW - 1 - ow0 < 0 ? -1 : (OW - 1 - ow0) / sw;   /* last iw inside */
            if (hi > IW - 1) hi = IW - 1;
            if (lo > hi) continue;
            for (ih = 0; ih < IH; ih++) {
                oh = ih * sh + kh * dh - ph;
                if (oh < 0 || oh >= OH) continue;
                const float* cr = c + ih * IW;
                float* yr = y + oh * OW + ow0;
                if (sw == 1) {
                    #pragma omp simd
                    for (iw = lo; iw <= hi; iw++) yr[iw] += cr[iw];
                } else {
                    for (iw = lo; iw <= hi; iw++) yr[iw * sw] += cr[iw];
                }
            }
        }
    }
}
typedef struct {
    const float* cols; float* y; const float* bias; Py_ssize_t ld, M, P, KH, KW, IH, IW, OH, OW, sh, sw, ph, pw, dh, dw;
} onnxep_col2im_job;
static void onnxep_col2im_task(void* p, Py_ssize_t item, int tid)
{
    onnxep_col2im_job* j = (onnxep_col2im_job*)p;
    Py_ssize_t n = item / j->M, m = item % j->M;
    onnxep_col2im_plane(j->cols, j->ld, n * j->P, j->y + item * j->OH * j->OW, m, j->KH, j->KW, j->IH, j->IW,
                        j->OH, j->OW, j->sh, j->sw, j->ph, j->pw, j->dh, j->dw, j->bias ? j->bias[m] : 0.0f);
}

#endif /* ONNXEP_NATIVE_CONVTRANSPOSE_H */
