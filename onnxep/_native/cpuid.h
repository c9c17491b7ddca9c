/* onnxep native code, included by onnxep/_kernels.pyx (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_CPUID_H
#define ONNXEP_NATIVE_CPUID_H

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <cpuid.h>
#define ONNXEP_HAVE_CPUID 1
#else
#define ONNXEP_HAVE_CPUID 0
#endif

/* bit 0: x86-64 baseline, bit 1: AVX2+FMA usable, bit 2: AVX-512 F/BW/DQ/VL usable,
   bit 3: AVX512-VNNI usable (vpdpbusd, with bit 2), bit 4: AVX512_BF16 usable (vdpbf16ps, with bit 2),
   bit 5: AMX-TILE + AMX-BF16 present with the OS's tile state enabled in XCR0 (bits 17, 18); Linux also wants a
   per-process permission request before the first tile instruction (bgemm.h asks for it).
   "usable" = the CPU has it (CPUID) AND the OS saves the registers (XGETBV): MLAS checks
   (xcr0 & 0xE0) == 0xE0 for the opmask/ZMM state before using AVX-512. */
static int onnxep_cpu_features(void) {
#if ONNXEP_HAVE_CPUID
    unsigned int a = 0, b = 0, c = 0, d = 0;
    unsigned long long xcr0 = 0;
    int feats = 1;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return feats;
    int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1;
    if (osxsave) {
        unsigned int lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = ((unsigned long long)hi << 32) | lo;
    }
    int ymm_ok = (xcr0 & 0x6) == 0x6;
    int zmm_ok = ymm_ok && (xcr0 & 0xE0) == 0xE0;
    if (__get_cpuid_max(0, 0) < 7) return feats;
    __cpuid_count(7, 0, a, b, c, d);
    int avx2 = (b >> 5) & 1;
    int f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
    if (avx && avx2 && fma && ymm_ok) feats |= 2;
    if ((feats & 2) && f && dq && bw && vl && zmm_ok) feats |= 4;
    if ((feats & 4) && ((c >> 11) & 1)) feats |= 8;
    if ((feats & 4) && ((d >> 24) & 1) && ((d >> 22) & 1) && (xcr0 & 0x60000) == 0x60000) feats |= 32;
    if (feats & 4) {
        __cpuid_count(7, 1, a, b, c, d);
        if ((a >> 5) & 1) feats |= 16;
    }
    return feats;
#else
    return 1;
#endif
}

/* One probe per process: the ISA-specific kernels (qgemm.h, bgemm.h) ask for one bit each. */
static int onnxep_cpu_has(int bit) {
    static int cached = -1;
    if (cached < 0) cached = onnxep_cpu_features();
    return (cached & bit) != 0;
}

#endif /* ONNXEP_NATIVE_CPUID_H */
