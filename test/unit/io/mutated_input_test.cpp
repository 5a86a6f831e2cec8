// Every reader, given a damaged copy of a valid file (a byte changed, or cut short), either reads it or
// throws qgru::Error: never another exception type, never a crash (run under sanitizers to see overreads).
#include <doctest/doctest.h>

#include <random>

#include "io_test_util.h"
#include "qgru/io/npy.h"
#include "qgru/io/safetensors.h"

namespace {

enum class Outcome { kRead, kRefused, kOtherException };

template <class Read>
Outcome attempt(Read&& read) {
  try {
    read();
    return Outcome::kRead;
  } catch (const qgru::Error&) {
    return Outcome::kRefused;
  } catch (...) {
    return Outcome::kOtherException;
  }
}

// Applies `trials` damages to `original` (a random byte replaced, or the file cut at a random length) and
// checks each outcome; returns how many damaged copies were refused.
template <class Read>
int check_mutations(const std::vector<uint8_t>& original, int trials, uint32_t seed, Read&& read) {
  std::mt19937 random(seed);
  int refused = 0;
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<uint8_t> damaged = original;
    if (trial % 4 == 3) {
      damaged.resize(random() % original.size());
    } else {
      damaged[random() % damaged.size()] = static_cast<uint8_t>(random());
    }
    const Outcome outcome = attempt([&] { read(damaged); });
    CAPTURE(trial);
    REQUIRE(outcome != Outcome::kOtherException);
    refused += outcome == Outcome::kRefused;
  }
  return refused;
}

}  // namespace

TEST_CASE("damaged safetensors files are read or refused with qgru::Error, nothing else") {
  const auto original = io_test::file_bytes((io_test::data_dir() / "hand_made.safetensors").string());
  const int refused = check_mutations(original, 3000, 1, [](const std::vector<uint8_t>& bytes) {
    qgru::parse_safetensors(bytes, "damaged.safetensors");
  });
  CHECK(refused > 500);  // header damage and every cut are refused
}

TEST_CASE("damaged .npy files are read or refused with qgru::Error, nothing else") {
  const auto original = io_test::file_bytes((io_test::data_dir() / "v2_i16.npy").string());
  const int refused = check_mutations(original, 3000, 2, [](const std::vector<uint8_t>& bytes) {
    qgru::parse_npy(bytes, "damaged.npy");
  });
  CHECK(refused > 500);
}

TEST_CASE("damaged .npz files are read or refused with qgru::Error, nothing else") {
  const auto original = io_test::file_bytes((io_test::data_dir() / "single.npz").string());
  const int refused = check_mutations(original, 3000, 3, [&](const std::vector<uint8_t>& bytes) {
    qgru::parse_npz(bytes, "damaged.npz");
  });
  CHECK(refused > 2000);  // CRC-32 catches data damage too
}
