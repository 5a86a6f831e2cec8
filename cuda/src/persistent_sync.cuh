#pragma once
// The persistent GRU kernel's meetings (cuda/src/persistent_gru.cu; protocol in qgru/kernels/persistent_gru.h), in
// a header of their own so that the barrier benchmark (test/cuda/bench_barrier.cu) times the kernel's own code:
//   PersistentSync::Grid: wait_arrivals (thread 0 spins on ld.acquire.gpu of the launch's arrival counter, bounded
//     by %globaltimer, then __threadfence and __syncthreads) and publish (__syncthreads, then thread 0 __threadfence
//     and red.release.gpu of one arrival);
//   PersistentSync::Cluster: cluster_barrier (barrier.cluster.arrive.release + wait.acquire in every thread), and
//     cluster_blocks_launched to check the launch's cluster size; on the host, ClusterLaunch, the configuration of a
//     launch in clusters, and kMaxClusterBlocks.
// Internal to cuda/src (and the benchmark).
#include <cuda_runtime.h>

#include <cstdint>

#include "persistent_gru_launch.h"
#include "qgru/kernels/persistent_gru.h"

namespace qgru::cuda {

__device__ __forceinline__ unsigned long long load_acquire(const unsigned long long* at) {
  unsigned long long value;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(value) : "l"(at) : "memory");
  return value;
}

__device__ __forceinline__ int load_relaxed(const int* at) {
  int value;
  asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(value) : "l"(at) : "memory");
  return value;
}

__device__ __forceinline__ void add_release(unsigned long long* at, unsigned long long value) {
  asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(at), "l"(value) : "memory");
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Every thread of the block: true once `arrivals_needed` arrivals are visible (acquire), false when the wait ran past
// a.spin_limit_ns or another block reported an error (the block then returns; the host throws).
__device__ inline bool wait_arrivals(const PersistentLaunch& a, unsigned long long arrivals_needed, int64_t phase, int* flag) {
  if (threadIdx.x == 0) {
    int failed = 0;
    if (load_acquire(a.arrivals) < arrivals_needed) {
      const unsigned long long start = global_ns();
      while (load_acquire(a.arrivals) < arrivals_needed) {
        if (load_relaxed(a.error) != 0) {
          failed = 1;
          break;
        }
        if (global_ns() - start > static_cast<unsigned long long>(a.spin_limit_ns)) {
          if (atomicCAS(a.error, 0, kernels::kPersistentTimeout) == 0) {
            a.error[1] = static_cast<int>(blockIdx.x);
            a.error[2] = static_cast<int>(phase);
          }
          failed = 1;
          break;
        }
        __nanosleep(32);
      }
    }
    __threadfence();  // as cooperative groups' grid sync: the block's later reads ordered after the acquire
    *flag = failed;
  }
  __syncthreads();
  return *flag == 0;
}

// The blocks of this block's cluster (%cluster_nctarank; 1 outside a cluster launch).
__device__ __forceinline__ unsigned cluster_blocks_launched() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned blocks;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(blocks));
  return blocks;
#else
  return 1;
#endif
}

// Every thread of the cluster: arrive (releasing its writes), then wait for every thread of every block of the cluster
// (acquiring theirs). The aligned forms: every thread of each warp executes them together (the phase loop is uniform).
__device__ __forceinline__ void cluster_barrier() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
  __trap();  // never launched: the plan takes Cluster only where the kernel image is sm_90 or newer
#endif
}

// After __syncthreads (every thread's writes of the phase done): one arrival, released.
__device__ inline void publish(const PersistentLaunch& a) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    add_release(a.arrivals, 1);
  }
}

// Clusters of up to this many blocks: sm_90's non-portable limit (8 without cudaFuncAttributeNonPortableClusterSizeAllowed,
// which the launching code sets on its kernel). Whether a given cluster fits is cudaOccupancyMaxActiveClusters' call.
inline constexpr int kMaxClusterBlocks = 16;

// The configuration of a 1-D launch of `blocks` blocks of `threads` in clusters of `cluster_blocks` (which divides
// `blocks`), for cudaLaunchKernelExC and cudaOccupancyMaxActiveClusters.
struct ClusterLaunch {
  cudaLaunchAttribute attribute[1];
  cudaLaunchConfig_t config{};  // config.attrs points into this object: neither copied nor moved
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
  ClusterLaunch(int64_t blocks, int64_t cluster_blocks, int threads, size_t smem_bytes, cudaStream_t stream) {
    attribute[0].id = cudaLaunchAttributeClusterDimension;
    attribute[0].val.clusterDim.x = static_cast<unsigned>(cluster_blocks);
    attribute[0].val.clusterDim.y = 1;
    attribute[0].val.clusterDim.z = 1;
    config.gridDim = dim3(static_cast<unsigned>(blocks));
    config.blockDim = dim3(static_cast<unsigned>(threads));
    config.dynamicSmemBytes = smem_bytes;
    config.stream = stream;
    config.attrs = attribute;
    config.numAttrs = 1;
  }
};

}  // namespace qgru::cuda
