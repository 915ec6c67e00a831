// SHA-1's compression function with the x86 SHA extensions, beside SHA-256's (sha256_hw.c). SHA-1
// makes only name-based (version-5) record ids, not security; the portable Swift compression in
// KidLedgerDomain/SHA1.swift is the fallback and the reference the tests hold this to.

#include "csha256.h"

#if defined(__x86_64__)

#include <immintrin.h>

__attribute__((target("sha,sse4.1,ssse3")))
void kl_sha1_hw_compress(uint32_t state[5], const uint8_t *blocks, size_t count) {
    // The message words are big-endian; the instructions want word 0 in the highest lane.
    const __m128i reverse = _mm_set_epi64x(0x0001020304050607ULL, 0x08090a0b0c0d0e0fULL);
    // ABCD with A in the highest lane; E in the highest lane of its own register.
    __m128i abcd = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)state), 0x1B);
    __m128i e = _mm_set_epi32((int)state[4], 0, 0, 0);

    for (; count > 0; count--, blocks += 64) {
        const __m128i abcdSaved = abcd, eSaved = e;
        // w[i % 4]: message words 4i..4i+3 (W[t] for t in 4i..4i+3).
        __m128i w[4];
        // A before the previous four rounds: what the next E is derived from.
        __m128i previous = abcd;
        for (int i = 0; i < 20; i++) {
            __m128i words;
            if (i < 4) {
                words = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(blocks + 16 * i)), reverse);
            } else {
                // W[t] = rotl1(W[t-3] ^ W[t-8] ^ W[t-14] ^ W[t-16]), four at a time.
                __m128i partial = _mm_xor_si128(_mm_sha1msg1_epu32(w[i % 4], w[(i + 1) % 4]), w[(i + 2) % 4]);
                words = _mm_sha1msg2_epu32(partial, w[(i + 3) % 4]);
            }
            w[i % 4] = words;
            // E plus the four words: E itself first, then rotl30 of A from four rounds back.
            __m128i ew = i == 0 ? _mm_add_epi32(e, words) : _mm_sha1nexte_epu32(previous, words);
            previous = abcd;
            switch (i / 5) {  // the round function and constant of rounds 20k..20k+19
            case 0: abcd = _mm_sha1rnds4_epu32(abcd, ew, 0); break;
            case 1: abcd = _mm_sha1rnds4_epu32(abcd, ew, 1); break;
            case 2: abcd = _mm_sha1rnds4_epu32(abcd, ew, 2); break;
            default: abcd = _mm_sha1rnds4_epu32(abcd, ew, 3); break;
            }
        }
        // E after the 80 rounds is rotl30 of A from four rounds before the end.
        e = _mm_sha1nexte_epu32(previous, eSaved);
        abcd = _mm_add_epi32(abcd, abcdSaved);
    }

    _mm_storeu_si128((__m128i *)state, _mm_shuffle_epi32(abcd, 0x1B));
    state[4] = (uint32_t)_mm_extract_epi32(e, 3);
}

#else

void kl_sha1_hw_compress(uint32_t state[5], const uint8_t *blocks, size_t count) {
    (void)state; (void)blocks; (void)count;
    __builtin_trap();  // never called: kl_sha256_hw_available() is 0 here
}

#endif
