/* Data movement and conversion loops of the compiled run loop (onnxep/_k_runloop.pxi): raw pointers, byte strides,
 * no Python objects, no allocation. Shapes have 1 .. RL_MAXD dims; every stride is in bytes (0: broadcast). */
#ifndef ONNXEP_RL_OPS_H
#define ONNXEP_RL_OPS_H

#include <string.h>
#include <stdint.h>

#define RL_MAXD 6

/* one element of `item` bytes (constant sizes become single moves) */
static inline void rl_move(char* d, const char* s, Py_ssize_t item) {
    switch (item) {
    case 1: *d = *s; break;
    case 2: memcpy(d, s, 2); break;
    case 4: memcpy(d, s, 4); break;
    case 8: memcpy(d, s, 8); break;
    default: memcpy(d, s, (size_t)item);
    }
}

/* odometer step over the outer nd - 1 dims of `shape`, moving up to three pointers by their strides;
 * 0 when the walk is over */
static inline int rl_next(Py_ssize_t* idx, int nd, const Py_ssize_t* shape, char** p, const Py_ssize_t* const* st,
                          int np_) {
    int k, j;
    for (k = nd - 2; k >= 0; k--) {
        if (++idx[k] < shape[k]) {
            for (j = 0; j < np_; j++) p[j] += st[j][k];
            return 1;
        }
        idx[k] = 0;
        for (j = 0; j < np_; j++) p[j] -= st[j][k] * (shape[k] - 1);
    }
    return 0;
}

static inline Py_ssize_t rl_count(int nd, const Py_ssize_t* shape) {
    Py_ssize_t n = 1;
    int k;
    for (k = 0; k < nd; k++) n *= shape[k];
    return n;
}

/* dst[i...] := src[i...] over `shape` (Transpose, Slice, Expand: src strides from the numpy view), rows [r0, r1) of
 * it: a row is one index of the outer nd - 1 dims (rl_count(nd - 1, shape) rows), in C order */
static void rl_strided_copy(char* dst, const char* src, Py_ssize_t item, int nd, const Py_ssize_t* shape,
                            const Py_ssize_t* ss, const Py_ssize_t* ds, Py_ssize_t r0, Py_ssize_t r1) {
    Py_ssize_t idx[RL_MAXD] = {0}, i, r, q, n = shape[nd - 1], sl = ss[nd - 1], dl = ds[nd - 1];
    char* p[2] = {dst, (char*)src};
    const Py_ssize_t* st[2] = {ds, ss};
    int k;
    if (n == 0 || r0 >= r1) return;
    for (q = r0, k = nd - 2; k >= 0; k--) {         /* the odometer at row r0 */
        idx[k] = q % shape[k];
        q /= shape[k];
        p[0] += idx[k] * ds[k];
        p[1] += idx[k] * ss[k];
    }
    for (r = r0; r < r1; r++) {
        if (sl == item && dl == item)
            memcpy(p[0], p[1], (size_t)(n * item));
        else
            for (i = 0; i < n; i++) rl_move(p[0] + i * dl, p[1] + i * sl, item);
        if (r + 1 < r1) rl_next(idx, nd, shape, p, st, 2);
    }
}

/* y := c ? a : b, broadcast (y contiguous; c one byte per element) */
static void rl_where(char* y, const char* c, const char* a, const char* b, Py_ssize_t item, int nd,
                     const Py_ssize_t* shape, const Py_ssize_t* sc, const Py_ssize_t* sa, const Py_ssize_t* sb) {
    Py_ssize_t idx[RL_MAXD] = {0}, i, n = shape[nd - 1], cl = sc[nd - 1], al = sa[nd - 1], bl = sb[nd - 1];
    char* p[3] = {(char*)c, (char*)a, (char*)b};
    const Py_ssize_t* st[3] = {sc, sa, sb};
    if (rl_count(nd, shape) == 0) return;
    do {
        for (i = 0; i < n; i++, y += item)
            rl_move(y, p[0][i * cl] ? p[1] + i * al : p[2] + i * bl, item);
    } while (rl_next(idx, nd, shape, p, st, 3));
}

/* y's rows [r0, r1) of `orow` bytes := the k inputs' rows of chunk[i] bytes side by side (Concat) */
static void rl_concat(char* y, char* const* xs, int k, Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t orow,
                      const Py_ssize_t* chunk) {
    Py_ssize_t r, o;
    int i;
    for (r = r0; r < r1; r++) {
        o = 0;
        for (i = 0; i < k; i++) {
            memcpy(y + r * orow + o, xs[i] + r * chunk[i], (size_t)chunk[i]);
            o += chunk[i];
        }
    }
}

/* the k outputs' rows [r0, r1) of chunk[i] bytes := x's rows of `xrow` bytes cut side by side (Split) */
static void rl_split(const char* x, char* const* ys, int k, Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t xrow,
                     const Py_ssize_t* chunk) {
    Py_ssize_t r, o;
    int i;
    for (r = r0; r < r1; r++) {
        o = 0;
        for (i = 0; i < k; i++) {
            memcpy(ys[i] + r * chunk[i], x + r * xrow + o, (size_t)chunk[i]);
            o += chunk[i];
        }
    }
}

/* Cast codes: what numpy's astype does (C conversions; float -> int truncates) */
enum { RL_T_F32 = 0, RL_T_F16 = 1, RL_T_I64 = 2, RL_T_I32 = 3, RL_T_BOOL = 4, RL_T_F64 = 5 };

static inline double rl_load(const char* x, int t) {
    switch (t) {
    case RL_T_F32: return *(const float*)x;
    case RL_T_F16: return (float)*(const _Float16*)x;
    case RL_T_I32: return *(const int32_t*)x;
    case RL_T_BOOL: return *(const uint8_t*)x != 0;
    default: return *(const double*)x;
    }
}

#define RL_CAST_LOOP(ST, DT, EXPR) \
    for (i = 0; i < n; i++) { ST v = ((const ST*)x)[i]; ((DT*)y)[i] = (EXPR); } return;

/* y[i] := x[i] converted from type code s to d; the pairs numpy rounds differently through double are explicit */
static void rl_cast(const char* x, char* y, Py_ssize_t n, int s, int d) {
    Py_ssize_t i;
    if (s == RL_T_I64) {
        switch (d) {
        case RL_T_F32: RL_CAST_LOOP(int64_t, float, (float)v)
        case RL_T_F16: RL_CAST_LOOP(int64_t, _Float16, (_Float16)v)
        case RL_T_I32: RL_CAST_LOOP(int64_t, int32_t, (int32_t)v)
        case RL_T_BOOL: RL_CAST_LOOP(int64_t, uint8_t, v != 0)
        case RL_T_F64: RL_CAST_LOOP(int64_t, double, (double)v)
        }
    }
    if (s == RL_T_F32 && d == RL_T_F16) { RL_CAST_LOOP(float, _Float16, (_Float16)v) }
    if (s == RL_T_F64 && d == RL_T_F16) { RL_CAST_LOOP(double, _Float16, (_Float16)v) }
    if (s == RL_T_F64 && d == RL_T_F32) { RL_CAST_LOOP(double, float, (float)v) }
    if (s == RL_T_I32 && d == RL_T_F32) { RL_CAST_LOOP(int32_t, float, (float)v) }
    if (s == RL_T_I32 && d == RL_T_F16) { RL_CAST_LOOP(int32_t, _Float16, (_Float16)v) }
    /* the rest goes exactly through double (float -> double is exact; double -> int truncates as C does) */
    for (i = 0; i < n; i++) {
        double v = rl_load(x + i * (s == RL_T_F64 || s == RL_T_I64 ? 8 : s == RL_T_F32 || s == RL_T_I32 ? 4 :
                                    s == RL_T_F16 ? 2 : 1), s);
        switch (d) {
        case RL_T_F32: ((float*)y)[i] = (float)v; break;
        case RL_T_F16: ((_Float16*)y)[i] = (_Float16)v; break;
        case RL_T_I64: ((int64_t*)y)[i] = (int64_t)v; break;
        case RL_T_I32: ((int32_t*)y)[i] = (int32_t)v; break;
        case RL_T_BOOL: ((uint8_t*)y)[i] = v != 0 || v != v; break;
        default: ((double*)y)[i] = v;
        }
    }
}

/* y := (x * x) * x (Pow by a constant 3, as onnxruntime and the Python path compute it) */
static void rl_cube(const float* x, float* y, Py_ssize_t n) {
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        float s = x[i] * x[i];
        y[i] = s * x[i];
    }
}

/* y[i] := x[i] is NaN (IsNaN float32) */
static void rl_isnan(const float* x, uint8_t* y, Py_ssize_t n) {
    Py_ssize_t i;
    for (i = 0; i < n; i++) y[i] = x[i] != x[i];
}

/* comparisons and logic into a bool y (contiguous), a and b broadcast by byte strides; types RL_T_* (f32, i64,
 * i32, bool); Not reads a only */
enum { RL_EQ = 0, RL_LT = 1, RL_GT = 2, RL_AND = 3, RL_OR = 4, RL_XOR = 5, RL_NOT = 6, RL_LE = 7, RL_GE = 8 };

#define RL_CMP_ROW(T) { \
    for (i = 0; i < n; i++, y++) { \
        T u = *(const T*)(p[0] + i * al), v = *(const T*)(p[1] + i * bl); \
        *y = op == RL_EQ ? u == v : op == RL_LT ? u < v : op == RL_GT ? u > v : op == RL_LE ? u <= v : \
             op == RL_GE ? u >= v : op == RL_AND ? (u && v) : op == RL_OR ? (u || v) : op == RL_XOR ? (!u != !v) : !u; \
    } }

static void rl_compare(int op, int t, uint8_t* y, const char* a, const char* b, int nd, const Py_ssize_t* shape,
                       const Py_ssize_t* sa, const Py_ssize_t* sb) {
    Py_ssize_t idx[RL_MAXD] = {0}, i, n = shape[nd - 1], al = sa[nd - 1], bl = sb[nd - 1];
    char* p[2] = {(char*)a, (char*)b};
    const Py_ssize_t* st[2] = {sa, sb};
    if (rl_count(nd, shape) == 0) return;
    do {
        switch (t) {
        case RL_T_F32: RL_CMP_ROW(float) break;
        case RL_T_I64: RL_CMP_ROW(int64_t) break;
        case RL_T_I32: RL_CMP_ROW(int32_t) break;
        default: RL_CMP_ROW(uint8_t)
        }
    } while (rl_next(idx, nd, shape, p, st, 2));
}

/* y[o, j, :] := x[o, idx[j], :] (Gather; rows of `inner` bytes, indices int64 or int32, negative from the end);
 * 0, or -1 without writing anything when an index is outside [-n, n) */
static int rl_gather(const char* x, const char* idx, char* y, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t nidx,
                     Py_ssize_t inner, int wide) {
    Py_ssize_t o, j, v;
    for (j = 0; j < nidx; j++) {
        v = wide ? ((const int64_t*)idx)[j] : ((const int32_t*)idx)[j];
        if (v < -n || v >= n) return -1;
    }
    for (o = 0; o < outer; o++)
        for (j = 0; j < nidx; j++) {
            v = wide ? ((const int64_t*)idx)[j] : ((const int32_t*)idx)[j];
            if (v < 0) v += n;
            memcpy(y + (o * nidx + j) * inner, x + (o * n + v) * inner, (size_t)inner);
        }
    return 0;
}

/* y[r] := the sum (mean: / C) of row r of x (R x C, contiguous): eight running sums, then the tail (ReduceSum /
 * ReduceMean over trailing axes; the Python path's float32 sums call the same loop) */
static void rl_row_sum(const float* x, float* y, Py_ssize_t R, Py_ssize_t C, int mean) {
    Py_ssize_t r, i;
    int j;
    for (r = 0; r < R; r++) {
        const float* p = x + r * C;
        float a[8] = {0, 0, 0, 0, 0, 0, 0, 0}, s;
        for (i = 0; i + 8 <= C; i += 8)
            for (j = 0; j < 8; j++) a[j] += p[i + j];
        s = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
        for (; i < C; i++) s += p[i];
        y[r] = mean ? s / (float)C : s;
    }
}

/* ---- decoder slice: RMS normalization, rotary embeddings, GatherND, ArgMax, integer arithmetic, CumSum,
 * GatherElements ---- */

#include <math.h>

/* rows r0 .. r1 - 1 of x (R x C, contiguous): y[r, :] := x[r, :] / sqrt(sum(x[r, :]^2) * (1 / C) + eps) * s[:]
 * (RMSNormalization, scale of C elements; the sum of squares in sixteen running sums, then the tail) */
static void rl_rms_norm_rows(const float* x, const float* s, float* y, Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t C,
                             float eps) {
    Py_ssize_t r, i;
    int j;
    float inv_c = 1.0f / (float)C;
    for (r = r0; r < r1; r++) {
        const float* p = x + r * C;
        float* q = y + r * C;
        float a[16] = {0}, ss, d;
        for (i = 0; i + 16 <= C; i += 16)
            for (j = 0; j < 16; j++) a[j] += p[i + j] * p[i + j];
        for (j = 0; j < 8; j++) a[j] += a[j + 8];
        ss = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
        for (; i < C; i++) ss += p[i] * p[i];
        d = sqrtf(ss * inv_c + eps);
        for (i = 0; i < C; i++) q[i] = p[i] / d * s[i];
    }
}

/* rows r0 .. r1 - 1 of y := x * cos + rot(x) * sin, rows of D contiguous floats in x and y: rotate-half (inter 0:
 * rot = [-x[h:], x[:h]], h = D / 2) or interleaved (inter 1: rot[2i] = -x[2i + 1], rot[2i + 1] = x[2i]). cos / sin
 * rows by broadcast byte strides over the outer dims (nd, shape: the rows' odometer); their last dim contiguous
 * (cl / sl 1) or one value (0). Each output pair is written after both its inputs are read: y may be x. */
static void rl_rotary_rows(const float* x, const char* c, const char* s, float* y, int nd, const Py_ssize_t* shape,
                           const Py_ssize_t* sc, const Py_ssize_t* ss, Py_ssize_t D, int cl, int sl, int inter,
                           Py_ssize_t r0, Py_ssize_t r1) {
    Py_ssize_t idx[RL_MAXD] = {0}, rem = r0, r, i, h = D / 2;
    const char* pc = c;
    const char* ps = s;
    int k;
    for (k = nd - 1; k >= 0; k--) {          /* the odometer at row r0 */
        idx[k] = rem % shape[k];
        rem /= shape[k];
        pc += idx[k] * sc[k];
        ps += idx[k] * ss[k];
    }
    for (r = r0; r < r1; r++) {
        const float* xr = x + r * D;
        const float* cr = (const float*)pc;
        const float* sr = (const float*)ps;
        float* yr = y + r * D;
        if (!inter) {       /* (both halves from the same two loads: y may be x) */
            if (cl && sl) {
                for (i = 0; i < h; i++) {
                    float x1 = xr[i], x2 = xr[i + h];
                    float a = x1 * cr[i], b = x2 * sr[i], e = x2 * cr[i + h], f = x1 * sr[i + h];
                    yr[i] = a - b;
                    yr[i + h] = e + f;
                }
            } else {
                for (i = 0; i < h; i++) {
                    float x1 = xr[i], x2 = xr[i + h];
                    float a = x1 * cr[i * cl], b = x2 * sr[i * sl], e = x2 * cr[(i + h) * cl], f = x1 * sr[(i + h) * sl];
                    yr[i] = a - b;
                    yr[i + h] = e + f;
                }
            }
        } else {
            for (i = 0; i < h; i++) {
                float x0 = xr[2 * i], x1 = xr[2 * i + 1];
                float a = x0 * cr[2 * i * cl], b = x1 * sr[2 * i * sl];
                float e = x1 * cr[(2 * i + 1) * cl], f = x0 * sr[(2 * i + 1) * sl];
                yr[2 * i] = a - b;
                yr[2 * i + 1] = e + f;
            }
        }
        for (k = nd - 1; k >= 0; k--) {
            if (++idx[k] < shape[k]) {
                pc += sc[k];
                ps += ss[k];
                break;
            }
            idx[k] = 0;
            pc -= sc[k] * (shape[k] - 1);
            ps -= ss[k] * (shape[k] - 1);
        }
    }
}

/* GatherND: y row i (of `inner` bytes) := data row (i / nb) * per + sum_j norm(idx[i * k + j]) * mult[j], indices
 * int64 (wide) or int32, norm adding dim[j] to a negative one; 0, or -1 without writing anything when an index is
 * outside [-dim[j], dim[j]) */
static int rl_gather_nd(const char* data, const char* idx, char* y, Py_ssize_t n, int k, Py_ssize_t nb,
                        Py_ssize_t per, Py_ssize_t inner, int wide, const Py_ssize_t* dim, const Py_ssize_t* mult) {
    Py_ssize_t i, row, v;
    int j;
    for (i = 0; i < n * k; i++) {
        v = wide ? ((const int64_t*)idx)[i] : ((const int32_t*)idx)[i];
        j = (int)(i % k);
        if (v < -dim[j] || v >= dim[j]) return -1;
    }
    for (i = 0; i < n; i++) {
        row = (i / nb) * per;
        for (j = 0; j < k; j++) {
            v = wide ? ((const int64_t*)idx)[i * k + j] : ((const int32_t*)idx)[i * k + j];
            if (v < 0) v += dim[j];
            row += v * mult[j];
        }
        rl_move(y + i * inner, data + row * inner, inner);
    }
    return 0;
}

/* ArgMax / ArgMin over the middle axis of x (outer, n, inner), contiguous, type RL_T_F32 / I64 / I32, into int64 y
 * (outer, inner): the first extreme (select_last_index 0) or the last (1); NaN wins as numpy's argmax has it */
#define RL_ARG_LOOP(T) { \
    const T* p = (const T*)x; \
    for (o = 0; o < outer; o++) for (q = 0; q < inner; q++) { \
        const T* b = p + o * n * inner + q; T best = b[0]; Py_ssize_t bi = 0; \
        if (best != best) { y[o * inner + q] = 0; continue; } \
        for (j = 1; j < n; j++) { T v = b[j * inner]; \
            if (v != v) { bi = j; break; } \
            if (mx ? (last ? v >= best : v > best) : (last ? v <= best : v < best)) { best = v; bi = j; } } \
        y[o * inner + q] = bi; } }

static void rl_arg_extreme(const char* x, int64_t* y, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner, int t,
                           int mx, int last) {
    Py_ssize_t o, q, j;
    switch (t) {
    case RL_T_F32: RL_ARG_LOOP(float) break;
    case RL_T_I64: RL_ARG_LOOP(int64_t) break;
    default: RL_ARG_LOOP(int32_t)
    }
}

/* integer binary arithmetic y := a op b broadcast by byte strides (y contiguous), int64 (wide) or int32: Add, Sub,
 * Mul, wrapping as numpy's integer arithmetic does */
enum { RL_I_ADD = 0, RL_I_SUB = 1, RL_I_MUL = 2 };

#define RL_INT_ROW(T, U) { \
    for (i = 0; i < n; i++) { \
        U u = (U)*(const T*)(p[0] + i * al), v = (U)*(const T*)(p[1] + i * bl); \
        ((T*)y)[i] = (T)(op == RL_I_ADD ? (U)(u + v) : op == RL_I_SUB ? (U)(u - v) : (U)(u * v)); \
    } y += n * sizeof(T); }

static void rl_binary_int(int op, int wide, char* y, const char* a, const char* b, int nd, const Py_ssize_t* shape,
                          const Py_ssize_t* sa, const Py_ssize_t* sb) {
    Py_ssize_t idx[RL_MAXD] = {0}, i, n = shape[nd - 1], al = sa[nd - 1], bl = sb[nd - 1];
    char* p[2] = {(char*)a, (char*)b};
    const Py_ssize_t* st[2] = {sa, sb};
    if (rl_count(nd, shape) == 0) return;
    do {
        if (wide) RL_INT_ROW(int64_t, uint64_t)
        else RL_INT_ROW(int32_t, uint32_t)
    } while (rl_next(idx, nd, shape, p, st, 2));
}

/* GatherElements: y (contiguous, `shape` = the indices' shape, nd dims) := x at the indices' coordinates with the
 * index in place of the `axis` one; xs x's byte strides, n x's axis dim, indices int64 (wide) or int32, negative
 * from the end; 0, or -1 without writing anything when an index is outside [-n, n) */
static int rl_gather_elements(const char* x, const char* idx, char* y, int nd, int axis, Py_ssize_t n,
                              Py_ssize_t item, const Py_ssize_t* shape, const Py_ssize_t* xs, int wide) {
    Py_ssize_t id[RL_MAXD] = {0}, total = rl_count(nd, shape), e, v;
    const char* base = x;
    int k;
    for (e = 0; e < total; e++) {
        v = wide ? ((const int64_t*)idx)[e] : ((const int32_t*)idx)[e];
        if (v < -n || v >= n) return -1;
    }
    for (e = 0; e < total; e++) {
        v = wide ? ((const int64_t*)idx)[e] : ((const int32_t*)idx)[e];
        if (v < 0) v += n;
        rl_move(y + e * item, base + v * xs[axis], item);
        for (k = nd - 1; k >= 0; k--) {
            if (++id[k] < shape[k]) {
                if (k != axis) base += xs[k];
                break;
            }
            if (k != axis) base -= xs[k] * (shape[k] - 1);
            id[k] = 0;
        }
    }
    return 0;
}

/* running sums along the middle axis of x (outer, n, inner), contiguous, type RL_T_F32 / I64 / I32, into y of the
 * same shape: inclusive or exclusive (the first 0), forward or from the end; sequential, as numpy's accumulate adds */
#define RL_CUMSUM_LOOP(T, U) { \
    const T* px = (const T*)x; T* py = (T*)y; \
    for (o = 0; o < outer; o++) for (q = 0; q < inner; q++) { \
        const T* b = px + o * n * inner + q; T* c = py + o * n * inner + q; U acc = 0; \
        for (j = 0; j < n; j++) { Py_ssize_t e = (rev ? n - 1 - j : j) * inner; \
            if (excl) { c[e] = (T)acc; acc = (U)(acc + (U)b[e]); } \
            else { acc = (U)(acc + (U)b[e]); c[e] = (T)acc; } } } }

static void rl_cumsum(const char* x, char* y, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner, int t, int excl,
                      int rev) {
    Py_ssize_t o, q, j;
    switch (t) {
    case RL_T_F32: RL_CUMSUM_LOOP(float, float) break;
    case RL_T_I64: RL_CUMSUM_LOOP(int64_t, uint64_t) break;
    default: RL_CUMSUM_LOOP(int32_t, uint32_t)
    }
}

#endif
