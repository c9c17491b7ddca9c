/* Streaming read rate of this machine at 1 and 2 threads beside onnxep's GEMV loop (bench/NOTES.md, issue 25):
   a plain AVX-512 sum over 151 MB (AlexNet's fc6), one contiguous half per thread, and onnxep_gemv_nk on the same
   bytes as a 4096 x 9216 weight, split the same way; 40 alternating rounds, the median and 90th percentile in GB/s.

       gcc -O3 -Wno-unused-function -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -o /tmp/probe_bw \
           bench/probe_bw.c -lpthread
       /tmp/probe_bw
*/
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef long Py_ssize_t;
typedef struct { int kind; } onnxep_act;
static inline float onnxep_act1(const onnxep_act* a, float x) { (void)a; return x; }
#include "../onnxep/_native/gemv.h"

#define N 4096L
#define K 9216L
#define ROUNDS 40
typedef struct { const float *w, *a; float* y; long n0, n1; int gemv; float sum; } part;

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void* work(void* p) {
    part* q = p;
    if (q->gemv) {
        onnxep_act act = {0};
        onnxep_gemv_nk(q->a, q->w, K, q->n0, q->n1, NULL, q->y, &act, 1);
        return NULL;
    }
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (const float* x = q->w + q->n0 * K; x < q->w + q->n1 * K; x += 64) {
        s0 = _mm512_add_ps(s0, _mm512_loadu_ps(x));
        s1 = _mm512_add_ps(s1, _mm512_loadu_ps(x + 16));
        s2 = _mm512_add_ps(s2, _mm512_loadu_ps(x + 32));
        s3 = _mm512_add_ps(s3, _mm512_loadu_ps(x + 48));
    }
    q->sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    return NULL;
}
static int cmp(const void* a, const void* b) { double x = *(const double*)a, y = *(const double*)b; return (x > y) - (x < y); }
int main(void) {
    float* w = aligned_alloc(64, N * K * sizeof(float));
    float* a = aligned_alloc(64, K * sizeof(float));
    float* y = aligned_alloc(64, N * sizeof(float));
    static double gbs[2][3][ROUNDS];
    if (!w || !a || !y) return 1;
    for (long i = 0; i < N * K; i++) w[i] = (float)(i % 7);
    for (long i = 0; i < K; i++) a[i] = 1.0f;
    for (int r = 0; r < ROUNDS; r++)
        for (int g = 0; g < 2; g++)
            for (int th = 1; th <= 2; th++) {
                part p[2];
                pthread_t t;
                for (int k = 0; k < th; k++) p[k] = (part){w, a, y, N * k / th, N * (k + 1) / th, g, 0.0f};
                double t0 = now();
                if (th == 2) pthread_create(&t, NULL, work, &p[1]);
                work(&p[0]);
                if (th == 2) pthread_join(t, NULL);
                gbs[g][th][r] = N * K * sizeof(float) / (now() - t0) / 1e9;
            }
    for (int g = 0; g < 2; g++)
        for (int th = 1; th <= 2; th++) {
            qsort(gbs[g][th], ROUNDS, sizeof(double), cmp);
            printf("%-5s %d thread(s): median %5.1f GB/s, p90 %5.1f\n", g ? "gemv" : "sum", th, gbs[g][th][ROUNDS / 2],
                   gbs[g][th][ROUNDS * 9 / 10]);
        }
    return 0;
}
