// bench_cuda_barrier: what one phase's meeting of the persistent GRU kernel's blocks costs on the GPU, alone and with
// the smallest exchange of h around it: the floor under a persistent step, beside which the kernel's own µs per step
// (bench_cuda_gru --recurrence persistent) reads as "meeting + work". The meetings are the kernel's own code
// (cuda/src/persistent_sync.cuh); the exchange mirrors the kernel's (qgru/kernels/persistent_gru.h).
//
// Modes, each one launch of `blocks` blocks of 256 threads running `iterations` phases:
//   grid           publish + wait_arrivals on the arrival counter (PersistentSync::Grid), nothing between;
//   cluster        cluster_barrier (PersistentSync::Cluster; one cluster of `blocks`, at most 16), nothing between;
//   grid-l2        a phase as the kernel's at N = 1: meet, stage the H = blocks x units codes of the exchange buffer
//                  the previous phase wrote (ld.global.cg, 16 bytes a thread), __syncthreads, check every staged code,
//                  write the block's `units` codes of this phase into the other buffer;
//   cluster-l2     the same around cluster_barrier;
//   cluster-dsmem  the same exchange through distributed shared memory: each block writes its codes straight into
//                  every cluster block's staging (two buffers by parity), so nothing is staged from L2 after the
//                  barrier (the design the kernel would take next if this row beats cluster-l2).
// The check is part of the measurement and of the result: each block's codes of phase i are
// phase_code(block, i); a staged code that is not the previous phase's (a meeting that does not order the exchange)
// counts as a mismatch, and any mismatch fails the run (exit 1). So this is also a GPU test of both barriers'
// ordering of ordinary global stores and of distributed shared memory.
//
// Usage: bench_cuda_barrier [--configs BxU,...] [--iterations I] [--runs R] [--json-lines] [--commit ID]
//   --configs: blocks x units per block (default 16x16,16x64,64x16: H = 256 in 16 blocks, H = 1024 in 16 blocks of
//   64 units (the cluster plan's), H = 1024 in 64 blocks of 16 (the grid plan's)); cluster modes only where blocks
//   <= 16. Prints a markdown table (median ns per phase over the runs, each run one launch of I phases; the launch's
//   own cost is spread over I phases) and with --json-lines one "JSON {...}" line per row:
//   {"bench": "persistent-meeting", "mode", "blocks", "units", "H", "ns_per_phase", "min_ns_per_phase",
//    "mismatches", "card", "date", "commit"} (scripts/collect_gpu_results.py takes them from the session's log into
//   docs/benchmarks/cuda-meetings.json).
// Without a GPU: "no usable GPU: <reason>", exit 77.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "persistent_sync.cuh"
#include "qgru_cuda/check.h"
#include "qgru_cuda/device.h"
#include "qgru_cuda/device_buffer.h"

namespace {

namespace cg = cooperative_groups;
using qgru::cuda::PersistentLaunch;

enum class Mode { Grid, Cluster, GridL2, ClusterL2, ClusterDsmem };
constexpr Mode kModes[] = {Mode::Grid, Mode::Cluster, Mode::GridL2, Mode::ClusterL2, Mode::ClusterDsmem};
const char* mode_name(Mode m) {
  switch (m) {
    case Mode::Grid: return "grid";
    case Mode::Cluster: return "cluster";
    case Mode::GridL2: return "grid-l2";
    case Mode::ClusterL2: return "cluster-l2";
    case Mode::ClusterDsmem: return "cluster-dsmem";
  }
  return "?";
}
bool is_cluster(Mode m) { return m == Mode::Cluster || m == Mode::ClusterL2 || m == Mode::ClusterDsmem; }
constexpr int kThreads = 256;
using qgru::cuda::kMaxClusterBlocks;

struct BarrierArgs {
  PersistentLaunch a;               // the arrival counter and error words (grid modes)
  unsigned char* exchange = nullptr;  // [2][H] codes (the l2 modes)
  unsigned long long* mismatches = nullptr;
  int iterations = 0, units = 0;    // units: codes (bytes) a block writes a phase, a multiple of 16
};

// The code block b writes at phase i: consecutive phases differ, so a code staged from the wrong phase is seen.
__device__ __forceinline__ unsigned char phase_code(int b, int i) { return static_cast<unsigned char>(b * 31 + i * 7 + 1); }

// Every staged code of phase i (H bytes at `staged`) against phase_code; mismatches counted into the result.
__device__ void check_staged(const unsigned char* staged, int H, int units, int i, unsigned long long* mismatches) {
  int bad = 0;
  for (int at = static_cast<int>(threadIdx.x); at < H; at += kThreads) bad += staged[at] != phase_code(at / units, i);
  if (bad != 0) atomicAdd(mismatches, static_cast<unsigned long long>(bad));
}

// The block's `units` codes of phase i, 16 bytes a thread, into `to` (global or another block's shared memory).
__device__ void write_codes(unsigned char* to, int units, int i) {
  const int chunks = units / 16;
  if (static_cast<int>(threadIdx.x) >= chunks) return;
  const unsigned code = phase_code(static_cast<int>(blockIdx.x), i) * 0x01010101u;
  reinterpret_cast<uint4*>(to)[threadIdx.x] = make_uint4(code, code, code, code);
}

template <Mode kMode>
__global__ void __launch_bounds__(kThreads, 1) barrier_kernel(BarrierArgs g) {
  extern __shared__ __align__(16) unsigned char smem[];  // staging: [2][H] codes (dsmem) or [H] (l2); then the flag
  const int blocks = static_cast<int>(gridDim.x), H = blocks * g.units, b = static_cast<int>(blockIdx.x);
  int* flag = reinterpret_cast<int*>(smem + 2 * H);
  if constexpr (kMode == Mode::Grid) {
    for (int i = 0; i < g.iterations; ++i) {
      if (!qgru::cuda::wait_arrivals(g.a, static_cast<unsigned long long>(blocks) * i, i, flag)) return;
      qgru::cuda::publish(g.a);
    }
  } else if constexpr (kMode == Mode::Cluster) {
    for (int i = 0; i < g.iterations; ++i) qgru::cuda::cluster_barrier();
  } else if constexpr (kMode == Mode::GridL2 || kMode == Mode::ClusterL2) {
    write_codes(g.exchange + b * g.units, g.units, 0);  // phase 0's codes into buffer 0
    for (int i = 1; i <= g.iterations; ++i) {
      if constexpr (kMode == Mode::GridL2) {
        qgru::cuda::publish(g.a);  // phase i - 1 done
        if (!qgru::cuda::wait_arrivals(g.a, static_cast<unsigned long long>(blocks) * i, i, flag)) return;
      } else {
        qgru::cuda::cluster_barrier();
      }
      const int4* from = reinterpret_cast<const int4*>(g.exchange + ((i - 1) & 1) * H);
      for (int c = static_cast<int>(threadIdx.x); c < H / 16; c += kThreads) reinterpret_cast<int4*>(smem)[c] = __ldcg(from + c);
      __syncthreads();
      check_staged(smem, H, g.units, i - 1, g.mismatches);
      write_codes(g.exchange + (i & 1) * H + b * g.units, g.units, i);
      // The next phase rewrites the staging only after its meeting, which every thread of the block passes
      // (publish begins with __syncthreads; the cluster barrier waits for every thread), as in the kernel.
    }
  } else {  // ClusterDsmem
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cg::cluster_group cluster = cg::this_cluster();
    const int peers = static_cast<int>(cluster.num_blocks());
    const int rank = static_cast<int>(cluster.block_rank());
    // Thread t writes chunk t % chunks of the block's codes into peer t / chunks (every peer, itself included).
    const int chunks = g.units / 16, t = static_cast<int>(threadIdx.x);
    auto push = [&](int i) {
      if (t >= peers * chunks) return;
      unsigned char* own = smem + (i & 1) * H + rank * g.units + (t % chunks) * 16;
      auto* to = static_cast<uint4*>(cluster.map_shared_rank(static_cast<void*>(own), t / chunks));
      const unsigned code = phase_code(static_cast<int>(blockIdx.x), i) * 0x01010101u;
      *to = make_uint4(code, code, code, code);
    };
    cluster.sync();  // every block started: its shared memory may be written
    push(0);
    for (int i = 1; i <= g.iterations; ++i) {
      qgru::cuda::cluster_barrier();
      check_staged(smem + ((i - 1) & 1) * H, H, g.units, i - 1, g.mismatches);
      push(i);
    }
    qgru::cuda::cluster_barrier();  // no block leaves while another may still write into its shared memory
#else
    __trap();
#endif
  }
}

const void* kernel_of(Mode m) {
  switch (m) {
    case Mode::Grid: return reinterpret_cast<const void*>(barrier_kernel<Mode::Grid>);
    case Mode::Cluster: return reinterpret_cast<const void*>(barrier_kernel<Mode::Cluster>);
    case Mode::GridL2: return reinterpret_cast<const void*>(barrier_kernel<Mode::GridL2>);
    case Mode::ClusterL2: return reinterpret_cast<const void*>(barrier_kernel<Mode::ClusterL2>);
    case Mode::ClusterDsmem: return reinterpret_cast<const void*>(barrier_kernel<Mode::ClusterDsmem>);
  }
  return nullptr;
}

struct Row {
  Mode mode;
  int blocks, units;
  double ns_per_phase = 0, min_ns_per_phase = 0;
  unsigned long long mismatches = 0;
  std::string error;  // a launch or wait that failed
};

Row measure(Mode mode, int blocks, int units, int iterations, int runs) {
  Row row{mode, blocks, units};
  const int H = blocks * units;
  const size_t smem = static_cast<size_t>(2 * H + 16);
  qgru::cuda::DeviceBuffer sync(64), exchange(static_cast<size_t>(2 * H)), mismatches(sizeof(unsigned long long));
  BarrierArgs g;
  g.a.arrivals = static_cast<unsigned long long*>(sync.data());
  g.a.error = reinterpret_cast<int*>(g.a.arrivals + 1);
  g.a.spin_limit_ns = 2'000'000'000;
  g.exchange = static_cast<unsigned char*>(exchange.data());
  g.mismatches = static_cast<unsigned long long*>(mismatches.data());
  g.iterations = iterations;
  g.units = units;
  QGRU_CUDA_CHECK(cudaMemset(g.mismatches, 0, sizeof(unsigned long long)));
  void* params[] = {&g};
  // One cluster of every block (cluster modes), as the kernel's launch configures it.
  const qgru::cuda::ClusterLaunch cluster(blocks, blocks, kThreads, smem, nullptr);
  if (is_cluster(mode) && blocks > 8) {
    QGRU_CUDA_CHECK(cudaFuncSetAttribute(kernel_of(mode), cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  auto launch = [&] {
    QGRU_CUDA_CHECK(cudaMemsetAsync(sync.data(), 0, 64));
    if (is_cluster(mode)) {
      QGRU_CUDA_CHECK(cudaLaunchKernelExC(&cluster.config, kernel_of(mode), params));
    } else {
      QGRU_CUDA_CHECK(cudaLaunchCooperativeKernel(kernel_of(mode), dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
                                                  params, smem, nullptr));
    }
  };
  try {
    // A launch's fixed cost (the memset, the launch) spread over `iterations` phases; the phases dominate at 10^4.
    const qgru::cuda::bench::CallTimes t = qgru::cuda::bench::time_calls(launch, 2, runs);
    row.ns_per_phase = 1e6 * t.median_ms / iterations;
    row.min_ns_per_phase = 1e6 * t.min_ms / iterations;
    int error[3] = {0, 0, 0};
    QGRU_CUDA_CHECK(cudaMemcpy(error, g.a.error, sizeof(error), cudaMemcpyDeviceToHost));
    QGRU_CUDA_CHECK(cudaMemcpy(&row.mismatches, g.mismatches, sizeof(row.mismatches), cudaMemcpyDeviceToHost));
    if (error[0] != 0) row.error = "block " + std::to_string(error[1]) + " waited past the limit at phase " + std::to_string(error[2]);
  } catch (const std::exception& e) {
    row.error = e.what();
  }
  return row;
}

int usage(const char* self) {
  std::fprintf(stderr, "usage: %s [--configs BxU,...] [--iterations I] [--runs R] [--json-lines] [--commit ID]\n"
                       "  B: blocks (cluster modes only where B <= 16); U: codes a block writes a phase, a multiple of 16\n",
               self);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<int, int>> configs = {{16, 16}, {16, 64}, {64, 16}};
  int iterations = 10000, runs = 7;
  bool json_lines = false;
  std::string commit = "unknown";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--configs") == 0 && i + 1 < argc) {
      configs.clear();
      std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        const size_t end = list.find(',', at) == std::string::npos ? list.size() : list.find(',', at);
        int B = 0, U = 0;
        if (std::sscanf(list.substr(at, end - at).c_str(), "%dx%d", &B, &U) != 2 || B < 1 || U < 16 || U % 16 != 0 ||
            B > 1024 || U > 4096) {
          return usage(argv[0]);
        }
        configs.emplace_back(B, U);
        at = end + 1;
      }
    } else if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      iterations = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--json-lines") == 0) {
      json_lines = true;
    } else if (std::strcmp(argv[i], "--commit") == 0 && i + 1 < argc) {
      commit = argv[++i];
    } else {
      return usage(argv[0]);
    }
  }
  if (iterations < 1 || runs < 1) return usage(argv[0]);
  const qgru::cuda::DeviceProbe probe = qgru::cuda::probe_devices();
  if (probe.device_count == 0) {
    std::printf("no usable GPU: %s\nbarrier benchmark NOT RUN (no figures)\n", probe.reason.c_str());
    return 77;
  }
  cudaDeviceProp prop{};
  QGRU_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int cluster_launch = 0;
  QGRU_CUDA_CHECK(cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, 0));
  std::printf("%s, %d SMs, %d phases a launch, median of %d launches\n\n", prop.name, prop.multiProcessorCount,
              iterations, runs);
  const std::string date = qgru::cuda::bench::utc_date();
  std::printf("| mode | blocks | units | H | ns per phase | min | mismatches |\n|---|---:|---:|---:|---:|---:|---:|\n");
  int failures = 0;
  for (const auto& [blocks, units] : configs) {
    for (Mode mode : kModes) {
      if (is_cluster(mode) && (cluster_launch == 0 || blocks > kMaxClusterBlocks)) continue;
      if (!is_cluster(mode) && blocks > prop.multiProcessorCount) continue;
      const Row r = measure(mode, blocks, units, iterations, runs);
      const bool failed = !r.error.empty() || r.mismatches != 0;
      failures += failed ? 1 : 0;
      std::printf("| %s | %d | %d | %d | %.0f | %.0f | %llu%s%s |\n", mode_name(mode), blocks, units, blocks * units,
                  r.ns_per_phase, r.min_ns_per_phase, r.mismatches, r.error.empty() ? "" : "; ", r.error.c_str());
      if (json_lines && !failed) {
        std::printf("JSON {\"bench\": \"persistent-meeting\", \"mode\": \"%s\", \"blocks\": %d, \"units\": %d, \"H\": %d, "
                    "\"ns_per_phase\": %.1f, \"min_ns_per_phase\": %.1f, \"mismatches\": 0, \"card\": \"%s\", "
                    "\"date\": \"%s\", \"commit\": \"%s\"}\n",
                    mode_name(mode), blocks, units, blocks * units, r.ns_per_phase, r.min_ns_per_phase, prop.name, date.c_str(),
                    commit.c_str());
      }
    }
  }
  if (failures != 0) std::printf("\nbench_cuda_barrier: %d row(s) failed (a wrong staged code or a failed launch)\n", failures);
  return failures == 0 ? 0 : 1;
}
