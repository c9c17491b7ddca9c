/* The direct-conv micro-kernel's inner loop alone (onnxep_duk_body's k step, direct_conv.h), A and B in L1: how
   fast MR rows x NV AVX-512 vectors of output channels run per FMA, and a broadcast of A through a 128-bit load and
   in-lane permutes instead of one broadcast load per FMA. Not a test, not built by setup.py (bench/NOTES.md, "Tiny
   zoo convnets"):
       gcc -O3 -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -o /tmp/probe bench/probe_dconv_nv.c && /tmp/probe
   Columns: ns per call (K = 147 k steps, A rows 6 floats apart: a 7x7/2 stem over 3 channels), FMAs per ns. */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define K 147
float A[64*8*K+1024] __attribute__((aligned(64)));
float B[K*32] __attribute__((aligned(64)));
float C[64*32];
#define KERN(NAME, MR, NV) \
__attribute__((noinline)) void NAME(const float* a, long rs, const float* b, float* c) { \
  __m512 c0[MR], c1[MR]; for (int i=0;i<MR;i++){c0[i]=_mm512_setzero_ps(); c1[i]=c0[i];} \
  for (long k=0;k<K;k++){ __m512 b0=_mm512_loadu_ps(b), b1 = NV==2?_mm512_loadu_ps(b+16):b0; \
    _Pragma("GCC unroll 32") for (int i=0;i<MR;i++){ __m512 ai=_mm512_set1_ps(a[i*rs]); c0[i]=_mm512_fmadd_ps(ai,b0,c0[i]); if(NV==2) c1[i]=_mm512_fmadd_ps(ai,b1,c1[i]);} \
    a+=1; b+=32; } \
  for (int i=0;i<MR;i++){_mm512_storeu_ps(c+i*32,c0[i]); if(NV==2)_mm512_storeu_ps(c+i*32+16,c1[i]);} }
KERN(k12_1,12,1) KERN(k12_2,12,2) KERN(k24_1,24,1) KERN(k16_1,16,1) KERN(k8_1,8,1) KERN(k28_1,28,1)
/* broadcast via 128-bit load + in-lane permute: 4 k per load */
__attribute__((noinline)) void k12_perm(const float* a, long rs, const float* b, float* c) {
  __m512 c0[12]; for (int i=0;i<12;i++) c0[i]=_mm512_setzero_ps();
  long k=0;
  for (;k+4<=K;k+=4){ __m512 b0=_mm512_loadu_ps(b), b1=_mm512_loadu_ps(b+32), b2=_mm512_loadu_ps(b+64), b3=_mm512_loadu_ps(b+96);
    _Pragma("GCC unroll 12") for (int i=0;i<12;i++){ __m512 q=_mm512_broadcast_f32x4(_mm_loadu_ps(a+i*rs));
      c0[i]=_mm512_fmadd_ps(_mm512_permute_ps(q,0x00),b0,c0[i]); c0[i]=_mm512_fmadd_ps(_mm512_permute_ps(q,0x55),b1,c0[i]);
      c0[i]=_mm512_fmadd_ps(_mm512_permute_ps(q,0xAA),b2,c0[i]); c0[i]=_mm512_fmadd_ps(_mm512_permute_ps(q,0xFF),b3,c0[i]);}
    a+=4; b+=128; }
  for (;k<K;k++){ __m512 b0=_mm512_loadu_ps(b); for (int i=0;i<12;i++) c0[i]=_mm512_fmadd_ps(_mm512_set1_ps(a[i*rs]),b0,c0[i]); a++; b+=32;}
  for (int i=0;i<12;i++) _mm512_storeu_ps(c+i*32,c0[i]); }
typedef void (*fn)(const float*, long, const float*, float*);
void run(const char* nm, fn f, int mr, int nv){ long reps=200000; for(long r=0;r<reps/10;r++) f(A,6,B,C);
  double t=now(); for(long r=0;r<reps;r++) f(A,6,B,C); t=now()-t;
  double fmas=(double)reps*K*mr*nv; printf("%-10s %6.2f ns/call  %.2f FMA/ns  (useful lanes x%d)\n", nm, t/reps*1e9, fmas/t*1e-9, nv); }
int main(){ for(int i=0;i<(int)(sizeof A/4);i++)A[i]=i*1e-3f; for(int i=0;i<K*32;i++)B[i]=1e-3f*i;
 for(int rep=0;rep<2;rep++){ run("12x1",k12_1,12,1); run("12x2",k12_2,12,2); run("8x1",k8_1,8,1); run("16x1",k16_1,16,1); run("24x1",k24_1,24,1); run("28x1",k28_1,28,1); run("12x1perm",k12_perm,12,1);} return 0; }
