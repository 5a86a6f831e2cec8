// The persistent GRU kernel on the GPU (GruRecurrence::Persistent) against CPU references, code for code, one line
// per case naming the path the cell took ("persistent (...)" or "per-step: <reason>"; a case the plan should take
// but did not counts as a failure):
//   single cells: HandGruCell's direct int64 loop (test/unit/kernels/hand_gru_cell.h), both cells
//   (linear_before_reset 1 and 0), H on edges (1, 31, 32, 33, 257) and the benchmark's widths, N 1 / 3 / 33 / 64,
//   T 0 / 1 / 5, forward and reverse, with h0;
//   whole models: QuantGruCuda against the reference executor (run_quantized_gru_codes): int8 (the int8 kernel),
//   int16-activations and int16 (the 16-bit kernel), multiplier scales, 1 to 3 layers, bidirectional, h0, sequence
//   lengths with rows of length 0, 1 and T;
//   every units-per-block configuration (QGRU_CUDA_GRU_UNITS) with 2 batch rows per block (QGRU_CUDA_GRU_ROWS): the
//   plan's default takes 16 units on every shape above, so the other slices and the largest shared memory run here;
//   11 and 17 batch rows per block: several 8-row tiles of batch rows on the int8 kernel's tensor cores;
//   two cells at once on two streams whose grids cannot both be resident (the second launch must wait, not hang);
//   the cluster barrier (QGRU_CUDA_GRU_SYNC=cluster), and with the exchange in shared memory (cluster-dsmem): cells
//   on edges and several clusters (batch slices) drifting apart, where the path must name the cluster barrier (and
//   the exchange), H = 1024's 16-block clusters of ~200 KB each (the path says which barrier the device gave), and
//   whole models.
// A case that throws (a launch error, a wait past the limit) stops the list with the case named.
// small = true: the compute-sanitizer list (a few small cases, both cells, lengths, reverse, the int8 kernel's k
// splits; under a minute).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "../unit/kernels/hand_gru_cell.h"
#include "../unit/support/gru_model_cases.h"
#include "gpu_checks.h"
#include "qgru/kernels/persistent_gru.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/verify/device_compare.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/device_buffer.h"
#include "qgru_cuda/gru_cell_cuda.h"
#include "qgru_cuda/quant_gru_cuda.h"

namespace qgru::cuda_test {

namespace {

std::vector<int32_t> random_codes(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(count);
  for (auto& x : v) x = static_cast<int32_t>(static_cast<uint32_t>(rng()) % 256);
  return v;
}

bool is_persistent(const std::string& path) { return path.rfind("persistent", 0) == 0; }

// The environment variable `name` set to `value` for the life of the object, then as it was.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const std::string& value) : name_(name) {
    const char* before = std::getenv(name);
    had_ = before != nullptr;
    if (had_) saved_ = before;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnvironment() {
    if (had_) {
      ::setenv(name_, saved_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string saved_;
};

// An exception out of a case, rethrown with the case's name in front (the self-test's main prints it and stops: a
// wait past the limit costs that limit per case, so the list does not go on after one).
class CaseFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
[[noreturn]] void rethrow_naming(const std::string& what_case, const std::exception& e) {
  throw CaseFailure(what_case + ": " + e.what());
}

// How a cell's blocks are asked to meet (QGRU_CUDA_GRU_SYNC, read at construction) and what its path must say.
enum class Meet {
  Grid,           // unset: the grid barrier; the path must not name a cluster
  Cluster,        // cluster: the path must name the cluster barrier (and not the exchange in shared memory)
  ClusterIfFits,  // cluster: either barrier (the device's occupancy decides); the path says which and why
  Dsmem,          // cluster-dsmem: the path must name the cluster barrier and the exchange in shared memory
  DsmemIfFits,    // cluster-dsmem: either (the device's occupancy decides)
};
// The QGRU_CUDA_GRU_SYNC value that asks for it.
const char* sync_setting(Meet meet) {
  using kernels::PersistentSync;
  return kernels::persistent_sync_name(meet == Meet::Grid                                   ? PersistentSync::Grid
                                       : meet == Meet::Cluster || meet == Meet::ClusterIfFits ? PersistentSync::Cluster
                                                                                                : PersistentSync::ClusterDsmem);
}

// One cell of hidden size H built once, run on every (N, T, direction) given; one line per run. units / rows: the
// plan's tuning (QGRU_CUDA_GRU_UNITS / _ROWS, read at construction; 0: the plan's choice), which the path must name.
int check_cell(int H, bool reset_before_linear, std::initializer_list<int> batches, std::initializer_list<int> lengths,
               std::initializer_list<bool> directions, int units = 0, int rows = 0, Meet meet = Meet::Grid) {
  const int C = 5;
  const qgru::test::HandGruCell cell(H, C, static_cast<uint32_t>(H * 3 + 1), reset_before_linear);
  const std::string cell_case = "persistent GRU cell H=" + std::to_string(H) + " lbr=" +
                                std::to_string(reset_before_linear ? 0 : 1) + " units=" + std::to_string(units) +
                                " rows=" + std::to_string(rows) + (meet == Meet::Grid ? "" : " sync=") + sync_setting(meet);
  std::optional<cuda::GruCellCuda> gpu_cell;
  try {
    const ScopedEnvironment u("QGRU_CUDA_GRU_UNITS", units != 0 ? std::to_string(units) : "");
    const ScopedEnvironment r("QGRU_CUDA_GRU_ROWS", rows != 0 ? std::to_string(rows) : "");
    const ScopedEnvironment m("QGRU_CUDA_GRU_SYNC", sync_setting(meet));
    gpu_cell.emplace(cell.view, cell.q_W.data(), cell.q_R.data(), C, cell.x_space, nullptr, nullptr,
                     cuda::GruRecurrence::Persistent);
  } catch (const std::exception& e) {
    rethrow_naming(cell_case, e);
  }
  const std::string tuned = " x " + std::to_string(units) + " units x " + std::to_string(rows) + " rows, smem ";
  int failures = 0;
  for (int N : batches) {
    for (int T : lengths) {
      for (bool reverse : directions) {
        const auto q_x = random_codes(static_cast<size_t>(T * N * C), static_cast<uint32_t>(T + H));
        const auto q_h0 = random_codes(static_cast<size_t>(N * H), static_cast<uint32_t>(N + H));
        std::vector<int32_t> gpu;
        try {
          gpu = gpu_cell->run(q_x.data(), T, N, q_h0.data(), reverse);
        } catch (const std::exception& e) {
          rethrow_naming(cell_case + " T=" + std::to_string(T) + " N=" + std::to_string(N) +
                             " reverse=" + std::to_string(reverse ? 1 : 0),
                         e);
        }
        const std::vector<int32_t> ref = cell.reference(q_x, T, N, q_h0, reverse);
        const std::string path = gpu_cell->describe_path(N);
        int bad = gpu.size() == ref.size() ? 0 : 1;
        for (size_t i = 0; bad == 0 && i < ref.size(); ++i) {
          if (gpu[i] != ref[i]) {
            bad = 1;
            std::printf("  first mismatch at t=%zu n=%zu j=%zu: gpu %d cpu %d\n", i / (N * H), (i / H) % N, i % H,
                        gpu[i], ref[i]);
          }
        }
        // T = 0 launches nothing: an empty result whatever the path
        const bool clustered = path.find(", cluster barrier of ") != std::string::npos;
        const bool in_shared = path.find(", exchange in shared memory") != std::string::npos;
        const bool path_wrong =
            T > 0 && (!is_persistent(path) || (units != 0 && rows != 0 && path.find(tuned) == std::string::npos) ||
                      ((meet == Meet::Cluster || meet == Meet::Dsmem) && !clustered) ||
                      (meet == Meet::Dsmem && !in_shared) || (meet == Meet::Cluster && in_shared) ||
                      (meet == Meet::Grid && clustered));
        const bool fails = bad != 0 || path_wrong;
        std::printf("%s persistent GRU cell H=%d C=%d T=%d N=%d reverse=%d lbr=%d [%s]%s%s\n", fails ? "FAIL" : "ok  ",
                    H, C, T, N, reverse ? 1 : 0, reset_before_linear ? 0 : 1, path.c_str(), bad ? ": codes differ" : "",
                    path_wrong ? "; wrong path" : "");
        failures += fails ? 1 : 0;
      }
    }
  }
  return failures;
}

int check_model(const test::GruModelCase& k) {
  const test::PreparedGruModel m = test::prepare_gru_model(k, 7);
  const QuantGruResult cpu = run_quantized_gru_codes(m.c.quantized, m.q_x.data(), k.T, k.N, m.h0(), nullptr, m.lengths_data());
  std::optional<cuda::QuantGruCuda> gpu_model;
  QuantGruResult gpu;
  try {
    gpu_model.emplace(m.c.quantized, cuda::GruRecurrence::Persistent);
    gpu = gpu_model->run_codes(m.q_x.data(), k.T, k.N, m.h0(), m.lengths_data());
  } catch (const std::exception& e) {
    rethrow_naming(std::string("persistent quantized GRU ") + k.preset +
                       " mult=" + std::to_string(k.multiplier ? 1 : 0) + " H=" + std::to_string(k.H) +
                       " T=" + std::to_string(k.T) + " N=" + std::to_string(k.N) + " L=" + std::to_string(k.L) + " D=" + std::to_string(k.D) +
                       " lbr=" + std::to_string(k.linear_before_reset ? 1 : 0),
                   e);
  }
  const CodeComparison cmp = compare_quant_codes(cpu, gpu, k.H, k.D);
  const std::string described = gpu_model->describe();
  // Every cell must take the persistent path (the int8 preset's the int8 kernel, the 16-bit presets' the wide one).
  const bool wide = std::string(k.preset) != "int8";
  const bool path_right = described.find("per-step") == std::string::npos &&
                          (described.find(", 16-bit") != std::string::npos) == wide;
  const bool fails = !cmp.equal() || !path_right;
  std::printf("%s persistent quantized GRU %-17s mult=%d H=%d T=%d N=%d L=%d D=%d h0=%d lbr=%d lengths=%d [%s]: %zu codes, "
              "%zu differ%s%s%s\n",
              fails ? "FAIL" : "ok  ", k.preset, k.multiplier ? 1 : 0, k.H, k.T, k.N, k.L, k.D, k.with_h0 ? 1 : 0,
              k.linear_before_reset ? 1 : 0, k.with_lengths ? 1 : 0, described.c_str(), cmp.compared, cmp.mismatches,
              cmp.first.empty() ? "" : "; first at ", cmp.first.c_str(), path_right ? "" : "; wrong path");
  return fails ? 1 : 0;
}

// Two persistent cells at once, each on a stream of its own (as a bidirectional layer's directions on the device flow),
// whose grids cannot both be resident: each holds more blocks than half the multiprocessors, each block more than half
// a multiprocessor's shared memory. A cooperative grid starts whole or waits: the second launch must wait for the first
// grid to finish, not start part of its blocks beside it and spin (which would end in a wait past the limit). Both
// cells' codes against the direct loop (the linear_before_reset = 1 cell forward, the other reversed).
int check_two_grids() {
  int device = 0, sm_count = 0, smem_optin = 0, smem_per_sm = 0, cooperative = 0;
  QGRU_CUDA_CHECK(cudaGetDevice(&device));
  QGRU_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  QGRU_CUDA_CHECK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  QGRU_CUDA_CHECK(cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  QGRU_CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  // 8 units per block: sm_count / 2 + 1 unit slices, which leave no multiprocessor for a second batch slice, so one
  // slice of all N rows; N the fewest rows whose staging takes a block past half a multiprocessor's shared memory.
  const int C = 5, T = 3, units = 8, H = units * (sm_count / 2 + 1);
  const qgru::test::HandGruCell forward(H, C, 71u, false), backward(H, C, 72u, true);
  const ScopedEnvironment tuning_units("QGRU_CUDA_GRU_UNITS", std::to_string(units));
  const ScopedEnvironment tuning_rows("QGRU_CUDA_GRU_ROWS", "");
  const ScopedEnvironment grid_barrier("QGRU_CUDA_GRU_SYNC", "");  // two cooperative grids, whatever the run asked for
  struct Streams {
    cudaStream_t s[2] = {nullptr, nullptr};
    ~Streams() {
      for (cudaStream_t x : s) {
        if (x != nullptr) cudaStreamDestroy(x);
      }
    }
  } streams;
  for (cudaStream_t& x : streams.s) QGRU_CUDA_CHECK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
  const cuda::GruCellCuda cell_f(forward.view, forward.q_W.data(), forward.q_R.data(), C, forward.x_space, streams.s[0],
                                 nullptr, cuda::GruRecurrence::Persistent);
  const cuda::GruCellCuda cell_b(backward.view, backward.q_W.data(), backward.q_R.data(), C, backward.x_space,
                                 streams.s[1], nullptr, cuda::GruRecurrence::Persistent);
  kernels::PersistentGruTuning tuning;
  tuning.units_per_block = units;
  const kernels::PersistentDevice dev{sm_count, smem_optin, cooperative != 0};
  const auto path = cell_f.wide() ? kernels::GruGemmPath::Wide16 : kernels::GruGemmPath::Int8;
  kernels::PersistentGruPlan plan;
  int N = 0;
  do {
    plan = kernels::plan_persistent_gru(path, H, ++N, false, dev, tuning);
  } while (plan.persistent && plan.smem.total_bytes <= smem_per_sm / 2);
  const std::string what = "two persistent grids at once H=" + std::to_string(H) + " N=" + std::to_string(N) +
                           " T=" + std::to_string(T) + " on " + std::to_string(sm_count) + " multiprocessors of " +
                           std::to_string(smem_per_sm) + " bytes of shared memory";
  const bool contended = plan.persistent && 2 * plan.blocks > sm_count;
  if (!contended || cell_f.describe_path(N) != plan.describe() || cell_b.describe_path(N) != plan.describe()) {
    std::printf("FAIL %s: the cells' plans [%s] [%s] are not two grids of more than %d blocks (expected [%s])\n",
                what.c_str(), cell_f.describe_path(N).c_str(), cell_b.describe_path(N).c_str(), sm_count / 2,
                plan.describe().c_str());
    return 1;
  }
  const auto q_x = random_codes(static_cast<size_t>(T * N * C), 73u);
  const auto q_h0 = random_codes(static_cast<size_t>(N * H), 74u);
  const cuda::DeviceBuffer x_codes = cuda::DeviceBuffer::from(q_x);
  const cuda::DeviceBuffer state_f = cuda::DeviceBuffer::from(q_h0), state_b = cuda::DeviceBuffer::from(q_h0);
  QGRU_CUDA_CHECK(cudaDeviceSynchronize());  // the uploads (legacy stream) before the cells' non-blocking streams
  kernels::LayerInputSource source;
  source.kind = kernels::LayerInputKind::Codes;
  source.cols = C;
  source.codes = static_cast<const int32_t*>(x_codes.data());
  std::vector<int32_t> got_f(static_cast<size_t>(T * N * H)), got_b(got_f.size());
  try {
    const int32_t* out_f = cell_f.run_on_device(source, T, N, static_cast<int32_t*>(state_f.data()), false, nullptr);
    const int32_t* out_b = cell_b.run_on_device(source, T, N, static_cast<int32_t*>(state_b.data()), true, nullptr);
    for (cudaStream_t x : streams.s) QGRU_CUDA_CHECK(cudaStreamSynchronize(x));
    cell_f.check_device_errors();
    cell_b.check_device_errors();
    QGRU_CUDA_CHECK(cudaMemcpy(got_f.data(), out_f, got_f.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
    QGRU_CUDA_CHECK(cudaMemcpy(got_b.data(), out_b, got_b.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
  } catch (const std::exception& e) {
    rethrow_naming(what, e);
  }
  const bool same_f = got_f == forward.reference(q_x, T, N, q_h0, false);
  const bool same_b = got_b == backward.reference(q_x, T, N, q_h0, true);
  std::printf("%s %s [%s] x 2, lbr=1 forward: %s, lbr=0 reverse: %s\n", same_f && same_b ? "ok  " : "FAIL",
              what.c_str(), plan.describe().c_str(), same_f ? "codes equal" : "codes differ",
              same_b ? "codes equal" : "codes differ");
  return same_f && same_b ? 0 : 1;
}

}  // namespace

int check_persistent_gru(bool small) {
  int failures = 0;
  if (small) {
    for (bool rbl : {false, true}) failures += check_cell(33, rbl, {3}, {4}, {false, true});
    // The int8 kernel's k splits (shared-memory zeroing, then atomics) for the sanitizers, which the other small cases
    // never reach (H_p 32 or 48: one k32 step, nothing to split): H_p 64 in rows padded to 80 bytes, 8 units and 11
    // batch rows per block, so every phase has 2 to 4 tiles (2 of batch rows, the last of 3 rows) split in two.
    for (bool rbl : {false, true}) failures += check_cell(64, rbl, {11}, {3}, {false}, 8, 11);
    // The cluster barrier, then with the exchange in shared memory: 5 unit slices a cluster, 3 clusters.
    for (bool rbl : {false, true}) failures += check_cell(40, rbl, {3}, {4}, {true}, 8, 1, Meet::Cluster);
    for (bool rbl : {false, true}) failures += check_cell(40, rbl, {3}, {4}, {true}, 8, 1, Meet::Dsmem);
    failures += check_model({"int8", false, 33, 2, 2, 3, 4, true, true, true});
    failures += check_model({"int8", true, 31, 1, 2, 3, 4, false, true, false});
    failures += check_model({"int16-activations", false, 33, 1, 2, 3, 4, true, true, false});
    return failures;
  }
  for (bool rbl : {false, true}) {
    for (int H : {1, 31, 32, 33, 257}) failures += check_cell(H, rbl, {1, 3, 33}, {0, 1, 5}, {false, true});
    // The benchmark's widths and batches.
    failures += check_cell(64, rbl, {1}, {20}, {false});
    failures += check_cell(256, rbl, {64}, {10}, {true});
    failures += check_cell(512, rbl, {32}, {10}, {false});
    failures += check_cell(1024, rbl, {1}, {20}, {true});
  }
  for (const test::GruModelCase& k : test::kPersistentModelCases) failures += check_model(k);
  // Wider and longer than the CPU emulation's list.
  failures += check_model({"int8", false, 130, 2, 2, 17, 9, true, true, true});
  failures += check_model({"int8", true, 64, 2, 2, 5, 20, true, true, false});
  failures += check_model({"int16-activations", false, 130, 2, 2, 17, 9, true, true, false});
  failures += check_model({"int16", false, 257, 1, 2, 33, 5, true, true, true});
  // Every units-per-block configuration, 2 rows per block (5 rows: a partial last batch slice), H = 200 (a partial last
  // unit slice for each; 256 units: about 160 KB of shared memory per block).
  for (int units : kernels::kPersistentUnitChoices) {
    for (bool rbl : {false, true}) failures += check_cell(200, rbl, {5}, {4}, {false, true}, units, 2);
  }
  // Several 8-row tiles of batch rows on the int8 kernel's tensor cores (on an H200 the plan's default gives a block at
  // most 8 batch rows on every shape above but the two grids'): 17 rows per block (3 tiles, the last of 1 row; at N = 40 a
  // last slice of 6 rows) with 3 k32 steps split 1 + 2 and the k16 tail (H = 100), and H = 256's rows padded to 272
  // bytes with the n rows' 2 tiles in 4 splits.
  for (bool rbl : {false, true}) {
    failures += check_cell(100, rbl, {17, 40}, {5}, {false, true}, 16, 17);
    failures += check_cell(256, rbl, {11}, {5}, {false}, 16, 11);
  }
  failures += check_two_grids();
  // The cluster barrier. H up to 257 fits one cluster (at most 16 unit slices: 257 takes 9 of 32 units); N = 33 and
  // 64 spread over several clusters; tuned 8 units (5 slices) with 1 and 2 rows a block, 3 to 17 clusters that run
  // phases apart. H = 1024: 16 slices of 64 units, ~200 KB of shared memory a block.
  // The same with the exchange in shared memory, and H = 65 in slices of 32 (the last slice's pushes stop at the
  // staging row's H_p = 80 codes).
  for (Meet meet : {Meet::Cluster, Meet::Dsmem}) {
    const Meet if_fits = meet == Meet::Cluster ? Meet::ClusterIfFits : Meet::DsmemIfFits;
    for (bool rbl : {false, true}) {
      for (int H : {1, 33, 257}) failures += check_cell(H, rbl, {1, 3, 33}, {1, 5}, {false, true}, 0, 0, meet);
      failures += check_cell(256, rbl, {64}, {10}, {true}, 0, 0, meet);
      failures += check_cell(40, rbl, {3, 17}, {6}, {false, true}, 8, 1, meet);
      failures += check_cell(100, rbl, {40}, {5}, {false}, 16, 17, meet);
      failures += check_cell(65, rbl, {40}, {5}, {true}, 32, 19, meet);
      failures += check_cell(1024, rbl, {1, 4}, {20}, {true}, 0, 0, if_fits);
    }
    const ScopedEnvironment cluster("QGRU_CUDA_GRU_SYNC", sync_setting(meet));
    for (const test::GruModelCase& k : test::kPersistentModelCases) failures += check_model(k);
  }
  return failures;
}

}  // namespace qgru::cuda_test
