// SVG charts for the HTML report (svg_plot.h).
#include "svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace qgru {
namespace svg {
namespace {

constexpr double kLeft = 64, kRight = 16, kTop = 40, kBottom = 44;
constexpr double kRowHeight = 14, kRowsPad = 6;  // range strip rows

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double pixel_lo = 0, pixel_hi = 1;  // pixel of lo and of hi
  double map(double v) const {
    const double a = log ? std::log10(lo) : lo;
    const double b = log ? std::log10(hi) : hi;
    const double u = log ? std::log10(v) : v;
    return pixel_lo + (u - a) / (b - a) * (pixel_hi - pixel_lo);
  }
};

double nice_step(double span, int target_ticks) {
  const double raw = span / std::max(target_ticks, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double ratio = raw / magnitude;
  const double nice = ratio < 1.5 ? 1 : ratio < 3 ? 2 : ratio < 7 ? 5 : 10;
  return nice * magnitude;
}

std::vector<double> ticks(const Axis& axis, int target, bool integer = false) {
  std::vector<double> result;
  if (axis.log) {
    for (double e = std::ceil(std::log10(axis.lo)); e <= std::floor(std::log10(axis.hi)) + 1e-9; e += 1) {
      result.push_back(std::pow(10.0, e));
    }
    return result;
  }
  const double step = integer ? std::max(1.0, std::round(nice_step(axis.hi - axis.lo, target)))
                               : nice_step(axis.hi - axis.lo, target);
  for (double v = std::ceil(axis.lo / step) * step; v <= axis.hi + step * 1e-9; v += step) {
    result.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  }
  return result;
}

std::string px(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", v);
  return buffer;
}

bool drawable(double v, bool log) { return std::isfinite(v) && (!log || v > 0); }

}  // namespace

std::string format_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[32];
  const double magnitude = std::fabs(value);
  if (value == 0) return "0";
  if (magnitude >= 1e5 || magnitude < 1e-3) {
    std::snprintf(buffer, sizeof buffer, "%.3g", value);
  } else if (magnitude >= 100) {
    std::snprintf(buffer, sizeof buffer, "%.0f", value);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.3g", value);
  }
  return buffer;
}

std::string escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* palette(size_t index) {
  static const char* const colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                       "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return colors[index % 10];
}

std::string render(const Chart& chart) {
  // H is the plot's height; the range strip adds rows below it.
  const double W = chart.width, H = chart.height;
  const double rows_height =
      chart.range_rows.empty() ? 0 : kRowsPad * 2 + kRowHeight * static_cast<double>(chart.range_rows.size());
  const double total_height = H + rows_height;
  // Named series and range rows get labels in a right margin, outside the data.
  const bool has_legend = std::any_of(chart.series.begin(), chart.series.end(), [](const Series& s) { return !s.name.empty(); });
  const double right = !chart.range_rows.empty() ? 190 : has_legend ? 150 : kRight;
  // Data ranges.
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const Series& s : chart.series) {
    for (double x : s.x) {
      if (std::isfinite(x)) x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
    }
    for (const std::vector<double>* values : {&s.y, &s.y_low}) {
      for (double y : *values) {
        if (drawable(y, chart.log_y)) y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
      }
    }
  }
  for (const Marker& m : chart.markers) {
    if (std::isfinite(m.x)) x_lo = std::min(x_lo, m.x), x_hi = std::max(x_hi, m.x);
  }
  for (const RangeRow& r : chart.range_rows) {
    for (double x : {r.lo, r.hi, r.grid_lo, r.grid_hi}) {
      if (std::isfinite(x)) x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
    }
  }
  const bool has_data = std::isfinite(y_lo) && std::isfinite(x_lo);
  if (!has_data) x_lo = 0, x_hi = 1, y_lo = chart.log_y ? 1 : 0, y_hi = chart.log_y ? 10 : 1;
  if (chart.fixed_y) y_lo = chart.y_min, y_hi = chart.y_max;
  if (x_hi <= x_lo) x_lo -= 0.5, x_hi += 0.5;
  if (y_hi <= y_lo) {
    if (chart.log_y) {
      y_lo /= 2, y_hi *= 2;
    } else {
      const double pad = std::max(std::fabs(y_lo) * 0.1, 0.5);
      y_lo -= pad, y_hi += pad;
    }
  } else if (!chart.fixed_y) {
    if (chart.log_y) {
      y_lo = std::pow(10.0, std::floor(std::log10(y_lo)));
      y_hi = std::pow(10.0, std::ceil(std::log10(y_hi)));
      if (y_hi <= y_lo) y_hi = y_lo * 10;
    } else {
      const double pad = (y_hi - y_lo) * 0.06;
      y_lo -= pad, y_hi += pad;
    }
  }
  Axis ax{x_lo, x_hi, false, kLeft, W - right};
  Axis ay{y_lo, y_hi, chart.log_y, H - kBottom, kTop};

  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" id=\"" << escape(chart.id) << "\" width=\"" << W
      << "\" height=\"" << total_height << "\" viewBox=\"0 0 " << W << ' ' << total_height << "\" role=\"img\" aria-label=\""
      << escape(chart.title) << "\">\n";
  out << "<rect x=\"0\" y=\"0\" width=\"" << W << "\" height=\"" << total_height << "\" fill=\"#ffffff\"/>\n";
  out << "<text x=\"" << kLeft << "\" y=\"16\" font-size=\"13\" font-weight=\"bold\" fill=\"#222\">"
      << escape(chart.title) << "</text>\n";
  if (!chart.note.empty()) {
    out << "<text x=\"" << kLeft << "\" y=\"30\" font-size=\"10.5\" fill=\"#555\">" << escape(chart.note) << "</text>\n";
  }
  // Plot frame, grid and ticks.
  out << "<rect x=\"" << px(kLeft) << "\" y=\"" << px(kTop) << "\" width=\"" << px(W - kLeft - right) << "\" height=\""
      << px(H - kTop - kBottom) << "\" fill=\"#fbfbfb\" stroke=\"#999\" stroke-width=\"0.8\"/>\n";
  out << "<g font-size=\"10\" fill=\"#444\">\n";
  for (double t : ticks(ax, 8, chart.integer_x)) {
    const double x = ax.map(t);
    out << "<line x1=\"" << px(x) << "\" y1=\"" << px(kTop) << "\" x2=\"" << px(x) << "\" y2=\"" << px(H - kBottom)
        << "\" stroke=\"#e4e4e4\" stroke-width=\"0.8\"/>";
    out << "<text x=\"" << px(x) << "\" y=\"" << px(H - kBottom + 13) << "\" text-anchor=\"middle\">"
        << format_number(t) << "</text>\n";
  }
  for (double t : ticks(ay, 5)) {
    const double y = ay.map(t);
    out << "<line x1=\"" << px(kLeft) << "\" y1=\"" << px(y) << "\" x2=\"" << px(W - right) << "\" y2=\"" << px(y)
        << "\" stroke=\"#e4e4e4\" stroke-width=\"0.8\"/>";
    out << "<text x=\"" << px(kLeft - 5) << "\" y=\"" << px(y + 3.5) << "\" text-anchor=\"end\">" << format_number(t)
        << "</text>\n";
  }
  out << "</g>\n";
  out << "<text x=\"" << px((kLeft + W - right) / 2) << "\" y=\"" << px(H - 8)
      << "\" font-size=\"11\" text-anchor=\"middle\" fill=\"#333\">" << escape(chart.x_label) << "</text>\n";
  out << "<text transform=\"translate(14," << px((kTop + H - kBottom) / 2)
      << ") rotate(-90)\" font-size=\"11\" text-anchor=\"middle\" fill=\"#333\">" << escape(chart.y_label)
      << "</text>\n";

  // Clip the data to the frame.
  out << "<clipPath id=\"" << escape(chart.id) << "-clip\"><rect x=\"" << px(kLeft) << "\" y=\"" << px(kTop)
      << "\" width=\"" << px(W - kLeft - right) << "\" height=\"" << px(H - kTop - kBottom) << "\"/></clipPath>\n";
  out << "<g clip-path=\"url(#" << escape(chart.id) << "-clip)\">\n";
  for (const Series& s : chart.series) {
    if (s.style == SeriesStyle::Steps) {
      // Filled histogram: x are edges (y.size() + 1 of them).
      const double base = chart.log_y ? ay.lo : std::max(ay.lo, 0.0);
      std::ostringstream path;
      bool open = false;
      for (size_t i = 0; i < s.y.size() && i + 1 < s.x.size(); ++i) {
        const double v = drawable(s.y[i], chart.log_y) ? s.y[i] : base;
        const double y = ay.map(std::max(v, base));
        if (!open) {
          path << "M" << px(ax.map(s.x[i])) << ' ' << px(ay.map(base));
          open = true;
        }
        path << " L" << px(ax.map(s.x[i])) << ' ' << px(y) << " L" << px(ax.map(s.x[i + 1])) << ' ' << px(y);
      }
      if (open) {
        path << " L" << px(ax.map(s.x[std::min(s.y.size(), s.x.size() - 1)])) << ' ' << px(ay.map(base)) << " Z";
        out << "<path d=\"" << path.str() << "\" fill=\"" << s.color << "\" fill-opacity=\"0.45\" stroke=\"" << s.color
            << "\" stroke-width=\"0.8\"/>\n";
      }
      continue;
    }
    if (s.style == SeriesStyle::Band) {
      // Upper edge left to right, lower edge right to left; points where either is missing are skipped.
      std::ostringstream path;
      std::vector<size_t> kept;
      for (size_t i = 0; i < s.x.size() && i < s.y.size() && i < s.y_low.size(); ++i) {
        if (std::isfinite(s.x[i]) && drawable(s.y[i], chart.log_y) && drawable(s.y_low[i], chart.log_y)) kept.push_back(i);
      }
      if (kept.empty()) continue;
      for (size_t k = 0; k < kept.size(); ++k) {
        path << (k ? " L" : "M") << px(ax.map(s.x[kept[k]])) << ' ' << px(ay.map(s.y[kept[k]]));
      }
      for (size_t k = kept.size(); k-- > 0;) path << " L" << px(ax.map(s.x[kept[k]])) << ' ' << px(ay.map(s.y_low[kept[k]]));
      out << "<path d=\"" << path.str() << " Z\" fill=\"" << s.color << "\" fill-opacity=\"0.35\" stroke=\"" << s.color
          << "\" stroke-width=\"" << s.width << "\" stroke-linejoin=\"round\"/>\n";
      continue;
    }
    std::ostringstream path;
    bool open = false;
    size_t points = 0;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!drawable(s.y[i], chart.log_y) || !std::isfinite(s.x[i])) {
        open = false;
        continue;
      }
      path << (open ? " L" : " M") << px(ax.map(s.x[i])) << ' ' << px(ay.map(s.y[i]));
      open = true;
      ++points;
    }
    if (points == 0) continue;
    out << "<path d=\"" << path.str() << "\" fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"" << s.width
        << "\"" << (s.dashed ? " stroke-dasharray=\"5 3\"" : "") << " stroke-linejoin=\"round\"/>\n";
    if (points == 1 || s.x.size() <= 48) {  // few points: mark them
      for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
        if (!drawable(s.y[i], chart.log_y)) continue;
        out << "<circle cx=\"" << px(ax.map(s.x[i])) << "\" cy=\"" << px(ay.map(s.y[i])) << "\" r=\"2\" fill=\""
            << s.color << "\"/>";
      }
      out << '\n';
    }
  }
  out << "</g>\n";
  // Rug (e.g. the quantization grid) along the bottom edge.
  if (!chart.rug.empty()) {
    std::ostringstream path;
    for (double r : chart.rug) {
      if (r < ax.lo || r > ax.hi) continue;
      path << "M" << px(ax.map(r)) << ' ' << px(H - kBottom) << " v-6 ";
    }
    out << "<path d=\"" << path.str() << "\" stroke=\"#2ca02c\" stroke-width=\"0.7\"/>\n";
    if (!chart.rug_label.empty()) {
      out << "<text x=\"" << px(W - right - 2) << "\" y=\"" << px(H - kBottom - 9)
          << "\" font-size=\"9.5\" text-anchor=\"end\" fill=\"#2ca02c\">" << escape(chart.rug_label) << "</text>\n";
    }
  }
  // Markers.
  for (size_t i = 0; i < chart.markers.size(); ++i) {
    const Marker& m = chart.markers[i];
    const double x = ax.map(m.x);
    out << "<line x1=\"" << px(x) << "\" y1=\"" << px(kTop) << "\" x2=\"" << px(x) << "\" y2=\"" << px(H - kBottom)
        << "\" stroke=\"" << m.color << "\" stroke-width=\"1.2\"" << (m.dashed ? " stroke-dasharray=\"4 3\"" : "")
        << "/>";
    const bool right_half = x > (kLeft + W - right) / 2;
    out << "<text x=\"" << px(x + (right_half ? -3 : 3)) << "\" y=\"" << px(kTop + 11 + 11 * static_cast<double>(i % 3))
        << "\" font-size=\"9.5\" fill=\"" << m.color << "\" text-anchor=\"" << (right_half ? "end" : "start") << "\">"
        << escape(m.label) << "</text>\n";
  }
  // Legend (top right, one row per named series).
  double legend_y = kTop + 8;
  for (const Series& s : chart.series) {
    if (s.name.empty()) continue;
    const double x = W - right + 8;
    out << "<line x1=\"" << px(x) << "\" y1=\"" << px(legend_y) << "\" x2=\"" << px(x + 16) << "\" y2=\"" << px(legend_y)
        << "\" stroke=\"" << s.color << "\" stroke-width=\"2.5\"" << (s.dashed ? " stroke-dasharray=\"5 3\"" : "")
        << "/><text x=\"" << px(x + 20) << "\" y=\"" << px(legend_y + 3.5) << "\" font-size=\"10\" fill=\"#222\">"
        << escape(s.name) << "</text>\n";
    legend_y += 13;
  }
  // Range strip: one row per range, on the plot's x axis, below the axis labels.
  if (!chart.range_rows.empty()) {
    out << "<rect x=\"" << px(kLeft) << "\" y=\"" << px(H) << "\" width=\"" << px(W - kLeft - right) << "\" height=\""
        << px(rows_height) << "\" fill=\"#fbfbfb\" stroke=\"#999\" stroke-width=\"0.8\"/>\n";
    for (double t : ticks(ax, 8, chart.integer_x)) {
      out << "<line x1=\"" << px(ax.map(t)) << "\" y1=\"" << px(H) << "\" x2=\"" << px(ax.map(t)) << "\" y2=\""
          << px(total_height) << "\" stroke=\"#e4e4e4\" stroke-width=\"0.8\"/>";
    }
    out << '\n';
    for (size_t i = 0; i < chart.range_rows.size(); ++i) {
      const RangeRow& r = chart.range_rows[i];
      const double y = H + kRowsPad + kRowHeight * (static_cast<double>(i) + 0.5);
      const double half = r.emphasis ? 4 : 3;
      out << "<g class=\"range-marker\" data-name=\"" << escape(r.name) << "\">";
      out << "<line x1=\"" << px(ax.map(r.grid_lo)) << "\" y1=\"" << px(y) << "\" x2=\"" << px(ax.map(r.grid_hi))
          << "\" y2=\"" << px(y) << "\" stroke=\"" << r.color << "\" stroke-opacity=\"0.6\" stroke-width=\"1\"/>";
      if (!r.ticks.empty()) {
        std::ostringstream path;
        for (double t : r.ticks) path << "M" << px(ax.map(t)) << ' ' << px(y - half - 1.5) << "v" << px(2 * half + 3);
        out << "<path d=\"" << path.str() << "\" stroke=\"" << r.color
            << "\" stroke-opacity=\"0.55\" stroke-width=\"0.6\"/>";
      }
      out << "<rect x=\"" << px(ax.map(r.lo)) << "\" y=\"" << px(y - half) << "\" width=\""
          << px(std::max(1.0, ax.map(r.hi) - ax.map(r.lo))) << "\" height=\"" << px(2 * half) << "\" fill=\"" << r.color
          << "\" fill-opacity=\"0.8\"/>";
      out << "<text x=\"" << px(W - right + 8) << "\" y=\"" << px(y + 3.5) << "\" font-size=\"10\" fill=\"#222\""
          << (r.emphasis ? " font-weight=\"bold\"" : "") << ">" << escape(r.label) << "</text></g>\n";
    }
  }
  if (!has_data) {
    out << "<text x=\"" << px((kLeft + W - right) / 2) << "\" y=\"" << px((kTop + H - kBottom) / 2)
        << "\" font-size=\"12\" text-anchor=\"middle\" fill=\"#888\">no data</text>\n";
  }
  out << "</svg>\n";
  return out.str();
}

}  // namespace svg
}  // namespace qgru
