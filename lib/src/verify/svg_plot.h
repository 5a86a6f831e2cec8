#pragma once
// Small self-contained SVG charts for the HTML reports (no script, no external resource): line charts with
// several series, filled step histograms, vertical markers, range strips, nice ticks, a legend. Private to
// the verify area.
#include <string>
#include <vector>

namespace qgru {
namespace svg {

// Steps: a filled histogram, x holds the bin edges (y.size() + 1). Band: the area between y_low and y,
// filled (an envelope, e.g. the min and max of the points that share one pixel column).
enum class SeriesStyle { Line, Steps, Band };

struct Series {
  std::string name;
  std::string color = "#1f77b4";
  std::vector<double> x;
  std::vector<double> y;  // non-finite values break the line (and are not drawn)
  SeriesStyle style = SeriesStyle::Line;
  bool dashed = false;
  double width = 1.5;
  std::vector<double> y_low;  // Band only: the lower edge, same size as y
};

// A vertical line at x with a label (e.g. a calibrated range bound).
struct Marker {
  double x = 0;
  std::string label;
  std::string color = "#d62728";
  bool dashed = true;
};

// One row of a range strip under the plot, on the plot's x axis: a bar over [lo, hi] (e.g. the range a
// calibration method picks) over a thin line across [grid_lo, grid_hi] (the representable range of the grid
// it maps to) with a tick at every value of `ticks` (the grid's codes), and `label` in the right margin.
struct RangeRow {
  std::string label;
  double lo = 0, hi = 0;
  double grid_lo = 0, grid_hi = 0;
  std::vector<double> ticks;
  std::string color = "#1f77b4";
  bool emphasis = false;  // a bold label and a thicker bar
  std::string name;       // the row group's data-name attribute (class "range-marker")
};

struct Chart {
  std::string id;  // the svg element's id
  std::string title;
  std::string x_label, y_label;
  int width = 640, height = 280;
  std::vector<Series> series;
  std::vector<Marker> markers;
  // Tick marks along the bottom edge (e.g. the quantization grid), drawn as short strokes.
  std::vector<double> rug;
  std::string rug_label;
  bool integer_x = false;      // x ticks on whole numbers only (time steps)
  bool log_y = false;          // y must be > 0 to be drawn
  bool fixed_y = false;        // use y_min/y_max instead of the data's range
  double y_min = 0, y_max = 1;
  std::string note;            // a line of small text under the title
  // Range strip: rows under the x axis (the svg grows by their height; `height` is the plot's part).
  std::vector<RangeRow> range_rows;
};

// The <svg> element (inline in HTML). Empty or all-non-finite data draws the axes and "no data".
std::string render(const Chart& chart);

// "1.23e-05", "0.0123", "12.3", "1234": 3 significant digits, no trailing noise.
std::string format_number(double value);
// & < > " ' escaped for text and attribute values.
std::string escape(const std::string& text);

// A categorical colour (10 distinct ones, cycling).
const char* palette(size_t index);

}  // namespace svg
}  // namespace qgru
