#pragma once
// The persistent GRU kernel's launch (cuda/src/persistent_gru.cu; plan, protocol and emulation in
// qgru/kernels/persistent_gru.h and persistent_gru_emulation.h). Internal to cuda/src.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "qgru/fixed/gru_cell.h"
#include "qgru/kernels/persistent_gru.h"

namespace qgru::cuda {

// What a launch needs besides its buffers (kernels::PersistentBuffers: device pointers and sizes).
struct PersistentLaunch {
  const void* R = nullptr;                 // packed R [rows_p, H_p] Stored, row c = g·H + j (the path's layout)
  unsigned long long* arrivals = nullptr;  // zeroed before the launch
  int* error = nullptr;                    // [3] zeroed before the launch: code, block, phase
  int64_t spin_limit_ns = kernels::kPersistentSpinLimitNs;  // a longer wait is reported as a timeout
};

// What the current device offers the plan.
kernels::PersistentDevice persistent_device();
// "" when every block of `plan` (Grid), or one cluster of its blocks (Cluster), can be resident at once with the
// compiled kernel (after raising its dynamic shared memory limit to the plan's), else the refusal.
// persistent_active_clusters: the Cluster plan's clusters that can be resident at once (cudaOccupancyMaxActiveClusters
// after the same limit; 0 where it refuses the cluster, as an error or as 0).
std::string persistent_occupancy(const kernels::PersistentGruPlan& plan);
int persistent_active_clusters(const kernels::PersistentGruPlan& plan);
// One launch of plan.blocks blocks on `stream`: cooperative (PersistentSync::Grid) or in clusters of
// plan.cluster_blocks (PersistentSync::Cluster). Stored / Acc: int8_t / int32_t (Int8 path) or
// int16_t / int64_t (Wide16), instantiated in persistent_gru.cu.
template <class Stored, class Acc>
void launch_persistent_gru(const kernels::PersistentGruPlan& plan, const GruCellParamsView& device_view,
                           const kernels::PersistentBuffers<Stored, Acc>& buffers, const PersistentLaunch& launch,
                           cudaStream_t stream);

}  // namespace qgru::cuda
