#pragma once
// The persistent GRU recurrence (cuda/src/persistent_gru.cu): ONE launch runs all T steps of one cell (one layer,
// one direction), int8 or 16-bit operands. Plain host code and QGRU_HD functions; the kernel calls the QGRU_HD ones and
// qgru/kernels/persistent_gru_emulation.h runs the same functions block by block on the host.
//
// Blocks and slices: B blocks, co-resident (one per multiprocessor at most, a cooperative launch) with the grid
// barrier, or in clusters of a batch slice's unit slices with the cluster barrier (PersistentSync). The units are cut
// into ceil(H / U) slices of U, the batch rows into ceil(N / NB) slices of NB; block b owns unit slice b mod
// (unit slices) and batch slice b / (unit slices): the hidden units [j0, j0 + U) of the batch rows [n0, n0 + NB), and
// all three gate rows (z, r, n) of R for its units, loaded once into shared memory (blocks of the same units and other
// rows hold the same R slice: a large batch spreads over more multiprocessors). Each step it computes R·h for its rows
// (exact integer dot products, below), then the shared cell (gru_cell_element, qgru/fixed/gru_cell.h) on its own
// (unit, row) elements, and writes their new h codes into a global exchange buffer.
// W·x of every step stays one GEMM up front (the B-1 GEMM of gru_cell_cuda.cu: cuBLAS int8 or the wide kernel).
//
// Exchange and synchronization (one grid-wide arrival counter, monotonic over the launch, zeroed before it):
//   linear_before_reset = 1 (one phase per step): at step s a block waits until B·s arrivals (every block has
//     published step s-1), stages h_s from exchange buffer parity(s) into shared memory, computes, writes h_{s+1}
//     of its units into buffer parity(s+1), then publishes (one arrival). Double buffering makes one wait per step
//     enough: the buffer a block writes at step s was last read at step s-1, and every block finished step s-1
//     (its reads precede its arrival) before any block passes the wait of step s.
//   linear_before_reset = 0 (two phases per step, docs/FIXED_POINT.md §3a): the n gate needs R_n·(r ⊙ h) over ALL
//     units, so a step exchanges twice: phase A stages h_s, computes the z and r rows, writes q_reset_hidden of its
//     units into the (single) reset buffer and publishes; phase B waits for every block's phase A, stages the reset
//     buffer, computes the n rows, runs the cell and writes h_{s+1} into buffer parity(s+1), and publishes. The
//     reset buffer is written at phase A of step s after every block finished phase B of step s-1 (its last reader).
// A block's own h codes as int32 (h_state) are read and written by the same thread of the same block only.
// Waits spin with acquire loads, publishes are release reductions after a __syncthreads (cuda/src/persistent_gru.cu);
// a wait longer than kPersistentSpinLimitNs sets the launch's error word, every waiting block gives up and the host
// throws instead of hanging.
//
// Two operand widths, as the per-step path's (plan_gru_operands, qgru/kernels/gru_step.h):
//   Int8 (Stored int8_t, Acc int32_t): R's codes and h's stored codes, both in [-128, 127], multiplied on the tensor
//     cores (mma.sync m16n8k32 .s8, int32 accumulators; below, "int8: a phase's dot products as one small GEMM"; the
//     lanes' dp4a dot products, persistent_dot_share, are the same sums), so each product has |a·b| <= 2^14 and any
//     partial or full sum over K = H_p terms has |Σ| <= H_p·2^14 < 2^31 for H_p < 2^17 (plan_gru_gemm refuses
//     longer reductions; the shared memory limit is far below);
//   Wide16 (Stored int16_t, Acc int64_t): both operands in [-32768, 32767], each product |a·b| <= 2^30 exact in int32,
//     summed in int64: |Σ| <= H_p·2^30 < 2^63 for any H_p a block can hold.
// Either way every intermediate is exact, so the order of the lanes' partial sums does not matter. B-1 comes from the
// path's own GEMM (cuBLAS int8, the wide kernel). The cell's arithmetic is gru_cell_element_folded's
// (B-1 / B-2's constants folded once per launch into shared memory), code for code gru_cell_element's.
#include <cstdint>
#include <string>

#include "qgru/fixed/gru_cell.h"
#include "qgru/hd.h"
#include "qgru/kernels/gru_step.h"
#include "qgru/kernels/int8_gemm_layout.h"
#include "qgru/kernels/wide_gemm.h"
#include "qgru/kernels/workspace.h"

namespace qgru::kernels {

inline constexpr int kPersistentThreads = 256;  // 8 warps
// Lanes that split one dot product of the 16-bit kernel (a group of 4 aligned lanes of a warp; 64 groups per block;
// the int8 kernel multiplies on the tensor cores, "int8: a phase's dot products as one small GEMM"). A warp per dot
// (32 lanes) made each dot a chain of five dependent shuffles after one or two dp4a's per lane at H <= 256, and
// a warp's dots ran one after another: at H = 256, U = 16, N = 1 (48 dots, 8 warps) six such chains per warp
// and step. Four lanes: two shuffles per dot, 64 dots at once, each lane streaming its 16-byte chunks of the two
// rows with 128-bit shared loads.
inline constexpr int kPersistentDotLanes = 4;
inline constexpr int kPersistentDotGroups = kPersistentThreads / kPersistentDotLanes;
// The units-per-block configurations the kernel may run (the table plan_persistent_gru picks from).
inline constexpr int kPersistentUnitChoices[] = {8, 16, 32, 64, 128, 256};
// The smallest slice the plan takes by default: below it the per-step barrier dominates a block's work.
// Not measured yet (no GPU has run the kernel): the benchmark sweeps PersistentGruTuning::units_per_block.
inline constexpr int kPersistentDefaultMinUnits = 16;
// The kernel's index math inside its step loop is 32-bit (the dot-product and element walks below, the words of a
// dot product): every index it forms there counts bytes, words or elements of ONE block's shared memory or fewer,
// so the plan refuses a block whose shared memory reaches 2^31 bytes (no device comes near: 227 KiB on sm_90).
inline constexpr int64_t kPersistentMaxSmemBytes = int64_t{1} << 31;
static_assert(32 % kPersistentDotLanes == 0, "a dot's lanes lie in one warp (its shuffles' mask)");
// A wait longer than this (globaltimer nanoseconds) is a failure, reported instead of spinning forever.
// Far above any step's work (the whole grid's step is microseconds to a millisecond), and below a test's patience.
inline constexpr int64_t kPersistentSpinLimitNs = 10'000'000'000;

// What the device offers (cuda/src/persistent_gru.cu asks cudaDeviceGetAttribute).
struct PersistentDevice {
  int sm_count = 0;
  int64_t smem_optin_bytes = 0;  // cudaDevAttrMaxSharedMemoryPerBlockOptin
  bool cooperative_launch = false;
  // The most blocks a cluster launch of the kernel may group (0: none: the device has no cluster launch, or the
  // kernel image it runs is older than sm_90). Whether a cluster of that many blocks at a plan's shared memory can
  // be resident is the occupancy check's question (persistent_cluster_occupancy_refusal).
  int max_cluster_blocks = 0;
};

// How the blocks that exchange h meet once per phase.
//   Grid: the arrival counter in global memory (the protocol above), over every block of a cooperative launch.
//   Cluster (sm_90): one thread-block cluster per batch slice, its blocks the slice's unit slices (cluster c =
//     blocks [c·unit_blocks, (c+1)·unit_blocks), the batch slice c of persistent_block_slice); each phase starts
//     with the cluster's hardware barrier (barrier.cluster.arrive.release + wait.acquire, every thread), which
//     orders the previous phase's exchange writes of the cluster's blocks before this phase's staging reads. A batch
//     slice's rows of the exchange buffers are written and read by its own cluster's blocks only, so clusters never
//     wait for one another: the launch needs no co-residency beyond one cluster at a time, and the barrier is the
//     cluster's, not the whole grid's. The same phases, parities and buffers as Grid; only the meeting differs.
//   ClusterDsmem: Cluster's clusters and barrier, and the exchange through distributed shared memory instead of L2.
//     Each block keeps its own staging buffers (persistent_stage_buffers: h by parity, and the reset codes of the
//     linear_before_reset = 0 cell), and after a phase's cell every block writes its units' new codes (from an outbox
//     in its shared memory, which persistent_phase_elements fills instead of the exchange buffers) straight into the staging buffer the next phase reads, in every
//     block of its cluster (persistent_push_*), before the barrier; so a phase starts on staged codes, with no read
//     from L2 after the barrier. Phase 0 stages h0 from the exchange buffer as the others do. Hazards, the double
//     buffering's argument per block: phase k writes peers' buffer persistent_push_buffer(k), never the buffer phase k
//     reads; they read it at phase k + 1 and last read it at phase k - 1 (one phase a step; the reset buffer of the
//     two-phase cell: written at phase A, read at the same step's phase B) or k - 3 (the two-phase cell's h buffers),
//     and every block finished phase k - 1 before any passes the barrier of phase k. The last phase pushes nothing, so no block writes into a block that has left. A cluster
//     barrier after the slice's setup (before any push) lets every block's shared memory be written.
enum class PersistentSync { Grid, Cluster, ClusterDsmem };
inline const char* persistent_sync_name(PersistentSync sync) {
  return sync == PersistentSync::Grid ? "grid" : sync == PersistentSync::Cluster ? "cluster" : "cluster-dsmem";
}
QGRU_HD constexpr bool persistent_in_clusters(PersistentSync sync) { return sync != PersistentSync::Grid; }
QGRU_HD constexpr bool persistent_dsmem(PersistentSync sync) { return sync == PersistentSync::ClusterDsmem; }

struct PersistentGruTuning {
  int units_per_block = 0;  // 0: the plan's choice; else one of kPersistentUnitChoices
  int rows_per_block = 0;   // batch rows per block; 0: the plan's choice
  // Cluster, ClusterDsmem: the cluster barrier where the device and the shape allow it, else Grid with the reason in
  // the plan's description. Grid until a GPU measures them side by side (scripts/gpu_session.sh sweeps all three).
  PersistentSync sync = PersistentSync::Grid;
};

// Operand and accumulator bytes of a path: 1 and 4 (Int8), 2 and 8 (Wide16).
struct PersistentWidths {
  int64_t operand_bytes, acc_bytes;
};
inline PersistentWidths persistent_widths(GruGemmPath path) {
  return path == GruGemmPath::Int8 ? PersistentWidths{1, 4} : PersistentWidths{2, 8};
}

// Shared memory of one block, in bytes from the dynamic shared memory's start (each region 16-byte aligned):
//   R slice [3·U, H_p] Stored, row g·U + u = R's row g·H + j0 + u (rows of units past H are zero);
//   staging [NB, H_p] Stored: h_s (or q_reset_hidden) of every unit for the block's batch rows, stored codes
//     (q - h_offset);
//   both with rows persistent_smem_row_bytes apart: an odd number of 16-byte chunks (a row's codes, and 16 bytes
//     more when they are an even number of chunks), so that the 8 rows of an ldmatrix matrix (or the rows the dot
//     groups of a quarter-warp read) start in 8 different 4-bank groups; with rows H_p·sizeof(Stored) apart, a
//     multiple of 128 bytes whenever H_p is, all 8 rows of a matrix hit the same 4 banks (an 8-way conflict on every
//     fragment load);
//   acc [NB, 3·U] Acc: the block's R·h (R_n·(r ⊙ h) in the n rows of the linear_before_reset = 0 cell);
//   folds [U] GruUnitFolds (96 bytes each, qgru/fixed/gru_cell.h): B-1 / B-2's step-invariant constants of the
//     block's units (operand offset and zero-point compensation, bias, the channels' rescales), folded once per
//     launch (persistent_fill_folds) so that a step's cell reads them from shared memory, not ~12 global loads per
//     channel;
//   outbox [NB, U] Stored (ClusterDsmem only): the block's new codes of a phase, pushed to its cluster from there;
//   flag: 16 bytes, the wait's verdict thread 0 hands to the block (so every byte the kernel uses is in the plan).
// The staging region holds stage_buffers buffers of stage_bytes each: 1, or with ClusterDsmem 2 (h by parity) or 3
// (and the reset codes of the linear_before_reset = 0 cell).
struct PersistentSmemLayout {
  int64_t r_offset = 0, r_bytes = 0, stage_offset = 0, stage_bytes = 0, stage_buffers = 1, acc_offset = 0, acc_bytes = 0,
          folds_offset = 0, folds_bytes = 0, outbox_offset = 0, outbox_bytes = 0, flag_offset = 0, total_bytes = 0;
};

QGRU_HD constexpr int64_t persistent_align16(int64_t bytes) { return (bytes + 15) / 16 * 16; }
// Bytes from one R or staging row to the next in shared memory: an odd number of 16-byte chunks (H_p is a multiple
// of 16, so rows stay 16-byte aligned).
QGRU_HD constexpr int64_t persistent_smem_row_bytes(int64_t H_p, int64_t operand_bytes) {
  return H_p * operand_bytes + ((H_p * operand_bytes / 16) % 2 == 0 ? 16 : 0);
}

// stage_buffers: 1, or ClusterDsmem's persistent_stage_buffers (which also takes the outbox).
inline PersistentSmemLayout persistent_smem_layout(int64_t units_per_block, int64_t H_p, int64_t rows_per_block,
                                                   const PersistentWidths& w = {1, 4}, int64_t stage_buffers = 1) {
  PersistentSmemLayout s;
  const int64_t row_bytes = persistent_smem_row_bytes(H_p, w.operand_bytes);
  s.r_bytes = 3 * units_per_block * row_bytes;
  s.stage_offset = persistent_align16(s.r_offset + s.r_bytes);
  s.stage_bytes = rows_per_block * row_bytes;
  s.stage_buffers = stage_buffers;
  s.acc_offset = persistent_align16(s.stage_offset + stage_buffers * s.stage_bytes);
  s.acc_bytes = w.acc_bytes * rows_per_block * 3 * units_per_block;
  s.folds_offset = persistent_align16(s.acc_offset + s.acc_bytes);
  s.folds_bytes = static_cast<int64_t>(sizeof(GruUnitFolds)) * units_per_block;
  s.outbox_offset = persistent_align16(s.folds_offset + s.folds_bytes);
  s.outbox_bytes = stage_buffers > 1 ? w.operand_bytes * rows_per_block * units_per_block : 0;
  s.flag_offset = persistent_align16(s.outbox_offset + s.outbox_bytes);
  s.total_bytes = s.flag_offset + 16;
  return s;
}
// ClusterDsmem's staging buffers: h_s at parity(s) (0, 1), and the linear_before_reset = 0 cell's reset codes (2).
QGRU_HD constexpr int64_t persistent_stage_buffers(int phases_per_step) { return phases_per_step == 2 ? 3 : 2; }

struct PersistentGruPlan {
  bool persistent = false;
  std::string reason;  // why the cell takes the per-step path (empty when persistent)
  GruGemmPath path = GruGemmPath::Int8;
  int64_t H = 0, H_p = 0, N = 0, N_p = 0;  // H_p, N_p: the path's GEMM layout's (plan_gru_gemm, plan_gru_wide)
  int64_t units_per_block = 0, rows_per_block = 0;  // U, NB
  int64_t unit_blocks = 0, batch_blocks = 0, blocks = 0;  // ceil(H / U), ceil(N / NB), their product
  int threads = kPersistentThreads;
  int phases_per_step = 1;  // 2 for the linear_before_reset = 0 cell
  PersistentSmemLayout smem;
  PersistentSync sync = PersistentSync::Grid;
  int64_t cluster_blocks = 0;  // Cluster, ClusterDsmem: blocks a cluster (= unit_blocks); Grid: 0
  std::string sync_note;       // Grid when the tuning asked for Cluster: why the cluster barrier was refused
  // Takes the per-step path for `why`; the cluster's refusal, when the plan carries one, stays in the reason after it
  // (a run asked for clusters then says why neither way of meeting took the cell).
  void refuse(const std::string& why) {
    persistent = false;
    reason = sync_note.empty() ? why : why + "; " + sync_note;
    sync_note.clear();
  }
  // "persistent (B blocks x U units x NB rows, smem S)" (", 16-bit" before the parenthesis closes on the wide path;
  // then ", cluster barrier of C blocks", or ", grid barrier: <why not the cluster's>" when that was asked for)
  // or "per-step: <reason>"
  std::string describe() const {
    if (!persistent) return "per-step: " + reason;
    std::string text = "persistent (" + std::to_string(blocks) + " blocks x " + std::to_string(units_per_block) +
                       " units x " + std::to_string(rows_per_block) + " rows, smem " + std::to_string(smem.total_bytes) +
                       (path == GruGemmPath::Int8 ? "" : ", 16-bit");
    if (persistent_in_clusters(sync)) {
      text += ", cluster barrier of " + std::to_string(cluster_blocks) + " blocks" +
              (persistent_dsmem(sync) ? ", exchange in shared memory" : "");
    }
    if (!sync_note.empty()) text += ", grid barrier: " + sync_note;
    return text + ")";
  }
};

// The plan for a cell of hidden size H at batch N on `device` whose operands take `path`, for one way of meeting
// (persistent_gru_plan_for_sync below; plan_persistent_gru is the entry).
// Grid: persistent when the device launches cooperatively, the blocks fit one per multiprocessor and one block's
// shared memory fits; else the per-step path with the reason. U: tuning's, or the smallest entry of
// kPersistentUnitChoices of at least kPersistentDefaultMinUnits whose unit slices fit the multiprocessors.
// Cluster: as Grid, but U's unit slices must also fit one cluster (device.max_cluster_blocks), and the blocks need not
// all be resident at once (clusters are independent); no cooperative launch.
// NB: tuning's (at most N), or the fewest rows that spread the batch over the multiprocessors the unit slices leave
// (NB = N when they leave none). The occupancy check of the compiled kernel at the plan's shared memory comes after
// (persistent_occupancy_refusal, persistent_cluster_occupancy_refusal).
inline PersistentGruPlan persistent_gru_plan_for_sync(GruGemmPath path, int64_t H, int64_t N, bool reset_before_linear,
                                                      const PersistentDevice& device, const PersistentGruTuning& tuning,
                                                      PersistentSync sync) {
  PersistentGruPlan plan;
  plan.path = path;
  plan.H = H;
  plan.N = N;
  plan.sync = sync;
  plan.H_p = pad_to_multiple(H, path == GruGemmPath::Int8 ? kInt8GemmMultiple : kWideTile);
  plan.N_p = path == GruGemmPath::Int8 ? pad_to_multiple(N, kInt8GemmMultiple) : N;
  plan.phases_per_step = reset_before_linear ? 2 : 1;
  const bool cluster = persistent_in_clusters(sync);
  const std::string shape = " (H=" + std::to_string(H) + " N=" + std::to_string(N) + ")";
  auto refuse = [&](const std::string& why) {
    plan.persistent = false;
    plan.reason = why + shape;
    return plan;
  };
  if (H < 1 || N < 1) return refuse("every size must be at least 1");
  if (path == GruGemmPath::Int8 && plan.H_p > kInt8GemmMaxK) {
    return refuse("a reduction this long could overflow dp4a's int32 accumulation");
  }
  if (cluster && device.max_cluster_blocks < 1) return refuse("the device (or the kernel image it runs) has no cluster launch");
  if (!cluster && !device.cooperative_launch) return refuse("the device does not support cooperative launches");
  if (device.sm_count < 1) return refuse("the device reports no multiprocessors");
  // The most unit slices a shape may have: one cluster's blocks, or the multiprocessors (one block each, all resident).
  const int64_t most_unit_blocks =
      cluster && device.max_cluster_blocks < device.sm_count ? device.max_cluster_blocks : device.sm_count;
  if (tuning.units_per_block != 0) {
    bool listed = false;
    for (int u : kPersistentUnitChoices) listed = listed || u == tuning.units_per_block;
    if (!listed) return refuse("units per block " + std::to_string(tuning.units_per_block) + " is not a configuration");
    plan.units_per_block = tuning.units_per_block;
  } else {
    for (int u : kPersistentUnitChoices) {
      if (u < kPersistentDefaultMinUnits || (H + u - 1) / u > most_unit_blocks) continue;
      plan.units_per_block = u;
      break;
    }
    if (plan.units_per_block == 0) {
      return refuse(cluster ? "H needs more unit slices than a cluster's " + std::to_string(device.max_cluster_blocks) +
                                  " blocks"
                            : std::string("H needs more blocks than the device has multiprocessors"));
    }
  }
  plan.unit_blocks = (H + plan.units_per_block - 1) / plan.units_per_block;
  if (cluster && plan.unit_blocks > device.max_cluster_blocks) {
    return refuse(std::to_string(plan.unit_blocks) + " unit slices exceed a cluster's " +
                  std::to_string(device.max_cluster_blocks) + " blocks");
  }
  if (tuning.rows_per_block < 0) return refuse("rows per block " + std::to_string(tuning.rows_per_block) + " is negative");
  if (tuning.rows_per_block != 0) {
    plan.rows_per_block = tuning.rows_per_block < N ? tuning.rows_per_block : N;
  } else {
    const int64_t spare = device.sm_count / plan.unit_blocks;  // batch slices the multiprocessors leave room for
    const int64_t slices = spare < 1 ? 1 : spare < N ? spare : N;
    plan.rows_per_block = (N + slices - 1) / slices;
  }
  plan.batch_blocks = (N + plan.rows_per_block - 1) / plan.rows_per_block;
  plan.blocks = plan.unit_blocks * plan.batch_blocks;
  if (!cluster && plan.blocks > device.sm_count) {
    return refuse(std::to_string(plan.blocks) + " blocks exceed the " + std::to_string(device.sm_count) + " multiprocessors");
  }
  // A launch's grid is at most 2^31 - 1 blocks (x dimension).
  if (plan.blocks > (int64_t{1} << 31) - 1) return refuse(std::to_string(plan.blocks) + " blocks exceed a launch's grid");
  plan.cluster_blocks = cluster ? plan.unit_blocks : 0;
  plan.smem = persistent_smem_layout(plan.units_per_block, plan.H_p, plan.rows_per_block, persistent_widths(path),
                                     persistent_dsmem(sync) ? persistent_stage_buffers(plan.phases_per_step) : 1);
  if (plan.smem.total_bytes >= kPersistentMaxSmemBytes) {
    return refuse("a block's shared memory (" + std::to_string(plan.smem.total_bytes) +
                  " bytes) reaches 2^31, past the kernel's 32-bit index math");
  }
  if (plan.smem.total_bytes > device.smem_optin_bytes) {
    return refuse("a block's shared memory (" + std::to_string(plan.smem.total_bytes) + " bytes: R slice, h staging, " +
                  "accumulators, folded constants) exceeds the device's " + std::to_string(device.smem_optin_bytes));
  }
  plan.persistent = true;
  return plan;
}

// The refusal when the compiled kernel, at the plan's shared memory, cannot keep every block resident (a spinning
// barrier with a block that never starts would deadlock); "" when blocks_per_sm · sm_count >= blocks.
inline std::string persistent_occupancy_refusal(const PersistentGruPlan& plan, int blocks_per_sm, int sm_count) {
  if (int64_t{blocks_per_sm} * sm_count >= plan.blocks) return "";
  return "occupancy: " + std::to_string(blocks_per_sm) + " resident block(s) per multiprocessor x " +
         std::to_string(sm_count) + " < " + std::to_string(plan.blocks) + " blocks at " +
         std::to_string(plan.smem.total_bytes) + " bytes of shared memory";
}
// The Cluster plan's: refused when not one cluster of the plan's blocks can be resident at its shared memory
// (cudaOccupancyMaxActiveClusters said `active_clusters`); "" otherwise (clusters beyond the resident ones wait their
// turn: they never wait for one another).
inline std::string persistent_cluster_occupancy_refusal(const PersistentGruPlan& plan, int active_clusters) {
  if (active_clusters >= 1) return "";
  return "occupancy: no cluster of " + std::to_string(plan.cluster_blocks) + " blocks at " +
         std::to_string(plan.smem.total_bytes) + " bytes of shared memory can be resident";
}

// The Cluster plan fitted to what the device keeps resident: GruCellCuda's plan when tuning.sync is Cluster.
// active_clusters(plan): the clusters of `plan` that can be resident at once (cudaOccupancyMaxActiveClusters; 0 when
// it refuses). Clusters of up to device.max_cluster_blocks blocks, then of up to 8 (the portable size) when no larger
// one fits. Where the tuning leaves the rows per block to the plan and fewer clusters fit at once than the plan has
// batch slices, the rows are raised until one wave holds every slice (a second wave would double the call), if that
// plan still fits; else the plan runs in waves. Where no cluster plan fits: the Grid plan, the first refusal in its
// sync_note (the Grid plan's occupancy is the caller's check, as for plan_persistent_gru; a caller refusing it calls
// refuse, which keeps the note). Where the Grid plan is refused too, its reason and then the cluster's.
template <class ActiveClusters>
PersistentGruPlan fit_persistent_clusters(GruGemmPath path, int64_t H, int64_t N, bool reset_before_linear,
                                          const PersistentDevice& device, const PersistentGruTuning& tuning,
                                          const ActiveClusters& active_clusters) {
  std::string why;  // the first refusal
  const int sizes[] = {device.max_cluster_blocks, 8};
  for (int most : sizes) {
    if (most == 8 && device.max_cluster_blocks <= 8) continue;  // tried already, or no cluster launch
    PersistentDevice d = device;
    d.max_cluster_blocks = most;
    const PersistentGruPlan p = persistent_gru_plan_for_sync(path, H, N, reset_before_linear, d, tuning, tuning.sync);
    const int active = p.persistent ? active_clusters(p) : 0;
    if (!p.persistent || active < 1) {
      if (why.empty()) why = p.persistent ? persistent_cluster_occupancy_refusal(p, active) : p.reason;
      continue;
    }
    if (tuning.rows_per_block == 0 && active < p.batch_blocks) {
      PersistentGruTuning one_wave = tuning;
      one_wave.rows_per_block = static_cast<int>((N + active - 1) / active);  // <= N: fits int (N's slices do)
      const PersistentGruPlan q =
          persistent_gru_plan_for_sync(path, H, N, reset_before_linear, d, one_wave, tuning.sync);
      if (q.persistent && active_clusters(q) >= q.batch_blocks) return q;
    }
    return p;
  }
  PersistentGruPlan grid = persistent_gru_plan_for_sync(path, H, N, reset_before_linear, device, tuning, PersistentSync::Grid);
  grid.sync_note = "the cluster barrier was refused: " + why;
  if (!grid.persistent) grid.refuse(grid.reason);  // both reasons
  return grid;
}

// The plan for tuning.sync without asking a device's occupancy: Grid as persistent_gru_plan_for_sync says; Cluster and
// ClusterDsmem as fit_persistent_clusters says when every cluster of a plan can be resident at once (the shape's
// limits alone: a Cluster plan where one is persistent, else the Grid plan with the cluster's refusal in sync_note,
// so a run asked for clusters still takes the persistent kernel where the grid barrier can, and says why it did).
inline PersistentGruPlan plan_persistent_gru(GruGemmPath path, int64_t H, int64_t N, bool reset_before_linear,
                                             const PersistentDevice& device, const PersistentGruTuning& tuning = {}) {
  if (!persistent_in_clusters(tuning.sync)) {
    return persistent_gru_plan_for_sync(path, H, N, reset_before_linear, device, tuning, PersistentSync::Grid);
  }
  const auto every_cluster_resident = [](const PersistentGruPlan& p) { return static_cast<int>(p.batch_blocks); };
  return fit_persistent_clusters(path, H, N, reset_before_linear, device, tuning, every_cluster_resident);
}

// The device workspace of one persistent run (GruCellCuda), the layout of the path's GEMMs (plan_gru_gemm or
// plan_gru_wide), regions in this order: x for every step [T·N_p, C_p] Stored, the two h exchange buffers
// [2][N_p, H_p] Stored (buffer 0 takes the packed h0), gemm_x [T·N_p, rows_p] Acc, the state [N, H] int32, the output
// [T, N, H] int32, the reset exchange buffer [N_p, H_p] Stored (the linear_before_reset = 0 cell; 0 bytes otherwise),
// and the synchronization words (the u64 arrival counter, then three int32 error words).
inline constexpr int64_t kPersistentSyncBytes = 32;
inline WorkspaceCarve persistent_gru_workspace(const GruGemmLayout& l, bool reset_before_linear) {
  return carve_workspace({l.x_bytes, 2 * l.h_bytes, l.gemm_x_bytes, l.state_bytes, l.output_bytes,
                          reset_before_linear ? l.h_bytes : 0, kPersistentSyncBytes});
}
// The path's GEMM layout (plan_gru_gemm for Int8, plan_gru_wide for Wide16).
inline GruGemmLayout persistent_gemm_layout(GruGemmPath path, int64_t H, int64_t C, int64_t N, int64_t T) {
  return path == GruGemmPath::Int8 ? plan_gru_gemm(H, C, N, T) : plan_gru_wide(H, C, N, T);
}

// ---- the slice a block owns and the smem rows it loads ----

struct PersistentSlice {
  int64_t j0 = 0;     // first unit
  int64_t units = 0;  // owned units (the last unit slice may hold fewer than U)
  int64_t n0 = 0;     // first batch row
  int64_t rows = 0;   // owned batch rows (the last batch slice may hold fewer than NB)
};
QGRU_HD PersistentSlice persistent_block_slice(int64_t H, int64_t units_per_block, int64_t N, int64_t rows_per_block,
                                               int64_t block) {
  const int64_t unit_blocks = (H + units_per_block - 1) / units_per_block;
  const int64_t j0 = block % unit_blocks * units_per_block, n0 = block / unit_blocks * rows_per_block;
  const int64_t j_end = j0 + units_per_block < H ? j0 + units_per_block : H;
  const int64_t n_end = n0 + rows_per_block < N ? n0 + rows_per_block : N;
  return {j0, j_end > j0 ? j_end - j0 : 0, n0, n_end > n0 ? n_end - n0 : 0};
}
// R's packed row (int8 [rows_p, H_p], row c = g·H + j) that slice row g·U + u holds; -1 for a unit past H (zeros).
QGRU_HD int64_t persistent_r_source_row(int64_t H, int64_t units_per_block, const PersistentSlice& slice, int64_t slice_row) {
  const int64_t g = slice_row / units_per_block, u = slice_row % units_per_block;
  return u < slice.units ? g * H + slice.j0 + u : -1;
}

// The cluster of block b (blocks [c·C, (c+1)·C) form cluster c, C = plan.cluster_blocks: the hardware's grouping of a
// 1-D grid), and the batch rows its blocks exchange: those of its blocks' batch slices (persistent_block_slice), batch
// slice c's when C = unit_blocks, as the plan makes it (any other C, as the emulation's fault test sets, gives the
// rows its blocks actually span). Grid: one group of every block and every padded row.
struct PersistentSyncGroup {
  int64_t index, first_block, blocks, n0, rows;
};
inline PersistentSyncGroup persistent_sync_group(const PersistentGruPlan& plan, int64_t block) {
  if (plan.sync == PersistentSync::Grid) return {0, 0, plan.blocks, 0, plan.N_p};
  const int64_t c = block / plan.cluster_blocks, first = c * plan.cluster_blocks;
  const int64_t last = first + plan.cluster_blocks - 1 < plan.blocks - 1 ? first + plan.cluster_blocks - 1 : plan.blocks - 1;
  const PersistentSlice a = persistent_block_slice(plan.H, plan.units_per_block, plan.N, plan.rows_per_block, first);
  const PersistentSlice z = persistent_block_slice(plan.H, plan.units_per_block, plan.N, plan.rows_per_block, last);
  return {c, first, plan.cluster_blocks, a.n0, z.n0 + z.rows - a.n0};
}

// ---- the step protocol ----

// The exchange buffer (0 or 1) that holds h_s, read at step s; step s writes h_{s+1} into parity(s + 1).
QGRU_HD int persistent_h_parity(int64_t step) { return static_cast<int>(step & 1); }
// Phase k of a launch: its step, input time t and part (0: A / the only one, 1: B), and the slice rows it multiplies:
// all 3U (linear_before_reset = 1), the z and r rows [0, 2U) (part A) or the n rows [2U, 3U) (part B). Phases run
// 0, 1, 2, ... in order, phases_per_step of them per step.
struct PersistentPhaseInfo {
  int64_t step, t;
  int part;
  int64_t first_row, rows;
};
// phase >= 0 and phases_per_step 1 or 2 (the plan's), so the step and part are a shift and a mask (phase / 2 and
// phase % 2 for two; the kernel calls this every phase and would otherwise divide 64-bit values).
QGRU_HD PersistentPhaseInfo persistent_phase_info(int64_t phase, int phases_per_step, int64_t T, bool reverse,
                                                  int64_t units_per_block) {
  const bool two = phases_per_step == 2;
  const int64_t step = two ? phase >> 1 : phase;
  const int part = two ? static_cast<int>(phase & 1) : 0;
  const int64_t U = units_per_block;
  const int64_t first_row = part == 1 ? 2 * U : 0, rows = phases_per_step == 1 ? 3 * U : part == 0 ? 2 * U : U;
  return {step, reverse ? T - 1 - step : step, part, first_row, rows};
}
// Arrivals on the counter before phase k may start: every block published phases 0 .. k-1.
QGRU_HD uint64_t persistent_arrivals_before(int64_t phase, int64_t blocks) {
  return static_cast<uint64_t>(phase) * static_cast<uint64_t>(blocks);
}
// The error word's codes (cuda/src/persistent_gru.cu): 0 none; kPersistentTimeout a wait ran past the limit (then
// words 1, 2: the block, the phase); kPersistentWrongCluster a Cluster kernel launched in clusters of another size
// (words 1, 2: the block, the size it saw).
inline constexpr int kPersistentTimeout = 1;
inline constexpr int kPersistentWrongCluster = 2;
inline constexpr int kPersistentErrorWords = 3;  // the code, then its two details

// ---- the arithmetic ----

// dp4a: c + Σ_{i<4} a.byte_i · b.byte_i, bytes signed. |each product| <= 2^14; see the header's overflow note.
QGRU_HD int32_t persistent_dp4a(int32_t a, int32_t b, int32_t c) {
#if defined(__CUDA_ARCH__)
  return __dp4a(a, b, c);
#else
  for (int i = 0; i < 4; ++i) {
    const int32_t ai = static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * i) & 0xFFu);
    const int32_t bi = static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * i) & 0xFFu);
    c += ai * bi;
  }
  return c;
#endif
}

// acc + the products of one 4-byte word pair. Int8: four int8 products by dp4a; Wide16: two int16 products, each
// exact in int32, added in int64.
template <class Stored, class Acc>
QGRU_HD Acc persistent_word_dot(int32_t a_word, int32_t b_word, Acc acc) {
  if constexpr (sizeof(Stored) == 1) {
    return persistent_dp4a(a_word, b_word, acc);
  } else {
    const auto a = static_cast<uint32_t>(a_word), b = static_cast<uint32_t>(b_word);
    const int32_t lo = static_cast<int32_t>(static_cast<int16_t>(a & 0xFFFFu)) * static_cast<int16_t>(b & 0xFFFFu);
    const int32_t hi = static_cast<int32_t>(static_cast<int16_t>(a >> 16)) * static_cast<int16_t>(b >> 16);
    return acc + static_cast<Acc>(lo) + static_cast<Acc>(hi);
  }
}

// The 4 words at `at` (16-byte aligned): one 128-bit load on the device.
struct PersistentChunk {
  int32_t w0, w1, w2, w3;
};
QGRU_HD PersistentChunk persistent_load_chunk(const int32_t* at) {
#if defined(__CUDA_ARCH__)
  const int4 v = *reinterpret_cast<const int4*>(at);
  return {v.x, v.y, v.z, v.w};
#else
  return {at[0], at[1], at[2], at[3]};
#endif
}

// One lane's share of the dot product of two rows of `words` 4-byte words (H_p·sizeof(Stored) / 4, a multiple of 4:
// H_p·sizeof(Stored) is a multiple of 16, and both rows start 16-byte aligned): the 16-byte chunks lane,
// lane + lanes, ... of the rows. The lanes of a dot sum their shares (the kernel with shuffles, the emulation in a
// loop). Two accumulators, even and odd words, halve the dependent chain of dp4a's; exact in Acc in any order, each
// partial sum being a sum over some of the products (see the header's bounds).
template <class Stored, class Acc>
// The chunk index is int32: words·4 bytes lie in one block's shared memory, < kPersistentMaxSmemBytes (the plan).
QGRU_HD Acc persistent_dot_share(const int32_t* a_words, const int32_t* b_words, int64_t words, int lane, int lanes) {
  Acc even = 0, odd = 0;
  const auto chunks = static_cast<int32_t>(words / 4);
  for (int32_t c = lane; c < chunks; c += lanes) {
    const PersistentChunk a = persistent_load_chunk(a_words + 4 * c), b = persistent_load_chunk(b_words + 4 * c);
    even = persistent_word_dot<Stored, Acc>(a.w0, b.w0, even);
    odd = persistent_word_dot<Stored, Acc>(a.w1, b.w1, odd);
    even = persistent_word_dot<Stored, Acc>(a.w2, b.w2, even);
    odd = persistent_word_dot<Stored, Acc>(a.w3, b.w3, odd);
  }
  return even + odd;
}

// A split walk: a thread visits positions i = first, first + stride, ... of a range of [major][count] (minor =
// i mod count, major = i / count) without dividing per position. persistent_split_stride splits first and stride
// once (per launch, or per kind of phase); each step adds them with one carry of minor into major (minor +
// step.minor < 2·count, so one conditional subtraction). The walk has passed the range once major reaches its rows.
// Three walks use it:
//   a dot group's products of a phase: p = g, g + groups, ..., minor = p mod rows_in_phase (the slice row
//     first_row + minor), major = p / rows_in_phase (staged row n, the block's batch row n0 + n; the accumulator
//     lands at acc[n·3U + slice row]);
//   a thread's staging chunks: chunk tid, tid + threads, ..., minor the 16-byte chunk of a row, major the row;
//   a thread's cell elements (persistent_element_stride): minor the unit, major the batch row.
// int32: every position indexes one block's shared memory or accumulators (< 2^31 bytes, the plan).
struct PersistentSplitWalk {
  int32_t minor, major;
};
struct PersistentSplitStride {
  PersistentSplitWalk start;  // (first mod count, first / count)
  PersistentSplitWalk step;   // (stride mod count, stride / count)
};
QGRU_HD PersistentSplitStride persistent_split_stride(int32_t first, int32_t stride, int32_t count) {
  return {{first % count, first / count}, {stride % count, stride / count}};
}
// first ? a : b, field by field (scalar selects keep both strides in registers; a select of whole structs made the
// compiler put them in local memory).
QGRU_HD PersistentSplitStride persistent_split_stride_select(bool first, const PersistentSplitStride& a,
                                                            const PersistentSplitStride& b) {
  return {{first ? a.start.minor : b.start.minor, first ? a.start.major : b.start.major},
          {first ? a.step.minor : b.step.minor, first ? a.step.major : b.step.major}};
}
QGRU_HD void persistent_split_walk_advance(PersistentSplitWalk& w, const PersistentSplitStride& s, int32_t count) {
  w.minor += s.step.minor;
  w.major += s.step.major;
  if (w.minor >= count) {
    w.minor -= count;
    ++w.major;
  }
}

// ---- int8: a phase's dot products as one small GEMM on the tensor cores ----
//
// A phase's products acc[n][row] = Σ_k R[first_row + row][k] · h[n][k] (rows_in_phase x batch_rows, K = H_p) are the
// product of the block's R rows (row-major A, [rows, H_p] int8 in shared memory) and its staged h rows (k contiguous
// for each batch row: column-major B), exactly the operands of mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32
// (PTX ISA, "Matrix fragments for mma.m16n8k32"): tiles of 16 rows x 8 batch rows, k32 steps, the fragments loaded
// with ldmatrix (8-bit data read as b16: a fragment's 4 bytes at k = 4·(lane % 4) .. + 3 of row lane / 4 are the
// b16 pair ldmatrix gives that lane), a last m16n8k16 step where H_p % 32 == 16. Exact: integer products summed in
// int32 under the bound dp4a's sums obey (|Σ| <= H_p·2^14 < 2^31), in any order; so the k range of a tile may be
// split among warps whose int32 partials are added into the accumulators with shared-memory atomics (exact and
// commutative: the same result in any order). The int8 kernel takes this path; the 16-bit one keeps the lanes'
// dot products above. Rows past the phase's rows and batch rows past the block's are computed from a valid row
// (row 0 of the phase, batch row 0) and never stored.
inline constexpr int kPersistentMmaWarps = kPersistentThreads / 32;
struct PersistentMmaPlan {
  int32_t m_tiles = 0, n_tiles = 0, tiles = 0;  // 16-row tiles of the phase's rows, 8-wide tiles of the batch rows
  int32_t k32 = 0;                              // whole k32 steps of H_p
  bool tail16 = false;                          // H_p % 32 == 16: one m16n8k16 step ends the last split
  int32_t split_shift = 0;                      // each tile's k steps split among 1 << split_shift warps
};
// The split spreads a phase's few tiles over the block's warps (at N = 1, U = 16: 3 tiles, split in 2) as long as
// every split keeps a k32 step.
QGRU_HD PersistentMmaPlan persistent_mma_plan(int32_t rows_in_phase, int32_t batch_rows, int32_t H_p) {
  PersistentMmaPlan p;
  p.m_tiles = (rows_in_phase + 15) / 16;
  p.n_tiles = (batch_rows + 7) / 8;
  p.tiles = p.m_tiles * p.n_tiles;
  p.k32 = H_p / 32;
  p.tail16 = H_p % 32 != 0;  // H_p is a multiple of 16
  while ((p.tiles << (p.split_shift + 1)) <= kPersistentMmaWarps && (1 << (p.split_shift + 1)) <= p.k32) ++p.split_shift;
  return p;
}
// Work item `item` (a warp takes items warp, warp + kPersistentMmaWarps, ...): its tile (mt, nt) and its k32 steps
// [k_begin, k_end), plus the k16 tail for the last split.
struct PersistentMmaItem {
  int32_t mt, nt, k_begin, k_end;
  bool tail16;
};
QGRU_HD PersistentMmaItem persistent_mma_item(const PersistentMmaPlan& p, int32_t item) {
  const int32_t tile = item >> p.split_shift, split = item & ((1 << p.split_shift) - 1);
  // Up to 8 batch rows a block (N = 1 among them) have one batch tile: no division for them.
  int32_t mt = tile;
  if (p.n_tiles != 1) mt = tile / p.n_tiles;
  // (split · k32) >> shift: the splits' boundaries, each split a near-equal share of the k32 steps
  return {mt, tile - mt * p.n_tiles, (split * p.k32) >> p.split_shift, ((split + 1) * p.k32) >> p.split_shift,
          p.tail16 && split == (1 << p.split_shift) - 1};
}
// Byte offsets lane `lane` hands ldmatrix, from the start of the R region and of the staging region (row_bytes: the
// rows' stride, persistent_smem_row_bytes). A (x4 for k32,
// x2 for the k16 tail): lanes 0-7 rows 0-7 at k0, 8-15 rows 8-15 at k0, 16-23 rows 0-7 at k0 + 16, 24-31 rows 8-15 at
// k0 + 16 of the tile; B (x2, x1 for the tail): lanes 0-7 batch rows 0-7 at k0, lanes 8-15 at k0 + 16.
QGRU_HD int32_t persistent_mma_a_offset(int32_t first_row, int32_t rows_in_phase, int32_t mt, int lane, int32_t row_bytes,
                                        int32_t k0) {
  int32_t row = 16 * mt + lane % 16;
  if (row >= rows_in_phase) row = 0;  // a valid row; its results are never stored
  return (first_row + row) * row_bytes + k0 + 16 * (lane / 16);
}
QGRU_HD int32_t persistent_mma_b_offset(int32_t batch_rows, int32_t nt, int lane, int32_t row_bytes, int32_t k0) {
  int32_t n = 8 * nt + lane % 8;
  if (n >= batch_rows) n = 0;
  return n * row_bytes + k0 + 16 * ((lane / 8) % 2);
}
// Accumulator element e (0..3) of lane `lane` in tile (mt, nt): its row in the phase and its batch row.
struct PersistentMmaAt {
  int32_t row, n;
};
QGRU_HD PersistentMmaAt persistent_mma_acc_at(int32_t mt, int32_t nt, int lane, int e) {
  return {16 * mt + lane / 4 + 8 * (e / 2), 8 * nt + 2 * (lane % 4) + e % 2};
}

// The cell on unit j = slice.j0 + u of row n at input time t (a step of the linear_before_reset = 1 cell, or phase B
// of the other): the stored accumulators of the step's W·x (gemm_x_t [N_p, ldc] from the B-1 GEMM) and the block's
// accumulators of row n (acc_n [3U] Acc, gate g of unit u at g·U + u), gru_cell_element_folded with the unit's folds
// (persistent_fill_folds: the same codes as gru_cell_element on the raw accumulators), and the new state in all three
// places:
// h_state [N, H] int32, the exchange buffer h_next [N_p, H_p] (stored code q - h_offset; a padded step copies the
// old code, the buffer being the other parity) and out_t [N, H] (zp_h on a padded step, as gru_step_element_t).
// Returns the stored code (for ClusterDsmem's outbox; there h_next is null: no phase reads the exchange buffer).
template <class Stored, class Acc>
QGRU_HD Stored persistent_step_element(const GruCellParamsView& view, const GruUnitFolds& folds, const Acc* gemm_x_t,
                                     int64_t ldc, const Acc* acc_n, int64_t units_per_block, int32_t h_offset,
                                     int32_t* h_state, Stored* h_next, int64_t H_p, int32_t* out_t, int64_t n, int64_t u,
                                     int32_t j, const int32_t* lengths, int64_t t) {
  const int64_t H = view.hidden_size;
  const bool padding = lengths != nullptr && t >= lengths[n];
  int32_t q_h = h_state[n * H + j];
  if (!padding) {
    int64_t stored_x[3], stored_h[3];
    for (int g = 0; g < 3; ++g) {
      stored_x[g] = gemm_x_t[n * ldc + g * H + j];
      // the n rows of the linear_before_reset = 0 cell hold R_n·(r ⊙ h), q_reset_hidden stored like h
      stored_h[g] = acc_n[g * units_per_block + u];
    }
    q_h = gru_cell_element_folded(view, folds, stored_x, stored_h, q_h);
    h_state[n * H + j] = q_h;
  }
  // Fits Stored: h's code range passed the path's operand offset check with this offset (plan_gru_operands).
  const auto stored = static_cast<Stored>(q_h - h_offset);
  if (h_next != nullptr) h_next[n * H_p + j] = stored;
  out_t[n * H + j] = padding ? view.h.zp : q_h;
  return stored;
}

// Phase A of the linear_before_reset = 0 cell for unit j (acc_n as above): q_reset_hidden from the r channel's accumulators and the old
// state, stored as q - h_offset at reset_out[n·H_p + j] (padding rows too: their phase B result is not used).
// gru_cell_reset_hidden_folded with the unit's folds (the same code as gru_cell_reset_hidden on the raw accumulators).
// Returns the stored code (for ClusterDsmem's outbox; there reset_out is null: no phase reads the exchange buffer).
template <class Stored, class Acc>
QGRU_HD Stored persistent_reset_hidden_element(const GruCellParamsView& view, const GruUnitFolds& folds, const Acc* gemm_x_t,
                                             int64_t ldc, const Acc* acc_n, int64_t units_per_block, int32_t h_offset,
                                             const int32_t* h_state, Stored* reset_out, int64_t H_p, int64_t n, int64_t u,
                                             int32_t j) {
  const int32_t q_reset_hidden =
      gru_cell_reset_hidden_folded(view, folds, gemm_x_t[n * ldc + view.hidden_size + j], acc_n[units_per_block + u],
                                   h_state[n * view.hidden_size + j]);
  // Fits Stored: q_reset_hidden lies in h's code range.
  const auto stored = static_cast<Stored>(q_reset_hidden - h_offset);
  if (reset_out != nullptr) reset_out[n * H_p + j] = stored;
  return stored;
}

// A thread's elements of a block's slice (element i: unit u = i mod units, batch row n_local = i / units): a split
// walk (minor u, major n_local) from the thread's first element by the block's threads, split once per launch.
// units == 0 (a slice past H, which the plan never makes) starts past the end: the walk visits nothing.
QGRU_HD PersistentSplitStride persistent_element_stride(const PersistentSlice& slice, int64_t first, int64_t stride) {
  if (slice.units < 1) return {{0, static_cast<int32_t>(slice.rows)}, {0, 1}};
  return persistent_split_stride(static_cast<int32_t>(first), static_cast<int32_t>(stride), static_cast<int32_t>(slice.units));
}

// ---- one phase of one block: what the kernel and the emulation both run ----

// The global memory of one launch (device pointers in the kernel, host vectors in the emulation) and its sizes.
template <class Stored, class Acc>
struct PersistentBuffers {
  const Acc* gemm_x = nullptr;       // B-1 for every step [T·N_p, rows_p] (row t·N_p + n)
  Stored* h_exchange = nullptr;      // [2][N_p, H_p] stored h codes, buffer 0 holding h0 at the start
  Stored* reset_exchange = nullptr;  // [N_p, H_p] q_reset_hidden (linear_before_reset = 0 cell)
  int32_t* h_state = nullptr;        // [N, H]
  int32_t* out = nullptr;            // [T, N, H] by input time
  const int32_t* lengths = nullptr;  // [N] or null
  int64_t T = 0, N = 0, N_p = 0, H_p = 0, rows_p = 0, units_per_block = 0;
  int32_t x_offset = 0, h_offset = 0;
  int phases_per_step = 1;
  bool reverse = false;
};

// The buffers of one launch of `plan` over T steps of the path's layout `l` (persistent_gemm_layout), from the
// pointers the caller allocated (the device workspace, or the emulation's vectors).
template <class Stored, class Acc>
PersistentBuffers<Stored, Acc> persistent_buffers(const PersistentGruPlan& plan, const GruGemmLayout& l, int64_t T,
                                                  bool reverse, int32_t x_offset, int32_t h_offset, const Acc* gemm_x,
                                                  Stored* h_exchange, Stored* reset_exchange, int32_t* h_state,
                                                  int32_t* out, const int32_t* lengths) {
  // In the order of PersistentBuffers' members.
  return {gemm_x, h_exchange, reset_exchange, h_state, out, lengths, T, plan.N, l.N_p, l.H_p, l.rows_p,
          plan.units_per_block, x_offset, h_offset, plan.phases_per_step, reverse};
}

// ClusterDsmem: the staging buffer (persistent_stage_buffers) phase `ph` reads, and the one it pushes its codes into
// (its h_{step+1} at parity(step + 1), or part A's reset codes into buffer 2).
QGRU_HD int persistent_stage_buffer(const PersistentPhaseInfo& ph) { return ph.part == 1 ? 2 : persistent_h_parity(ph.step); }
QGRU_HD int persistent_push_buffer(const PersistentPhaseInfo& ph, int phases_per_step) {
  return phases_per_step == 2 && ph.part == 0 ? 2 : persistent_h_parity(ph.step + 1);
}

// ClusterDsmem's pushes of one phase (persistent_phase_pushes; the kernel's threads and the emulation walk items
// 0 .. items - 1 with persistent_push_stride, each at persistent_push_at): every block of a cluster writes its outbox ([rows, U] Stored: its units' codes of
// each of its batch rows) into row n, codes [j0, min(j0 + U, H_p)), of the push buffer of every block of the cluster
// (itself too), in chunks of 16 bytes (8 where U codes are not a multiple of 16 bytes: U = 8 int8 codes). The last
// unit slice may reach past H_p (H = 65 in slices of 32: H_p = 80), and a staging row holds H_p codes: its pushes
// stop there. Chunks tile the pushed codes exactly: H_p and j0 are multiples of 16 (8 for U = 8) codes' bytes (H_p of
// 16 codes, or of the wide tile; j0 of U). Item i of peers · rows · chunks_per_row: peer i / (rows · chunks_per_row),
// then row, then chunk (persistent_push_split). Offsets in bytes, int32: the outbox and a block's shared memory are
// far below 2^31 (kPersistentMaxSmemBytes).
struct PersistentPushes {
  int32_t chunk_bytes, chunks_per_row, items_per_peer, items;
  int32_t rows, peers;  // the block's batch rows; the blocks of its cluster
  int32_t units_bytes;  // an outbox row: U codes
  int32_t push_at;      // the push buffer's offset: stage_offset + persistent_push_buffer · stage_bytes
  int32_t row_bytes;    // the staging rows' stride (persistent_smem_row_bytes)
  int32_t j0_bytes;     // the block's first unit's byte in a staging row (j0 · operand bytes)
};
// The push buffer's offset in a block's shared memory for phase `ph` (PersistentPushes::push_at): the only part of a
// block's pushes that changes from phase to phase.
QGRU_HD int32_t persistent_push_offset(const PersistentPhaseInfo& ph, int phases_per_step, int64_t stage_offset,
                                       int64_t stage_bytes) {
  return static_cast<int32_t>(stage_offset + persistent_push_buffer(ph, phases_per_step) * stage_bytes);
}
// One block's pushes of phase `ph` (its slice's rows and units, to `peers` blocks; the plan's stage_offset and
// stage_bytes).
QGRU_HD PersistentPushes persistent_phase_pushes(const PersistentPhaseInfo& ph, int phases_per_step,
                                                 const PersistentSlice& slice, int64_t units_per_block,
                                                 int64_t operand_bytes, int64_t H_p, int64_t peers,
                                                 int64_t stage_offset, int64_t stage_bytes) {
  // the codes a staging row takes
  const int64_t units = slice.j0 + units_per_block < H_p ? units_per_block : H_p - slice.j0;
  const auto units_bytes = static_cast<int32_t>(units_per_block * operand_bytes);  // a multiple of 8: U >= 8
  // chunks of 16 bytes, or 8 (a shift, not a division: this runs every phase)
  const int32_t chunk_shift = units_bytes % 16 == 0 ? 4 : 3;
  const int32_t per_row = static_cast<int32_t>(units * operand_bytes) >> chunk_shift;
  const auto per_peer = static_cast<int32_t>(slice.rows) * per_row;
  return {int32_t{1} << chunk_shift,
          per_row,
          per_peer,
          per_peer * static_cast<int32_t>(peers),
          static_cast<int32_t>(slice.rows),
          static_cast<int32_t>(peers),
          units_bytes,
          persistent_push_offset(ph, phases_per_step, stage_offset, stage_bytes),
          static_cast<int32_t>(persistent_smem_row_bytes(H_p, operand_bytes)),
          static_cast<int32_t>(slice.j0 * operand_bytes)};
}
struct PersistentPush {
  int32_t peer, from, to;  // from: in the outbox; to: from the peer's dynamic shared memory's start
};
// An item as (peer, outbox row, chunk in the row): the reference split, by division.
struct PersistentPushWalk {
  int32_t peer, row, chunk;
};
QGRU_HD PersistentPushWalk persistent_push_split(const PersistentPushes& p, int32_t item) {
  const int32_t peer = item / p.items_per_peer, within = item - peer * p.items_per_peer;
  const int32_t row = within / p.chunks_per_row;
  return {peer, row, within - row * p.chunks_per_row};
}
QGRU_HD PersistentPush persistent_push_at(const PersistentPushes& p, const PersistentPushWalk& w) {
  return {w.peer, w.row * p.units_bytes + w.chunk * p.chunk_bytes,
          p.push_at + w.row * p.row_bytes + p.j0_bytes + w.chunk * p.chunk_bytes};
}
// A thread's items first, first + stride, ... (stride: the block's threads) walked by additions. The push shape is
// the same in every phase of a launch (only push_at changes), so the first item and the stride are split once per
// launch (persistent_push_stride); each step then adds the stride's parts with one carry each (chunk <
// chunks_per_row and row < rows before a step stay below twice that after the additions), and the walk ends at
// peer >= peers. The kernel's pushes take no division in a phase.
struct PersistentPushStride {
  PersistentPushWalk start, step;
};
QGRU_HD PersistentPushStride persistent_push_stride(const PersistentPushes& shape, int32_t first, int32_t stride) {
  return {persistent_push_split(shape, first), persistent_push_split(shape, stride)};
}
QGRU_HD void persistent_push_walk_advance(PersistentPushWalk& w, const PersistentPushStride& s, const PersistentPushes& p) {
  w.chunk += s.step.chunk;
  w.row += s.step.row;
  w.peer += s.step.peer;
  if (w.chunk >= p.chunks_per_row) {
    w.chunk -= p.chunks_per_row;
    ++w.row;
  }
  if (w.row >= p.rows) {
    w.row -= p.rows;
    ++w.peer;
  }
}

// Where a phase's staging starts: the block's first batch row of h_step (the step's parity) or of the reset codes
// (part B); slice.rows rows of H_p codes follow.
template <class Stored, class Acc>
QGRU_HD const Stored* persistent_stage_source(const PersistentBuffers<Stored, Acc>& b, const PersistentPhaseInfo& ph,
                                              const PersistentSlice& slice) {
  const Stored* buffer = ph.part == 1 ? b.reset_exchange : b.h_exchange + persistent_h_parity(ph.step) * b.N_p * b.H_p;
  return buffer + slice.n0 * b.H_p;
}

// The block's folds (the smem region folds [U]): unit u of the slice at folds[u], for the stored accumulators of the
// launch's operand offsets; threads first, first + stride, ... take units first, first + stride, ... Once per launch,
// before the first phase (the kernel: every thread, then a __syncthreads; the emulation: once per block).
template <class Stored, class Acc>
QGRU_HD void persistent_fill_folds(const GruCellParamsView& view, const PersistentBuffers<Stored, Acc>& b,
                                   const PersistentSlice& slice, GruUnitFolds* folds, int32_t first, int32_t stride) {
  for (int32_t u = first; u < static_cast<int32_t>(slice.units); u += stride) {
    folds[u] = fold_unit(view, static_cast<int32_t>(slice.j0) + u, b.x_offset, b.h_offset);
  }
}

// The units' work of a phase after the dot products (acc: the block's accumulators [NB, 3U]; folds: the block's
// [U], persistent_fill_folds), elements first,
// first + stride, ... of the slice's units·rows (unit u = i mod units, batch row n0 + i / units; `walk`): q_reset_hidden (part A of the
// linear_before_reset = 0 cell) or the cell (every other phase), whose new codes go into exchange buffer
// parity(step + 1).
// The thread's elements come from `walk` (persistent_element_stride of its first element and the stride).
// outbox (ClusterDsmem: the block's [NB, U] Stored region, else null): each element's stored code at
// outbox[n_local · U + u], for the pushes, instead of the exchange buffers (after phase 0, which stages h0 from
// exchange buffer 0, no phase reads them there).
template <class Stored, class Acc>
QGRU_HD void persistent_phase_elements(const GruCellParamsView& view, const PersistentBuffers<Stored, Acc>& b,
                                       const PersistentSlice& slice, const PersistentPhaseInfo& ph, const Acc* acc,
                                       const GruUnitFolds* folds, const PersistentSplitStride& walk,
                                       Stored* outbox = nullptr) {
  const int64_t H = view.hidden_size;
  const Acc* gemm_x_t = b.gemm_x + ph.t * b.N_p * b.rows_p;
  Stored* h_next = outbox != nullptr ? nullptr : b.h_exchange + persistent_h_parity(ph.step + 1) * b.N_p * b.H_p;
  Stored* reset_out = outbox != nullptr ? nullptr : b.reset_exchange;
  const auto units = static_cast<int32_t>(slice.units), rows = static_cast<int32_t>(slice.rows);
  for (PersistentSplitWalk e = walk.start; e.major < rows; persistent_split_walk_advance(e, walk, units)) {
    const int64_t u = e.minor, n_local = e.major, n = slice.n0 + n_local;
    const auto j = static_cast<int32_t>(slice.j0 + u);
    const Acc* acc_n = acc + n_local * 3 * b.units_per_block;
    const Stored stored =
        b.phases_per_step == 2 && ph.part == 0
            ? persistent_reset_hidden_element<Stored, Acc>(view, folds[u], gemm_x_t, b.rows_p, acc_n, b.units_per_block,
                                                           b.h_offset, b.h_state, reset_out, b.H_p, n, u, j)
            : persistent_step_element<Stored, Acc>(view, folds[u], gemm_x_t, b.rows_p, acc_n, b.units_per_block,
                                                   b.h_offset, b.h_state, h_next, b.H_p, b.out + ph.t * b.N * H, n, u,
                                                   j, b.lengths, ph.t);
    if (outbox != nullptr) outbox[n_local * b.units_per_block + u] = stored;  // ClusterDsmem: [rows, U]
  }
}

}  // namespace qgru::kernels
