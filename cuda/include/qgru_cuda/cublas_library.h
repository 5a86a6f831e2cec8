#pragma once
// cuBLAS, loaded when a CUDA executor first needs it (dlopen), not linked: no qgru process pays for loading
// libcublas and libcublasLt (about 600 MB of shared objects) at start, and one runs (CPU paths, --version) on a
// machine that has no cuBLAS at all. The calls go through blas::<the cuBLAS name>, with cuBLAS's own signatures:
//   QGRU_CUBLAS_CHECK(blas::cublasGemmEx(handle, ...));
// A binary that links no cuBLAS fails to link on any call that forgets the prefix.
//
// The file: libcublas.so.<CUBLAS_VER_MAJOR of the headers compiled against> (libcublas.so.13 for CUDA 13), then
// libcublas.so, both searched by the dynamic loader (LD_LIBRARY_PATH, the executable's RUNPATH, ld.so.cache);
// the environment variable QGRU_CUBLAS_LIBRARY, when set, names the one file to open instead (a name the loader
// searches for, or a path). When it cannot be loaded, the first call throws CudaFailure with one line naming the
// file, dlopen's reason and where cuBLAS comes from (docs/CUDA.md, "cuBLAS at first use").
#include <cublas_v2.h>

#include <string>
#include <type_traits>
#include <vector>

namespace qgru::cuda {
// cublasGemmEx is overloaded in C++: cublas_api.h adds an inline one that takes the compute type as a cudaDataType
// and migrates it. The table holds the exported one (compute type cublasComputeType_t), which every call uses.
using CublasGemmExFunction = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                                                int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                                                cublasGemmAlgo_t);
// Compiles only while one declared overload has exactly this type (unevaluated: no symbol is referenced).
static_assert(std::is_same_v<decltype(static_cast<CublasGemmExFunction>(&::cublasGemmEx)), CublasGemmExFunction>);
}  // namespace qgru::cuda

// Every cuBLAS function qgru calls: the name libcublas exports and the pointer's type (the header's declaration).
// cublas_v2.h maps cublasCreate to cublasCreate_v2 and so on, and the _v2 names are what the library defines for
// them (an unsuffixed cublasSgemm it also exports is the legacy cublas.h API's, a different signature). A new call
// adds its exported name here (test_cuda resolves every one against the toolkit's libcublas).
#define QGRU_CUBLAS_FUNCTIONS(X)                                    \
  X(cublasCreate_v2, decltype(&::cublasCreate_v2))                  \
  X(cublasDestroy_v2, decltype(&::cublasDestroy_v2))                \
  X(cublasSetStream_v2, decltype(&::cublasSetStream_v2))            \
  X(cublasSetWorkspace_v2, decltype(&::cublasSetWorkspace_v2))      \
  X(cublasSetMathMode, decltype(&::cublasSetMathMode))              \
  X(cublasGemmEx, ::qgru::cuda::CublasGemmExFunction)               \
  X(cublasSgemm_v2, decltype(&::cublasSgemm_v2))                    \
  X(cublasDgemm_v2, decltype(&::cublasDgemm_v2))                    \
  X(cublasDsyrk_v2, decltype(&::cublasDsyrk_v2))                    \
  X(cublasGetStatusName, decltype(&::cublasGetStatusName))          \
  X(cublasGetStatusString, decltype(&::cublasGetStatusString))

namespace qgru::cuda {

// The function table: each entry typed as the header declares it (decltype names no symbol, so nothing links).
struct CublasLibrary {
#define QGRU_CUBLAS_POINTER(name, type) type name = nullptr;
  QGRU_CUBLAS_FUNCTIONS(QGRU_CUBLAS_POINTER)
#undef QGRU_CUBLAS_POINTER
  std::string file;   // the file that opened
  std::string error;  // why cuBLAS is unusable: not loaded, or a function missing ("" when every entry is set)
};

// The files tried, in order: QGRU_CUBLAS_LIBRARY alone when set and not empty, else "libcublas.so.<major>" and
// "libcublas.so".
std::vector<std::string> cublas_library_candidates();

// Opens the first of `candidates` that loads and resolves every function of the table; never throws (error says
// why not). Each call opens the library again (dlopen counts references; nothing is closed): for tests and for
// cublas_library().
CublasLibrary load_cublas_library(const std::vector<std::string>& candidates);

// The process's cuBLAS: load_cublas_library(cublas_library_candidates()) at the first call (thread-safe; the
// answer, loaded or not, is kept for the process). Throws CudaFailure with the error when unusable.
const CublasLibrary& cublas_library();

// "" when cuBLAS is usable, else the one line why (loads it at the first call; never throws).
std::string cublas_unusable_reason();

// "" when a CUDA device can be used (the probe finds one, and then cuBLAS loads), else the one line why: the
// probe's reason, or cuBLAS's. cuBLAS is loaded only on a machine with a device.
std::string device_unusable_reason();

namespace blas {

// blas::cublasX(args...): the table's cublasX, with the header's parameter types (so a call converts its
// arguments as a direct call would), after cublas_library() (which throws when cuBLAS is unusable).
template <typename Function>
struct Forward;
template <typename Result, typename... Args>
struct Forward<Result (*)(Args...)> {
  template <Result (*CublasLibrary::*entry)(Args...)>
  static Result call(Args... args) {
    return (cublas_library().*entry)(args...);
  }
};

#define QGRU_CUBLAS_FORWARD(name, type) \
  inline constexpr auto name = &Forward<decltype(CublasLibrary::name)>::call<&CublasLibrary::name>;
QGRU_CUBLAS_FUNCTIONS(QGRU_CUBLAS_FORWARD)
#undef QGRU_CUBLAS_FORWARD

}  // namespace blas

}  // namespace qgru::cuda
