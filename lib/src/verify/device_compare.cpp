#include "qgru/verify/device_compare.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

namespace qgru {

namespace {

// "output t=.. n=.. direction=.. unit=.." or "h_n cell=.. n=.. unit=..".
std::string place(bool output, size_t i, int N, int H, int D) {
  std::ostringstream os;
  const size_t Hz = static_cast<size_t>(H), Nz = static_cast<size_t>(N);
  if (output) {
    const size_t width = static_cast<size_t>(D) * Hz, row = i / width, col = i % width;
    os << "output t=" << row / Nz << " n=" << row % Nz << " direction=" << col / Hz << " unit=" << col % Hz;
  } else {
    os << "h_n cell=" << i / (Nz * Hz) << " n=" << (i / Hz) % Nz << " unit=" << i % Hz;
  }
  return os.str();
}

template <class V>
void compare_codes(const std::vector<V>& a, const std::vector<V>& b, bool output, int N, int H, int D, CodeComparison& c) {
  if (a.size() != b.size()) {
    c.mismatches += a.size() > b.size() ? a.size() : b.size();
    if (c.first.empty()) c.first = std::string(output ? "output" : "h_n") + " sizes differ: cpu " + std::to_string(a.size()) +
                                   ", device " + std::to_string(b.size());
    return;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    ++c.compared;
    if (a[i] != b[i]) {
      if (c.mismatches++ == 0) {
        c.first = place(output, i, N, H, D) + ": cpu " + std::to_string(a[i]) + ", device " + std::to_string(b[i]);
      }
    }
  }
}

void compare_floats(const std::vector<float>& a, const std::vector<float>& b, bool output, int N, int H, int D,
                    FloatComparison& c) {
  if (a.size() != b.size()) {
    c.max_abs_diff = std::numeric_limits<double>::infinity();
    c.worst = std::string(output ? "output" : "h_n") + " sizes differ: cpu " + std::to_string(a.size()) + ", device " +
              std::to_string(b.size());
    return;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    ++c.compared;
    double diff = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (std::isnan(diff)) diff = std::numeric_limits<double>::infinity();
    if (diff > c.max_abs_diff || c.worst.empty()) {
      c.max_abs_diff = diff;
      std::ostringstream os;
      os.precision(9);
      os << place(output, i, N, H, D) << ": cpu " << a[i] << ", device " << b[i];
      c.worst = os.str();
    }
  }
}

}  // namespace

CodeComparison compare_quant_codes(const QuantGruResult& cpu, const QuantGruResult& device, int H, int D) {
  CodeComparison c;
  compare_codes(cpu.output_codes, device.output_codes, true, cpu.N, H, D, c);
  compare_codes(cpu.h_n_codes, device.h_n_codes, false, cpu.N, H, D, c);
  return c;
}

FloatComparison compare_float_outputs(const FloatGruResult& cpu, const FloatGruResult& device, int H, int D,
                                      double tolerance) {
  FloatComparison c;
  c.tolerance = tolerance;
  compare_floats(cpu.output, device.output, true, cpu.N, H, D, c);
  compare_floats(cpu.h_n, device.h_n, false, cpu.N, H, D, c);
  return c;
}

std::string device_comparison_text(const std::string& device, const CodeComparison& codes, const FloatComparison& floats) {
  std::ostringstream os;
  os << "device check (" << device << " vs cpu):\n";
  os << "  integer codes (output, h_n): " << codes.compared << " compared, " << codes.mismatches << " differ"
     << (codes.equal() ? ": equal code for code" : ": MISMATCH, first at " + codes.first) << "\n";
  os.precision(3);
  os << "  float GRU (output, h_n): " << floats.compared << " compared, max |cuda - cpu| = " << std::scientific
     << floats.max_abs_diff << " (tolerance " << floats.tolerance << ")"
     << (floats.within() ? ": within" : ": OUTSIDE, worst at " + floats.worst) << "\n";
  return os.str();
}

nlohmann::json device_comparison_json(const std::string& device, const CodeComparison& codes, const FloatComparison& floats) {
  nlohmann::json j;
  j["device"] = device;
  j["integer"] = {{"compared", codes.compared}, {"mismatches", codes.mismatches}, {"equal", codes.equal()},
                  {"first_mismatch", codes.first}};
  j["float"] = {{"compared", floats.compared}, {"max_abs_diff", floats.max_abs_diff}, {"tolerance", floats.tolerance},
                {"within", floats.within()}, {"worst", floats.worst}};
  j["passed"] = codes.equal() && floats.within();
  return j;
}

}  // namespace qgru
