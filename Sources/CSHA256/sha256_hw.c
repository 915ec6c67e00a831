// SHA-256's compression function with the x86 SHA extensions: with SHA-1's (sha1_hw.c), the one
// place kidledger uses processor-specific instructions. Everything else about hashing (padding,
// lengths, the portable fallback that is also the reference) is Swift, in KidLedgerDomain/SHA256.swift.

#include "csha256.h"

#if defined(__x86_64__)

#include <cpuid.h>
#include <immintrin.h>

static int available;

__attribute__((constructor)) static void detect(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    int ssse3 = (c >> 9) & 1, sse41 = (c >> 19) & 1;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    int sha = (b >> 29) & 1;
    available = ssse3 && sse41 && sha;
}

int kl_sha256_hw_available(void) { return available; }

static const uint32_t K[64] __attribute__((aligned(16))) = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

__attribute__((target("sha,sse4.1,ssse3")))
void kl_sha256_hw_compress(uint32_t state[8], const uint8_t *blocks, size_t count) {
    // Byte order: each 32-bit message word is big-endian.
    const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    // The instructions keep the state as ABEF and CDGH.
    __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[0]), 0xB1);  // CDAB
    __m128i cdgh = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[4]), 0x1B); // EFGH
    __m128i abef = _mm_alignr_epi8(tmp, cdgh, 8);                                          // ABEF
    cdgh = _mm_blend_epi16(cdgh, tmp, 0xF0);                                               // CDGH

    for (; count > 0; count--, blocks += 64) {
        const __m128i abefSaved = abef, cdghSaved = cdgh;
        // w[i % 4]: message words 4i..4i+3.
        __m128i w[4];
        for (int i = 0; i < 16; i++) {
            __m128i words;
            if (i < 4) {
                words = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(blocks + 16 * i)), swap);
            } else {
                // W[t] = σ1(W[t-2]) + W[t-7] + σ0(W[t-15]) + W[t-16], four at a time.
                __m128i partial = _mm_sha256msg1_epu32(w[i % 4], w[(i + 1) % 4]);
                partial = _mm_add_epi32(partial, _mm_alignr_epi8(w[(i + 3) % 4], w[(i + 2) % 4], 4));
                words = _mm_sha256msg2_epu32(partial, w[(i + 3) % 4]);
            }
            w[i % 4] = words;
            __m128i kw = _mm_add_epi32(words, _mm_load_si128((const __m128i *)&K[4 * i]));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, kw);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(kw, 0x0E));
        }
        abef = _mm_add_epi32(abef, abefSaved);
        cdgh = _mm_add_epi32(cdgh, cdghSaved);
    }

    tmp = _mm_shuffle_epi32(abef, 0x1B);               // FEBA
    cdgh = _mm_shuffle_epi32(cdgh, 0xB1);              // DCHG
    abef = _mm_blend_epi16(tmp, cdgh, 0xF0);           // DCBA
    cdgh = _mm_alignr_epi8(cdgh, tmp, 8);              // HGFE
    _mm_storeu_si128((__m128i *)&state[0], abef);
    _mm_storeu_si128((__m128i *)&state[4], cdgh);
}

#else

int kl_sha256_hw_available(void) { return 0; }

void kl_sha256_hw_compress(uint32_t state[8], const uint8_t *blocks, size_t count) {
    (void)state; (void)blocks; (void)count;
    __builtin_trap();  // never called: kl_sha256_hw_available() is 0 here
}

#endif
