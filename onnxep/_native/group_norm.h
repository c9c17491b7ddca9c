/* onnxep native code, included by onnxep/_k_norm.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_GROUP_NORM_H
#define ONNXEP_NATIVE_GROUP_NORM_H

static inline float onnxep_exp_neg(float x);     /* _k_transformer.pxi (later in this unit): exp of x <= 0 */

/* GroupNorm (com.onnxep GroupNorm, graph/passes/fuse_group_norm.py): per instance n and group g of C / G channels,
   y := (x - mean) * inv_std * gamma[c] + beta[c] [then SiLU y * sigmoid(y)], x NCHW (N, C, S) or channel-last
   (N, S, C).
   The moments: chunks of at most ONNXEP_GN_CHUNK elements, each two-pass while the chunk is in L1 -- the mean as
   its first element plus the mean offset from it (no large partial sums: exact to a few ulp of the spread, not
   of the mean), then the squared deviations from that mean -- merged in double by Chan et al.'s pairwise update:
   no cancellation, and about one pass of memory traffic. */
#define ONNXEP_GN_CHUNK 2048
typedef struct { double n, mean, m2; } onnxep_gn_mom;
/* Chan et al.'s pairwise update: a merges nb more values of mean mb and squared deviations m2b */
static inline void onnxep_gn_combine(onnxep_gn_mom* a, double nb, double mb, double m2b)
{
    double n = a->n + nb, d = mb - a->mean;
    if (nb == 0) return;
    a->mean += d * nb / n;
    a->m2 += m2b + d * d * a->n * nb / n;
    a->n = n;
}
/* chunk of nb values: mean K + s / nb, where s sums x - K, and q sums (x - (float)mean)^2 */
static inline void onnxep_gn_merge(onnxep_gn_mom* a, double nb, float K, float s, float q)
{
    double mb = (double)K + (double)s / nb, dm = mb - (double)(float)mb;
    onnxep_gn_combine(a, nb, mb, (double)q - nb * dm * dm);
}
/* the moments of L contiguous floats */
static void onnxep_gn_moments(const float* x, Py_ssize_t L, onnxep_gn_mom* mo)
{
    Py_ssize_t off, i, m;
    for (off = 0; off < L; off += ONNXEP_GN_CHUNK) {
        const float* p = x + off;
        float s = 0.0f, q = 0.0f, K = p[0], mb;
        m = L - off < ONNXEP_GN_CHUNK ? L - off : ONNXEP_GN_CHUNK;
        #pragma omp simd reduction(+:s)
        for (i = 0; i < m; i++) s += p[i] - K;
        mb = (float)((double)K + (double)s / (double)m);
        #pragma omp simd reduction(+:q)
        for (i = 0; i < m; i++) { float d = p[i] - mb; q += d * d; }
        onnxep_gn_merge(mo, (double)m, K, s, q);
    }
}
/* Channel-last (N, S, C) moments, in two steps so that the loops run along the contiguous channels whatever C / G
   is: each block of rows (rows_ch of them: about 64 KB, at least 32 rows) gets per channel what onnxep_gn_merge
   takes for a chunk -- its first row K, s = sum (x - K), then q = sum (x - mb)^2 about the float mean mb, while the
   block is in L2. Then per instance the blocks merge into each channel's mean and M2 (onnxep_gn_merge's update,
   vectorised along the channels), and each group merges its channels, in order: the same sums whatever the thread
   count. The strided form this replaced (each group's few channels summed along the rows) took 3-12x the NCHW
   kernel's time when C / G was under 16 channels. */
#define ONNXEP_GN_BLOCK 16384
static void onnxep_gn_block_task(void* p, Py_ssize_t item, int tid);
static void onnxep_gn_group_task(void* p, Py_ssize_t item, int tid);
/* v * sigmoid(v), sigmoid from e = exp(-|v|): 1 / (1 + e) for v >= 0, e / (1 + e) below (no overflow) */
static inline float onnxep_gn_silu(float v)
{
    float e = onnxep_exp_neg(v < 0.0f ? v : -v);
    float r = 1.0f / (1.0f + e);
    return v * (v >= 0.0f ? r : e * r);
}
/* y := ((x - m) - ml) * a + b [silu]: the mean as a float pair m + ml (its float64 value to ~48 bits), so a mean
   far from zero next to a small spread loses nothing to its rounding */
static void onnxep_gn_apply(const float* x, float* y, Py_ssize_t S, float m, float ml, float a, float b, int silu)
{
    Py_ssize_t i;
    if (silu) {
        #pragma omp simd
        for (i = 0; i < S; i++) y[i] = onnxep_gn_silu(((x[i] - m) - ml) * a + b);
    } else {
        #pragma omp simd
        for (i = 0; i < S; i++) y[i] = ((x[i] - m) - ml) * a + b;
    }
}
/* one channel-last row of C: y[c] := ((x[c] - m[c]) - ml[c]) * a[c] + b[c] [silu] */
static void onnxep_gn_apply_row(const float* x, float* y, Py_ssize_t C, const float* m, const float* ml,
                                const float* a, const float* b, int silu)
{
    Py_ssize_t c;
    if (silu) {
        #pragma omp simd
        for (c = 0; c < C; c++) y[c] = onnxep_gn_silu(((x[c] - m[c]) - ml[c]) * a[c] + b[c]);
    } else {
        #pragma omp simd
        for (c = 0; c < C; c++) y[c] = ((x[c] - m[c]) - ml[c]) * a[c] + b[c];
    }
}
typedef struct {
    const float* x; float* y; Py_ssize_t N, C, S, G, rows_per; const float* gamma; const float* beta;
    float eps; int silu, layout; float* mean; float* mean_lo; float* scale;   /* channel-last out: per (n, c) */
    Py_ssize_t rows_ch, nch; float* blk;      /* layout 1: row blocks of rows_ch, nch per instance, 3 x C each */
    double* acc;                              /* layout 1: per instance, the channels' means and M2 */
} onnxep_gn_job;
static void onnxep_gn_nchw_task(void* p, Py_ssize_t item, int tid)
{
    onnxep_gn_job* j = (onnxep_gn_job*)p;
    Py_ssize_t n = item / j->G, g = item % j->G, Cg = j->C / j->G, c, S = j->S;
    const float* x = j->x + (n * j->C + g * Cg) * S;
    float* y = j->y + (n * j->C + g * Cg) * S;
    onnxep_gn_mom mo = {0.0, 0.0, 0.0};
    onnxep_gn_moments(x, Cg * S, &mo);
    float inv = (float)(1.0 / sqrt((mo.m2 > 0.0 ? mo.m2 / mo.n : 0.0) + (double)j->eps)), m = (float)mo.mean;
    float ml = (float)(mo.mean - (double)m);
    for (c = 0; c < Cg; c++)
        onnxep_gn_apply(x + c * S, y + c * S, S, m, ml, inv * j->gamma[g * Cg + c], j->beta[g * Cg + c],
                        j->silu);
}
static void onnxep_gn_stats_task(void* p, Py_ssize_t item, int tid)     /* layout 2 (NCHW x): per (n, g) */
{
    onnxep_gn_job* j = (onnxep_gn_job*)p;
    Py_ssize_t n = item / j->G, g = item % j->G, Cg = j->C / j->G, c;
    onnxep_gn_mom mo = {0.0, 0.0, 0.0};
    onnxep_gn_moments(j->x + (n * j->C + g * Cg) * j->S, Cg * j->S, &mo);
    float inv = (float)(1.0 / sqrt((mo.m2 > 0.0 ? mo.m2 / mo.n : 0.0) + (double)j->eps)), m = (float)mo.mean;
    float ml = (float)(mo.mean - (double)m);
    for (c = g * Cg; c < (g + 1) * Cg; c++) {
        j->mean[n * j->C + c] = m;
        j->mean_lo[n * j->C + c] = ml;
        j->scale[n * j->C + c] = inv * j->gamma[c];
    }
}
/* block ch of instance n: blk[0:C] the first row K, [C:2C] s, [2C:3C] q */
static void onnxep_gn_block_task(void* p, Py_ssize_t item, int tid)
{
    onnxep_gn_job* j = (onnxep_gn_job*)p;
    Py_ssize_t n = item / j->nch, r0 = (item % j->nch) * j->rows_ch, C = j->C, rows, r, c, c0;
    const float* x = j->x + (n * j->S + r0) * C;
    float* K = j->blk + item * 3 * C;
    float* sm = K + C;
    float* q = sm + C;
    rows = j->S - r0 < j->rows_ch ? j->S - r0 : j->rows_ch;
    for (c = 0; c < C; c++) { K[c] = x[c]; sm[c] = 0.0f; q[c] = 0.0f; }
    for (r = 0; r < rows; r++) {
        const float* xr = x + r * C;
        #pragma omp simd
        for (c = 0; c < C; c++) sm[c] += xr[c] - K[c];
    }
    for (c0 = 0; c0 < C; c0 += 256) {                /* the means about which q sums, 256 channels at a time */
        float mb[256];
        Py_ssize_t cn = C - c0 < 256 ? C - c0 : 256;
        for (c = 0; c < cn; c++) mb[c] = (float)((double)K[c0 + c] + (double)sm[c0 + c] / (double)rows);
        for (r = 0; r < rows; r++) {
            const float* xr = x + r * C + c0;
            float* qc = q + c0;
            #pragma omp simd
            for (c = 0; c < cn; c++) { float d = xr[c] - mb[c]; qc[c] += d * d; }
        }
    }
}
static void onnxep_gn_group_task(void* p, Py_ssize_t n, int tid)
{
    onnxep_gn_job* j = (onnxep_gn_job*)p;
    Py_ssize_t G = j->G, Cg = j->C / G, C = j->C, ch, c, g, rows;
    double* mean = j->acc + 2 * n * C;
    double* m2 = mean + C;
    double na = 0.0, nb, w, w2;
    for (c = 0; c < C; c++) { mean[c] = 0.0; m2[c] = 0.0; }
    for (ch = 0; ch < j->nch; ch++) {       /* onnxep_gn_merge of each block, along the channels */
        const float* K = j->blk + (n * j->nch + ch) * 3 * C;
        const float* sm = K + C;
        const float* q = sm + C;
        rows = j->S - ch * j->rows_ch < j->rows_ch ? j->S - ch * j->rows_ch : j->rows_ch;
        nb = (double)rows;
        w = nb / (na + nb);
        w2 = na * nb / (na + nb);
        #pragma omp simd
        for (c = 0; c < C; c++) {
            double mb = (double)K[c] + (double)sm[c] / nb, dm = mb - (double)(float)mb, d = mb - mean[c];
            mean[c] += d * w;
            m2[c] += ((double)q[c] - nb * dm * dm) + d * d * w2;
        }
        na += nb;
    }
    for (g = 0; g < G; g++) {                /* then the group's channels, in order */
        onnxep_gn_mom mo = {0.0, 0.0, 0.0};
        for (c = g * Cg; c < (g + 1) * Cg; c++) onnxep_gn_combine(&mo, na, mean[c], m2[c]);
        float inv = (float)(1.0 / sqrt((mo.m2 > 0.0 ? mo.m2 / mo.n : 0.0) + (double)j->eps)), m = (float)mo.mean;
        float ml = (float)(mo.mean - (double)m);
        for (c = g * Cg; c < (g + 1) * Cg; c++) {
            j->mean[n * C + c] = m;
            j->mean_lo[n * C + c] = ml;
            j->scale[n * C + c] = inv * j->gamma[c];
        }
    }
}
static void onnxep_gn_nhwc_apply_task(void* p, Py_ssize_t item, int tid)
{
    onnxep_gn_job* j = (onnxep_gn_job*)p;
    Py_ssize_t r0 = item * j->rows_per, r1 = r0 + j->rows_per, r, n;
    if (r1 > j->N * j->S) r1 = j->N * j->S;
    for (r = r0; r < r1; r++) {
        n = r / j->S;
        onnxep_gn_apply_row(j->x + r * j->C, j->y + r * j->C, j->C, j->mean + n * j->C, j->mean_lo + n * j->C,
                            j->scale + n * j->C, j->beta, j->silu);
    }
}
/* NCHW x into channel-last y: pixels [s0, s0 + ONNXEP_GN_TILE) of image n, ONNXEP_GN_TILE_C channels at a time
   normalised into a tile (contiguous, vectorised), then written across into y's rows */
#define ONNXEP_GN_TILE 16
#define ONNXEP_GN_TILE_C 256
static void onnxep_gn_nchw_to_nhwc_task(void* p, Py_ssize_t item, int tid)
{
    onnxep_gn_job* j = (onnxep_gn_job*)p;
    Py_ssize_t nb = (j->S + ONNXEP_GN_TILE - 1) / ONNXEP_GN_TILE, n = item / nb, s0 = (item % nb) * ONNXEP_GN_TILE;
    Py_ssize_t B = j->S - s0 < ONNXEP_GN_TILE ? j->S - s0 : ONNXEP_GN_TILE, C = j->C, c0, c, cn, s;
    float tile[ONNXEP_GN_TILE_C * ONNXEP_GN_TILE];
    float* yb = j->y + (n * j->S + s0) * C;
    for (c0 = 0; c0 < C; c0 += ONNXEP_GN_TILE_C) {
        cn = C - c0 < ONNXEP_GN_TILE_C ? C - c0 : ONNXEP_GN_TILE_C;
        for (c = 0; c < cn; c++) {
            Py_ssize_t k = n * C + c0 + c;
            onnxep_gn_apply(j->x + k * j->S + s0, tile + c * ONNXEP_GN_TILE, B, j->mean[k], j->mean_lo[k],
                            j->scale[k], j->beta[c0 + c], j->silu);
        }
        for (s = 0; s < B; s++)
            for (c = 0; c < cn; c++) yb[s * C + c0 + c] = tile[c * ONNXEP_GN_TILE + s];
    }
}
/* x, y: N x C x S (layout 1, channel-last: N x S x C; layout 2: x N x C x S, y N x S x C); y may be x but for
   layout 2. nth threads at most, one when the tensor is smaller than par_work elements. Returns -1 when the
   scratch of the channel-last layouts could not be allocated. */
static int onnxep_group_norm(const float* x, float* y, Py_ssize_t N, Py_ssize_t C, Py_ssize_t S, Py_ssize_t G,
                             const float* gamma, const float* beta, float eps, int silu, int layout,
                             int nth, Py_ssize_t par_work)
{
    onnxep_gn_job j;
    Py_ssize_t total = N * C * S, items, nacc;
    if (total == 0) return 0;
    if (total < par_work) nth = 1;
    j.x = x; j.y = y; j.N = N; j.C = C; j.S = S; j.G = G; j.gamma = gamma; j.beta = beta; j.eps = eps;
    j.silu = silu; j.layout = layout; j.mean = NULL; j.mean_lo = NULL; j.scale = NULL;
    if (layout == 0) {
        onnxep_parallel_for(N * G, nth, onnxep_gn_nchw_task, &j);
        return 0;
    }
    j.rows_ch = ONNXEP_GN_BLOCK / C > 32 ? ONNXEP_GN_BLOCK / C : 32;
    j.nch = layout == 1 ? (S + j.rows_ch - 1) / j.rows_ch : 0;
    nacc = layout == 1 ? 2 * N * C : 0;
    j.acc = (double*)malloc(nacc * sizeof(double) + 3 * N * (1 + j.nch) * C * sizeof(float));
    if (j.acc == NULL) return -1;
    j.mean = (float*)(j.acc + nacc);
    j.mean_lo = j.mean + N * C;
    j.scale = j.mean + 2 * N * C;
    j.blk = j.mean + 3 * N * C;
    if (layout == 1) {
        items = N * j.nch;
        onnxep_parallel_for(items, items < 2 ? 1 : nth, onnxep_gn_block_task, &j);
        onnxep_parallel_for(N, N * j.nch * C < 65536 ? 1 : nth, onnxep_gn_group_task, &j);
    } else
        onnxep_parallel_for(N * G, nth, onnxep_gn_stats_task, &j);
    if (layout == 2) {
        items = N * ((S + ONNXEP_GN_TILE - 1) / ONNXEP_GN_TILE);
        onnxep_parallel_for(items, items < 2 ? 1 : nth, onnxep_gn_nchw_to_nhwc_task, &j);
        free(j.acc);
        return 0;
    }
    j.rows_per = 4096 / C > 0 ? 4096 / C : 1;                       /* about 16 KB of x per item */
    items = (N * S + j.rows_per - 1) / j.rows_per;
    onnxep_parallel_for(items, items < 2 ? 1 : nth, onnxep_gn_nhwc_apply_task, &j);
    free(j.acc);
    return 0;
}

#endif /* ONNXEP_NATIVE_GROUP_NORM_H */
