#ifndef KIDLEDGER_CSHA256_H
#define KIDLEDGER_CSHA256_H

#include <stddef.h>
#include <stdint.h>

/// Whether this processor has the SHA extensions `kl_sha256_hw_compress` needs (x86-64 with SHA,
/// SSSE3 and SSE4.1). Decided once, when the library is loaded; 0 on every other architecture.
int kl_sha256_hw_available(void);

/// The SHA-256 compression function (FIPS 180-4, 6.2.2) over `count` 64-byte blocks at `blocks`,
/// with the SHA instructions. `state` holds the eight working words H0..H7 in order, as numbers
/// (not serialized). Call only when `kl_sha256_hw_available()` returned 1.
void kl_sha256_hw_compress(uint32_t state[8], const uint8_t *blocks, size_t count);

/// The SHA-1 compression function (FIPS 180-4, 6.1.2) over `count` 64-byte blocks at `blocks`,
/// with the SHA instructions. `state` holds the five working words H0..H4 in order, as numbers.
/// Call only when `kl_sha256_hw_available()` returned 1 (the same instructions).
void kl_sha1_hw_compress(uint32_t state[5], const uint8_t *blocks, size_t count);

#endif
