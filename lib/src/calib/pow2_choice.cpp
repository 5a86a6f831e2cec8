#include "qgru/calib/pow2_choice.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "pow2_grid.h"
#include "qgru/calib/range_methods.h"

namespace qgru {

namespace {

using calib_detail::finest_pow2_grid;

// The finer candidate: the range [min·f, max·f] with the largest f in (0, 1) whose finest covering grid has
// shift `finer` (found by bisection). The window keeps the range's proportions: both ends clip by the same
// factor. False when no scaling reaches that shift.
bool range_for_finer_shift(double min, double max, const TensorQuant& spec, int finer, double& out_min,
                           double& out_max) {
  auto shift_at = [&](double f) { return finest_pow2_grid(min * f, max * f, spec).shift; };
  double good = 1e-9, bad = 1.0;
  if (shift_at(good) < finer) return false;
  for (int iteration = 0; iteration < 80; ++iteration) {
    const double mid = 0.5 * (good + bad);
    (shift_at(mid) >= finer ? good : bad) = mid;
  }
  out_min = min * good;
  out_max = max * good;
  return finest_pow2_grid(out_min, out_max, spec).shift == finer;
}

double kl_for_grid(const TensorStats& stats, const std::vector<double>& abs_bins, double absmax,
                   const TensorQuant& grid) {
  const double step = grid.scale();
  const double edge = stats.max >= -stats.min ? grid.dequantize(grid.qmax()) : -grid.dequantize(grid.qmin());
  const int bins = static_cast<int>(abs_bins.size());
  int clip_bins = bins;
  double covered = absmax;
  if (edge < absmax) {
    clip_bins = std::max(1, std::min(bins, static_cast<int>(std::floor(edge * bins / absmax))));
    covered = edge;
  }
  const double levels = std::max(1.0, std::round(covered / step));
  return kl_divergence_for_clip(abs_bins, clip_bins, static_cast<int>(std::min(levels, 1e9)));
}

}  // namespace

Pow2Choice choose_pow2_range(const TensorStats& stats, double min, double max, const TensorQuant& spec,
                             Pow2Objective objective, double percentile, bool include_zeros) {
  Pow2Choice choice;
  choice.min = min;
  choice.max = max;
  const TensorQuant covering = finest_pow2_grid(min, max, spec);
  choice.shift = choice.covering_shift = covering.shift;
  if (min == 0.0 && max == 0.0) {
    choice.detail = "pow2: zero range, shift " + std::to_string(covering.shift);
    return choice;
  }
  const double absmax = std::max(-stats.min, stats.max);
  std::vector<double> abs_bins;
  if (objective == Pow2Objective::Kl) abs_bins = histogram_view(stats, 0.0, absmax, kKlBins, true, include_zeros);
  const double budget_fraction = 1.0 - percentile / 100.0;

  auto score = [&](const TensorQuant& grid, std::string& text) {
    std::ostringstream out;
    double value = 0;
    switch (objective) {
      case Pow2Objective::Mse:
        value = grid_mse(stats, grid, include_zeros);
        out << "mse " << value;
        break;
      case Pow2Objective::Kl:
        value = kl_for_grid(stats, abs_bins, absmax, grid);
        out << "KL " << value;
        break;
      case Pow2Objective::ClippedMass: {
        const GridFit fit = grid_fit(stats, grid, include_zeros);
        const double budget = budget_fraction * fit.total;
        const bool within = spec.symmetric ? fit.clipped_low + fit.clipped_high <= budget
                                           : (fit.clipped_low <= budget && fit.clipped_high <= budget);
        // Within budget: finer is better (score -shift); over budget: disqualified.
        value = within ? -static_cast<double>(grid.shift) : std::numeric_limits<double>::infinity();
        out << "clipped " << (fit.clipped_low + fit.clipped_high) / std::max(1.0, fit.total) * 100.0 << "%"
            << (within ? "" : " (over budget)");
        break;
      }
    }
    text = out.str();
    return value;
  };

  std::string covering_text;
  double best = score(covering, covering_text);
  std::ostringstream detail;
  detail << "pow2: shift " << covering.shift << " (covering) " << covering_text;
  const int finer = covering.shift + 1;
  double candidate_min, candidate_max;
  if (range_for_finer_shift(min, max, spec, finer, candidate_min, candidate_max)) {
    std::string text;
    const double value = score(finest_pow2_grid(candidate_min, candidate_max, spec), text);
    detail << "; shift " << finer << " (finer) " << text;
    if (value < best) {
      choice.min = candidate_min;
      choice.max = candidate_max;
      choice.shift = finer;
    }
  }
  detail << " -> shift " << choice.shift;
  choice.detail = detail.str();
  return choice;
}

}  // namespace qgru
