/* onnxep native code, included by onnxep/_k_transpose.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_CHANNEL_SHUFFLE_H
#define ONNXEP_NATIVE_CHANNEL_SHUFFLE_H

/* ShuffleNet's channel shuffle of one pixel, G groups of Cg 4-byte channels: y[c*G + g] = x[g*Cg + c], for
   c0 <= c < c1. With G a compile-time constant (the switch below) gcc vectorises the g loop as interleaved
   stores. */
static inline __attribute__((always_inline)) void onnxep_shuffle_px(const float* __restrict__ x,
                                                                   float* __restrict__ y, Py_ssize_t c0,
                                                                   Py_ssize_t c1, Py_ssize_t Cg,
                                                                   const Py_ssize_t G)
{
    Py_ssize_t c, g;
    for (c = c0; c < c1; c++)
        for (g = 0; g < G; g++) y[c * G + g] = x[g * Cg + c];
}
#define ONNXEP_SHUFFLE_CASE(K) case K: for (p = p0; p < p1; p++)                                            onnxep_shuffle_px(x + p * C, y + p * C, c0, c1, Cg, K);                                        break;
/* pixels p0 <= p < p1, channels-in-group c0 <= c < c1 of each */
static void onnxep_shuffle_rows(const float* x, float* y, Py_ssize_t p0, Py_ssize_t p1, Py_ssize_t c0,
                                Py_ssize_t c1, Py_ssize_t G, Py_ssize_t Cg)
{
    Py_ssize_t p, C = G * Cg;
    switch (G) {
    ONNXEP_SHUFFLE_CASE(2) ONNXEP_SHUFFLE_CASE(3) ONNXEP_SHUFFLE_CASE(4) ONNXEP_SHUFFLE_CASE(8)
    default: for (p = p0; p < p1; p++) onnxep_shuffle_px(x + p * C, y + p * C, c0, c1, Cg, G); break;
    }
}

#endif /* ONNXEP_NATIVE_CHANNEL_SHUFFLE_H */
