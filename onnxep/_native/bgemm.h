/* onnxep bf16 GEMM (issue 29, session config onnxep.compute_precision=bf16): Y = act(alpha * A @ B [+ bias] [+ R]),
   A and B rounded to bf16 (round to nearest even), products accumulated in fp32.

   Packed B (bg_pack_b, once per constant weight): panels of BG_NR = 32 columns (N padded to 32), each K2 = ceil(K/2)
   pair groups of 32 x 2 bf16: group g holds column c's k = 2g, 2g+1 at [2c], [2c + 1] (vdpbf16ps's pair layout, and
   AMX's: 16 groups x 16 columns of one panel are one B tile, row stride 128 bytes), zero padded to K2P = K2 rounded
   up to 16 groups (one tile's depth) so a tile never reads past its panel. Half the bytes of the fp32 packing; counted in floats (one float slot = one bf16 pair) so it goes
   through the same packed-weight cache as the fp32 packings (format key BGEMM_FORMAT, _k_bgemm.pxi).
   Packed A (bg_pack_a, per call, in parallel): rows of K2 bf16 pairs (one uint32 each), zero padded.

   AMX (tdpbf16ps on 16 x 16 fp32 tiles), where the CPU has AMX-BF16 and the OS grants the tile state: an item's rows
   go in 16-row tiles, A packed with its rows padded to 16 and its groups to K2P; 2 x 2 tiles of C (32 x 32) take 4
   of the 8 tile registers, 2 A and 2 B tiles the rest, and C stays in tiles for the whole K.
   Micro-kernel otherwise: AVX512_BF16 vdpbf16ps, chosen at run time by CPUID (leaf 7 subleaf 1 EAX bit 5, plus AVX-512 F/BW and
   the OS's ZMM state; compiled with a target attribute in every variant, never by -m flags), MR rows x 32 columns.
   Generic C on the same packed data elsewhere (the Python side uses bf16 only where the CPU has vdpbf16ps, and the
   fp32 GEMM otherwise; the generic kernel is the tests' reference layout and the fallback if forced).

   Blocking (derived, not tuned to a model): AVX-512 has 32 zmm registers; a 32-column tile needs 2 accumulators per
   row, 2 registers for B's pair vectors and 1 for A's broadcast pair: 2 MR + 3 <= 32 gives MR <= 14; MR = 12 keeps
   a spare register (and BG_MB = 4 MR). KC: one B panel block (KC x 32 bf16 = 64 KC bytes) and an item's A rows
   (BG_MB x KC bf16 = 96 KC bytes) should stay in L1D (32-48 KB on the target CPUs): 160 KC <= 48 KB gives KC <= 307,
   KC = 256 (a power of two, 40 KB). An item (BG_MB x BG_NB = 48 x 128) keeps its fp32 C tile (24 KB) across K
   blocks; the A block of a whole item row (48 x K bf16) stays in L2 (1-2 MB) for K up to ~10000. */
#ifndef ONNXEP_BGEMM_H
#define ONNXEP_BGEMM_H
#include <stdint.h>
#include <string.h>
#include "cpuid.h"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <x86intrin.h>
#define BG_X86 1
#if defined(__linux__)
#include <unistd.h>
#include <sys/syscall.h>
#endif
#else
#define BG_X86 0
#endif

#define BG_NR 32
#define BG_MR 12
#define BG_MB 48          /* rows per work item (4 register blocks) */
/* The last item also takes a remainder of fewer than BG_MR rows (bg_nmb): an item of its own would stream the whole
   of B again for a few rows, at the latency of a short register block (49 rows x 768 x 3072: 1.04x the time of 48
   rows, 1 thread; 196 x 384 x 1536 1.04x 192 rows). So an item has up to BG_MBX rows, BG_MBP with AMX's padding. */
#define BG_MBX (BG_MB + BG_MR - 1)
#define BG_MBP ((BG_MBX + 15) / 16 * 16)
#define BG_NB 128         /* columns per work item (4 panels) */
#define BG_KC 256         /* k per block (128 pairs) */

static inline int64_t bg_k2(int64_t K) { return (K + 1) / 2; }
/* row items of an M-row GEMM: BG_MB rows each, the last one BG_MB .. BG_MBX (or all M rows when fewer) */
static inline int64_t bg_nmb(int64_t M) {
    int64_t q = M / BG_MB, r = M % BG_MB;
    return q == 0 ? 1 : q + (r >= BG_MR);
}
static inline int64_t bg_k2p(int64_t K) { return (bg_k2(K) + 15) / 16 * 16; }
static inline int64_t bg_np(int64_t N) { return (N + BG_NR - 1) / BG_NR; }
/* packed B length in float-sized slots (one bf16 pair each) */
static inline int64_t bg_pack_b_len(int64_t K, int64_t N) { return bg_np(N) * BG_NR * bg_k2p(K); }

/* fp32 -> bf16, round to nearest even; NaN stays a (quiet) NaN */
static inline uint16_t bg_f2b(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float bg_b2f(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* B element (k, n) at B[k * sk + n * sn] (sk = N, sn = 1 for a K x N weight; sk = 1, sn = K for transB) */
static void bg_pack_b(const float* B, int64_t K, int64_t N, int64_t sk, int64_t sn, uint16_t* out) {
    int64_t K2P = bg_k2p(K), NP = bg_np(N);
    memset(out, 0, (size_t)bg_pack_b_len(K, N) * 4);
    for (int64_t p = 0; p < NP; p++) {
        uint16_t* pan = out + p * K2P * BG_NR * 2;
        for (int64_t k = 0; k < K; k++) {
            uint16_t* g = pan + (k / 2) * BG_NR * 2 + (k & 1);
            const float* b = B + k * sk;
            int64_t c1 = N - p * BG_NR < BG_NR ? N - p * BG_NR : BG_NR;
            for (int64_t c = 0; c < c1; c++) g[2 * c] = bg_f2b(b[(p * BG_NR + c) * sn]);
        }
    }
}

/* rows m0..m1 of A (row stride lda) -> rows of bf16 pairs (uint32: low half k even, high half k odd), row stride
   ld2 >= K2 pairs, zero from K2 to ld2 */
static void bg_pack_a_rows(const float* A, int64_t lda, int64_t K, int64_t ld2, int64_t m0, int64_t m1,
                           uint32_t* out) {
    for (int64_t m = m0; m < m1; m++) {
        const float* a = A + m * lda;
        uint32_t* o = out + m * ld2;
        int64_t g;
        for (g = 0; g < K / 2; g++) o[g] = (uint32_t)bg_f2b(a[2 * g]) | ((uint32_t)bg_f2b(a[2 * g + 1]) << 16);
        if (K & 1) o[g++] = (uint32_t)bg_f2b(a[K - 1]);
        for (; g < ld2; g++) o[g] = 0;
    }
}

/* ---------------------------------------------------------------- kernel selection */
enum { BG_GENERIC = 0, BG_AVX512BF16 = 1, BG_AMX = 2 };
static int bg_force = -1;        /* tests: force a kernel (-1: best available) */
static int bg_prefetch = 1;      /* bg_block fetches the next B block into L2 (tests, A/B: bgemm_prefetch) */

static int bg_cpu_bf16(void) { return onnxep_cpu_has(16); }

/* AMX-BF16 present (cpuid.h bit 5) with vdpbf16ps for the A conversion, and, on Linux, the process's permission to
   use the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA: without it the first tile
   instruction faults). Asked once, on the first bf16 GEMM that would use it. */
static int bg_cpu_amx(void) {
#if BG_X86 && defined(__linux__) && defined(SYS_arch_prctl)
    static int cached = -1;
    if (cached >= 0) return cached;
    int ok = onnxep_cpu_has(32) && onnxep_cpu_has(16);
    if (ok) ok = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
    cached = ok;
    return ok;
#else
    return 0;
#endif
}

static int bg_have(int k) {
    if (k == BG_GENERIC) return 1;
    if (k == BG_AVX512BF16) return bg_cpu_bf16();
    if (k == BG_AMX) return bg_cpu_amx();
    return 0;
}

static int bg_kernel(void) {
    if (bg_force >= 0 && bg_have(bg_force)) return bg_force;
    return bg_have(BG_AMX) ? BG_AMX : bg_have(BG_AVX512BF16) ? BG_AVX512BF16 : BG_GENERIC;
}

/* ---------------------------------------------------------------- micro-kernels
   C[mr, nr] (fp32, ldc) (+)= sum over kp pairs of A rows (uint32 pairs, lda2) x one B panel block (kp x 32 x 2);
   load: add to C's current values (later K blocks), else overwrite. */
static void bg_micro_generic(const uint32_t* A, int64_t lda2, const uint16_t* Bp, int64_t kp, int mr, int nr,
                             float* C, int64_t ldc, int load) {
    for (int i = 0; i < mr; i++) {
        float acc[BG_NR];
        for (int c = 0; c < BG_NR; c++) acc[c] = load && c < nr ? C[i * ldc + c] : 0.0f;
        const uint32_t* a = A + i * lda2;
        for (int64_t g = 0; g < kp; g++) {
            float a0 = bg_b2f((uint16_t)(a[g] & 0xFFFF)), a1 = bg_b2f((uint16_t)(a[g] >> 16));
            const uint16_t* b = Bp + g * BG_NR * 2;
            for (int c = 0; c < BG_NR; c++) acc[c] += a0 * bg_b2f(b[2 * c]) + a1 * bg_b2f(b[2 * c + 1]);
        }
        for (int c = 0; c < nr; c++) C[i * ldc + c] = acc[c];
    }
}

/* The epilogue in registers, for the tiles of a GEMM's last K block (bg_block): C is Y's tile, each element stored as
   act(acc + bias[n] + R[m, n]) with the buffered epilogue's operations in its order (bg_epilogue, alpha 1: same
   bits); kind: ONNXEP_ACT_NONE, _RELU or _CLIP [lo, hi]. R and C may be the same memory. */
typedef struct { const float* bias; const float* R; int64_t ldr; int kind; float lo, hi; } bg_ep;
static int bg_ep_regs = 1;      /* tests, A/B (bgemm_epilogue_in_regs): 0 keeps every tile on the buffered epilogue */

#if BG_X86
#define BG_T __attribute__((target("avx512bf16,avx512bw,avx512f"), always_inline)) inline
/* A tile's rows stored to C, each act(acc + bias + R) first where EB (bias), ER (R) and EK (0 none, 1 Relu, 2 Clip)
   say so: compile-time flags, so each combination is straight-line code and the accumulators stay in registers. Row
   by row, R's row read before C's is written (R may be C's memory). */
static BG_T void bg_tile_store(const int MR, const int NV, const int EB, const int ER, const int EK,
                               const __m512* acc0, const __m512* acc1, __mmask16 m0, __mmask16 m1, float* C,
                               int64_t ldc, const bg_ep* ep) {
    const __m512 z = _mm512_setzero_ps();
    const __m512 lo = EK == 2 ? _mm512_set1_ps(ep->lo) : z, hi = EK == 2 ? _mm512_set1_ps(ep->hi) : z;
    const __m512 b0 = EB ? _mm512_maskz_loadu_ps(m0, ep->bias) : z;
    const __m512 b1 = EB && NV > 1 ? _mm512_maskz_loadu_ps(m1, ep->bias + 16) : z;
    for (int i = 0; i < MR; i++) {
        __m512 v0 = acc0[i], v1 = acc1[i];
        if (EB) { v0 = _mm512_add_ps(v0, b0); if (NV > 1) v1 = _mm512_add_ps(v1, b1); }
        if (ER) {
            v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, ep->R + i * ep->ldr));
            if (NV > 1) v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, ep->R + i * ep->ldr + 16));
        }
        if (EK == 1) {      /* NaN -> 0, as onnxep_act_row */
            v0 = _mm512_max_ps(v0, z);
            if (NV > 1) v1 = _mm512_max_ps(v1, z);
        } else if (EK == 2) {       /* NaN stays */
            v0 = _mm512_min_ps(hi, _mm512_max_ps(lo, v0));
            if (NV > 1) v1 = _mm512_min_ps(hi, _mm512_max_ps(lo, v1));
        }
        _mm512_mask_storeu_ps(C + i * ldc, m0, v0);
        if (NV > 1) _mm512_mask_storeu_ps(C + i * ldc + 16, m1, v1);
    }
}

static BG_T void bg_tile(const uint32_t* A, int64_t lda2, const uint16_t* Bp, int64_t kp, const int MR, const int NV,
                         int nr, const float* Ci, int64_t ldci, float* C, int64_t ldc, int load, const uint16_t* pf,
                         int64_t kpf, const bg_ep* ep) {
    __m512 acc0[BG_MR], acc1[BG_MR];
    __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1u);
    __mmask16 m1 = nr >= 32 ? (__mmask16)0xFFFF : nr <= 16 ? (__mmask16)0 : (__mmask16)((1u << (nr - 16)) - 1u);
    for (int i = 0; i < MR; i++) {
        acc0[i] = load ? _mm512_maskz_loadu_ps(m0, Ci + i * ldci) : _mm512_setzero_ps();
        acc1[i] = load && NV > 1 ? _mm512_maskz_loadu_ps(m1, Ci + i * ldci + 16) : _mm512_setzero_ps();
    }
    for (int64_t g = 0; g < kp; g++) {
        __m512i b0 = _mm512_loadu_si512((const void*)(Bp + g * 64));
        __m512i b1 = NV > 1 ? _mm512_loadu_si512((const void*)(Bp + g * 64 + 32)) : b0;
        if (g < kpf) {      /* the next block's pair g: its two cache lines into L2 */
            _mm_prefetch((const char*)(pf + g * 64), _MM_HINT_T1);
            _mm_prefetch((const char*)(pf + g * 64 + 32), _MM_HINT_T1);
        }
        for (int i = 0; i < MR; i++) {
            __m512i ab = _mm512_set1_epi32((int)A[i * lda2 + g]);
            acc0[i] = _mm512_dpbf16_ps(acc0[i], (__m512bh)ab, (__m512bh)b0);
            if (NV > 1) acc1[i] = _mm512_dpbf16_ps(acc1[i], (__m512bh)ab, (__m512bh)b1);
        }
    }
    /* the epilogue picked once a tile, each combination straight-line code (bg_tile_store): with the operations
       tested row by row inside the unrolled rows, the compiler spilled the accumulators to the stack and back */
    const int v = !ep ? 0 : (ep->bias != NULL) + 2 * (ep->R != NULL)
                            + 4 * (ep->kind == ONNXEP_ACT_RELU ? 1 : ep->kind == ONNXEP_ACT_CLIP ? 2 : 0);
    switch (v) {
        case 0: bg_tile_store(MR, NV, 0, 0, 0, acc0, acc1, m0, m1, C, ldc, ep); break;
        case 1: bg_tile_store(MR, NV, 1, 0, 0, acc0, acc1, m0, m1, C, ldc, ep); break;
        case 2: bg_tile_store(MR, NV, 0, 1, 0, acc0, acc1, m0, m1, C, ldc, ep); break;
        case 3: bg_tile_store(MR, NV, 1, 1, 0, acc0, acc1, m0, m1, C, ldc, ep); break;
        case 4: bg_tile_store(MR, NV, 0, 0, 1, acc0, acc1, m0, m1, C, ldc, ep); break;
        case 5: bg_tile_store(MR, NV, 1, 0, 1, acc0, acc1, m0, m1, C, ldc, ep); break;
        case 6: bg_tile_store(MR, NV, 0, 1, 1, acc0, acc1, m0, m1, C, ldc, ep); break;
        case 7: bg_tile_store(MR, NV, 1, 1, 1, acc0, acc1, m0, m1, C, ldc, ep); break;
        case 8: bg_tile_store(MR, NV, 0, 0, 2, acc0, acc1, m0, m1, C, ldc, ep); break;
        case 9: bg_tile_store(MR, NV, 1, 0, 2, acc0, acc1, m0, m1, C, ldc, ep); break;
        case 10: bg_tile_store(MR, NV, 0, 1, 2, acc0, acc1, m0, m1, C, ldc, ep); break;
        default: bg_tile_store(MR, NV, 1, 1, 2, acc0, acc1, m0, m1, C, ldc, ep); break;
    }
}

#define BG_CASE(R) \
    case R: if (nr > 16) bg_tile(Ar, lda2, Bp, kp, R, 2, nr, Ci, ldci, C, ldc, load, pf, kpf, e); \
            else bg_tile(Ar, lda2, Bp, kp, R, 1, nr, Ci, ldci, C, ldc, load, pf, kpf, e); \
            break;

/* pf (kpf pairs, or kpf 0): the B block the caller takes next, fetched into L2 by the first register block (the
   rows after it find this block in L1). load: the products add to the tile at Ci0 (row stride ldci; C0's own, or a
   buffer of the earlier K blocks' sums when the last K block stores to Y through ep) */
__attribute__((target("avx512bf16,avx512bw,avx512f")))
static void bg_micro_bf16(const uint32_t* A, int64_t lda2, const uint16_t* Bp, int64_t kp, int mr, int nr,
                          const float* Ci0, int64_t ldci, float* C0, int64_t ldc, int load, const uint16_t* pf,
                          int64_t kpf, const bg_ep* ep) {
    /* nb register blocks of near-equal rows (48: 4 x 12; 52: 11, 11, 10, 10, 10, not 4 x 12 and a 4-row block
       that runs at the latency of its 8 accumulator chains) */
    const int nb = (mr + BG_MR - 1) / BG_MR;
    for (int b = 0, i = 0, r; b < nb; b++, i += r, kpf = 0) {
        r = mr / nb + (b < mr % nb);
        const uint32_t* Ar = A + i * lda2;
        float* C = C0 + i * ldc;
        const float* Ci = Ci0 + i * ldci;
        bg_ep ei, *e = NULL;
        if (ep) { ei = *ep; if (ei.R) ei.R += i * ei.ldr; e = &ei; }
        switch (r) { BG_CASE(1) BG_CASE(2) BG_CASE(3) BG_CASE(4) BG_CASE(5) BG_CASE(6) BG_CASE(7) BG_CASE(8)
                     BG_CASE(9) BG_CASE(10) BG_CASE(11) BG_CASE(12) }
    }
}

/* ---------------------------------------------------------------- vdpbf16ps against the FMA
   Whether vdpbf16ps gives more products per second than the fp32 FMA on this core (the bf16 conv path without AMX
   pays only then, ops/_bf16.py bf16_conv_path): vdpbf16ps does 32 products per instruction against the FMA's 16, at
   half the FMA's issue rate on Sapphire Rapids (no gain) and at its full rate on Zen 4 / Zen 5 (2x). No CPUID bit
   tells which, so time both: BG_PROBE_CH independent accumulator chains (as many as the micro-kernel keeps, 2 BG_MR:
   more than either instruction's latency x issue rate on the target CPUs), register-resident, no loads, BG_PROBE_IT
   steps (~3-6 us a trial); one warm-up trial each (the 512-bit units may start slow), then the minimum over
   BG_PROBE_REP alternating trials each, so a trial another process preempts or slows only lengthens its own time.
   ~120 us once per process. Returns (products per second, vdpbf16ps) / (products per second, FMA). */
#define BG_PROBE_CH (2 * BG_MR)
#define BG_PROBE_IT 1024
#define BG_PROBE_REP 9

__attribute__((target("avx512bf16,avx512bw,avx512f"), noinline))
static uint64_t bg_probe_trial(int dp) {
    __m512 acc[BG_PROBE_CH];
    __m512 x = _mm512_set1_ps(1e-3f);
    __m512bh xb = _mm512_cvtne2ps_pbh(x, x);
    for (int j = 0; j < BG_PROBE_CH; j++) acc[j] = _mm512_setzero_ps();
    uint64_t t0 = __rdtsc();
    if (dp) {
        for (int i = 0; i < BG_PROBE_IT; i++) {
            __asm__ volatile("" : "+v"(xb));        /* the operand is opaque each step: nothing hoisted or folded */
#pragma GCC unroll 32
            for (int j = 0; j < BG_PROBE_CH; j++) acc[j] = _mm512_dpbf16_ps(acc[j], xb, xb);
        }
    } else {
        for (int i = 0; i < BG_PROBE_IT; i++) {
            __asm__ volatile("" : "+v"(x));
#pragma GCC unroll 32
            for (int j = 0; j < BG_PROBE_CH; j++) acc[j] = _mm512_fmadd_ps(x, x, acc[j]);
        }
    }
    uint64_t t1 = __rdtsc();
    for (int j = 1; j < BG_PROBE_CH; j++) acc[0] = _mm512_add_ps(acc[0], acc[j]);
    static volatile float sink;
    sink = _mm512_reduce_add_ps(acc[0]);
    return t1 - t0;
}

static double bg_dp_ratio(void) {
    static double cached = -1.0;
    if (cached >= 0.0) return cached;
    double r = 0.0;
    if (bg_cpu_bf16()) {
        uint64_t best_dp = UINT64_MAX, best_fma = UINT64_MAX;
        bg_probe_trial(1);
        bg_probe_trial(0);
        for (int i = 0; i < BG_PROBE_REP; i++) {
            uint64_t d = bg_probe_trial(1), f = bg_probe_trial(0);
            if (d < best_dp) best_dp = d;
            if (f < best_fma) best_fma = f;
        }
        r = best_dp ? 2.0 * (double)best_fma / (double)best_dp : 0.0;
    }
    cached = r;
    return r;
}

/* bg_pack_a_rows with vcvtne2ps2bf16 (round to nearest even; unlike bg_f2b it flushes fp32 denormals to zero) */
__attribute__((target("avx512bf16,avx512bw,avx512f")))
static void bg_pack_a_rows_bf16(const float* A, int64_t lda, int64_t K, int64_t ld2, int64_t m0, int64_t m1,
                                uint32_t* out) {
    for (int64_t m = m0; m < m1; m++) {
        const float* a = A + m * lda;
        uint32_t* o = out + m * ld2;
        int64_t k = 0;
        for (; k + 32 <= K; k += 32)
            _mm512_storeu_si512((void*)(o + k / 2),
                                (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(a + k + 16), _mm512_loadu_ps(a + k)));
        if (k < K) {
            int n = (int)(K - k);
            __mmask16 ml = n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
            __mmask16 mh = n > 16 ? (__mmask16)((1u << (n - 16)) - 1u) : (__mmask16)0;
            __m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(mh, a + k + 16), _mm512_maskz_loadu_ps(ml, a + k));
            _mm512_mask_storeu_epi32((void*)(o + k / 2), (__mmask16)((1u << ((n + 1) / 2)) - 1u), (__m512i)v);
        }
        for (int64_t g = (K + 1) / 2; g < ld2; g++) o[g] = 0;
    }
}

/* n floats -> n bf16 at dst (round to nearest even, denormals flushed as vcvtneps2bf16 does) */
__attribute__((target("avx512bf16,avx512bw,avx512vl,avx512f")))
static inline void bg_cvt_run_bf16(const float* src, int64_t n, uint16_t* dst) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i*)(dst + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        _mm256_mask_storeu_epi16((void*)(dst + i), m, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i)));
    }
}

#endif

/* C[mr, nr] (+)= A x B block as bg_micro_generic, by kernel kern (vdpbf16ps for BG_AVX512BF16 and BG_AMX: rows of any
   count, no tile padding); pf: the B block the caller takes next (kpf pairs of it into L2; kpf 0: none) */
static void bg_micro(int kern, const uint32_t* A, int64_t lda2, const uint16_t* Bp, int64_t kp, int mr, int nr,
                     float* C, int64_t ldc, int load, const uint16_t* pf, int64_t kpf) {
#if BG_X86
    if (kern != BG_GENERIC) { bg_micro_bf16(A, lda2, Bp, kp, mr, nr, C, ldc, C, ldc, load, pf, kpf, NULL); return; }
#endif
    (void)pf; (void)kpf;
    bg_micro_generic(A, lda2, Bp, kp, mr, nr, C, ldc, load);
}

/* bg_pack_a_rows by kernel kern (vcvtne2ps2bf16 unless BG_GENERIC) */
static void bg_pack_a(int kern, const float* A, int64_t lda, int64_t K, int64_t ld2, int64_t m0, int64_t m1,
                      uint32_t* out) {
#if BG_X86
    if (kern != BG_GENERIC) { bg_pack_a_rows_bf16(A, lda, K, ld2, m0, m1, out); return; }
#endif
    bg_pack_a_rows(A, lda, K, ld2, m0, m1, out);
}

#if BG_X86
#if defined(__linux__)
typedef struct { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; } bg_tilecfg;
#define BG_FENCE() __asm__ volatile("" ::: "memory")   /* the tile macros' asm declares no memory operands */

/* C tiles of one item: rows 0..16 mb (mb row tiles, A rows padded to 16 with zeros), columns c0..c1 in steps of 32
   (B zero padded to 32), all K2P groups; buf row stride BG_NB floats. */
__attribute__((target("amx-tile,amx-bf16")))
static void bg_item_amx(const uint32_t* Ap, int64_t K2P, const uint16_t* Bpan, int mb, int64_t ncol, float* buf) {
    bg_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) { cfg.rows[t] = 16; cfg.colsb[t] = 64; }
    _tile_loadconfig(&cfg);
    BG_FENCE();
    const long sa = (long)(K2P * 4), sc = BG_NB * 4;
    for (int64_t c = 0; c < ncol; c += BG_NR) {
        const uint16_t* Bp = Bpan + (c / BG_NR) * K2P * BG_NR * 2;
        float* C = buf + c;
        int i = 0;
        for (; i + 2 <= mb; i += 2) {
            const uint32_t* A0 = Ap + (int64_t)i * 16 * K2P;
            const uint32_t* A1 = A0 + 16 * K2P;
            _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
            for (int64_t g = 0; g < K2P; g += 16) {
                _tile_loadd(4, A0 + g, sa);
                _tile_loadd(5, A1 + g, sa);
                _tile_loadd(6, Bp + g * BG_NR * 2, BG_NR * 4);
                _tile_loadd(7, Bp + g * BG_NR * 2 + 32, BG_NR * 4);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
            float* Ci = C + (int64_t)i * 16 * BG_NB;
            _tile_stored(0, Ci, sc);
            _tile_stored(1, Ci + 16, sc);
            _tile_stored(2, Ci + 16 * BG_NB, sc);
            _tile_stored(3, Ci + 16 * BG_NB + 16, sc);
        }
        if (i < mb) {
            const uint32_t* A0 = Ap + (int64_t)i * 16 * K2P;
            _tile_zero(0); _tile_zero(1);
            for (int64_t g = 0; g < K2P; g += 16) {
                _tile_loadd(4, A0 + g, sa);
                _tile_loadd(6, Bp + g * BG_NR * 2, BG_NR * 4);
                _tile_loadd(7, Bp + g * BG_NR * 2 + 32, BG_NR * 4);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
            }
            float* Ci = C + (int64_t)i * 16 * BG_NB;
            _tile_stored(0, Ci, sc);
            _tile_stored(1, Ci + 16, sc);
        }
    }
    _tile_release();
    BG_FENCE();
}
#endif
#else
static double bg_dp_ratio(void) { return 0.0; }
#endif

/* ---------------------------------------------------------------- channel-last conv as a GEMM
   A row m is output pixel (n, oh, ow) of an NHWC conv (one group of it), column k = (ky * kw + kx) * C + c; taps
   outside the image are zeros. The rows are gathered into a per-thread fp32 row while A is packed (no im2col matrix), and B is
   the weight as (kh * kw * C) x cout. */
/* Grouped convs run one group at a time: x points at the group's first channel, C is the group's channel count and xc
   X's channels per pixel (the pixel stride; C == xc for group 1). xb (or NULL): X already rounded to bf16 pairs
   (bg_conv_x_item, pixel stride xc / 2 pairs), at the group's first pair -- a tap's channels are then copied, not
   converted, so a kernel whose taps overlap (kh * kw > sh * sw: each pixel gathered kh * kw / (sh * sw) times)
   converts each input value once. xh (or NULL), for an odd C on the vdpbf16ps / AMX kernels: X rounded to bf16 value by
   value (bg_conv_x_item, pixel stride xc values), at the group's first channel -- a kernel row's taps are then one
   16-bit copy per run instead of a conversion (a 7x7 stride-2 stem on 3 channels converts each input value ~12
   times). */
typedef struct { const float* x; int64_t H, W, C, kh, kw, sh, sw, dh, dw, ph, pw, Ho, Wo, xc; const uint32_t* xb;
                 const uint16_t* xh; } bg_conv;

/* X (P pixels of xc floats) -> bf16, BG_XPIX pixels an item, rounded as bg_pack_conv_rows would: pairs into xb (xc
   even), or values into xh (xh non-NULL: the simd kernels' odd-C layout, bg_cvt_run_bf16) */
#define BG_XPIX 64
typedef struct { const float* x; uint32_t* xb; uint16_t* xh; int64_t P, xc; int simd; } bg_xconv;

static void bg_conv_x_item(void* ctx, Py_ssize_t item, int tid) {
    const bg_xconv* c = (const bg_xconv*)ctx;
    int64_t p0 = item * BG_XPIX, p1 = p0 + BG_XPIX < c->P ? p0 + BG_XPIX : c->P;
    (void)tid;
#if BG_X86
    if (c->xh) { bg_cvt_run_bf16(c->x + p0 * c->xc, (p1 - p0) * c->xc, c->xh + p0 * c->xc); return; }
#endif
    bg_pack_a(c->simd ? BG_AVX512BF16 : BG_GENERIC, c->x, c->xc, c->xc, c->xc / 2, p0, p1, c->xb);
}

/* The in-image taps of kernel row ky for output column ow: kx0..kx1 (kx1 <= kx0: none). With dilation 1 and X's
   pixels C floats apart (group 1) those taps are one contiguous run of (kx1 - kx0) * C floats of X, gathered (and
   converted) as one piece instead of tap by tap: a 7x7 stem on 3 channels made 49 copies of 12 bytes per row. */
static inline void bg_conv_kx_range(const bg_conv* cv, int64_t ow, int64_t* kx0, int64_t* kx1) {
    int64_t iw0 = ow * cv->sw - cv->pw, a = 0, b = cv->kw;
    if (iw0 < 0) a = (-iw0 + cv->dw - 1) / cv->dw;
    if (iw0 + (b - 1) * cv->dw >= cv->W) b = cv->W - 1 - iw0 < 0 ? 0 : (cv->W - 1 - iw0) / cv->dw + 1;
    *kx0 = a;
    *kx1 = b > a ? b : a;
}

static void bg_conv_row(const bg_conv* cv, int64_t m, float* row) {
    int64_t hw = cv->Ho * cv->Wo, n = m / hw, r = m % hw, oh = r / cv->Wo, ow = r % cv->Wo, C = cv->C;
    const int runs = cv->dw == 1 && cv->xc == C;
    int64_t kx0, kx1;
    bg_conv_kx_range(cv, ow, &kx0, &kx1);
    float* d = row;
    for (int64_t ky = 0; ky < cv->kh; ky++, d += cv->kw * C) {
        int64_t ih = oh * cv->sh - cv->ph + ky * cv->dh;
        if (ih < 0 || ih >= cv->H || kx1 <= kx0) { memset(d, 0, (size_t)(cv->kw * C) * 4); continue; }
        memset(d, 0, (size_t)(kx0 * C) * 4);
        memset(d + kx1 * C, 0, (size_t)((cv->kw - kx1) * C) * 4);
        int64_t p0 = (n * cv->H + ih) * cv->W + ow * cv->sw - cv->pw;     /* pixel of tap kx = 0 */
        if (runs) {
            const float* s0 = cv->x + (p0 + kx0) * C;
            float* d0 = d + kx0 * C;
            for (int64_t j = 0, e = (kx1 - kx0) * C; j < e; j++) d0[j] = s0[j];
        } else {
            for (int64_t kx = kx0; kx < kx1; kx++)
                memcpy(d + kx * C, cv->x + (p0 + kx * cv->dw) * cv->xc, (size_t)C * 4);
        }
    }
}

/* ---------------------------------------------------------------- the GEMM with its epilogue
   Y[m, n] = act(alpha * acc + bias[n] + R[m * ldr + n]) (bias / R optional), Y row stride ldy. */
typedef struct {
    const float* A; int64_t lda;        /* for the A packing pass */
    uint32_t* Ap;                       /* packed A, M x lda2 pairs (AMX: rows padded to 16) */
    const uint16_t* Bp;
    int64_t M, N, K, K2;
    int64_t lda2, K2P;                  /* packed A's row stride in pairs; B's groups per panel (bg_k2p) */
    const bg_conv* cv;                  /* non-NULL: A's rows are this conv's im2col rows (A, lda, Ap unused) */
    float* rows;                        /* with cv: one K-float gather row per thread */
    uint32_t* abuf;                     /* with cv: one item's packed rows (BG_MBP x lda2) per thread */
    float alpha;
    const float* bias; const float* R; int64_t ldr;
    float* Y; int64_t ldy;
    const onnxep_act* act;
    int kern;
    int64_t nmb, nnb;
    int64_t nbw;                        /* columns of a bg_item block: BG_NB, or fewer whole panels (bg_narrow) */
} bg_args;

#if BG_X86 && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* n values of a kernel row's run -> dst: copied from X's bf16 copy (xh) or converted from X (x), 32 / 16 a vector */
__attribute__((target("avx512bf16,avx512bw,avx512vl,avx512f")))
static inline void bg_run16(const float* x, const uint16_t* xh, int64_t n, uint16_t* dst) {
    int64_t i = 0;
    if (xh) {
        for (; i + 32 <= n; i += 32) _mm512_storeu_si512((void*)(dst + i), _mm512_loadu_si512((const void*)(xh + i)));
        if (i < n) {
            __mmask32 m = (__mmask32)((1ull << (n - i)) - 1ull);
            _mm512_mask_storeu_epi16((void*)(dst + i), m, _mm512_maskz_loadu_epi16(m, (const void*)(xh + i)));
        }
        return;
    }
    bg_cvt_run_bf16(x, n, dst);
}

/* n zero bf16 values at dst */
__attribute__((target("avx512bw,avx512f")))
static inline void bg_zero16(int64_t n, uint16_t* dst) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) _mm512_storeu_si512((void*)(dst + i), _mm512_setzero_si512());
    if (i < n) _mm512_mask_storeu_epi16((void*)(dst + i), (__mmask32)((1ull << (n - i)) - 1ull), _mm512_setzero_si512());
}

/* rows m0..m1 of an odd-C conv's im2col matrix -> out (row stride lda2 pairs): each row its K bf16 values in order,
   zero padded. A row whose taps all lie in the image is written run by run with no zeroing (the interior of a stem);
   a border row is zeroed first. The pixel walks the output row by row instead of dividing per row. */
__attribute__((target("avx512bf16,avx512bw,avx512vl,avx512f")))
static void bg_pack_conv_rows_odd(const bg_conv* cv, int64_t K, int64_t lda2, int64_t m0, int64_t m1, uint32_t* out) {
    const int64_t C = cv->C, hw = cv->Ho * cv->Wo, kwc = cv->kw * C, W2 = 2 * lda2;
    const int runs = cv->dw == 1 && cv->xc == C;     /* a kernel row's in-image taps: one run of X */
    int64_t n = m0 / hw, r = m0 % hw, oh = r / cv->Wo, ow = r % cv->Wo;
    for (int64_t m = m0; m < m1; m++) {
        uint16_t* o16 = (uint16_t*)(out + (m - m0) * lda2);
        int64_t kx0, kx1, ih0 = oh * cv->sh - cv->ph;
        bg_conv_kx_range(cv, ow, &kx0, &kx1);
        if (kx0 == 0 && kx1 == cv->kw && ih0 >= 0 && ih0 + (cv->kh - 1) * cv->dh < cv->H) {
            bg_zero16(W2 - K, o16 + K);
        } else {
            bg_zero16(W2, o16);
        }
        if (kx1 > kx0) {
            for (int64_t ky = 0; ky < cv->kh; ky++) {
                int64_t ih = ih0 + ky * cv->dh;
                if (ih < 0 || ih >= cv->H) continue;
                int64_t p0 = (n * cv->H + ih) * cv->W + ow * cv->sw - cv->pw;     /* pixel of tap kx = 0 */
                uint16_t* d = o16 + ky * kwc;
                if (runs) {
                    int64_t o = (p0 + kx0) * C;
                    bg_run16(cv->x + o, cv->xh ? cv->xh + o : NULL, (kx1 - kx0) * C, d + kx0 * C);
                } else {
                    for (int64_t kx = kx0; kx < kx1; kx++) {
                        int64_t o = (p0 + kx * cv->dw) * cv->xc;
                        bg_run16(cv->x + o, cv->xh ? cv->xh + o : NULL, C, d + kx * C);
                    }
                }
            }
        }
        if (++ow == cv->Wo) { ow = 0; if (++oh == cv->Ho) { oh = 0; n++; } }
    }
}
#endif

/* rows m0..m1 of the conv's im2col matrix -> packed pairs at out (row stride lda2), rounded as the kernel's pack does.
   With an even C each tap's channels convert straight from x (no fp32 row); else through the thread's fp32 row. */
static void bg_pack_conv_rows(const bg_args* a, int64_t m0, int64_t m1, int tid, uint32_t* out) {
    const bg_conv* cv = a->cv;
    const int64_t C = cv->C, hw = cv->Ho * cv->Wo;
    const int simd = BG_X86 && a->kern != BG_GENERIC;
    if (cv->kh == 1 && cv->kw == 1 && cv->sh == 1 && cv->sw == 1 && cv->ph == 0 && cv->pw == 0 && cv->Ho == cv->H
            && cv->Wo == cv->W && !cv->xb) {
        /* a 1x1 conv of stride 1 without pads: row m is pixel m of X (xc floats apart), the rows in one pass */
        bg_pack_a(a->kern, cv->x + m0 * cv->xc, cv->xc, C, a->lda2, 0, m1 - m0, out);
        return;
    }
    for (int64_t m = m0; m < m1; m++) {
        uint32_t* o = out + (m - m0) * a->lda2;
        if (C % 2 == 0) {
            int64_t n = m / hw, r = m % hw, oh = r / cv->Wo, ow = r % cv->Wo, kx0, kx1;
            const int runs = cv->dw == 1 && cv->xc == C;     /* a kernel row's in-image taps: one run of X */
            bg_conv_kx_range(cv, ow, &kx0, &kx1);
            uint32_t* d = o;
            for (int64_t ky = 0; ky < cv->kh; ky++, d += cv->kw * C / 2) {
                int64_t ih = oh * cv->sh - cv->ph + ky * cv->dh;
                if (ih < 0 || ih >= cv->H || kx1 <= kx0) { memset(d, 0, (size_t)(cv->kw * C) * 2); continue; }
                memset(d, 0, (size_t)(kx0 * C) * 2);
                memset(d + kx1 * C / 2, 0, (size_t)((cv->kw - kx1) * C) * 2);
                int64_t p0 = (n * cv->H + ih) * cv->W + ow * cv->sw - cv->pw;     /* pixel of tap kx = 0 */
                for (int64_t kx = kx0; kx < kx1; kx++) {
                    int64_t nc = runs ? (kx1 - kx0) * C : C, p = p0 + kx * cv->dw;
                    uint32_t* dk = d + kx * C / 2;
                    if (cv->xb) memcpy(dk, cv->xb + p * (cv->xc / 2), (size_t)nc * 2);
#if BG_X86
                    else if (simd) bg_pack_a_rows_bf16(cv->x + p * cv->xc, 0, nc, nc / 2, 0, 1, dk);
#endif
                    else bg_pack_a_rows(cv->x + p * cv->xc, 0, nc, nc / 2, 0, 1, dk);
                    if (runs) break;
                }
            }
            for (int64_t g = a->K2; g < a->lda2; g++) o[g] = 0;
            continue;
        }
#if BG_X86 && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (simd) {     /* odd C: the row's pairs are its K bf16 values in order (bg_pack_conv_rows_odd) */
            bg_pack_conv_rows_odd(cv, a->K, a->lda2, m, m1, o);
            break;
        }
#endif
        float* row = a->rows + (int64_t)tid * a->K;
        bg_conv_row(cv, m, row);
#if BG_X86
        if (simd) { bg_pack_a_rows_bf16(row, 0, a->K, a->lda2, 0, 1, o); continue; }
#endif
        bg_pack_a_rows(row, 0, a->K, a->lda2, 0, 1, o);
    }
    (void)simd;
}

/* the rows m0..m1 of row item mb (bg_nmb) */
static inline void bg_item_rows(const bg_args* a, int64_t mb, int64_t* m0, int64_t* m1) {
    *m0 = mb * BG_MB;
    *m1 = mb == a->nmb - 1 ? a->M : *m0 + BG_MB;
}

/* The column block width (whole BG_NR panels, at most BG_NB) of a GEMM that runs bg_item over its packed A on nth
   threads. With few items the BG_NB blocks leave a thread idle: a 7x7 conv's 49 rows are one row item, so N 160 is
   one block of 128 columns and one of 32 (0.8 of the work on one thread), N 320 three blocks for two threads. The
   widest block that still gives the least work a thread can get (in panels: ceil(row items x panels / nth)) is
   taken; a wider block keeps more of its A rows in L1 over its panels (bg_block runs the panels inside each K
   block), so nothing narrows when the blocks already share out evenly (N 512: four blocks for two threads). */
static inline int64_t bg_narrow(int64_t nmb, int64_t N, int nth, int kern) {
    const int64_t npan = bg_np(N), wmax = BG_NB / BG_NR;
    if (nth <= 1 || kern == BG_AMX || npan <= 1) return BG_NB;
    const int64_t best = (nmb * npan + nth - 1) / nth;
    for (int64_t w = wmax; w > 1; w--) {
        int64_t items = nmb * ((npan + w - 1) / w), wide = w < npan ? w : npan;
        if ((items + nth - 1) / nth * wide <= best) return w * BG_NR;
    }
    return BG_NR;
}

static void bg_pack_item(void* ctx, Py_ssize_t item, int tid) {
    bg_args* a = (bg_args*)ctx;
    int64_t m0, m1;
    bg_item_rows(a, item, &m0, &m1);
    if (a->cv) { bg_pack_conv_rows(a, m0, m1, tid, a->Ap + m0 * a->lda2); return; }
    bg_pack_a(a->kern, a->A, a->lda, a->K, a->lda2, m0, m1, a->Ap);
}

/* The B block after panel c0 of K block g0 in an item's columns n0..n1 (the next panel, else the next K block's first,
   else the next column block's first), fetched into L2 while the current one is multiplied: a weight streamed from
   memory (one larger than the caches, or read once per run) otherwise waits on each block's first lines. Returns the
   pairs to fetch, at most the current block's kp (0: none; pf off, or past the last column), and sets *p to the
   block. */
static inline int64_t bg_next_block(const bg_args* a, int pf, int64_t K2, int64_t n0, int64_t n1, int64_t c0,
                                    int64_t g0, int64_t kp, const uint16_t** p) {
    int64_t pc = c0 + BG_NR, pg = g0, kpf;
    if (pc >= n1) { pc = n0; pg = g0 + BG_KC / 2; }
    if (pg >= K2) { pc = n1; pg = 0; }
    *p = a->Bp + ((pc / BG_NR) * a->K2P + pg) * BG_NR * 2;
    kpf = pf && pc < a->N ? (K2 - pg < BG_KC / 2 ? K2 - pg : BG_KC / 2) : 0;
    return kpf < kp ? kpf : kp;
}

/* rows m0..m1 x columns n0..n1 of Y from packed A rows Am (row m0 first, stride lda2): products, then the epilogue */
static void bg_block(const bg_args* a, const uint32_t* Am, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const int64_t K2 = a->K2, w = n1 - n0;
    float buf[BG_MBP * BG_NB];
    int mr = (int)(m1 - m0);
    const int kern = a->kern;
    /* the next B block's prefetch (below) where a full register block of rows shares each B block: with fewer rows
       (a batch-1 FC layer: M = 1) the tile streams B at the memory's rate anyway, and the prefetches only add memory
       operations (AlexNet at 2 threads, bf16: 1.26x the time with them) */
    const int pf = bg_prefetch && mr >= BG_MR;
    const int kind = a->act ? a->act->kind : ONNXEP_ACT_NONE;
#if BG_X86
    /* the epilogue in the tiles' registers: the last K block's tiles add the earlier blocks' sums (buf) to their
       products and store act(sum + bias + R) straight to Y (bg_ep), with no pass over buf afterwards; an activation
       other than Relu / Clip (Gelu, Sigmoid ...) then over the block's stored rows, still in L1 (BG_MB x BG_NB
       floats), as the buffered epilogue below applies it (same bits; per 32-column tile, the Gelu's constants set up
       for two vectors a row took 1.02x the time of the product then a separate Gelu pass, 3136 x 96 x 384 at 1
       thread) */
    const int in_regs = kern == BG_AVX512BF16 && bg_ep_regs && K2 > 0 && a->alpha == 1.0f;
#else
    const int in_regs = 0;
#endif
    const int regs = kind == ONNXEP_ACT_NONE || kind == ONNXEP_ACT_RELU || kind == ONNXEP_ACT_CLIP;
#if BG_X86 && defined(__linux__)
    if (kern == BG_AMX && K2 > 0) {
        bg_item_amx(Am, a->K2P, a->Bp + (n0 / BG_NR) * a->K2P * BG_NR * 2, (mr + 15) / 16,
                    n1 - n0, buf);
    } else
#endif
    for (int64_t g0 = 0; g0 < K2; g0 += BG_KC / 2) {
        int64_t kp = K2 - g0 < BG_KC / 2 ? K2 - g0 : BG_KC / 2;
        const uint32_t* Ap = Am + g0;
        for (int64_t c0 = n0; c0 < n1; c0 += BG_NR) {
            int nr = (int)(n1 - c0 < BG_NR ? n1 - c0 : BG_NR);
            const uint16_t* Bp = a->Bp + ((c0 / BG_NR) * a->K2P + g0) * BG_NR * 2;
            float* C = buf + (c0 - n0);
            const uint16_t* pfp;
            int64_t kpf = bg_next_block(a, pf, K2, n0, n1, c0, g0, kp, &pfp);
#if BG_X86
            if (in_regs && g0 + kp >= K2) {
                bg_ep ep = {a->bias ? a->bias + c0 : NULL, a->R ? a->R + m0 * a->ldr + c0 : NULL, a->ldr,
                            regs ? kind : ONNXEP_ACT_NONE, a->act ? a->act->a : 0.0f, a->act ? a->act->b : 0.0f};
                bg_micro_bf16(Ap, a->lda2, Bp, kp, mr, nr, C, BG_NB, a->Y + m0 * a->ldy + c0, a->ldy, g0 > 0, pfp,
                              kpf, &ep);
                continue;
            }
#endif
            bg_micro(kern, Ap, a->lda2, Bp, kp, mr, nr, C, BG_NB, g0 > 0, pfp, kpf);
        }
    }
    if (in_regs) {
        if (!regs) onnxep_act_tile(a->act, a->Y + m0 * a->ldy + n0, a->ldy, mr, n1 - n0);
        return;
    }
    if (K2 == 0) memset(buf, 0, sizeof(buf));
    const float alpha = a->alpha;
    const float* __restrict bp = a->bias ? a->bias + n0 : NULL;
    const onnxep_act* act = a->act;
    for (int64_t m = m0; m < m1; m++) {
        const float* __restrict c = buf + (m - m0) * BG_NB;
        /* Y may be R's memory (a conv's residual taken in place): each element reads r[j] before writing y[j] */
        float* y = a->Y + m * a->ldy + n0;
        const float* r = a->R ? a->R + m * a->ldr + n0 : NULL;
        if (r && bp) for (int64_t j = 0; j < w; j++) y[j] = (alpha * c[j] + bp[j]) + r[j];
        else if (r) for (int64_t j = 0; j < w; j++) y[j] = alpha * c[j] + r[j];
        else if (bp) for (int64_t j = 0; j < w; j++) y[j] = alpha * c[j] + bp[j];
        else for (int64_t j = 0; j < w; j++) y[j] = alpha * c[j];
        if (kind != ONNXEP_ACT_NONE) onnxep_act_row(act, y, w);
    }
}

static void bg_item(void* ctx, Py_ssize_t item, int tid) {
    bg_args* a = (bg_args*)ctx;
    int64_t nb = item / a->nmb, mb = item % a->nmb, m0, m1;
    bg_item_rows(a, mb, &m0, &m1);
    int64_t n0 = nb * a->nbw, n1 = n0 + a->nbw < a->N ? n0 + a->nbw : a->N;
    (void)tid;
    bg_block(a, a->Ap + m0 * a->lda2, m0, m1, n0, n1);
}

/* a conv's item: BG_MB (.. BG_MBX) output pixels packed into the thread's own buffer (rows padded to 16 with zeros for AMX's
   tiles), then every column block from it -- no packed im2col matrix of the whole image (VGG-19's first 3x3 would be
   58 MB of bf16, written and read back) */
static void bg_conv_item(void* ctx, Py_ssize_t item, int tid) {
    bg_args* a = (bg_args*)ctx;
    int64_t m0, m1;
    bg_item_rows(a, item, &m0, &m1);
    uint32_t* Am = a->abuf + (int64_t)tid * BG_MBP * a->lda2;
    int64_t mp = (m1 - m0 + 15) / 16 * 16;
    if (a->K) bg_pack_conv_rows(a, m0, m1, tid, Am);
    if (mp > m1 - m0 && mp <= BG_MBP) memset(Am + (m1 - m0) * a->lda2, 0, (size_t)(mp - (m1 - m0)) * a->lda2 * 4);
    for (int64_t n0 = 0; n0 < a->N; n0 += BG_NB)
        bg_block(a, Am, m0, m1, n0, n0 + BG_NB < a->N ? n0 + BG_NB : a->N);
}

#endif /* ONNXEP_BGEMM_H */
