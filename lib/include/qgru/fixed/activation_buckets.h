#pragma once
// The bucket index of a piecewise-linear activation (ActivationView::pwl_bucket, qgru/fixed/activation.h), built on
// the host from the thresholds alone: an acceleration structure, not data of the artifact. The device copies of a
// cell's activations carry one (qgru/kernels/device_upload.h), so a 16-bit gate's segment is found with about three
// dependent loads instead of about nine; the host views keep the plain search, the reference. The answer is the
// same by construction (find_pwl_segment) and by test: every input code of every generated activation, with and
// without the index (test/unit/quant/activation_test.cpp).
#include <cstdint>
#include <vector>

#include "qgru/fixed/activation.h"

namespace qgru {

inline constexpr int64_t kActivationPwlMaxBuckets = 256;

struct PwlBuckets {
  std::vector<int32_t> first_segment;  // [buckets + 1]: the segment of each bucket's first code, then the last segment
  int32_t shift = 0;                   // bucket j: codes q_in_min + j·2^shift ..
};

// The index of a Pwl view's thresholds: the fewest codes per bucket (a power of two) that keep the buckets at most
// kActivationPwlMaxBuckets. view.pwl_bucket is ignored (the plain search builds the index).
inline PwlBuckets pwl_buckets(const ActivationView& view) {
  PwlBuckets b;
  const int64_t span = int64_t{view.q_in_max} - view.q_in_min;  // codes - 1, >= 0
  while ((span >> b.shift) >= kActivationPwlMaxBuckets) ++b.shift;
  const int64_t buckets = (span >> b.shift) + 1;
  ActivationView plain = view;
  plain.pwl_bucket = nullptr;
  b.first_segment.resize(static_cast<size_t>(buckets + 1));
  for (int64_t j = 0; j < buckets; ++j) {
    b.first_segment[static_cast<size_t>(j)] = find_pwl_segment(plain, static_cast<int32_t>(view.q_in_min + (j << b.shift)));
  }
  b.first_segment[static_cast<size_t>(buckets)] = view.num_segments - 1;
  return b;
}

// The view with `buckets` attached (they must outlive it and come from pwl_buckets of the same view).
inline ActivationView with_pwl_buckets(ActivationView view, const PwlBuckets& buckets) {
  view.pwl_bucket = buckets.first_segment.data();
  view.pwl_bucket_shift = buckets.shift;
  return view;
}

}  // namespace qgru
