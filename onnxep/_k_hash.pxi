# Content hashing for the pre-packed weight cache: XXH64 (Yann Collet's public specification, xxhash_spec.md),
# written from the spec. Oracle: the `xxhash` package's xxh64_intdigest (tests/kernels/test_hash.py).
#
#   4 accumulators, each eats one 8-byte lane of every 32-byte stripe:  acc = rotl(acc + lane*P2, 31) * P1
#   merge the 4 lanes (len >= 32) or start from seed + P5, add len, then the tail in 8/4/1-byte steps, avalanche.
# All arithmetic is mod 2**64 (uint64_t wraps in C). Input lanes are little-endian.

from libc.stdint cimport uint32_t

cdef extern from *:
    """
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    #define ONNXEP_BIG_ENDIAN 1
    #else
    #define ONNXEP_BIG_ENDIAN 0
    #endif
    /* The five XXH64 primes, as compile-time constants (module-level cdef globals would be reloaded from memory). */
    #define ONNXEP_XXH_P1 0x9E3779B185EBCA87ULL
    #define ONNXEP_XXH_P2 0xC2B2AE3D27D4EB4FULL
    #define ONNXEP_XXH_P3 0x165667B19E3779F9ULL
    #define ONNXEP_XXH_P4 0x85EBCA77C2B2AE63ULL
    #define ONNXEP_XXH_P5 0x27D4EB2F165667C5ULL
    """
    const int ONNXEP_BIG_ENDIAN
    const uint64_t XXH_P1 "ONNXEP_XXH_P1"
    const uint64_t XXH_P2 "ONNXEP_XXH_P2"
    const uint64_t XXH_P3 "ONNXEP_XXH_P3"
    const uint64_t XXH_P4 "ONNXEP_XXH_P4"
    const uint64_t XXH_P5 "ONNXEP_XXH_P5"
    uint64_t __builtin_bswap64(uint64_t) noexcept nogil
    uint32_t __builtin_bswap32(uint32_t) noexcept nogil

cdef enum:
    XXH_STRIPE = 32             # bytes per round of the 4 accumulators
    XXH_NOGIL_MIN = 64 * 1024   # below this, releasing and re-taking the GIL costs more than it frees (hashlib: 2 KB)


cdef inline uint64_t _rotl64(uint64_t x, int r) noexcept nogil:
    """x rotated left by r (0 < r < 64); gcc turns this shape into one rol."""
    return (x << r) | (x >> (64 - r))


cdef inline uint64_t _read64le(const uint8_t* p) noexcept nogil:
    """Unaligned little-endian 64-bit load (memcpy compiles to one mov)."""
    cdef uint64_t v
    memcpy(&v, p, 8)
    if ONNXEP_BIG_ENDIAN:
        v = __builtin_bswap64(v)
    return v


cdef inline uint32_t _read32le(const uint8_t* p) noexcept nogil:
    """Unaligned little-endian 32-bit load."""
    cdef uint32_t v
    memcpy(&v, p, 4)
    if ONNXEP_BIG_ENDIAN:
        v = __builtin_bswap32(v)
    return v


cdef inline uint64_t _xxh64_round(uint64_t acc, uint64_t lane) noexcept nogil:
    """acc := rotl(acc + lane*P2, 31) * P1"""
    acc = acc + lane * XXH_P2
    acc = _rotl64(acc, 31)
    return acc * XXH_P1


cdef inline uint64_t _xxh64_merge(uint64_t acc, uint64_t v) noexcept nogil:
    """acc := (acc ^ round(0, v)) * P1 + P4"""
    acc = acc ^ _xxh64_round(0, v)
    return acc * XXH_P1 + XXH_P4


cdef uint64_t xxh64_raw(const uint8_t* p, size_t n, uint64_t seed) noexcept nogil:
    """XXH64 of the n bytes at p (any alignment) with `seed`."""
    cdef const uint8_t* end = p + n
    cdef const uint8_t* limit
    cdef uint64_t v1, v2, v3, v4, acc
    if n >= XXH_STRIPE:
        v1 = seed + XXH_P1 + XXH_P2
        v2 = seed + XXH_P2
        v3 = seed
        v4 = seed - XXH_P1
        limit = end - XXH_STRIPE
        while p <= limit:   # the hot loop: 4 independent multiply chains, 32 bytes per iteration
            v1 = _xxh64_round(v1, _read64le(p))
            v2 = _xxh64_round(v2, _read64le(p + 8))
            v3 = _xxh64_round(v3, _read64le(p + 16))
            v4 = _xxh64_round(v4, _read64le(p + 24))
            p += XXH_STRIPE
        acc = _rotl64(v1, 1) + _rotl64(v2, 7) + _rotl64(v3, 12) + _rotl64(v4, 18)
        acc = _xxh64_merge(acc, v1)
        acc = _xxh64_merge(acc, v2)
        acc = _xxh64_merge(acc, v3)
        acc = _xxh64_merge(acc, v4)
    else:
        acc = seed + XXH_P5
    acc = acc + <uint64_t>n
    # tail: at most 31 bytes left
    while end - p >= 8:
        acc = acc ^ _xxh64_round(0, _read64le(p))
        acc = _rotl64(acc, 27) * XXH_P1 + XXH_P4
        p += 8
    if end - p >= 4:
        acc = acc ^ (<uint64_t>_read32le(p) * XXH_P1)
        acc = _rotl64(acc, 23) * XXH_P2 + XXH_P3
        p += 4
    while p < end:
        acc = acc ^ (<uint64_t>p[0] * XXH_P5)
        acc = _rotl64(acc, 11) * XXH_P1
        p += 1
    # avalanche
    acc = acc ^ (acc >> 33)
    acc = acc * XXH_P2
    acc = acc ^ (acc >> 29)
    acc = acc * XXH_P3
    acc = acc ^ (acc >> 32)
    return acc


def xxh64(const uint8_t[::1] data, uint64_t seed=0):
    """XXH64 of a contiguous byte buffer (read-only buffers accepted), as an int in [0, 2**64); equals
    xxhash.xxh64_intdigest(data, seed). The GIL is released while hashing inputs of 64 KB or more."""
    cdef size_t n = <size_t>data.shape[0]
    cdef uint8_t empty = 0
    cdef const uint8_t* p = &data[0] if n > 0 else &empty   # a valid pointer even for b""
    cdef uint64_t h
    if n < XXH_NOGIL_MIN:
        return xxh64_raw(p, n, seed)
    with nogil:
        h = xxh64_raw(p, n, seed)
    return h
