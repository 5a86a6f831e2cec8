#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/base/sha256.h"

namespace {
std::string hex_of(const std::string& text) { return qgru::sha256_hex(text.data(), text.size()); }
std::string hex_of(const std::string& text, bool accelerated) {
  qgru::Sha256 hash(accelerated);
  hash.update(text.data(), text.size());
  return hash.hex_digest();
}
}  // namespace

TEST_CASE("sha256 matches the FIPS 180-4 / NIST example vectors, portable and accelerated") {
  for (bool accelerated : {false, true}) {
    CAPTURE(accelerated);
    CHECK(hex_of("", accelerated) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(hex_of("abc", accelerated) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(hex_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", accelerated) ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK(hex_of(std::string(1000000, 'a'), accelerated) ==
          "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  }
  CHECK(hex_of("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hex_of("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hex_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(hex_of("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
               "mnopqrstnopqrstu") == "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  CHECK(hex_of(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Lengths around the padding edges (55/56 bytes: the length field fits or spills into a second block).
// Expected digests computed with Python's hashlib for bytes (i*7+3) mod 256.
TEST_CASE("sha256 padding is right at the block-boundary lengths") {
  const std::pair<size_t, const char*> cases[] = {
      {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
      {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
      {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
      {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
      {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
      {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
      {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
      {128, "d2742f1f4ac6bb7ca2b239ee18402ba8b3f9f8e652d2a72973c2b9ba11c08cf6"}};
  for (const auto& [case_length, digest] : cases) {
    const size_t length = case_length;  // CAPTURE needs a variable: C++17 lambdas cannot capture a binding (clang)
    std::vector<uint8_t> bytes(length);
    for (size_t i = 0; i < length; ++i) bytes[i] = static_cast<uint8_t>((i * 7 + 3) & 0xFF);
    CAPTURE(length);
    CHECK(qgru::sha256_hex(bytes.data(), bytes.size()) == digest);
  }
}

TEST_CASE("sha256 fed in pieces at every split point equals the one-shot digest") {
  std::vector<uint8_t> bytes(200);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31 + 1);
  for (size_t length : {0u, 1u, 63u, 64u, 65u, 127u, 200u}) {
    const std::string whole = qgru::sha256_hex(bytes.data(), length);
    for (size_t first = 0; first <= length; ++first) {
      for (size_t second = first; second <= length; second += 17) {
        qgru::Sha256 hash;
        hash.update(bytes.data(), first);
        hash.update(bytes.data() + first, second - first);
        hash.update(bytes.data() + second, length - second);
        CAPTURE(length);
        CAPTURE(first);
        REQUIRE(hash.hex_digest() == whole);
      }
    }
  }
}

TEST_CASE("sha256 with the x86 SHA extensions equals the portable reference on random messages") {
  qgru::Sha256 probe(true);
  if (!probe.accelerated()) MESSAGE("this CPU has no SHA extensions: both sides run the portable code");
  std::vector<uint8_t> bytes(5000);
  uint32_t state = 12345;
  for (uint8_t& byte : bytes) {
    state = state * 1664525u + 1013904223u;  // LCG: deterministic, every byte value occurs
    byte = static_cast<uint8_t>(state >> 24);
  }
  for (size_t length = 0; length <= bytes.size(); length += (length < 300 ? 1 : 97)) {
    qgru::Sha256 portable(false), fast(true);
    portable.update(bytes.data(), length);
    fast.update(bytes.data(), length);
    CAPTURE(length);
    REQUIRE(fast.hex_digest() == portable.hex_digest());
  }
}

TEST_CASE("sha256 object refuses reuse after digest until reset") {
  qgru::Sha256 hash;
  hash.update("abc", 3);
  const std::string first = hash.hex_digest();
  CHECK_THROWS_AS(hash.update("x", 1), qgru::Error);
  hash.reset();
  hash.update("abc", 3);
  CHECK(hash.hex_digest() == first);
}

TEST_CASE("sha256 of a file streams it and names a missing file") {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("qgru_sha256_" + std::to_string(getpid()) + ".bin");
  {
    std::ofstream out(path, std::ios::binary);
    const std::string block(1000, 'a');
    for (int i = 0; i < 1000; ++i) out << block;  // one million 'a', spanning several read blocks
  }
  CHECK(qgru::sha256_file_hex(path.string()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  std::filesystem::remove(path);
  try {
    qgru::sha256_file_hex(path.string());
    FAIL("expected qgru::Error");
  } catch (const qgru::Error& error) {
    CHECK(std::string(error.what()).find(path.string()) != std::string::npos);
  }
}
