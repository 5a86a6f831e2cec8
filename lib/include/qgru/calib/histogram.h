#pragma once
// A histogram of real values whose range is a power of two and grows by doubling, so that histograms of
// shards of data merge exactly (DESIGN.md, "Calibration statistics merge").
//
// Layout: kBins = 2^17 bins of width w = 2^(exponent - 16) cover [-2^exponent, 2^exponent); bin k holds the
// values v with floor(v / w) == k - kBinsPerSide. Growing the exponent by one merges bins pairwise
// (new index = floor(old signed index / 2) + kBinsPerSide), which is exactly what binning the same values
// directly at the larger exponent gives. Hence the histogram of a data set depends only on the set (its
// largest magnitude fixes the exponent), not on the order of insertion or on how it was split into shards.
// Resolution: a KL view of 2048 bins over [0, max|x|] spans at least 16 fine bins per view bin (max|x| >=
// 2^(exponent-1)), which keeps re-binning within the KL search's tolerance (2^14 per side was not: see
// docs/CALIBRATION.md). Memory: 1 MiB per tensor.
// Exact zeros are not stored here (TensorStats counts them apart, so methods may include or exclude them).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace qgru {

class Pow2Histogram {
 public:
  static constexpr int kLog2BinsPerSide = 16;
  static constexpr int kBinsPerSide = 1 << kLog2BinsPerSide;  // 65536
  static constexpr int kBins = 2 * kBinsPerSide;                // 131072
  static constexpr int kMinExponent = -64;                      // smallest range [-2^-64, 2^-64)
  static constexpr int kMaxExponent = 129;                      // holds every finite float (|v| < 2^128)

  Pow2Histogram() : bins_(kBins, 0) { set_exponent(kMinExponent); }

  // Adds one finite value (the caller rejects NaN/Inf and skips exact zeros). Inline: it runs once per observed
  // value. The signed bin index is floor(value·2^(16 - exponent)): the scaling by a power of two is exact in
  // double for every finite float value and lands in [-2^16, 2^16), where the truncation to int64 is exact and
  // stepping down by one where it rounded up (negative non-integers) gives the floor.
  void add(double value) {
    if (!(value >= -limit_ && value < limit_)) grow_for(value);
    const double scaled = value * scale_;
    int64_t index = static_cast<int64_t>(scaled);
    index -= static_cast<int64_t>(scaled < static_cast<double>(index));
    bins_[static_cast<size_t>(index + kBinsPerSide)] += 1;
  }
  // Adds every value of `other` (exact; the result does not depend on the order of merges).
  void merge(const Pow2Histogram& other);
  // Raises the exponent to `new_exponent` (>= exponent()), merging bins pairwise.
  void grow_to(int new_exponent);

  int exponent() const { return exponent_; }
  double bin_width() const;                // 2^(exponent - 16)
  double bin_lower(int index) const;       // left edge of bin `index`
  const std::vector<uint64_t>& bins() const { return bins_; }
  uint64_t total() const;

  // For readers: replace the state (bins.size() must be kBins, exponent in range; checked by the caller).
  void assign(int exponent, std::vector<uint64_t> bins);

  bool operator==(const Pow2Histogram& other) const {
    return exponent_ == other.exponent_ && bins_ == other.bins_;
  }

 private:
  void set_exponent(int exponent);
  void grow_for(double value);  // the smallest exponent whose range holds `value`
  int exponent_ = kMinExponent;
  double limit_ = 0;  // 2^exponent: values in [-limit_, limit_) fit
  double scale_ = 0;  // 2^(16 - exponent): value * scale_ is exact (a power of two)
  std::vector<uint64_t> bins_;
};

}  // namespace qgru
