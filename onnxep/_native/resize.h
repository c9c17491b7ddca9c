/* onnxep native code, included by onnxep/_k_resample.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_RESIZE_H
#define ONNXEP_NATIVE_RESIZE_H

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
    #define ONNXEP_RESIZE2_SAME_ROW(oh) ((oh) > 0 && ih[2 * (oh)] == ih[2 * (oh) - 2]         && (wh == NULL || (ih[2 * (oh) + 1] == ih[2 * (oh) - 1] && wh[2 * (oh)] == wh[2 * (oh) - 2]                            && wh[2 * (oh) + 1] == wh[2 * (oh) - 1])))
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

#endif /* ONNXEP_NATIVE_RESIZE_H */
