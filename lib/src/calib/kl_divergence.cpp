// TensorRT's entropy calibration, made precise in docs/CALIBRATION.md, "kl".
#include <cmath>
#include <limits>
#include <sstream>

#include "qgru/base/error.h"
#include "qgru/calib/range_methods.h"

namespace qgru {

double kl_divergence_for_clip(const std::vector<double>& abs_bins, int clip_bins, int levels) {
  const int bins = static_cast<int>(abs_bins.size());
  if (clip_bins < 1 || clip_bins > bins || levels < 1) {
    throw Error("internal: KL clip at " + std::to_string(clip_bins) + " of " + std::to_string(bins) +
                " bins with " + std::to_string(levels) + " levels");
  }
  const size_t i = static_cast<size_t>(clip_bins);
  // P: the first i bins, the outliers (bins >= i) added to the last one.
  std::vector<double> p(abs_bins.begin(), abs_bins.begin() + clip_bins);
  double outliers = 0;
  for (size_t k = i; k < abs_bins.size(); ++k) outliers += abs_bins[k];
  p[i - 1] += outliers;
  // Q: each level's sum (without the outliers) spread over the level's bins where P is non-zero.
  const size_t level_count = static_cast<size_t>(levels);
  std::vector<double> level_sum(level_count, 0.0);
  std::vector<int64_t> level_nonzero(level_count, 0);
  auto level_of = [&](size_t k) { return static_cast<size_t>(static_cast<int64_t>(k) * levels / clip_bins); };
  for (size_t k = 0; k < i; ++k) {
    level_sum[level_of(k)] += abs_bins[k];
    if (p[k] != 0) level_nonzero[level_of(k)] += 1;
  }
  std::vector<double> q(i, 0.0);
  double p_total = 0, q_total = 0;
  for (size_t k = 0; k < i; ++k) {
    if (p[k] != 0) q[k] = level_sum[level_of(k)] / static_cast<double>(level_nonzero[level_of(k)]);
    p_total += p[k];
    q_total += q[k];
  }
  if (p_total <= 0) return 0.0;  // an empty histogram: nothing to lose
  double divergence = 0;
  for (size_t k = 0; k < i; ++k) {
    if (p[k] <= 0) continue;
    if (q[k] <= 0) return std::numeric_limits<double>::infinity();
    const double pk = p[k] / p_total;
    const double qk = q[k] / q_total;
    divergence += pk * std::log(pk / qk);
  }
  return divergence;
}

KlSearch kl_search(const std::vector<double>& abs_bins, int levels) {
  const int bins = static_cast<int>(abs_bins.size());
  KlSearch best;
  best.clip_bins = bins;
  if (levels >= bins) {
    best.divergence = kl_divergence_for_clip(abs_bins, bins, levels);
    return best;
  }
  best.divergence = std::numeric_limits<double>::infinity();
  for (int i = levels; i <= bins; ++i) {
    const double divergence = kl_divergence_for_clip(abs_bins, i, levels);
    if (divergence <= best.divergence) {  // ties go to the larger i
      best.divergence = divergence;
      best.clip_bins = i;
    }
  }
  return best;
}

int kl_levels(const TensorStats& stats, const TensorQuant& spec) {
  const bool non_negative = spec.is_unsigned || stats.min >= 0;
  return 1 << (non_negative ? spec.bits : spec.bits - 1);
}

MethodRange kl_range(const TensorStats& stats, const TensorQuant& spec, bool include_zeros) {
  const double absmax = std::max(-stats.min, stats.max);
  MethodRange range;
  if (!(absmax > 0)) {
    range.detail = "kl: all values are 0";
    return range;
  }
  const int levels = kl_levels(stats, spec);
  const std::vector<double> abs_bins = histogram_view(stats, 0.0, absmax, kKlBins, true, include_zeros);
  const KlSearch search = kl_search(abs_bins, levels);
  const double threshold = (search.clip_bins + 0.5) * absmax / kKlBins;
  range.min = std::max(stats.min, -threshold);
  range.max = std::min(stats.max, threshold);
  std::ostringstream detail;
  detail << "kl: i*=" << search.clip_bins << "/" << kKlBins << " levels=" << levels << " T=" << threshold
         << " (absmax " << absmax << ") KL=" << search.divergence;
  range.detail = detail.str();
  return range;
}

}  // namespace qgru
