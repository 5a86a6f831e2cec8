#include "qgru/base/sha256.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/base/input_file.h"
#include "sha256_x86.h"

namespace qgru {
namespace {

// FIPS 180-4 section 4.2.2: the first 32 bits of the fractional parts of the cube roots of the first 64 primes.
constexpr uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// All arithmetic below is on uint32_t, modulo 2^32, as the standard specifies.
inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

// The reference compression of one 64-byte block (FIPS 180-4 section 6.2.2), written as the standard reads.
void compress_portable(uint32_t* state, const uint8_t* block) {
  uint32_t w[64];
  for (int t = 0; t < 16; ++t) {  // message words are big-endian
    w[t] = (uint32_t{block[4 * t]} << 24) | (uint32_t{block[4 * t + 1]} << 16) |
           (uint32_t{block[4 * t + 2]} << 8) | uint32_t{block[4 * t + 3]};
  }
  for (int t = 16; t < 64; ++t) {
    const uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    const uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
  for (int t = 0; t < 64; ++t) {
    const uint32_t big_sigma1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
    const uint32_t choose = (e & f) ^ (~e & g);
    const uint32_t t1 = h + big_sigma1 + choose + kRoundConstants[t] + w[t];
    const uint32_t big_sigma0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
    const uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
    const uint32_t t2 = big_sigma0 + majority;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state[0] += a; state[1] += b; state[2] += c; state[3] += d;
  state[4] += e; state[5] += f; state[6] += g; state[7] += h;
}

}  // namespace

Sha256::Sha256(bool allow_acceleration)
    : accelerated_(allow_acceleration && sha256_detail::x86_sha_available()) {
  reset();
}

void Sha256::reset() {
  // FIPS 180-4 section 5.3.3: fractional parts of the square roots of the first 8 primes.
  state_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  buffered_ = 0;
  total_bytes_ = 0;
  finished_ = false;
}

void Sha256::compress(const uint8_t* blocks, size_t count) {
  if (accelerated_) {
    sha256_detail::x86_sha_compress(state_.data(), blocks, count);
    return;
  }
  for (; count > 0; --count, blocks += 64) compress_portable(state_.data(), blocks);
}

void Sha256::update(const void* data, size_t size) {
  if (finished_) throw Error("internal: Sha256::update after digest (call reset first)");
  const auto* bytes = static_cast<const uint8_t*>(data);
  total_bytes_ += size;
  if (buffered_ > 0) {
    const size_t take = std::min(size, buffer_.size() - buffered_);
    std::memcpy(buffer_.data() + buffered_, bytes, take);
    buffered_ += take;
    bytes += take;
    size -= take;
    if (buffered_ < buffer_.size()) return;
    compress(buffer_.data(), 1);
    buffered_ = 0;
  }
  const size_t whole_blocks = size / 64;
  if (whole_blocks > 0) compress(bytes, whole_blocks);
  bytes += whole_blocks * 64;
  size -= whole_blocks * 64;
  if (size > 0) std::memcpy(buffer_.data(), bytes, size);
  buffered_ = size;
}

std::array<uint8_t, 32> Sha256::digest() {
  if (finished_) throw Error("internal: Sha256::digest called twice (call reset first)");
  // Padding (FIPS 180-4 section 5.1.1): 0x80, zeros up to 56 mod 64, then the bit length as a
  // big-endian uint64 (bit length = 8 * bytes, modulo 2^64).
  const uint64_t bit_length = total_bytes_ * 8u;
  buffer_[buffered_++] = 0x80;
  if (buffered_ > 56) {
    std::memset(buffer_.data() + buffered_, 0, 64 - buffered_);
    compress(buffer_.data(), 1);
    buffered_ = 0;
  }
  std::memset(buffer_.data() + buffered_, 0, 56 - buffered_);
  for (int i = 0; i < 8; ++i) buffer_[56 + i] = static_cast<uint8_t>(bit_length >> (56 - 8 * i));
  compress(buffer_.data(), 1);
  finished_ = true;
  std::array<uint8_t, 32> out{};
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<uint8_t>(state_[i] >> (24 - 8 * j));
  }
  return out;
}

std::string Sha256::hex_digest() {
  static const char kHex[] = "0123456789abcdef";
  const auto bytes = digest();
  std::string text;
  text.reserve(64);
  for (uint8_t byte : bytes) {
    text += kHex[byte >> 4];
    text += kHex[byte & 0xF];
  }
  return text;
}

bool Sha256::accelerated() const { return accelerated_; }

std::string sha256_hex(const void* data, size_t size) {
  Sha256 hash;
  hash.update(data, size);
  return hash.hex_digest();
}

std::string sha256_file_hex(const std::string& path) {
  const InputFile file(path);  // a regular file only: a FIFO or a device is refused, never read
  Sha256 hash;
  std::vector<char> block(1 << 20);
  uint64_t offset = 0;
  while (const uint64_t got = file.read_some(offset, block.data(), block.size())) {
    hash.update(block.data(), static_cast<size_t>(got));
    offset += got;
  }
  return hash.hex_digest();
}

}  // namespace qgru
