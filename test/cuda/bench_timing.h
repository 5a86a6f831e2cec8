#pragma once
// Timing for the CUDA benchmarks (bench_gru.cpp, bench_linear.cpp, bench_barrier.cu): `warmup` untimed calls, then
// `runs` calls, each between its own pair of CUDA events on the default stream, so a call's time includes whatever it
// waits for there. Every CUDA call is checked (QGRU_CUDA_CHECK throws). And the date every benchmark's JSON rows
// carry (bench_gptq.cpp's too).
#include <cuda_runtime.h>

#include <algorithm>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "qgru_cuda/check.h"

namespace qgru::cuda::bench {

struct CallTimes {
  double median_ms;  // the middle of the sorted times (the upper one of the two middles for an even count)
  double min_ms;
};

// Median and minimum in milliseconds of `runs` (>= 1) calls of fn after `warmup` calls.
inline CallTimes time_calls(const std::function<void()>& fn, int warmup, int runs) {
  for (int i = 0; i < warmup; ++i) fn();
  QGRU_CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  QGRU_CUDA_CHECK(cudaEventCreate(&start));
  QGRU_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    QGRU_CUDA_CHECK(cudaEventRecord(start));
    fn();
    QGRU_CUDA_CHECK(cudaEventRecord(stop));
    QGRU_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    QGRU_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  QGRU_CUDA_CHECK(cudaEventDestroy(start));
  QGRU_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times.front()};
}

// Today's date in UTC, YYYY-MM-DD: a row's "date".
inline std::string utc_date() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d", std::gmtime(&now));
  return text;
}

}  // namespace qgru::cuda::bench
