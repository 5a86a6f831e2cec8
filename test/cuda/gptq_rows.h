#pragma once
// Device-generated activation rows for bench_cuda_gptq (gptq_rows.cu).
#include <cstdint>

namespace qgru::cuda_test {

// rows [count, K] (device) = the rows t0 .. t0 + count of the seeded activation stream.
void generate_rows(float* rows, int64_t t0, int64_t count, int64_t K, uint64_t seed, void* stream);

}  // namespace qgru::cuda_test
