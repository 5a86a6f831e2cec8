// cuBLAS loaded at first use (qgru_cuda/cublas_library.h), on the CPU: every entry of the function table resolves
// in the toolkit's libcublas (a misspelled name, a name the library does not export or a wrong soname fails here,
// not on the next GPU), and a library that cannot be loaded is one line saying which file, why, and where cuBLAS
// comes from. No GPU and no CUDA call: dlopen, dlsym and cuBLAS's status names only.
// QGRU_CUDA_TOOLKIT_LIBRARY_DIR is the folder CMake found the toolkit's libraries in; ctest runs this binary with
// it first on LD_LIBRARY_PATH (test/CMakeLists.txt), as a user's environment would name it. A toolkit without
// libcublas fails here: the CUDA build cannot work without it, so there is nothing to skip.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "qgru_cuda/check.h"
#include "qgru_cuda/cublas_library.h"
#include "qgru_cuda/status.h"

using namespace qgru::cuda;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The toolkit's libcublas by the soname this build expects (libcublas.so.13 for CUDA 13 headers).
std::string toolkit_cublas() {
  return std::string(QGRU_CUDA_TOOLKIT_LIBRARY_DIR) + "/libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
}

// The names of the table's entries that are not set.
std::vector<std::string> unset_entries(const CublasLibrary& api) {
  std::vector<std::string> unset;
#define QGRU_CUBLAS_UNSET(name, type) \
  if (api.name == nullptr) unset.push_back(#name);
  QGRU_CUBLAS_FUNCTIONS(QGRU_CUBLAS_UNSET)
#undef QGRU_CUBLAS_UNSET
  return unset;
}

int table_size() {
  int entries = 0;
#define QGRU_CUBLAS_COUNT(name, type) ++entries;
  QGRU_CUBLAS_FUNCTIONS(QGRU_CUBLAS_COUNT)
#undef QGRU_CUBLAS_COUNT
  return entries;
}

}  // namespace

TEST_CASE("a misspelled or unexported cuBLAS name fails here: every table entry resolves in the toolkit's libcublas") {
  const CublasLibrary api = load_cublas_library({toolkit_cublas()});
  INFO("file: ", toolkit_cublas(), "; error: ", api.error);
  REQUIRE(api.error.empty());
  CHECK(api.file == toolkit_cublas());
  CHECK(unset_entries(api).empty());
  CHECK(table_size() >= 11);  // every function the CUDA executors, GPTQ and the linear call
}

TEST_CASE("a wrong soname fails here: the default files are the headers' major's soname, then the plain name") {
  const std::vector<std::string> candidates = cublas_library_candidates();
  REQUIRE(candidates.size() == 2);
  CHECK(candidates[0] == "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
  CHECK(candidates[1] == "libcublas.so");
  // By soname alone, as a user's process finds it (ctest puts the toolkit's folder on LD_LIBRARY_PATH).
  const CublasLibrary api = load_cublas_library({candidates[0]});
  INFO("error: ", api.error);
  REQUIRE(api.error.empty());
  CHECK(unset_entries(api).empty());
}

TEST_CASE("QGRU_CUBLAS_LIBRARY names the one file to try") {
  const char* before = std::getenv("QGRU_CUBLAS_LIBRARY");
  const std::string kept = before != nullptr ? before : "";
  setenv("QGRU_CUBLAS_LIBRARY", "/opt/custom/libcublas.so.13", 1);
  CHECK(cublas_library_candidates() == std::vector<std::string>{"/opt/custom/libcublas.so.13"});
  setenv("QGRU_CUBLAS_LIBRARY", "", 1);  // empty: as if unset
  CHECK(cublas_library_candidates().size() == 2);
  if (before != nullptr) {
    setenv("QGRU_CUBLAS_LIBRARY", kept.c_str(), 1);
  } else {
    unsetenv("QGRU_CUBLAS_LIBRARY");
  }
}

TEST_CASE("a missing cuBLAS is one line: the file, dlopen's reason and where cuBLAS comes from") {
  const CublasLibrary api = load_cublas_library({"libqgru_no_such_cublas.so.13"});
  INFO("error: ", api.error);
  CHECK(contains(api.error, "cuBLAS (libqgru_no_such_cublas.so.13) could not be loaded: libqgru_no_such_cublas.so.13: "
                            "cannot open shared object file"));
  CHECK(contains(api.error, "LD_LIBRARY_PATH"));
  CHECK(contains(api.error, "QGRU_CUBLAS_LIBRARY"));
  CHECK(contains(api.error, "nvidia/cu" + std::to_string(CUBLAS_VER_MAJOR) + "/lib"));
  CHECK(api.error.find('\n') == std::string::npos);
  CHECK(api.file.empty());
  CHECK(unset_entries(api).size() == static_cast<size_t>(table_size()));
}

TEST_CASE("the first candidate's reason is the one reported, and a later candidate that loads is taken") {
  const CublasLibrary neither = load_cublas_library({"libqgru_no_such_a.so", "libqgru_no_such_b.so"});
  CHECK(contains(neither.error, "cuBLAS (libqgru_no_such_a.so) could not be loaded: libqgru_no_such_a.so: "));
  CHECK_FALSE(contains(neither.error, "libqgru_no_such_b.so"));
  const CublasLibrary second = load_cublas_library({"libqgru_no_such_a.so", toolkit_cublas()});
  INFO("error: ", second.error);
  CHECK(second.error.empty());
  CHECK(second.file == toolkit_cublas());
  CHECK(unset_entries(second).empty());
}

TEST_CASE("a library that loads but lacks a cuBLAS function is refused with that function's name") {
  const CublasLibrary api = load_cublas_library({"libm.so.6"});  // loads; exports no cuBLAS name
  CHECK(api.error == "libm.so.6 has no cublasCreate_v2");       // the table's first entry
  CHECK(api.file == "libm.so.6");
}

// Run twice by ctest: unit_cuda (QGRU_CUBLAS_LIBRARY unset: the toolkit's cuBLAS by soname) and
// unit_cuda_cublas_missing (QGRU_CUBLAS_LIBRARY=libqgru_no_such_cublas.so: every call is the one-line error).
TEST_CASE("the process's cuBLAS: loaded at first use, or every call is one line saying why") {
  const char* chosen = std::getenv("QGRU_CUBLAS_LIBRARY");
  if (chosen == nullptr) {
    REQUIRE(cublas_unusable_reason().empty());
    CHECK(&cublas_library() == &cublas_library());  // loaded once
    // A call through the table that needs no GPU: the status's name, as cuBLAS itself spells it.
    CHECK(std::string(blas::cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED)) == "CUBLAS_STATUS_NOT_SUPPORTED");
    CHECK_THROWS_AS(QGRU_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED), NotSupported);
    CHECK_THROWS_WITH_AS(QGRU_CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE),
                         doctest::Contains("cuBLAS error CUBLAS_STATUS_INVALID_VALUE"), CudaFailure);
    return;
  }
  REQUIRE(std::string(chosen) == "libqgru_no_such_cublas.so");
  const std::string expected = "cuBLAS (libqgru_no_such_cublas.so) could not be loaded: libqgru_no_such_cublas.so: ";
  CHECK(contains(cublas_unusable_reason(), expected));
  CHECK_THROWS_WITH_AS(cublas_library(), doctest::Contains(expected.c_str()), CudaFailure);
  cublasHandle_t handle = nullptr;
  CHECK_THROWS_WITH_AS(blas::cublasCreate(&handle), doctest::Contains(expected.c_str()), CudaFailure);
  CHECK(handle == nullptr);
}
