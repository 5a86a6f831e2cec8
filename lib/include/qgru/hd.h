#pragma once
// QGRU_HD marks arithmetic that runs on both host and device. Under nvcc it is __host__ __device__;
// in a plain C++ build it is nothing, so the same function is what the CPU executor and the tests run.
#if defined(__CUDACC__)
#define QGRU_HD __host__ __device__ __forceinline__
#else
#define QGRU_HD inline
#endif
