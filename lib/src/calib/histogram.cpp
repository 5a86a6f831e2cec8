#include "qgru/calib/histogram.h"

#include <cmath>
#include <numeric>
#include <string>

#include "qgru/base/error.h"

namespace qgru {

namespace {

bool fits(double value, int exponent) {
  const double limit = std::ldexp(1.0, exponent);
  return value >= -limit && value < limit;
}

}  // namespace

void Pow2Histogram::set_exponent(int exponent) {
  exponent_ = exponent;
  limit_ = std::ldexp(1.0, exponent);
  scale_ = std::ldexp(1.0, kLog2BinsPerSide - exponent);
}

double Pow2Histogram::bin_width() const { return std::ldexp(1.0, exponent_ - kLog2BinsPerSide); }

double Pow2Histogram::bin_lower(int index) const {
  return std::ldexp(static_cast<double>(index - kBinsPerSide), exponent_ - kLog2BinsPerSide);
}

uint64_t Pow2Histogram::total() const { return std::accumulate(bins_.begin(), bins_.end(), uint64_t{0}); }

void Pow2Histogram::grow_to(int new_exponent) {
  if (new_exponent <= exponent_) return;
  if (new_exponent > kMaxExponent) {
    throw Error("internal: histogram exponent " + std::to_string(new_exponent) + " above " +
                std::to_string(kMaxExponent));
  }
  std::vector<uint64_t> grown(kBins, 0);
  const int steps = new_exponent - exponent_;
  for (int index = 0; index < kBins; ++index) {
    if (bins_[static_cast<size_t>(index)] == 0) continue;
    // floor division of the signed index by 2^steps (arithmetic shift floors for negatives too).
    const int64_t signed_index = static_cast<int64_t>(index) - kBinsPerSide;
    const int64_t merged = (steps >= 62 ? (signed_index < 0 ? -1 : 0) : (signed_index >> steps)) + kBinsPerSide;
    grown[static_cast<size_t>(merged)] += bins_[static_cast<size_t>(index)];
  }
  bins_.swap(grown);
  set_exponent(new_exponent);
}

void Pow2Histogram::grow_for(double value) {
  int needed = exponent_;
  while (!fits(value, needed)) ++needed;
  grow_to(needed);
}

void Pow2Histogram::merge(const Pow2Histogram& other) {
  if (other.exponent_ > exponent_) grow_to(other.exponent_);
  if (other.exponent_ == exponent_) {
    for (size_t index = 0; index < bins_.size(); ++index) bins_[index] += other.bins_[index];
    return;
  }
  Pow2Histogram raised = other;
  raised.grow_to(exponent_);
  for (size_t index = 0; index < bins_.size(); ++index) bins_[index] += raised.bins_[index];
}

void Pow2Histogram::assign(int exponent, std::vector<uint64_t> bins) {
  if (bins.size() != static_cast<size_t>(kBins) || exponent < kMinExponent || exponent > kMaxExponent) {
    throw Error("internal: histogram assigned " + std::to_string(bins.size()) + " bins at exponent " +
                std::to_string(exponent));
  }
  set_exponent(exponent);
  bins_ = std::move(bins);
}

}  // namespace qgru
