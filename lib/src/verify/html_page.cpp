// The shared frame of qgru's HTML pages (html_page.h).
#include "html_page.h"

#include <sstream>

#include "qgru/version.h"
#include "svg_plot.h"

namespace qgru {
namespace html {
namespace {

const char* kStyle = R"(
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; color: #222; margin: 24px 32px; max-width: 1400px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 18px; border-bottom: 1px solid #ccc; padding-bottom: 3px; margin-top: 28px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
p.lead, p.help { color: #555; font-size: 13px; margin: 4px 0 10px; max-width: 1000px; }
dl.meta { display: grid; grid-template-columns: max-content auto; gap: 2px 14px; font-size: 13px; margin: 8px 0; }
dl.meta dt { color: #666; } dl.meta dd { margin: 0; font-family: "DejaVu Sans Mono", monospace; }
table { border-collapse: collapse; font-size: 12.5px; margin: 6px 0 12px; }
th, td { border: 1px solid #d5d5d5; padding: 3px 9px; }
th { background: #f1f3f6; text-align: left; }
td.num { text-align: right; font-family: "DejaVu Sans Mono", monospace; }
td.good { background: #e3f4e1; } td.fair { background: #fbf3d5; } td.poor { background: #f9dede; }
.plots { display: flex; flex-wrap: wrap; gap: 10px; }
svg.chart { border: 1px solid #e2e2e2; background: #fff; }
)";

}  // namespace

std::string page_begin(const std::string& title, const std::string& extra_style) {
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" << svg::escape(title)
      << "</title>\n<style>" << kStyle << extra_style << "</style>\n</head>\n<body>\n";
  out << "<h1>" << svg::escape(title) << "</h1>\n";
  return out.str();
}

std::string page_end(const std::string& note) {
  return std::string("<p class=\"help\">Written by qgru ") + QGRU_VERSION_STRING + ". " + note +
         "</p>\n</body>\n</html>\n";
}

std::string meta_list(const std::vector<std::pair<std::string, std::string>>& items) {
  std::ostringstream out;
  out << "<dl class=\"meta\">";
  for (const auto& [key, value] : items) {
    if (!value.empty()) out << "<dt>" << svg::escape(key) << "</dt><dd>" << svg::escape(value) << "</dd>";
  }
  out << "</dl>\n";
  return out.str();
}

std::string cell_id(int layer, int direction) {
  return "l" + std::to_string(layer) + "-d" + std::to_string(direction);
}

std::string cell_title(int layer, int direction, int num_directions) {
  return "layer " + std::to_string(layer) +
         (num_directions == 2 ? (direction ? ", reverse direction" : ", forward direction") : "");
}

GridMarks grid_marks(const TensorQuant& grid, int64_t max_marks) {
  GridMarks marks;
  const int64_t codes = int64_t{grid.qmax()} - grid.qmin() + 1;
  while (codes / marks.every > max_marks) marks.every *= 2;
  for (int64_t c = grid.qmin(); c <= grid.qmax(); c += marks.every) marks.values.push_back(grid.dequantize(c));
  return marks;
}

}  // namespace html
}  // namespace qgru
