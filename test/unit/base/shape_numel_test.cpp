#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/base/tensor.h"

using qgru::shape_numel;
using qgru::shape_numel_checked;

namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
}

TEST_CASE("shape_numel is the exact product on ordinary shapes, 1 for a scalar and 0 with any zero extent") {
  CHECK(shape_numel({}) == 1);
  CHECK(shape_numel({7}) == 7);
  CHECK(shape_numel({2, 3, 4}) == 24);
  CHECK(shape_numel({0}) == 0);
  CHECK(shape_numel({3, 0, 5}) == 0);
  CHECK(shape_numel({kMax}) == kMax);
  CHECK(shape_numel({kMax, 1, 1}) == kMax);
  CHECK(shape_numel({int64_t{1} << 31, int64_t{1} << 31}) == int64_t{1} << 62);
}

TEST_CASE("shape_numel refuses a product of the non-zero extents past INT64_MAX instead of wrapping") {
  // 2^62 * 4 = 2^64 wraps to 0 in 64-bit arithmetic; 2^32 * (2^32 - 1) = 2^64 - 2^32 passes a uint64_t check.
  CHECK_THROWS_AS(shape_numel({int64_t{1} << 62, 4}), qgru::Error);
  CHECK_THROWS_AS(shape_numel({int64_t{1} << 32, (int64_t{1} << 32) - 1}), qgru::Error);
  CHECK_THROWS_AS(shape_numel({kMax, 2}), qgru::Error);
  CHECK_THROWS_AS(shape_numel({-1, 3}), qgru::Error);
  int64_t numel = -1;
  CHECK_FALSE(shape_numel_checked({int64_t{1} << 62, 2}, numel));
}

TEST_CASE("a zero extent does not hide an overflow of the other extents, in any order") {
  // The shape of corpus case npy/shape_partial_product_overflow.npy: NumPy refuses it ("array is too big").
  const int64_t a = int64_t{1} << 32, b = (int64_t{1} << 32) - 1;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{a, b, 0}, std::vector<int64_t>{0, a, b},
                                            std::vector<int64_t>{a, 0, b}}) {
    int64_t numel = -1;
    CHECK_FALSE(shape_numel_checked(shape, numel));
    CHECK_THROWS_AS(shape_numel(shape), qgru::Error);
  }
  // Non-zero extents whose product fits stay valid with a zero among them: 2^62 * 0 = 0 elements.
  int64_t numel = -1;
  CHECK(shape_numel_checked({int64_t{1} << 62, 0, 1}, numel));
  CHECK(numel == 0);
}
