#pragma once
// The frame shared by qgru's HTML pages (verify's report, calibrate's report): one self-contained document
// (no script, no external resource) with a common style sheet, a header list, and the ids of layers and
// directions. Private to the verify area.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "qgru/base/tensor_quant.h"

namespace qgru {
namespace html {

// "<!DOCTYPE html>" through the opening <body> and the <h1> title; `extra_style` is appended to the shared
// style sheet.
std::string page_begin(const std::string& title, const std::string& extra_style = "");
// A closing line "Written by qgru <version>." followed by `note`, and </body></html>.
std::string page_end(const std::string& note);

// <dl class="meta"> of (key, value) pairs; pairs with an empty value are left out.
std::string meta_list(const std::vector<std::pair<std::string, std::string>>& items);

// "l<layer>-d<direction>", for element ids.
std::string cell_id(int layer, int direction);
// "layer 0" or, for bidirectional models, "layer 0, forward direction" / "layer 0, reverse direction".
std::string cell_title(int layer, int direction, int num_directions);

// The dequantized values of a grid's codes for plotting: every code when there are at most `max_marks`,
// else every `every`-th code (every a power of two) from qmin.
struct GridMarks {
  std::vector<double> values;
  int64_t every = 1;
};
GridMarks grid_marks(const TensorQuant& grid, int64_t max_marks);

}  // namespace html
}  // namespace qgru
