#pragma once
// SHA-256 block compression with the x86 SHA extensions (SHA-NI), used by Sha256 when the CPU has them.
// The portable compression in sha256.cpp is the reference; the unit tests compare the two on every
// machine that has the extensions.
#include <cstddef>
#include <cstdint>

namespace qgru::sha256_detail {

// True when this build targets x86 and the CPU reports SHA, SSSE3 and SSE4.1.
bool x86_sha_available();
// Folds `blocks` 64-byte blocks into `state` (FIPS 180-4 H0..H7). Call only when x86_sha_available().
void x86_sha_compress(uint32_t state[8], const uint8_t* data, size_t blocks);

}  // namespace qgru::sha256_detail
