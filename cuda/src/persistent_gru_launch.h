#pragma once
// The persistent GRU kernel's launch (cuda/src/persistent_gru.cu; plan, protocol and emulation in
// qgru/kernels/persistent_gru.h and persistent_gru_emulation.h). Internal to cuda/src.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "qgru/fixed/gru_cell.h"
#include "qgru/kernels/persistent_gru.h"

namespace qgru::cuda {

// Device pointers and sizes of one launch (one cell over all T steps).
struct PersistentGruArgs {
  // Stored / Acc: int8_t / int32_t on the Int8 path, int16_t / int64_t on the Wide16 path (plan.path).
  const void* R = nullptr;         // packed R [rows_p, H_p] Stored, row c = g·H + j (the path's layout)
  const void* gemm_x = nullptr;    // B-1 for every step [T·N_p, rows_p] Acc (row t·N_p + n)
  void* h_exchange = nullptr;      // [2][N_p, H_p] stored h codes; buffer 0 holds h0 on entry
  void* reset_exchange = nullptr;  // [N_p, H_p] q_reset_hidden (linear_before_reset = 0 cell only)
  int32_t* h_state = nullptr;        // [N, H] h codes, h0 on entry, the state after the last step on return
  int32_t* out = nullptr;            // [T, N, H] codes by input time
  const int32_t* lengths = nullptr;  // [N] or null
  unsigned long long* arrivals = nullptr;  // zeroed before the launch
  int* error = nullptr;                    // [3] zeroed before the launch: code, block, phase
  int64_t T = 0, N_p = 0, rows_p = 0;
  int64_t spin_limit_ns = kernels::kPersistentSpinLimitNs;  // a longer wait is reported as a timeout
  int32_t x_offset = 0, h_offset = 0;
  bool reverse = false;
};

// What the current device offers the plan.
kernels::PersistentDevice persistent_device();
// "" when every block of `plan` can be resident at once with the compiled kernel (after raising its dynamic shared
// memory limit to the plan's), else the refusal.
std::string persistent_occupancy(const kernels::PersistentGruPlan& plan);
// One cooperative launch of plan.blocks blocks on `stream`.
void launch_persistent_gru(const kernels::PersistentGruPlan& plan, const GruCellParamsView& device_view,
                           const PersistentGruArgs& args, cudaStream_t stream);

}  // namespace qgru::cuda
