#pragma once
// Checks shared by the tests of qgru's HTML pages (html_report_test.cpp: verify's report;
// calibration_report_test.cpp: the calibration report).
#include <doctest/doctest.h>

#include <cstddef>
#include <string>

namespace qgru::test {

// How many times `what` occurs in text, occurrences not overlapping.
inline size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// A whole HTML document that loads nothing: no script, no link, no image or frame source, no URL but the SVG
// namespace.
inline void check_self_contained(const std::string& html) {
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("</html>") != std::string::npos);
  CHECK(count(html, "<script") == 0);
  CHECK(count(html, "<link") == 0);
  CHECK(count(html, " src=") == 0);
  CHECK(count(html, "http") == count(html, "xmlns=\"http://www.w3.org/2000/svg\""));
}

}  // namespace qgru::test
