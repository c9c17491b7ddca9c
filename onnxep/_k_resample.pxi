# Upsampling kernels: ConvTranspose's col2im (the columns a GEMM made scattered and summed into the output planes).

cdef extern from *:
    """
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
    """
    ctypedef struct Col2imJob "onnxep_col2im_job":
        const float* cols
        float* y
        const float* bias
        Py_ssize_t ld, M, P, KH, KW, IH, IW, OH, OW, sh, sw, ph, pw, dh, dw
    void col2im_task "onnxep_col2im_task"(void* p, Py_ssize_t item, int tid) noexcept nogil


cdef extern from *:
    """
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
    """
    ctypedef struct Col2imNhwcJob "onnxep_col2im_nhwc_job":
        const float* cols
        float* y
        const float* bias
        Py_ssize_t ld, M, KH, KW, IH, IW, OH, OW, sh, sw, ph, pw, dh, dw, band
    void col2im_nhwc_task "onnxep_col2im_nhwc_task"(void* p, Py_ssize_t item, int tid) noexcept nogil


def col2im_nhwc_f32(const float[:, ::1] cols, float[::1] y, Py_ssize_t N, Py_ssize_t M, Py_ssize_t KH,
                    Py_ssize_t KW, Py_ssize_t IH, Py_ssize_t IW, Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t sh,
                    Py_ssize_t sw, Py_ssize_t ph, Py_ssize_t pw, Py_ssize_t dh, Py_ssize_t dw,
                    const float[::1] bias=None, int nthreads=0):
    """2-D ConvTranspose's col2im, channel-last: cols (N * IH * IW, KH * KW * M) -- X^T W with W as
    (C, KH, KW, M) -- into y (N, OH, OW, M): y[n, ih * sh + kh * dh - ph, iw * sw + kw * dw - pw, m] += the column
    value, from bias[m] (0 without bias). ph / pw: the begin pads (cropped)."""
    cdef Col2imNhwcJob j
    cdef Py_ssize_t bands
    if cols.shape[0] != N * IH * IW or cols.shape[1] != KH * KW * M or y.shape[0] != N * M * OH * OW:
        raise ValueError(f"col2im_nhwc_f32: cols {cols.shape[0]}x{cols.shape[1]}, y {y.shape[0]} do not fit "
                         f"N={N} M={M} kernel {KH}x{KW} in {IH}x{IW} out {OH}x{OW}")
    if min(sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
        raise ValueError(f"col2im_nhwc_f32: strides {sh},{sw} / dilations {dh},{dw} must be >= 1, pads {ph},{pw} "
                         f">= 0")
    if bias is not None and bias.shape[0] != M:
        raise ValueError(f"col2im_nhwc_f32: bias has {bias.shape[0]} values for {M} channels")
    if N * M * OH * OW == 0:
        return
    j.cols, j.y, j.bias = &cols[0, 0] if cols.shape[0] * cols.shape[1] else NULL, &y[0], NULL
    if bias is not None:
        j.bias = &bias[0]
    j.ld, j.M, j.KH, j.KW, j.IH, j.IW, j.OH, j.OW = cols.shape[1], M, KH, KW, IH, IW, OH, OW
    j.sh, j.sw, j.ph, j.pw, j.dh, j.dw = sh, sw, ph, pw, dh, dw
    j.band = 1 if OH * OW * M >= 4096 else OH           # rows per task: small images are one task each
    bands = (OH + j.band - 1) // j.band
    with nogil:
        parallel_for(N * bands, 1 if N * M * OH * OW * KH * KW < NORM_PAR_WORK else _nthreads(nthreads),
                     col2im_nhwc_task, &j)


def col2im_f32(const float[:, ::1] cols, float[::1] y, Py_ssize_t N, Py_ssize_t M, Py_ssize_t KH, Py_ssize_t KW,
               Py_ssize_t IH, Py_ssize_t IW, Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t sh, Py_ssize_t sw,
               Py_ssize_t ph, Py_ssize_t pw, Py_ssize_t dh, Py_ssize_t dw, const float[::1] bias=None,
               int nthreads=0):
    """2-D ConvTranspose's col2im: cols (M * KH * KW, N * IH * IW) -- the GEMM W^T X, image n in columns
    n * IH * IW ... -- into y (N, M, OH, OW): y[n, m, ih * sh + kh * dh - ph, iw * sw + kw * dw - pw] += the column
    value, every plane starting from bias[m] (0 without bias). ph / pw: the begin pads (cropped)."""
    cdef Col2imJob j
    if cols.shape[0] != M * KH * KW or cols.shape[1] != N * IH * IW or y.shape[0] != N * M * OH * OW:
        raise ValueError(f"col2im_f32: cols {cols.shape[0]}x{cols.shape[1]}, y {y.shape[0]} do not fit "
                         f"N={N} M={M} kernel {KH}x{KW} in {IH}x{IW} out {OH}x{OW}")
    if min(sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
        raise ValueError(f"col2im_f32: strides {sh},{sw} / dilations {dh},{dw} must be >= 1, pads {ph},{pw} >= 0")
    if bias is not None and bias.shape[0] != M:
        raise ValueError(f"col2im_f32: bias has {bias.shape[0]} values for {M} channels")
    if N * M * OH * OW == 0:
        return
    j.cols, j.y, j.bias = &cols[0, 0] if cols.shape[0] * cols.shape[1] else NULL, &y[0], NULL
    if bias is not None:
        j.bias = &bias[0]
    j.ld, j.M, j.P, j.KH, j.KW, j.IH, j.IW, j.OH, j.OW = cols.shape[1], M, IH * IW, KH, KW, IH, IW, OH, OW
    j.sh, j.sw, j.ph, j.pw, j.dh, j.dw = sh, sw, ph, pw, dh, dw
    with nogil:
        parallel_for(N * M, 1 if N * M * OH * OW * KH * KW < NORM_PAR_WORK else _nthreads(nthreads), col2im_task,
                     &j)


# ------------------------------------------------------------------------------ Resize: 2-tap (linear) on H and W
cdef extern from *:
    """
    /* One plane of a separable 2-tap resize of the last two axes: each output row oh blends input rows ih[2 oh] and
       ih[2 oh + 1] with weights wh[2 oh], wh[2 oh + 1] into tmp (IW floats, vectorised), then each output column ow
       blends tmp[iw[2 ow]], tmp[iw[2 ow + 1]] with ww[2 ow], ww[2 ow + 1] -- rows first, then columns, as Resize
       applies its axes in order. */
    static void onnxep_resize2_plane(const float* x, float* y, Py_ssize_t IW, Py_ssize_t OH, Py_ssize_t OW,
                                     const int64_t* ih, const float* wh, const int64_t* iw, const float* ww,
                                     float* tmp)
    {
        Py_ssize_t oh, ow, i;
        /* an output row made of the same input rows and weights as the row before it is a copy of that row (half
           the rows of a 2x upsampling) */
        #define ONNXEP_RESIZE2_SAME_ROW(oh) ((oh) > 0 && ih[2 * (oh)] == ih[2 * (oh) - 2] \
            && (wh == NULL || (ih[2 * (oh) + 1] == ih[2 * (oh) - 1] && wh[2 * (oh)] == wh[2 * (oh) - 2] \
                               && wh[2 * (oh) + 1] == wh[2 * (oh) - 1])))
        if (wh == NULL) {                 /* nearest: y[oh, ow] = x[ih[2 oh], iw[2 ow]], a copy (exact, inf / NaN too) */
            for (oh = 0; oh < OH; oh++) {
                const float* r0 = x + ih[2 * oh] * IW;
                float* yr = y + oh * OW;
                if (ONNXEP_RESIZE2_SAME_ROW(oh)) { memcpy(yr, yr - OW, OW * sizeof(float)); continue; }
                for (ow = 0; ow < OW; ow++) yr[ow] = r0[iw[2 * ow]];
            }
            return;
        }
        for (oh = 0; oh < OH; oh++) {
            const float* r0 = x + ih[2 * oh] * IW;
            const float* r1 = x + ih[2 * oh + 1] * IW;
            float a = wh[2 * oh], b = wh[2 * oh + 1];
            float* yr = y + oh * OW;
            if (ONNXEP_RESIZE2_SAME_ROW(oh)) { memcpy(yr, yr - OW, OW * sizeof(float)); continue; }
            if (b == 0.0f) {              /* one tap (a still axis, an exact position): inf / NaN of the other unread */
                #pragma omp simd
                for (i = 0; i < IW; i++) tmp[i] = r0[i] * a;
            } else {
                #pragma omp simd
                for (i = 0; i < IW; i++) tmp[i] = r0[i] * a + r1[i] * b;
            }
            for (ow = 0; ow < OW; ow++)
                yr[ow] = tmp[iw[2 * ow]] * ww[2 * ow] + tmp[iw[2 * ow + 1]] * ww[2 * ow + 1];
        }
    }
    #define ONNXEP_RESIZE2_MAX_IW 8192     /* the row scratch lives on the stack */
    typedef struct {
        const float* x; float* y; Py_ssize_t IH, IW, OH, OW; const int64_t* ih; const float* wh; const int64_t* iw;
        const float* ww;
    } onnxep_resize2_job;
    static void onnxep_resize2_task(void* p, Py_ssize_t item, int tid)
    {
        onnxep_resize2_job* j = (onnxep_resize2_job*)p;
        float tmp[ONNXEP_RESIZE2_MAX_IW];
        onnxep_resize2_plane(j->x + item * j->IH * j->IW, j->y + item * j->OH * j->OW, j->IW, j->OH, j->OW, j->ih,
                             j->wh, j->iw, j->ww, tmp);
    }
    static void onnxep_resize2(const float* x, float* y, Py_ssize_t P, Py_ssize_t IH, Py_ssize_t IW, Py_ssize_t OH,
                               Py_ssize_t OW, const int64_t* ih, const float* wh, const int64_t* iw, const float* ww,
                               int nth, Py_ssize_t par_work)
    {
        onnxep_resize2_job j;
        if (P * OH * OW == 0) return;
        j.x = x; j.y = y; j.IH = IH; j.IW = IW; j.OH = OH; j.OW = OW; j.ih = ih; j.wh = wh; j.iw = iw; j.ww = ww;
        onnxep_parallel_for(P, P * OH * OW < par_work ? 1 : nth, onnxep_resize2_task, &j);
    }
    """
    enum: RESIZE2_MAX_IW "ONNXEP_RESIZE2_MAX_IW"
    void resize2_c "onnxep_resize2"(const float* x, float* y, Py_ssize_t P, Py_ssize_t IH, Py_ssize_t IW,
                                    Py_ssize_t OH, Py_ssize_t OW, const int64_t* ih, const float* wh,
                                    const int64_t* iw, const float* ww, int nth, Py_ssize_t par_work) noexcept nogil

RESIZE2_IW_LIMIT = RESIZE2_MAX_IW


def resize2_f32(const float[::1] x, float[::1] y, Py_ssize_t P, Py_ssize_t IH, Py_ssize_t IW, Py_ssize_t OH,
                Py_ssize_t OW, const int64_t[::1] ih, const float[::1] wh, const int64_t[::1] iw,
                const float[::1] ww, int nthreads=0):
    """y (P, OH, OW) := x (P, IH, IW) resized by two taps per axis: y[p, oh, ow] = sum over a, b of
    wh[2 oh + a] * ww[2 ow + b] * x[p, ih[2 oh + a], iw[2 ow + b]], rows blended first (linear Resize of H and W).
    wh and ww None: nearest, y[p, oh, ow] = x[p, ih[2 oh], iw[2 ow]] (a copy)."""
    cdef Py_ssize_t k
    if P * OH * OW == 0 and y.shape[0] == 0:
        return
    if x.shape[0] != P * IH * IW or y.shape[0] != P * OH * OW or x.shape[0] == 0:
        raise ValueError(f"resize2_f32: x has {x.shape[0]} elements, y {y.shape[0]}, expected {P}x{IH}x{IW} and "
                         f"{P}x{OH}x{OW}")
    if (wh is None) != (ww is None):
        raise ValueError("resize2_f32: give both weight tables or neither")
    if ih.shape[0] != 2 * OH or iw.shape[0] != 2 * OW or (wh is not None and (wh.shape[0] != 2 * OH
                                                                             or ww.shape[0] != 2 * OW)):
        raise ValueError("resize2_f32: the tables need 2 entries per output row / column")
    if IW > RESIZE2_MAX_IW:
        raise ValueError(f"resize2_f32: rows of {IW} exceed {RESIZE2_MAX_IW}")
    for k in range(2 * OH):
        if not 0 <= ih[k] < IH:
            raise ValueError(f"resize2_f32: row index {ih[k]} outside [0, {IH})")
    for k in range(2 * OW):
        if not 0 <= iw[k] < IW:
            raise ValueError(f"resize2_f32: column index {iw[k]} outside [0, {IW})")
    with nogil:
        resize2_c(&x[0], &y[0], P, IH, IW, OH, OW, &ih[0], &wh[0] if wh is not None else NULL, &iw[0],
                  &ww[0] if ww is not None else NULL, _nthreads(nthreads), NORM_PAR_WORK)
