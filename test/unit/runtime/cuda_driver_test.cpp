// The driver requirement of a CUDA build (qgru/runtime/cuda_driver.h): which driver each toolkit needs and the
// one-line reason a driver cannot serve it, for drivers the tests name (no GPU or driver needed).
#include <doctest/doctest.h>

#include <string>

#include "qgru/runtime/cuda_driver.h"

using namespace qgru::cuda_driver;

namespace {
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("a 535-series driver (CUDA 12.2) cannot run a CUDA 13 build, and the message says so, not 'no GPU'") {
  const std::string why = driver_problem(12020, 13000);
  CHECK(contains(why, "driver is too old"));
  CHECK(contains(why, "supports CUDA 12.2"));
  CHECK(contains(why, "built with CUDA 13.0"));
  CHECK(contains(why, "580 or newer"));
  CHECK(contains(why, "build qgru with a CUDA 12.x toolkit"));
  CHECK_FALSE(contains(why, "no GPU"));
  CHECK(why.find('\n') == std::string::npos);
}

TEST_CASE("minor version compatibility: any driver of the same major or newer serves a build") {
  CHECK(driver_problem(13000, 13000).empty());
  CHECK(driver_problem(13020, 13000).empty());  // newer minor
  CHECK(driver_problem(13000, 13020).empty());  // older minor of the same major: supported
  CHECK(driver_problem(12000, 12090).empty());  // a 525 driver runs a CUDA 12.9 build
  CHECK(driver_problem(13000, 12040).empty());  // backward compatibility
  CHECK_FALSE(driver_problem(12090, 13000).empty());
  CHECK_FALSE(driver_problem(11080, 12040).empty());
  CHECK(contains(driver_problem(11080, 12040), "525 or newer"));
}

TEST_CASE("no driver installed is its own message") {
  const std::string why = driver_problem(0, 13000);
  CHECK(contains(why, "no NVIDIA driver is installed"));
  CHECK(contains(why, "CUDA 13.0"));
  CHECK(contains(why, "580 or newer"));
}

TEST_CASE("version text and the build line name the toolkit and the minimum driver") {
  CHECK(version_text(12040) == "12.4");
  CHECK(version_text(13000) == "13.0");
  CHECK(version_text(12090) == "12.9");
  const std::string line = build_text(12040, "static");
  CHECK(contains(line, "built with CUDA 12.4"));
  CHECK(contains(line, "runtime static"));
  CHECK(contains(line, "cuBLAS 12.x loaded at first use"));  // cuBLAS is opened by the first CUDA call, not at start
  CHECK(contains(line, "CUDA 12.0 or newer (Linux driver 525 or newer)"));
  // A major without a known floor still names the CUDA version it needs.
  CHECK(required_driver_text(14000) == "an NVIDIA driver for CUDA 14.0 or newer");
}
