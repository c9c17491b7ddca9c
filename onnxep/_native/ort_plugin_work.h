/* onnxep's onnxruntime plugin EP: per-thread workspaces and the shared pre-pack log (issue 28).
 *
 * The adapters run their items on onnxruntime's intra-op threads, which do not tell an item which thread runs it:
 * each thread keeps its own workspaces here (grown on demand, 64-byte aligned, kept for the thread's life), one per
 * slot (0: the computing thread's im2col / pack buffer, 1: the GEMM tile workspace of whichever thread runs a tile).
 */
#ifndef ONNXEP_ORT_PLUGIN_WORK_H
#define ONNXEP_ORT_PLUGIN_WORK_H
#include <stdlib.h>
#include <stddef.h>

#define ONNXEP_TL_SLOTS 2
static __thread float* onnxep_tl_buf[ONNXEP_TL_SLOTS];
static __thread size_t onnxep_tl_cap[ONNXEP_TL_SLOTS];

/* At least n floats of this thread's workspace `slot` (NULL when out of memory). */
static float* onnxep_plugin_tl(int slot, size_t n) {
    if (n == 0) n = 1;
    if (n > onnxep_tl_cap[slot]) {
        size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
        void* p = NULL;
        if (posix_memalign(&p, 64, bytes) != 0) return NULL;
        free(onnxep_tl_buf[slot]);
        onnxep_tl_buf[slot] = (float*)p;
        onnxep_tl_cap[slot] = bytes / sizeof(float);
    }
    return onnxep_tl_buf[slot];
}

/* The last buffers SetSharedPrePackedWeight handed to a kernel, for the tests (onnxep.ort.shared_prepack_log). */
#define ONNXEP_SHARED_LOG 256
static const void* volatile onnxep_shared_log[ONNXEP_SHARED_LOG];
static volatile int onnxep_shared_log_n;

static void onnxep_shared_log_add(const void* p) {
    int i = __atomic_fetch_add(&onnxep_shared_log_n, 1, __ATOMIC_RELAXED);
    if (i < ONNXEP_SHARED_LOG) onnxep_shared_log[i] = p;
}
static int onnxep_shared_log_count(void) {
    int n = __atomic_load_n(&onnxep_shared_log_n, __ATOMIC_RELAXED);
    return n < ONNXEP_SHARED_LOG ? n : ONNXEP_SHARED_LOG;
}
static const void* onnxep_shared_log_get(int i) { return onnxep_shared_log[i]; }
static void onnxep_shared_log_reset(void) { __atomic_store_n(&onnxep_shared_log_n, 0, __ATOMIC_RELAXED); }
#endif
