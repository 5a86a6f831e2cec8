// The persistent GRU kernel's plan, slices and protocol (qgru/kernels/persistent_gru.h) and its block-by-block host
// emulation under random interleavings (qgru/kernels/persistent_gru_emulation.h), against independent references:
// HandGruCell's direct int64 loop (hand_gru_cell.h) for single cells, the reference executor
// (run_quantized_gru_codes) for whole calibrated models through the shared layer loop. The fault switches show the
// comparison catches a wrong exchange buffer or a skipped wait.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cell_reference_check.h"
#include "hand_gru_cell.h"
#include "qgru/kernels/persistent_gru.h"
#include "gru_model_cases.h"
#include "qgru/kernels/persistent_gru_emulation.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/runtime/layer_loop.h"
#include "qgru/runtime/quant_executor.h"

namespace qgru {
namespace {

using kernels::GruGemmPath;
using kernels::PersistentDevice;
using kernels::PersistentGruPlan;
using kernels::PersistentGruTuning;

constexpr PersistentDevice kH200{132, 232448, true};  // the figures an H200 reports (sm_90 opt-in shared memory)
// The same with cluster launches of up to 16 blocks (what persistent_device reports on sm_90 with the sm_90 image).
constexpr PersistentDevice kH200Clusters{132, 232448, true, 16};

PersistentGruPlan plan_for(int64_t H, int64_t N, bool reset_before_linear, int units = 0,
                           GruGemmPath path = GruGemmPath::Int8, int rows = 0) {
  PersistentGruTuning tuning;
  tuning.units_per_block = units;
  tuning.rows_per_block = rows;
  return kernels::plan_persistent_gru(path, H, N, reset_before_linear, kH200, tuning);
}

PersistentGruPlan plan_cluster(int64_t H, int64_t N, bool reset_before_linear, int units = 0,
                               GruGemmPath path = GruGemmPath::Int8, int rows = 0,
                               const PersistentDevice& device = kH200Clusters,
                               kernels::PersistentSync sync = kernels::PersistentSync::Cluster) {
  PersistentGruTuning tuning;
  tuning.units_per_block = units;
  tuning.rows_per_block = rows;
  tuning.sync = sync;
  return kernels::plan_persistent_gru(path, H, N, reset_before_linear, device, tuning);
}

std::vector<int32_t> random_codes(size_t count, uint32_t seed, int lo, int hi) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(count);
  for (auto& x : v) x = lo + static_cast<int32_t>(static_cast<uint32_t>(rng()) % static_cast<uint32_t>(hi - lo + 1));
  return v;
}

}  // namespace

TEST_CASE("persistent plan: the units per block, the blocks, the shared memory and every refusal with its reason") {
  // Default: the smallest listed slice of at least 16 units whose blocks fit the multiprocessors.
  PersistentGruPlan p = plan_for(1024, 1, false);
  REQUIRE(p.persistent);
  CHECK(p.units_per_block == 16);
  CHECK(p.blocks == 64);
  CHECK(p.phases_per_step == 1);
  // R, staging (rows of 1024 codes and 16 bytes more: persistent_smem_row_bytes), acc, folds, flag
  CHECK(p.smem.total_bytes == 3 * 16 * 1040 + 1040 + 4 * 3 * 16 + 96 * 16 + 16);
  CHECK(p.describe() == "persistent (64 blocks x 16 units x 1 rows, smem " + std::to_string(p.smem.total_bytes) + ")");
  p = plan_for(2200, 1, true);  // 2200 / 16 = 138 blocks > 132: 32 units
  REQUIRE(p.persistent);
  CHECK(p.units_per_block == 32);
  CHECK(p.blocks == 69);
  CHECK(p.phases_per_step == 2);
  CHECK(plan_for(1, 1, false).blocks == 1);
  CHECK(plan_for(257, 1, false).blocks == 17);
  CHECK(plan_for(33, 1, false, 8).blocks == 5);
  // A batch spreads over the multiprocessors the unit slices leave: 16 unit slices leave room for 8 batch slices.
  p = plan_for(256, 64, false);
  REQUIRE(p.persistent);
  CHECK((p.unit_blocks == 16 && p.rows_per_block == 8 && p.batch_blocks == 8 && p.blocks == 128));
  CHECK(p.smem.stage_bytes == 8 * (256 + 16));
  CHECK(p.smem.acc_bytes == 4 * 8 * 3 * 16);
  p = plan_for(256, 33, false);  // 8 slices for 33 rows: 5 rows each, the last 3 rows; 7 batch slices
  CHECK((p.rows_per_block == 5 && p.batch_blocks == 7 && p.blocks == 112));
  CHECK(plan_for(256, 64, false, 0, GruGemmPath::Int8, 100).rows_per_block == 64);  // at most N
  CHECK(plan_for(256, 64, false, 0, GruGemmPath::Int8, 5).reason == "208 blocks exceed the 132 multiprocessors (H=256 N=64)");
  CHECK(plan_for(256, 64, false, 0, GruGemmPath::Int8, -1).reason == "rows per block -1 is negative (H=256 N=64)");

  // Refusals, each naming why and the shape.
  // 16-bit operands: twice the bytes of R and staging, 8-byte accumulators, unpadded batch rows (the wide layout's).
  const PersistentGruPlan wide = plan_for(1024, 3, false, 0, GruGemmPath::Wide16);  // 2 batch slices: 2 rows, 1 row
  REQUIRE(wide.persistent);
  CHECK(wide.N_p == 3);
  // rows of 2 KiB of codes and 16 bytes more (persistent_smem_row_bytes: consecutive rows 4 banks apart)
  CHECK(wide.smem.total_bytes == 3 * 16 * (2 * 1024 + 16) + 2 * (2 * 1024 + 16) + 8 * 2 * 3 * 16 + 96 * 16 + 16);
  CHECK(wide.describe() == "persistent (128 blocks x 16 units x 2 rows, smem " + std::to_string(wide.smem.total_bytes) +
                               ", 16-bit)");
  // 48 rows of R of 2064 bytes, 1536 bytes of folds, the flag, 2064 and 384 bytes per batch row, 2 batch slices: at
  // most 53 rows each ((232448 - 99072 - 1536 - 16) / 2448 = 53.8)
  CHECK(plan_for(1024, 106, false, 0, GruGemmPath::Wide16).persistent);
  CHECK_FALSE(plan_for(1024, 107, false, 0, GruGemmPath::Wide16).persistent);
  CHECK(kernels::plan_persistent_gru(GruGemmPath::Int8, 64, 1, false, {132, 232448, false}).reason ==
        "the device does not support cooperative launches (H=64 N=1)");
  CHECK(plan_for(64, 1, false, 12).reason == "units per block 12 is not a configuration (H=64 N=1)");
  CHECK(plan_for(65536, 1, false).reason == "H needs more blocks than the device has multiprocessors (H=65536 N=1)");
  CHECK(plan_for(4096, 1, false, 16).reason == "256 blocks exceed the 132 multiprocessors (H=4096 N=1)");
  CHECK(plan_for(4096, 1, false).reason.find("a block's shared memory (402336 bytes") == 0);
  const PersistentGruPlan big = plan_for(1024, 512, false);  // 2 batch slices of 256 rows: 256 KiB of staging each
  CHECK_FALSE(big.persistent);
  CHECK(big.reason.find("exceeds the device's 232448") != std::string::npos);
  // The largest N that fits at H = 1024 (64 unit slices, 2 batch slices): 48 rows of R of 1040 bytes, 1040 bytes of
  // staging and 192 of accumulators per batch row, 1536 bytes of folds, the flag: (232448 - 49920 - 1536 - 16) / 1232
  // = 146.9, 146 rows per block.
  CHECK(plan_for(1024, 292, false).persistent);
  CHECK_FALSE(plan_for(1024, 293, false).persistent);
  // The kernel's 32-bit index math: a block of 2^31 bytes or more is refused whatever the device offers.
  // (H = 256, 16-bit, one batch slice of 2^22 rows: 512 bytes of staging and 384 of accumulators a row.)
  const PersistentDevice huge{132, int64_t{1} << 40, true};
  const PersistentGruPlan past_int32 =
      kernels::plan_persistent_gru(GruGemmPath::Wide16, 256, int64_t{1} << 22, false, huge, {0, 1 << 22});
  CHECK_FALSE(past_int32.persistent);
  CHECK(past_int32.reason.find("reaches 2^31, past the kernel's 32-bit index math") != std::string::npos);
  const PersistentGruPlan below_int32 =
      kernels::plan_persistent_gru(GruGemmPath::Wide16, 256, int64_t{1} << 21, false, huge, {0, 1 << 21});
  CHECK(below_int32.persistent);
  CHECK(below_int32.smem.total_bytes < (int64_t{1} << 31));

  // Occupancy: refused unless every block can be resident at once.
  CHECK(kernels::persistent_occupancy_refusal(plan_for(1024, 1, false), 1, 64).empty());
  CHECK(kernels::persistent_occupancy_refusal(plan_for(1024, 1, false), 1, 63) ==
        "occupancy: 1 resident block(s) per multiprocessor x 63 < 64 blocks at 52704 bytes of shared memory");
  CHECK(kernels::persistent_occupancy_refusal(plan_for(1024, 1, false), 0, 132).find("0 resident") != std::string::npos);
}

TEST_CASE("persistent plan, cluster barrier: a cluster per batch slice, the unit slices within one cluster, else the grid's plan saying why") {
  using kernels::PersistentSync;
  // H = 256: 16 unit slices of 16 units, one cluster of 16 blocks.
  PersistentGruPlan p = plan_cluster(256, 1, false);
  REQUIRE(p.persistent);
  CHECK(p.sync == PersistentSync::Cluster);
  CHECK((p.units_per_block == 16 && p.unit_blocks == 16 && p.cluster_blocks == 16 && p.blocks == 16));
  CHECK(p.sync_note.empty());
  CHECK(p.describe() == "persistent (16 blocks x 16 units x 1 rows, smem " + std::to_string(p.smem.total_bytes) +
                            ", cluster barrier of 16 blocks)");
  // H = 1024: 16 and 32 units need 64 and 32 slices, more than a cluster's 16; 64 units (16 slices) fit one block's
  // shared memory: 192 rows of R of 1040 bytes, 1040 bytes of staging, 192 int32 accumulators, 64 folds, the flag.
  p = plan_cluster(1024, 1, false);
  REQUIRE(p.persistent);
  CHECK((p.units_per_block == 64 && p.cluster_blocks == 16 && p.blocks == 16));
  CHECK(p.smem.total_bytes == 3 * 64 * 1040 + 1040 + 4 * 3 * 64 + 96 * 64 + 16);
  // A batch: one cluster per batch slice; clusters need not all be resident, so tuned rows may ask for more blocks
  // than multiprocessors (the grid barrier refuses that).
  p = plan_cluster(256, 64, false);
  CHECK((p.persistent && p.rows_per_block == 8 && p.batch_blocks == 8 && p.blocks == 128 && p.cluster_blocks == 16));
  p = plan_cluster(256, 200, false, 0, GruGemmPath::Int8, 1);
  CHECK((p.persistent && p.sync == PersistentSync::Cluster && p.blocks == 3200));
  CHECK(plan_for(256, 200, false, 0, GruGemmPath::Int8, 1).reason == "3200 blocks exceed the 132 multiprocessors (H=256 N=200)");
  // No cooperative launch is needed for clusters.
  CHECK(plan_cluster(256, 1, false, 0, GruGemmPath::Int8, 0, {132, 232448, false, 16}).sync == PersistentSync::Cluster);

  // Refused clusters fall back to the grid barrier's plan, the reason in the description.
  // 16-bit H = 1024: 64 units a block take 3 x 64 rows of 2064 bytes, past the device's shared memory.
  p = plan_cluster(1024, 1, false, 0, GruGemmPath::Wide16);
  REQUIRE(p.persistent);
  CHECK((p.sync == PersistentSync::Grid && p.cluster_blocks == 0 && p.units_per_block == 16 && p.blocks == 64));
  CHECK(p.sync_note.find("the cluster barrier was refused: a block's shared memory (") == 0);
  CHECK(p.describe().find(", 16-bit, grid barrier: the cluster barrier was refused: a block's shared memory") != std::string::npos);
  // Tuned units whose slices outnumber a cluster's blocks.
  p = plan_cluster(256, 1, false, 8);
  CHECK((p.persistent && p.sync == PersistentSync::Grid && p.blocks == 32));
  CHECK(p.sync_note == "the cluster barrier was refused: 32 unit slices exceed a cluster's 16 blocks (H=256 N=1)");
  // No unit slicing fits a cluster: 2200 units need 18 slices of 128; 9 slices of 256 overflow shared memory.
  p = plan_cluster(2200, 1, false);
  CHECK((p.persistent && p.sync == PersistentSync::Grid && p.units_per_block == 32));
  CHECK(p.sync_note.find("the cluster barrier was refused: a block's shared memory (") == 0);
  p = plan_cluster(65536, 1, false);
  CHECK_FALSE(p.persistent);  // neither way fits: the grid's reason, then the cluster's
  CHECK(p.reason == "H needs more blocks than the device has multiprocessors (H=65536 N=1); the cluster barrier was "
                    "refused: H needs more unit slices than a cluster's 16 blocks (H=65536 N=1)");
  CHECK(p.sync_note.empty());
  CHECK(p.describe() == "per-step: " + p.reason);
  // A grid fallback the caller's occupancy check refuses (GruCellCuda::persistent_plan) keeps the cluster's reason.
  p = plan_cluster(256, 1, false, 8);
  REQUIRE((p.persistent && p.sync == PersistentSync::Grid));
  p.refuse("occupancy: 1 block of 32 per multiprocessor");
  CHECK_FALSE(p.persistent);
  CHECK(p.reason == "occupancy: 1 block of 32 per multiprocessor; the cluster barrier was refused: 32 unit slices "
                    "exceed a cluster's 16 blocks (H=256 N=1)");
  // Without a note, refuse is the plain refusal.
  p = plan_for(256, 1, false);
  p.refuse("why");
  CHECK((!p.persistent && p.reason == "why"));
  CHECK(kernels::persistent_gru_plan_for_sync(GruGemmPath::Int8, 65536, 1, false, kH200Clusters, {},
                                              PersistentSync::Cluster).reason ==
        "H needs more unit slices than a cluster's 16 blocks (H=65536 N=1)");
  // A device (or kernel image) without cluster launches.
  p = plan_cluster(256, 1, false, 0, GruGemmPath::Int8, 0, kH200);
  CHECK((p.persistent && p.sync == PersistentSync::Grid));
  CHECK(p.sync_note == "the cluster barrier was refused: the device (or the kernel image it runs) has no cluster launch "
                       "(H=256 N=1)");
  // Grid asked for: no note, the description as before.
  CHECK(plan_for(256, 1, false).describe().find("barrier") == std::string::npos);

  // Occupancy: one cluster resident is enough.
  CHECK(kernels::persistent_cluster_occupancy_refusal(plan_cluster(1024, 1, false), 1).empty());
  CHECK(kernels::persistent_cluster_occupancy_refusal(plan_cluster(1024, 1, false), 0) ==
        "occupancy: no cluster of 16 blocks at 207648 bytes of shared memory can be resident");

  // Groups: the hardware's consecutive blocks, batch slice by batch slice; the grid's one group of every padded row.
  p = plan_cluster(256, 33, false);  // 8 batch slices of 5 rows, the last of 3; 7 clusters
  REQUIRE((p.rows_per_block == 5 && p.batch_blocks == 7 && p.cluster_blocks == 16));
  for (int64_t b = 0; b < p.blocks; ++b) {
    const kernels::PersistentSyncGroup g = kernels::persistent_sync_group(p, b);
    const kernels::PersistentSlice slice = kernels::persistent_block_slice(256, 16, 33, 5, b);
    CHECK((g.index == b / 16 && g.first_block == g.index * 16 && g.blocks == 16));
    CHECK((g.n0 == slice.n0 && g.rows == slice.rows));  // the rows the cluster's blocks stage are the group's
  }
  // Clusters of another size than the unit slices (the emulation's fault test): the rows their blocks span.
  PersistentGruPlan halved = plan_cluster(40, 11, false, 8, GruGemmPath::Int8, 3);  // 5 unit slices, 4 batch slices
  REQUIRE((halved.unit_blocks == 5 && halved.batch_blocks == 4));
  halved.cluster_blocks = 2;  // blocks 4, 5 (slice 0's last unit slice, slice 1's first) form cluster 2
  const kernels::PersistentSyncGroup straddling = kernels::persistent_sync_group(halved, 5);
  CHECK((straddling.index == 2 && straddling.first_block == 4 && straddling.n0 == 0 && straddling.rows == 6));
  const kernels::PersistentSyncGroup tail = kernels::persistent_sync_group(halved, 19);  // cluster 9: block 18, 19
  CHECK((tail.n0 == 9 && tail.rows == 2));
  const PersistentGruPlan grid = plan_for(256, 33, false);
  const kernels::PersistentSyncGroup all = kernels::persistent_sync_group(grid, grid.blocks - 1);
  CHECK((all.index == 0 && all.first_block == 0 && all.blocks == grid.blocks && all.n0 == 0 && all.rows == grid.N_p));
}

TEST_CASE("persistent cluster fit: 16-block clusters, else 8, rows raised to one wave of resident clusters, else the grid's plan") {
  using kernels::PersistentSync;
  PersistentGruTuning cluster;
  cluster.sync = PersistentSync::Cluster;
  std::vector<std::string> asked;  // the plans whose occupancy the fit asked for, in order
  const auto fit = [&](int64_t H, int64_t N, const PersistentGruTuning& tuning, auto&& active,
                       GruGemmPath path = GruGemmPath::Int8) {
    asked.clear();
    return kernels::fit_persistent_clusters(path, H, N, false, kH200Clusters, tuning,
                                            [&](const PersistentGruPlan& q) {
                                              asked.push_back(q.describe());
                                              return active(q);
                                            });
  };
  // Everything fits: the plan_persistent_gru cluster plan, occupancy asked once.
  PersistentGruPlan p = fit(256, 1, cluster, [](const PersistentGruPlan&) { return 8; });
  CHECK(p.describe() == plan_cluster(256, 1, false).describe());
  CHECK(asked.size() == 1);
  // No 16-block cluster resident: clusters of at most 8 (H = 256 as 8 slices of 32 units).
  p = fit(256, 1, cluster, [](const PersistentGruPlan& q) { return q.cluster_blocks > 8 ? 0 : 3; });
  CHECK((p.persistent && p.sync == PersistentSync::Cluster && p.cluster_blocks == 8 && p.units_per_block == 32));
  CHECK(asked.size() == 2);
  // Fewer clusters resident than batch slices: rows raised so one wave holds them (H = 256, N = 64: 8 slices of 8
  // rows; 3 resident: 3 slices of 22 rows, the last 20).
  p = fit(256, 64, cluster, [](const PersistentGruPlan&) { return 3; });
  CHECK((p.persistent && p.cluster_blocks == 16 && p.rows_per_block == 22 && p.batch_blocks == 3));
  // ... unless the larger plan itself fits fewer: the plan's own rows, in waves.
  p = fit(256, 64, cluster, [](const PersistentGruPlan& q) { return q.rows_per_block > 8 ? 2 : 3; });
  CHECK((p.persistent && p.rows_per_block == 8 && p.batch_blocks == 8));
  // ... and never over the tuning's rows.
  PersistentGruTuning tuned = cluster;
  tuned.rows_per_block = 4;
  p = fit(256, 64, tuned, [](const PersistentGruPlan&) { return 3; });
  CHECK((p.persistent && p.rows_per_block == 4 && p.batch_blocks == 16));
  CHECK(asked.size() == 1);
  // No cluster at all: H = 1024 needs 16 slices (8 slices of 128 units overflow shared memory): the grid's plan, the
  // first refusal (the 16-block cluster's occupancy) in its note.
  p = fit(1024, 1, cluster, [](const PersistentGruPlan&) { return 0; });
  CHECK((p.persistent && p.sync == PersistentSync::Grid && p.blocks == 64));
  CHECK(p.sync_note == "the cluster barrier was refused: occupancy: no cluster of 16 blocks at 207648 bytes of shared "
                       "memory can be resident");
  // A device without cluster launches: the grid's plan without asking the occupancy.
  asked.clear();
  p = kernels::fit_persistent_clusters(GruGemmPath::Int8, 256, 1, false, kH200, cluster, [&](const PersistentGruPlan& q) {
    asked.push_back(q.describe());
    return 8;
  });
  CHECK((p.persistent && p.sync == PersistentSync::Grid && asked.empty()));
  CHECK(p.sync_note.find("has no cluster launch") != std::string::npos);
}

TEST_CASE("persistent exchange in shared memory: the plan's buffers and outbox; a phase's pushes write every code of "
          "every row once into every block of the cluster, inside the push buffer") {
  using kernels::PersistentSync;
  // H = 256, N = 1: 16 blocks of 16 units; two staging buffers (three for the linear_before_reset = 0 cell), an
  // outbox of 16 codes.
  for (bool rbl : {false, true}) {
    const PersistentGruPlan p = plan_cluster(256, 1, rbl, 0, GruGemmPath::Int8, 0, kH200Clusters, PersistentSync::ClusterDsmem);
    REQUIRE((p.persistent && p.sync == PersistentSync::ClusterDsmem && p.cluster_blocks == 16));
    CHECK(p.smem.stage_buffers == (rbl ? 3 : 2));
    CHECK(p.smem.outbox_bytes == 16);
    CHECK(p.smem.total_bytes == 3 * 16 * 272 + (rbl ? 3 : 2) * 272 + 4 * 3 * 16 + 96 * 16 + 16 + 16);
    CHECK(p.describe().find(", cluster barrier of 16 blocks, exchange in shared memory)") != std::string::npos);
  }
  // Which buffer a phase reads and pushes into: h by parity, part A's reset codes into buffer 2.
  for (int64_t step = 0; step < 4; ++step) {
    const kernels::PersistentPhaseInfo one = kernels::persistent_phase_info(step, 1, 8, false, 16);
    CHECK(kernels::persistent_stage_buffer(one) == step % 2);
    CHECK(kernels::persistent_push_buffer(one, 1) == (step + 1) % 2);
    const kernels::PersistentPhaseInfo a = kernels::persistent_phase_info(2 * step, 2, 8, false, 16);
    const kernels::PersistentPhaseInfo b = kernels::persistent_phase_info(2 * step + 1, 2, 8, false, 16);
    CHECK((kernels::persistent_stage_buffer(a) == step % 2 && kernels::persistent_push_buffer(a, 2) == 2));
    CHECK((kernels::persistent_stage_buffer(b) == 2 && kernels::persistent_push_buffer(b, 2) == (step + 1) % 2));
  }
  // Every cluster's pushes of one phase, for several shapes and both widths: each byte of each row's codes of units
  // [0, H) written exactly once in every block, from the outbox byte of its unit and row; nothing outside the push
  // buffer's rows' code bytes.
  for (GruGemmPath path : {GruGemmPath::Int8, GruGemmPath::Wide16}) {
    // (65 in slices of 32: the last slice reaches past H_p = 80; its pushes stop at the row's end)
    for (const auto& [H, U, N, rows] : {std::tuple<int, int, int, int>{256, 16, 1, 0}, {40, 8, 7, 3}, {512, 32, 2, 0},
                                        {100, 16, 40, 17}, {33, 8, 3, 1}, {65, 32, 40, 19},
                                        // 16 peers x 5 rows x 4 chunks: 320 items, threads walk two with carries
                                        {1024, 64, 5, 5}}) {
      if (H == 1024 && path == GruGemmPath::Wide16) continue;  // 64 units of 16-bit R exceed a block's shared memory
      const PersistentGruPlan p = plan_cluster(H, N, false, U, path, rows, kH200Clusters, PersistentSync::ClusterDsmem);
      CAPTURE(p.describe());
      REQUIRE((p.persistent && p.sync == PersistentSync::ClusterDsmem));
      const int64_t bytes = path == GruGemmPath::Int8 ? 1 : 2;
      const auto row_stride = static_cast<int32_t>(kernels::persistent_smem_row_bytes(p.H_p, bytes));
      const int32_t push_at = static_cast<int32_t>(p.smem.stage_offset + p.smem.stage_bytes);  // buffer 1
      // phase 0 of the one-phase cell pushes into buffer 1
      const kernels::PersistentPhaseInfo phase0 = kernels::persistent_phase_info(0, 1, 4, false, U);
      for (int64_t first = 0; first < p.blocks; first += p.cluster_blocks) {
        const kernels::PersistentSyncGroup g = kernels::persistent_sync_group(p, first);
        // writes[peer][byte]: how many times, and the (source block, outbox byte) of the last
        std::vector<std::vector<int>> writes(static_cast<size_t>(g.blocks), std::vector<int>(static_cast<size_t>(p.smem.total_bytes), 0));
        bool from_right = true;
        for (int64_t b = g.first_block; b < g.first_block + g.blocks; ++b) {
          const kernels::PersistentSlice slice = kernels::persistent_block_slice(H, U, N, p.rows_per_block, b);
          const kernels::PersistentPushes push = kernels::persistent_phase_pushes(
              phase0, 1, slice, U, bytes, p.H_p, g.blocks, p.smem.stage_offset, p.smem.stage_bytes);
          // the items as the kernel's threads walk them
          std::vector<kernels::PersistentPush> items;
          for (int32_t thread = 0; thread < kernels::kPersistentThreads; ++thread) {
            const kernels::PersistentPushStride walk = kernels::persistent_push_stride(push, thread, kernels::kPersistentThreads);
            for (kernels::PersistentPushWalk w = walk.start; w.peer < push.peers; kernels::persistent_push_walk_advance(w, walk, push)) {
              items.push_back(kernels::persistent_push_at(push, w));
            }
          }
          CHECK(items.size() == static_cast<size_t>(push.items));
          for (const kernels::PersistentPush& item : items) {
            REQUIRE((item.peer >= 0 && item.peer < g.blocks));
            for (int32_t c = 0; c < push.chunk_bytes; ++c) {
              const int32_t to = item.to + c, from = item.from + c;
              REQUIRE((to >= push_at && to < push_at + p.smem.stage_bytes));
              const int32_t row = (to - push_at) / row_stride, code_byte = (to - push_at) % row_stride;
              // the outbox byte [row, U] of the same unit and row
              from_right = from_right && from == row * U * bytes + (code_byte - static_cast<int32_t>(slice.j0 * bytes));
              ++writes[static_cast<size_t>(item.peer)][static_cast<size_t>(to)];
            }
          }
        }
        CHECK(from_right);
        for (int64_t peer = 0; peer < g.blocks; ++peer) {
          int64_t once = 0, more = 0, stray = 0;
          for (int32_t at = push_at; at < push_at + p.smem.stage_bytes; ++at) {
            const int count = writes[static_cast<size_t>(peer)][static_cast<size_t>(at)];
            const int32_t row = (at - push_at) / row_stride, code_byte = (at - push_at) % row_stride;
            // every slice's units up to the row's H_p codes
            const bool wanted = row < g.rows && code_byte < std::min<int64_t>(p.unit_blocks * U, p.H_p) * bytes;
            once += wanted && count == 1;
            more += count > 1;
            stray += !wanted && count != 0;
          }
          CHECK(once == g.rows * std::min<int64_t>(p.unit_blocks * U, p.H_p) * bytes);
          CHECK(more == 0);
          CHECK(stray == 0);
        }
      }
    }
  }
}

// The push walk (the kernel's: first item and stride split once a launch, then additions with one carry each) visits
// exactly the items first, first + stride, ... below items, each split as the reference division does, for shapes
// with every ratio of stride to a peer's items and a row's chunks; and a launch's phases push the same shape (the
// kernel splits its walk from phase 0's).
TEST_CASE("persistent push walk: a thread's items by additions equal the reference split by division") {
  using kernels::PersistentSync;
  int64_t walks = 0;
  for (int32_t peers : {1, 2, 3, 7, 16}) {
    for (int32_t rows : {1, 2, 5, 17, 64}) {
      for (int32_t chunks : {1, 2, 3, 4, 8}) {
        kernels::PersistentPushes p{};
        p.chunk_bytes = 16;
        p.chunks_per_row = chunks;
        p.items_per_peer = rows * chunks;
        p.items = p.items_per_peer * peers;
        p.rows = rows;
        p.peers = peers;
        for (int32_t stride : {1, 3, 32, 256}) {
          for (int32_t first = 0; first < stride; ++first) {
            const kernels::PersistentPushStride walk = kernels::persistent_push_stride(p, first, stride);
            int32_t item = first;
            for (kernels::PersistentPushWalk w = walk.start; w.peer < p.peers; kernels::persistent_push_walk_advance(w, walk, p)) {
              REQUIRE(item < p.items);
              const kernels::PersistentPushWalk want = kernels::persistent_push_split(p, item);
              REQUIRE((w.peer == want.peer && w.row == want.row && w.chunk == want.chunk));
              REQUIRE((w.row < rows && w.chunk < chunks));
              item += stride;
            }
            CHECK(item >= p.items);  // no item left out
            ++walks;
          }
        }
      }
    }
  }
  CHECK(walks == 5 * 5 * 5 * (1 + 3 + 32 + 256));
  // The shape of a launch's pushes does not depend on the phase: only the buffer they go into.
  const PersistentGruPlan plan = plan_cluster(65, 40, false, 32, GruGemmPath::Int8, 19, kH200Clusters, PersistentSync::ClusterDsmem);
  REQUIRE((plan.persistent && plan.sync == PersistentSync::ClusterDsmem));
  for (bool two_phases : {false, true}) {
    const int P = two_phases ? 2 : 1;
    for (int64_t b = 0; b < plan.blocks; ++b) {
      const kernels::PersistentSlice slice = kernels::persistent_block_slice(65, 32, 40, plan.rows_per_block, b);
      const auto pushes_of = [&](int64_t k) {
        return kernels::persistent_phase_pushes(kernels::persistent_phase_info(k, P, 5, false, 32), P, slice, 32, 1,
                                                plan.H_p, plan.cluster_blocks, plan.smem.stage_offset, plan.smem.stage_bytes);
      };
      const kernels::PersistentPushes first = pushes_of(0);
      for (int64_t k = 1; k < 5 * P; ++k) {
        const kernels::PersistentPushes other = pushes_of(k);
        CHECK((other.chunk_bytes == first.chunk_bytes && other.chunks_per_row == first.chunks_per_row &&
               other.items_per_peer == first.items_per_peer && other.items == first.items && other.rows == first.rows &&
               other.peers == first.peers && other.units_bytes == first.units_bytes && other.row_bytes == first.row_bytes &&
               other.j0_bytes == first.j0_bytes));
      }
    }
  }
}

TEST_CASE("persistent slices cover every (unit, batch row) once; the shared memory regions are aligned and disjoint") {
  for (int64_t H : {1, 31, 32, 33, 257, 1000}) {
    for (int U : kernels::kPersistentUnitChoices) {
      for (int64_t N : {1, 3, 33}) {
      const PersistentGruPlan p = plan_for(H, N, false, U);
      if (!p.persistent) continue;
      CHECK(p.blocks == p.unit_blocks * p.batch_blocks);
      std::vector<int> owners(static_cast<size_t>(H * N), 0);
      for (int64_t b = 0; b < p.blocks; ++b) {
        const kernels::PersistentSlice s = kernels::persistent_block_slice(H, U, N, p.rows_per_block, b);
        CHECK(s.units >= 1);  // no block without a unit or a row
        CHECK(s.rows >= 1);
        for (int64_t n = 0; n < s.rows; ++n)
          for (int64_t u = 0; u < s.units; ++u) ++owners[static_cast<size_t>((s.n0 + n) * H + s.j0 + u)];
        for (int64_t row = 0; row < 3 * U; ++row) {
          const int64_t src = kernels::persistent_r_source_row(H, U, s, row);
          const int64_t g = row / U, u = row % U;
          CHECK(src == (u < s.units ? g * H + s.j0 + u : -1));
        }
      }
      CHECK(std::all_of(owners.begin(), owners.end(), [](int o) { return o == 1; }));
      const kernels::PersistentSmemLayout& m = p.smem;
      CHECK(m.stage_offset % 16 == 0);
      CHECK(m.acc_offset % 16 == 0);
      CHECK(m.r_offset + m.r_bytes <= m.stage_offset);
      CHECK(m.stage_offset + m.stage_bytes <= m.acc_offset);
      CHECK(m.acc_offset + m.acc_bytes <= m.folds_offset);
      CHECK(m.folds_offset % 16 == 0);
      CHECK(m.folds_bytes == 96 * U);
      CHECK(m.folds_offset + m.folds_bytes <= m.flag_offset);
      CHECK(m.flag_offset % 16 == 0);
      CHECK(m.flag_offset + 16 == m.total_bytes);
      CHECK(m.acc_bytes == 4 * p.rows_per_block * 3 * U);
      // rows an odd number of 16-byte chunks apart: the codes, and 16 bytes more where they are an even number
      const int64_t row_stride = p.H_p + (p.H_p / 16 % 2 == 0 ? 16 : 0);
      CHECK(m.stage_bytes == p.rows_per_block * row_stride);
      CHECK(m.r_bytes == 3 * U * row_stride);
      }
    }
  }
}

TEST_CASE("persistent protocol: parity alternates, phases count up, arrivals before a phase") {
  CHECK(kernels::persistent_h_parity(0) == 0);
  CHECK(kernels::persistent_h_parity(1) == 1);
  CHECK(kernels::persistent_h_parity(6) == 0);
  // One phase per step: every gate's rows; two: z and r rows (A), then the n rows (B); reverse visits t = T-1 .. 0.
  kernels::PersistentPhaseInfo ph = kernels::persistent_phase_info(3, 1, 10, false, 16);
  CHECK((ph.step == 3 && ph.t == 3 && ph.part == 0 && ph.first_row == 0 && ph.rows == 48));
  ph = kernels::persistent_phase_info(6, 2, 10, true, 16);
  CHECK((ph.step == 3 && ph.t == 6 && ph.part == 0 && ph.first_row == 0 && ph.rows == 32));
  ph = kernels::persistent_phase_info(7, 2, 10, true, 16);
  CHECK((ph.step == 3 && ph.t == 6 && ph.part == 1 && ph.first_row == 32 && ph.rows == 16));
  CHECK(kernels::persistent_arrivals_before(0, 17) == 0);
  CHECK(kernels::persistent_arrivals_before(7, 17) == 119);
}

TEST_CASE("persistent phase info: the shift and mask equal the division for every phase of 1 and 2 phases a step") {
  for (int P = 1; P <= 2; ++P) {
    for (int64_t phase = 0; phase < 20000; ++phase) {
      const kernels::PersistentPhaseInfo ph = kernels::persistent_phase_info(phase, P, 10001, phase % 3 == 0, 16);
      REQUIRE(ph.step == phase / P);
      REQUIRE(ph.part == static_cast<int>(phase % P));
      REQUIRE(ph.t == (phase % 3 == 0 ? 10000 - phase / P : phase / P));
    }
  }
  // Past 2^32 phases too (the shift is 64-bit).
  const int64_t far = (int64_t{1} << 40) + 7;
  CHECK(kernels::persistent_phase_info(far, 2, far, false, 16).step == far / 2);
  CHECK(kernels::persistent_phase_info(far, 2, far, false, 16).part == 1);
}

TEST_CASE("persistent dot walk: every group's products equal the division formula, each product once, every phase shape") {
  // Every configuration of U, each phase's rows (3U, 2U, U), batch rows 1 .. 40 and every dot group, with the
  // kernel's group count and with others (a step below, equal to and above the phase's rows): the walk visits
  // exactly the products p = g, g + groups, ... below rows·batch_rows, split as p mod rows and p / rows.
  for (int U : kernels::kPersistentUnitChoices) {
    for (int64_t rows : {3 * U, 2 * U, U}) {
      const int64_t first_row = rows == U ? 2 * U : 0;
      for (int32_t groups : {kernels::kPersistentDotGroups, kernels::kPersistentThreads, 8, static_cast<int32_t>(rows),
                             3 * static_cast<int32_t>(rows) + 1}) {
        for (int32_t batch_rows = 1; batch_rows <= 40; ++batch_rows) {
          std::vector<int> seen(static_cast<size_t>(rows * batch_rows), 0);
          for (int32_t group = 0; group < groups; ++group) {
            const kernels::PersistentSplitStride stride = kernels::persistent_split_stride(group, groups, static_cast<int32_t>(rows));
            int64_t p = group;
            for (kernels::PersistentSplitWalk d = stride.start; d.major < batch_rows;
                 kernels::persistent_split_walk_advance(d, stride, static_cast<int32_t>(rows))) {
              REQUIRE(p < rows * batch_rows);
              REQUIRE(first_row + d.minor == first_row + p % rows);
              REQUIRE(d.major == p / rows);
              ++seen[static_cast<size_t>(p)];
              p += groups;
            }
            REQUIRE(p >= rows * batch_rows);  // the walk ended where the division loop ends
          }
          REQUIRE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
        }
      }
    }
  }
}

TEST_CASE("persistent int8 tensor-core dots: every k step of every tile once, the tail once, addresses inside the rows") {
  for (int32_t rows : {8, 16, 24, 32, 48, 96, 192, 768})
    for (int32_t batch_rows : {1, 2, 7, 8, 9, 17, 40})
      for (int32_t H_p : {16, 32, 48, 272, 1024, 1040}) {
        CAPTURE(rows);
        CAPTURE(batch_rows);
        CAPTURE(H_p);
        const kernels::PersistentMmaPlan p = kernels::persistent_mma_plan(rows, batch_rows, H_p);
        REQUIRE(p.m_tiles * 16 >= rows);
        REQUIRE(p.n_tiles * 8 >= batch_rows);
        REQUIRE(32 * p.k32 + (p.tail16 ? 16 : 0) == H_p);
        const int32_t splits = 1 << p.split_shift;
        REQUIRE((splits == 1 || p.tiles * splits <= kernels::kPersistentMmaWarps));  // a split only to fill the warps
        REQUIRE((splits == 1 || splits <= p.k32));                                     // every split keeps a k32 step
        std::vector<int> k_seen(static_cast<size_t>(p.tiles * std::max(p.k32, 1)), 0), tail_seen(static_cast<size_t>(p.tiles), 0);
        for (int32_t item = 0; item < (p.tiles << p.split_shift); ++item) {
          const kernels::PersistentMmaItem it = kernels::persistent_mma_item(p, item);
          REQUIRE(it.mt >= 0);
          REQUIRE(it.mt < p.m_tiles);
          REQUIRE(it.nt >= 0);
          REQUIRE(it.nt < p.n_tiles);
          REQUIRE(0 <= it.k_begin);
          REQUIRE(it.k_begin <= it.k_end);
          REQUIRE(it.k_end <= p.k32);
          for (int32_t ks = it.k_begin; ks < it.k_end; ++ks) ++k_seen[static_cast<size_t>((it.mt * p.n_tiles + it.nt) * p.k32 + ks)];
          if (it.tail16) ++tail_seen[static_cast<size_t>(it.mt * p.n_tiles + it.nt)];
          // The row address of every lane ldmatrix reads (k32 steps: A x4, all lanes; B x2, lanes 0-15; the k16 tail:
          // A x2, lanes 0-15; B x1, lanes 0-7): inside the phase's rows / the block's batch rows, 16-byte aligned,
          // 16 bytes inside its row.
          std::vector<std::pair<int32_t, bool>> steps;  // (k0, tail)
          for (int32_t ks = it.k_begin; ks < it.k_end; ++ks) steps.emplace_back(32 * ks, false);
          if (it.tail16) steps.emplace_back(32 * p.k32, true);
          const auto stride = static_cast<int32_t>(kernels::persistent_smem_row_bytes(H_p, 1));
          // 8 consecutive rows (an ldmatrix matrix) start on 8 different 4-bank groups: no bank conflict
          for (int32_t r = 1; r < 8; ++r) REQUIRE((r * stride / 16) % 8 != 0);
          for (const auto& [k0, tail] : steps) {
            const int32_t first_row = 5;
            for (int lane = 0; lane < (tail ? 16 : 32); ++lane) {
              const int32_t a = kernels::persistent_mma_a_offset(first_row, rows, it.mt, lane, stride, k0);
              // linear in k0: the kernel steps its addresses 32 bytes per k32 step from the item's first
              REQUIRE(a - kernels::persistent_mma_a_offset(first_row, rows, it.mt, lane, stride, 32 * it.k_begin) == k0 - 32 * it.k_begin);
              REQUIRE(kernels::persistent_mma_b_offset(batch_rows, it.nt, lane, stride, k0) -
                          kernels::persistent_mma_b_offset(batch_rows, it.nt, lane, stride, 32 * it.k_begin) ==
                      k0 - 32 * it.k_begin);
              REQUIRE(a % 16 == 0);
              REQUIRE(a / stride >= first_row);
              REQUIRE(a / stride < first_row + rows);
              REQUIRE(a % stride + 16 <= H_p);  // inside the row's codes, never its padding
            }
            for (int lane = 0; lane < (tail ? 8 : 16); ++lane) {
              const int32_t b = kernels::persistent_mma_b_offset(batch_rows, it.nt, lane, stride, k0);
              REQUIRE(b % 16 == 0);
              REQUIRE(b / stride < batch_rows);
              REQUIRE(b % stride + 16 <= H_p);
            }
            // The lanes ldmatrix ignores (.x2: 16-31, .x1: 8-31; PTX ISA, ldmatrix) hand addresses too, the tail's at
            // most 16 bytes past their row's codes: every lane's 16 bytes lie in the phase's rows or the 16 bytes
            // after them, inside the block's shared memory (staging follows R, the accumulators follow staging).
            bool inside = true;
            for (int lane = 0; lane < 32; ++lane) {
              const int32_t a = kernels::persistent_mma_a_offset(first_row, rows, it.mt, lane, stride, k0);
              const int32_t b = kernels::persistent_mma_b_offset(batch_rows, it.nt, lane, stride, k0);
              inside = inside && a >= first_row * stride && a + 16 <= (first_row + rows) * stride + 16 && b >= 0 &&
                       b + 16 <= batch_rows * stride + 16;
            }
            REQUIRE(inside);
          }
        }
        if (p.k32 > 0) REQUIRE(std::all_of(k_seen.begin(), k_seen.end(), [](int c) { return c == 1; }));
        REQUIRE(std::all_of(tail_seen.begin(), tail_seen.end(), [&](int c) { return c == (p.tail16 ? 1 : 0); }));
        // The accumulator elements of a tile: each (row, batch row) of the tile once.
        std::vector<int> at_seen(16 * 8, 0);
        for (int lane = 0; lane < 32; ++lane)
          for (int e = 0; e < 4; ++e) {
            const kernels::PersistentMmaAt at = kernels::persistent_mma_acc_at(0, 0, lane, e);
            ++at_seen[static_cast<size_t>(at.row * 8 + at.n)];
          }
        REQUIRE(std::all_of(at_seen.begin(), at_seen.end(), [](int c) { return c == 1; }));
      }
}

TEST_CASE("persistent element walk: (unit, row) of every element equals i mod units and i / units, each element once") {
  // Every slice of 1 .. 256 units (a short last slice included) and 1 .. 9 rows, strides of one thread, a block
  // and odd ones, every first element of the stride.
  for (int64_t units = 1; units <= 256; ++units) {
    for (int64_t rows = 1; rows <= 9; ++rows) {
      const kernels::PersistentSlice slice{5, units, 3, rows};
      for (int64_t stride : {int64_t{1}, int64_t{7}, int64_t{kernels::kPersistentThreads}, int64_t{300}}) {
        std::vector<int> seen(static_cast<size_t>(units * rows), 0);
        for (int64_t first = 0; first < stride; ++first) {
          const kernels::PersistentSplitStride walk = kernels::persistent_element_stride(slice, first, stride);
          int64_t i = first;
          for (kernels::PersistentSplitWalk e = walk.start; e.major < rows;
               kernels::persistent_split_walk_advance(e, walk, static_cast<int32_t>(units))) {
            REQUIRE(i < units * rows);
            REQUIRE(e.minor == i % units);
            REQUIRE(e.major == i / units);
            ++seen[static_cast<size_t>(i)];
            i += stride;
          }
          REQUIRE(i >= units * rows);
        }
        REQUIRE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
      }
    }
  }
  // A slice without units visits nothing.
  const kernels::PersistentSplitStride none = kernels::persistent_element_stride({0, 0, 0, 4}, 0, 256);
  CHECK(none.start.major >= 4);
}

TEST_CASE("persistent dp4a emulation equals the byte-wise signed dot product, extremes included") {
  std::mt19937 rng(5);
  const int8_t extremes[] = {-128, -127, -1, 0, 1, 126, 127};
  for (int trial = 0; trial < 20000; ++trial) {
    int8_t a[4], b[4];
    for (int i = 0; i < 4; ++i) {
      a[i] = trial < 2401 ? extremes[(trial / (i == 0 ? 1 : i == 1 ? 7 : i == 2 ? 49 : 343)) % 7] : static_cast<int8_t>(rng());
      b[i] = trial < 2401 ? extremes[(trial / (i == 0 ? 343 : i == 1 ? 49 : i == 2 ? 7 : 1)) % 7] : static_cast<int8_t>(rng());
    }
    int32_t wa = 0, wb = 0;
    int64_t want = 1000;
    for (int i = 0; i < 4; ++i) {
      wa |= static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint8_t>(a[i])) << (8 * i));
      wb |= static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint8_t>(b[i])) << (8 * i));
      want += int64_t{a[i]} * b[i];
    }
    REQUIRE(kernels::persistent_dp4a(wa, wb, 1000) == want);
  }
  // The worst case the overflow note bounds: H_p = 2^17 - 16 products of (-128)·(-128), one lane's share.
  const int64_t words = (kernels::kInt8GemmMaxK - 15) / 4;
  std::vector<int32_t> all_min(static_cast<size_t>(words), static_cast<int32_t>(0x80808080u));
  int64_t total = 0;
  for (int lane = 0; lane < kernels::kPersistentDotLanes; ++lane) {
    total += kernels::persistent_dot_share<int8_t, int32_t>(all_min.data(), all_min.data(), words, lane,
                                                           kernels::kPersistentDotLanes);
  }
  CHECK(total == words * 4 * 16384);
  CHECK(total < (int64_t{1} << 31));
  // The 16-bit shares: (-32768)·(-32768) = 2^30 per product, far past int32 in the sum, exact in int64; mixed signs.
  const int64_t wide_words = 4096;
  std::vector<int32_t> wide_min(static_cast<size_t>(wide_words), static_cast<int32_t>(0x80008000u));
  std::vector<int32_t> mixed(static_cast<size_t>(wide_words), static_cast<int32_t>(0x7FFF8000u));  // hi 32767, lo -32768
  int64_t wide_total = 0, mixed_total = 0;
  for (int lane = 0; lane < kernels::kPersistentDotLanes; ++lane) {
    wide_total += kernels::persistent_dot_share<int16_t, int64_t>(wide_min.data(), wide_min.data(), wide_words, lane,
                                                                  kernels::kPersistentDotLanes);
    mixed_total += kernels::persistent_dot_share<int16_t, int64_t>(wide_min.data(), mixed.data(), wide_words, lane,
                                                                   kernels::kPersistentDotLanes);
  }
  CHECK(wide_total == wide_words * 2 * (int64_t{1} << 30));
  CHECK(mixed_total == wide_words * ((int64_t{1} << 30) - int64_t{32768} * 32767));
}

TEST_CASE("persistent emulation equals the direct cell loop: both cells, both widths, H on edges, N 1/3/33, T 0/1/5, h0, reverse") {
  for (GruGemmPath path : {GruGemmPath::Int8, GruGemmPath::Wide16}) {
  for (bool reset_before_linear : {false, true}) {
    for (int H : {1, 31, 32, 33, 257}) {
      for (int N : {1, 3, 33}) {
        if (H == 257 && N == 33 && (reset_before_linear || path == GruGemmPath::Wide16)) continue;  // the largest once
        const int C = 5;
        const qgru::test::HandGruCell cell(H, C, static_cast<uint32_t>(H * 7 + N), reset_before_linear);
        for (int T : {0, 1, 5}) {
          const auto q_x = random_codes(static_cast<size_t>(T * N * C), static_cast<uint32_t>(T + H), 0, 255);
          const auto q_h0 = random_codes(static_cast<size_t>(N * H), static_cast<uint32_t>(N + H), 0, 255);
          for (bool reverse : {false, true}) {
            const int U = H <= 33 ? 8 : 16;  // several blocks even for small H
            const PersistentGruPlan plan = plan_for(H, N, reset_before_linear, U, path);
            REQUIRE(plan.persistent);
            // The cluster meetings on the same cells (T = 5; H = 257 in 17 slices of 16 takes the grid's).
            for (kernels::PersistentSync sync : {kernels::PersistentSync::Cluster, kernels::PersistentSync::ClusterDsmem}) {
              if (T != 5) continue;
              const PersistentGruPlan clusters = plan_cluster(H, N, reset_before_linear, U, path, 0, kH200Clusters, sync);
              CAPTURE(clusters.describe());
              REQUIRE(clusters.persistent);
              kernels::PersistentEmulationOptions options;
              options.seed = static_cast<uint32_t>(H * 1000 + N * 10 + T + (reverse ? 5 : 0) + 7);
              const kernels::PersistentEmulationResult got = kernels::emulate_persistent_gru_cell(
                  clusters, cell.view, cell.q_W.data(), cell.q_R.data(), C, cell.x_space, q_x.data(), T, q_h0.data(),
                  reverse, nullptr, options);
              qgru::test::check_cell_flow(cell, got.out, q_x, T, N, q_h0, reverse);
            }
            kernels::PersistentEmulationOptions options;
            options.seed = static_cast<uint32_t>(H * 1000 + N * 10 + T + (reverse ? 5 : 0));
            const bool wide = path == GruGemmPath::Wide16;
            CAPTURE(wide);
            CAPTURE(reset_before_linear);
            CAPTURE(H);
            CAPTURE(N);
            CAPTURE(T);
            CAPTURE(reverse);
            const kernels::PersistentEmulationResult got = kernels::emulate_persistent_gru_cell(
                plan, cell.view, cell.q_W.data(), cell.q_R.data(), C, cell.x_space, q_x.data(), T, q_h0.data(), reverse,
                nullptr, options);
            if (T == 0) {
              CHECK(got.out.empty());
              continue;
            }
            qgru::test::check_cell_flow(cell, got.out, q_x, T, N, q_h0, reverse);
            // The scheduler did interleave: with several blocks some wait was not yet satisfied.
            if (plan.blocks > 1 && T > 1) CHECK(got.yields > 0);
          }
        }
      }
    }
  }
  }
}

TEST_CASE("persistent emulation with several 8-row tiles of batch rows and of slice rows, partial last tiles and k splits") {
  // The cases above plan at most 8 batch rows a block (one batch tile of the tensor-core path). Here tuned rows per
  // block give 2 or 3 batch tiles, the last one partial, with several row tiles, k32 steps split among warps (a phase
  // with fewer tiles than warps) or not, with and without the k16 tail; the 16-bit path's dot groups on the same
  // shapes (those test_cuda_gpu runs among them). Each (H, U, N, rows per block) names what the int8 path's phases
  // must exercise, checked first.
  struct Shape {
    int H, U, N, rows;
    bool some_split, tail16;
  };
  const Shape shapes[] = {
      {65, 32, 40, 19, false, true},   // H_p 80; 3 batch slices of 19, 19, 2 rows; 3 batch tiles, the last of 3 rows
      {64, 8, 11, 11, true, false},    // 2 batch tiles (8 + 3), 1 or 2 row tiles, every phase split in two
      {100, 16, 17, 17, true, true},   // H_p 112: 3 k32 steps split 1 + 2, the tail on the last split
      {100, 16, 40, 17, true, true},   // the same in 3 batch slices of 17, 17, 6 rows
      {256, 16, 11, 11, true, false},  // H_p 256 (rows padded to 272 bytes): the n rows' 2 tiles in 4 splits
  };
  for (const Shape& s : shapes) {
    for (GruGemmPath path : {GruGemmPath::Int8, GruGemmPath::Wide16}) {
      for (bool reset_before_linear : {false, true}) {
        const PersistentGruPlan plan = plan_for(s.H, s.N, reset_before_linear, s.U, path, s.rows);
        CAPTURE(s.H);
        CAPTURE(s.N);
        CAPTURE(reset_before_linear);
        CAPTURE(plan.describe());
        REQUIRE(plan.persistent);
        REQUIRE(plan.rows_per_block == s.rows);
        if (path == GruGemmPath::Int8) {
          bool split = false;
          for (int part = 0; part < plan.phases_per_step; ++part) {
            const kernels::PersistentPhaseInfo kind =
                kernels::persistent_phase_info(part, plan.phases_per_step, 1, false, s.U);
            const kernels::PersistentMmaPlan mp = kernels::persistent_mma_plan(
                static_cast<int32_t>(kind.rows), s.rows, static_cast<int32_t>(plan.H_p));
            CHECK(mp.n_tiles >= 2);
            CHECK(mp.tail16 == s.tail16);
            split = split || mp.split_shift > 0;
          }
          if (reset_before_linear) CHECK(split == s.some_split);  // the two-phase cell's smaller phases split
        }
        const int C = 5, T = 4;
        const qgru::test::HandGruCell cell(s.H, C, static_cast<uint32_t>(s.H * 13 + s.N), reset_before_linear);
        const auto q_x = random_codes(static_cast<size_t>(T * s.N * C), static_cast<uint32_t>(s.N), 0, 255);
        const auto q_h0 = random_codes(static_cast<size_t>(s.N * s.H), static_cast<uint32_t>(s.H), 0, 255);
        for (bool reverse : {false, true}) {
          CAPTURE(reverse);
          kernels::PersistentEmulationOptions options;
          options.seed = static_cast<uint32_t>(s.H + s.N + (reverse ? 1 : 0));
          const kernels::PersistentEmulationResult got = kernels::emulate_persistent_gru_cell(
              plan, cell.view, cell.q_W.data(), cell.q_R.data(), C, cell.x_space, q_x.data(), T, q_h0.data(), reverse,
              nullptr, options);
          qgru::test::check_cell_flow(cell, got.out, q_x, T, s.N, q_h0, reverse);
        }
      }
    }
  }
}

TEST_CASE("persistent emulation: a block reading the wrong exchange buffer or skipping a wait is caught") {
  for (GruGemmPath path : {GruGemmPath::Int8, GruGemmPath::Wide16}) {
  for (bool reset_before_linear : {false, true}) {
    const int H = 33, C = 5, N = 3, T = 6;
    const qgru::test::HandGruCell cell(H, C, 99, reset_before_linear);
    const auto q_x = random_codes(static_cast<size_t>(T * N * C), 1, 0, 255);
    const auto q_h0 = random_codes(static_cast<size_t>(N * H), 2, 0, 255);
    const std::vector<int32_t> want = cell.reference(q_x, T, N, q_h0, false);
    const PersistentGruPlan plan = plan_for(H, N, reset_before_linear, 8, path);
    REQUIRE(plan.blocks == 15);  // 5 unit slices x 3 batch rows
    for (uint32_t seed = 1; seed <= 8; ++seed) {
      const bool wide = path == GruGemmPath::Wide16;
      CAPTURE(wide);
      CAPTURE(reset_before_linear);
      CAPTURE(seed);
      kernels::PersistentEmulationOptions options;
      options.seed = seed;
      CHECK(kernels::emulate_persistent_gru_cell(plan, cell.view, cell.q_W.data(), cell.q_R.data(), C, cell.x_space,
                                                 q_x.data(), T, q_h0.data(), false, nullptr, options)
                .out == want);
      options.fault_wrong_parity = true;
      CHECK(kernels::emulate_persistent_gru_cell(plan, cell.view, cell.q_W.data(), cell.q_R.data(), C, cell.x_space,
                                                 q_x.data(), T, q_h0.data(), false, nullptr, options)
                .out != want);
      options.fault_wrong_parity = false;
      options.fault_skip_wait = true;
      CHECK(kernels::emulate_persistent_gru_cell(plan, cell.view, cell.q_W.data(), cell.q_R.data(), C, cell.x_space,
                                                 q_x.data(), T, q_h0.data(), false, nullptr, options)
                .out != want);
    }
  }
  }
}

TEST_CASE("persistent emulation, cluster barrier: clusters drift phases apart, the codes equal the direct cell loop; a "
          "cluster that does not hold every writer of its rows is caught") {
  struct Shape {
    int H, U, N, rows;
  };
  // 5 unit slices x 3 batch slices of 1 row; 3 unit slices x 3 batch slices (19, 19, 2 rows: tiles, the tail);
  // 4 unit slices x 4 batch slices of 3 rows (the last of 2)
  const Shape shapes[] = {{33, 8, 3, 1}, {65, 32, 40, 19}, {32, 8, 11, 3}};
  for (const Shape& s : shapes) {
    for (GruGemmPath path : {GruGemmPath::Int8, GruGemmPath::Wide16}) {
      for (bool reset_before_linear : {false, true}) {
       for (kernels::PersistentSync sync : {kernels::PersistentSync::Cluster, kernels::PersistentSync::ClusterDsmem}) {
        const PersistentGruPlan plan = plan_cluster(s.H, s.N, reset_before_linear, s.U, path, s.rows, kH200Clusters, sync);
        CAPTURE(plan.describe());
        REQUIRE(plan.persistent);
        REQUIRE(plan.sync == sync);
        REQUIRE(plan.batch_blocks >= 3);
        const int C = 5, T = 6;
        const qgru::test::HandGruCell cell(s.H, C, static_cast<uint32_t>(s.H * 17 + s.N), reset_before_linear);
        const auto q_x = random_codes(static_cast<size_t>(T * s.N * C), static_cast<uint32_t>(s.N + 3), 0, 255);
        const auto q_h0 = random_codes(static_cast<size_t>(s.N * s.H), static_cast<uint32_t>(s.H + 3), 0, 255);
        for (bool reverse : {false, true}) {
          CAPTURE(reverse);
          const std::vector<int32_t> want = cell.reference(q_x, T, s.N, q_h0, reverse);
          for (uint32_t seed = 1; seed <= 4; ++seed) {
            CAPTURE(seed);
            kernels::PersistentEmulationOptions options;
            options.seed = seed;
            const kernels::PersistentEmulationResult got = kernels::emulate_persistent_gru_cell(
                plan, cell.view, cell.q_W.data(), cell.q_R.data(), C, cell.x_space, q_x.data(), T, q_h0.data(), reverse,
                nullptr, options);
            CHECK(got.out == want);
            CHECK(got.max_phase_gap > 1);  // clusters ran phases apart: no wait of one on another
            // The same plan with one grid barrier: never more than one phase apart.
            PersistentGruPlan one_group = plan;
            one_group.sync = kernels::PersistentSync::Grid;
            const kernels::PersistentEmulationResult grid = kernels::emulate_persistent_gru_cell(
                one_group, cell.view, cell.q_W.data(), cell.q_R.data(), C, cell.x_space, q_x.data(), T, q_h0.data(),
                reverse, nullptr, options);
            CHECK(grid.out == want);
            CHECK(grid.max_phase_gap <= 1);
            // Faults: the wrong exchange buffer, a skipped barrier, and clusters half as large as the unit slices
            // (a block's barrier then misses writers of the rows it stages).
            options.fault_wrong_parity = true;
            CHECK(kernels::emulate_persistent_gru_cell(plan, cell.view, cell.q_W.data(), cell.q_R.data(), C,
                                                       cell.x_space, q_x.data(), T, q_h0.data(), reverse, nullptr,
                                                       options).out != want);
            options.fault_wrong_parity = false;
            options.fault_skip_wait = true;
            CHECK(kernels::emulate_persistent_gru_cell(plan, cell.view, cell.q_W.data(), cell.q_R.data(), C,
                                                       cell.x_space, q_x.data(), T, q_h0.data(), reverse, nullptr,
                                                       options).out != want);
            options.fault_skip_wait = false;
            if (plan.unit_blocks % 2 == 0) {
              PersistentGruPlan halved = plan;
              halved.cluster_blocks = plan.unit_blocks / 2;
              CHECK(kernels::emulate_persistent_gru_cell(halved, cell.view, cell.q_W.data(), cell.q_R.data(), C,
                                                         cell.x_space, q_x.data(), T, q_h0.data(), reverse, nullptr,
                                                         options).out != want);
            }
          }
        }
       }
      }
    }
  }
}

namespace {

// What GruCellCuda does per cell when its plan takes the persistent path, emulated: the persistent emulation where the
// plan takes the cell, the per-step path's emulation (kernels::emulate_gru_cell) where it refuses; records each plan.
class PersistentRunner : public GruCellRunner {
 public:
  PersistentRunner(const QuantizedGru& model, uint32_t seed,
                   kernels::PersistentSync sync = kernels::PersistentSync::Grid)
      : model_(model), seed_(seed), sync_(sync) {}
  void run_cell(int layer, int direction, const int32_t* q_x, int T, int N, std::vector<int32_t>& q_h, int32_t* out,
                int out_stride, int out_offset) override {
    const GruCellQuantParams& p = model_.cell(layer, direction);
    const TensorQuant& xq = p.q(GruTensor::x);
    const CodeSpace x_space{xq.zp, xq.qmin(), xq.qmax()};
    const auto W = std::minmax_element(p.q_W.begin(), p.q_W.end());
    const auto R = std::minmax_element(p.q_R.begin(), p.q_R.end());
    const GruCellParamsView view = p.view();
    const kernels::GruOperandPlan operands = kernels::plan_gru_operands(*W.first, *W.second, *R.first, *R.second, x_space, view.h);
    PersistentGruTuning tuning;
    tuning.units_per_block = p.hidden_size <= 33 ? 8 : 0;
    tuning.sync = sync_;
    const PersistentGruPlan plan =
        kernels::plan_persistent_gru(operands.path, p.hidden_size, N, view.reset_before_linear, kH200Clusters, tuning);
    plans.push_back(plan);
    std::vector<int32_t> codes;
    if (plan.persistent) {
      kernels::PersistentEmulationOptions options;
      options.seed = seed_ + static_cast<uint32_t>(layer * 2 + direction);
      codes = kernels::emulate_persistent_gru_cell(plan, view, p.q_W.data(), p.q_R.data(), p.input_size, x_space, q_x, T,
                                                   q_h.data(), direction == 1, lengths, options)
                  .out;
    } else {
      codes = kernels::emulate_gru_cell(view, p.q_W.data(), p.q_R.data(), p.input_size, x_space, q_x, T, N, q_h.data(),
                                        direction == 1, lengths);
    }
    store_cell_codes(codes, T, N, p.hidden_size, direction, q_h, out, out_stride, out_offset, lengths);
  }
  std::vector<PersistentGruPlan> plans;

 private:
  const QuantizedGru& model_;
  uint32_t seed_;
  kernels::PersistentSync sync_;
};

}  // namespace

namespace {

// |raw accumulator| bound of one side: K · max |weight code| · max |operand code| (the overflow proof's own bound).
int64_t accumulator_bound(const std::vector<int32_t>& q_weights, int64_t K, const CodeSpace& operand) {
  int64_t w_max = 0;
  for (int32_t w : q_weights) w_max = std::max<int64_t>(w_max, w < 0 ? -int64_t{w} : int64_t{w});
  const int64_t code_max = std::max<int64_t>(-int64_t{operand.q_min}, operand.q_max);
  return K * w_max * code_max;
}

// A raw accumulator in [-bound, bound] of log-uniform magnitude (small values, where the linears do not saturate,
// as often as large ones).
int64_t random_accumulator(std::mt19937_64& rng, int64_t bound) {
  const int bits = static_cast<int>(rng() % 64);
  const auto magnitude = static_cast<int64_t>(rng() >> (63 - std::min(bits, 62)) >> 1);
  const int64_t v = bound == 0 ? 0 : magnitude % (bound + 1);
  return rng() & 1 ? v : -v;
}

}  // namespace

TEST_CASE("persistent folded cell returns gru_cell_element's codes: every preset, both cells, both scale forms, wide inputs") {
  // The persistent kernel's cell (gru_cell_element_folded, gru_cell_reset_hidden_folded on fold_unit's constants and
  // the GEMM's stored accumulators) against the shared cell on the raw accumulators, element by element: random units,
  // operand offsets (the paths' 0 / 128 and any 16-bit one), raw accumulators over the whole proven range, old h codes.
  for (const std::string& preset : bitwidth_preset_names()) {
    for (bool multiplier : {false, true}) {
      for (bool linear_before_reset : {true, false}) {
        CAPTURE(preset);
        CAPTURE(multiplier);
        CAPTURE(linear_before_reset);
        const test::GruModelCase k{preset.c_str(), multiplier, 33, 1, 1, 2, 2, false, false, linear_before_reset};
        const test::PreparedGruModel m = test::prepare_gru_model(k, 7);
        const GruCellQuantParams& p = m.c.quantized.cell(0, 0);
        const GruCellParamsView view = p.view();
        REQUIRE(view.reset_before_linear == !linear_before_reset);
        REQUIRE(view.multiplier_scales == multiplier);
        const TensorQuant& xq = p.q(GruTensor::x);
        const CodeSpace x_space{xq.zp, xq.qmin(), xq.qmax()};
        const int64_t bound_x = accumulator_bound(p.q_W, p.input_size, x_space);
        const int64_t bound_h = accumulator_bound(p.q_R, p.hidden_size, view.h);
        std::mt19937_64 rng(101u + (multiplier ? 2u : 0u) + (linear_before_reset ? 1u : 0u));
        std::vector<int32_t> seen_h(static_cast<size_t>(view.h.q_max - view.h.q_min + 1), 0);
        int64_t unsaturated = 0, mismatches = 0;
        for (int i = 0; i < 20000; ++i) {
          const auto j = static_cast<int32_t>(rng() % static_cast<uint64_t>(view.hidden_size));
          const int32_t offsets[] = {0, 128, -128, static_cast<int32_t>(rng() % 65537) - 32768};
          const int32_t x_offset = offsets[rng() % 4], h_offset = offsets[rng() % 4];
          GruCellAccumulators raw;
          int64_t stored_x[3], stored_h[3];
          for (int32_t g = 0; g < 3; ++g) {
            const int32_t c = g * view.hidden_size + j;
            raw.gemm_x[g] = random_accumulator(rng, bound_x);
            raw.gemm_h[g] = random_accumulator(rng, bound_h);
            stored_x[g] = raw.gemm_x[g] - int64_t{x_offset} * view.W_sum[c];  // what the GEMM of offset operands holds
            stored_h[g] = raw.gemm_h[g] - int64_t{h_offset} * view.R_sum[c];
          }
          const auto q_h_old =
              view.h.q_min + static_cast<int32_t>(rng() % static_cast<uint64_t>(view.h.q_max - view.h.q_min + 1));
          const GruUnitFolds folds = fold_unit(view, j, x_offset, h_offset);
          const int32_t want = gru_cell_element(view, j, raw, q_h_old, nullptr);
          const int32_t got = gru_cell_element_folded(view, folds, stored_x, stored_h, q_h_old);
          const int32_t want_reset = gru_cell_reset_hidden(view, j, raw.gemm_x[1], raw.gemm_h[1], q_h_old);
          const int32_t got_reset = gru_cell_reset_hidden_folded(view, folds, stored_x[1], stored_h[1], q_h_old);
          mismatches += (want != got) + (want_reset != got_reset);
          ++seen_h[static_cast<size_t>(want - view.h.q_min)];
          for (int32_t g = 0; g < 3; ++g) {
            const int32_t q_ih = compute_weight_ih_linear(view, g * view.hidden_size + j, raw.gemm_x[g]);
            unsaturated += q_ih > view.weight_ih_linear.q_min && q_ih < view.weight_ih_linear.q_max;
          }
        }
        CHECK(mismatches == 0);
        // The inputs reach inside the linears' ranges, not only their saturated ends, and many output codes.
        CHECK(unsaturated > 10000);
        CHECK(std::count_if(seen_h.begin(), seen_h.end(), [](int32_t n) { return n > 0; }) > 50);
      }
    }
  }
}

TEST_CASE("persistent emulation through the layer loop equals the reference executor: presets, multipliers, lengths, "
          "layers, every meeting") {
  for (kernels::PersistentSync sync :
       {kernels::PersistentSync::Grid, kernels::PersistentSync::Cluster, kernels::PersistentSync::ClusterDsmem}) {
  for (const test::GruModelCase& k : test::kPersistentModelCases) {
    const std::string preset = k.preset;
    CAPTURE(kernels::persistent_sync_name(sync));
    CAPTURE(preset);
    CAPTURE(k.multiplier);
    CAPTURE(k.H);
    CAPTURE(k.L);
    CAPTURE(k.D);
    CAPTURE(k.N);
    CAPTURE(k.T);
    CAPTURE(k.linear_before_reset);
    const test::PreparedGruModel m = test::prepare_gru_model(k, 5);
    const QuantGruResult want =
        run_quantized_gru_codes(m.c.quantized, m.q_x.data(), k.T, k.N, m.h0(), nullptr, m.lengths_data());
    PersistentRunner runner(m.c.quantized, 11u + static_cast<uint32_t>(k.H), sync);
    const QuantGruResult got = run_layer_loop(m.c.quantized, m.q_x.data(), k.T, k.N, m.h0(), runner, m.lengths_data());
    CHECK(got.output_codes == want.output_codes);
    CHECK(got.h_n_codes == want.h_n_codes);
    REQUIRE(runner.plans.size() == static_cast<size_t>(k.L * k.D));
    for (const PersistentGruPlan& p : runner.plans) {
      CAPTURE(p.describe());
      CHECK(p.persistent);
      // the int8 preset's operands take the int8 path, the 16-bit presets' the wide one
      CHECK(p.path == (preset == "int8" ? GruGemmPath::Int8 : GruGemmPath::Wide16));
      CHECK(p.sync == sync);  // every case's cell fits a cluster
    }
  }
  }
}

TEST_CASE("persistent workspace: regions aligned, disjoint and sized by the path's layout") {
  for (GruGemmPath path : {GruGemmPath::Int8, GruGemmPath::Wide16}) {
    for (bool reset_before_linear : {false, true}) {
      const kernels::GruGemmLayout l = kernels::persistent_gemm_layout(path, 33, 5, 3, 7);
      const kernels::WorkspaceCarve w = kernels::persistent_gru_workspace(l, reset_before_linear);
      const int64_t operand = path == GruGemmPath::Int8 ? 1 : 2, acc = path == GruGemmPath::Int8 ? 4 : 8;
      CHECK(l.N_p == (path == GruGemmPath::Int8 ? 16 : 3));
      const int64_t sizes[] = {operand * 7 * l.N_p * l.C_p, 2 * operand * l.N_p * l.H_p, acc * 7 * l.N_p * l.rows_p,
                               4 * 3 * 33, 4 * 7 * 3 * 33, reset_before_linear ? operand * l.N_p * l.H_p : 0,
                               kernels::kPersistentSyncBytes};
      REQUIRE(w.offsets.size() == 7);
      for (size_t i = 0; i < 7; ++i) {
        CHECK(w.offsets[i] % kernels::kWorkspaceAlignment == 0);
        const int64_t end = w.offsets[i] + sizes[i];
        CHECK(end <= (i + 1 < 7 ? w.offsets[i + 1] : w.total_bytes));
      }
    }
  }
}

TEST_CASE("persistent emulation refuses a plan the kernel would not run, naming why") {
  const qgru::test::HandGruCell cell(33, 5, 3);
  const std::vector<int32_t> q_x(5, 0);
  const PersistentGruPlan refused = plan_for(64, 1, false, 12);
  CHECK_THROWS_WITH_AS(kernels::emulate_persistent_gru_cell(refused, cell.view, cell.q_W.data(), cell.q_R.data(), 5,
                                                            cell.x_space, q_x.data(), 1, nullptr, false, nullptr),
                       doctest::Contains("units per block 12 is not a configuration"), qgru::Error);
  const PersistentGruPlan other_h = plan_for(32, 1, false);
  CHECK_THROWS_WITH_AS(kernels::emulate_persistent_gru_cell(other_h, cell.view, cell.q_W.data(), cell.q_R.data(), 5,
                                                            cell.x_space, q_x.data(), 1, nullptr, false, nullptr),
                       doctest::Contains("plan for H=32, cell H=33"), qgru::Error);
}

}  // namespace qgru
