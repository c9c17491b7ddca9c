# Upsampling kernels: ConvTranspose's col2im (the columns a GEMM made scattered and summed into the output planes).

cdef extern from "_native/convtranspose.h":
    ctypedef struct Col2imJob "onnxep_col2im_job":
        const float* cols
        float* y
        const float* bias
        Py_ssize_t ld, M, P, KH, KW, IH, IW, OH, OW, sh, sw, ph, pw, dh, dw
    void col2im_task "onnxep_col2im_task"(void* p, Py_ssize_t item, int tid) noexcept nogil


cdef extern from "_native/col2im_nhwc.h":
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
cdef extern from "_native/resize.h":
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
