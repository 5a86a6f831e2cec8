#pragma once
// SHA-256 (FIPS 180-4). Artifacts record the sha256 of the tensor file they describe, and readers check it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace qgru {

// Incremental hashing: update() any number of times, then digest() once (the object is then spent;
// reset() starts over). Blocks are compressed with the x86 SHA extensions when the CPU has them and
// `allow_acceleration` is true; otherwise (and as the reference the tests compare against) in portable C++.
class Sha256 {
 public:
  explicit Sha256(bool allow_acceleration = true);
  void reset();
  void update(const void* data, size_t size);
  std::array<uint8_t, 32> digest();
  std::string hex_digest();  // 64 lowercase hex characters
  bool accelerated() const;  // whether the x86 SHA extensions are in use

 private:
  void compress(const uint8_t* blocks, size_t count);  // count 64-byte blocks
  bool accelerated_ = false;
  std::array<uint32_t, 8> state_{};
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;      // bytes waiting in buffer_ (always < 64 between calls)
  uint64_t total_bytes_ = 0;  // message length so far; FIPS 180-4 bounds messages below 2^64 bits
  bool finished_ = false;
};

std::string sha256_hex(const void* data, size_t size);
// Streams the file in blocks (constant memory). Throws qgru::Error naming the file if it cannot be read.
std::string sha256_file_hex(const std::string& path);

}  // namespace qgru
