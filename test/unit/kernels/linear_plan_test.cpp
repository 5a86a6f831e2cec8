// Launch planning of the GPU quantized linear: the configurations listed, the split-K covering every k tile
// exactly once, workspace sizes, and "not supported" answers that name the shape.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "qgru/kernels/linear_plan.h"

namespace dq = qgru::kernels;

TEST_CASE("every listed tile configuration tiles into 16x16x16 WMMA steps and fits 48 KiB static smem") {
  for (const auto& c : dq::kTileConfigs) {
    CHECK(c.block_m % (16 * c.warps_m) == 0);
    CHECK(c.block_n % (16 * c.warps_n) == 0);
    CHECK(c.block_k % 16 == 0);
    CHECK(c.block_k % (32 / c.bits) == 0);
    CHECK(dq::tile_smem_bytes(c) <= 48 * 1024);
  }
}

TEST_CASE("split-K covers every k tile exactly once, with no empty split, for the benchmark shapes") {
  for (int bits : {4, 8}) {
    for (int64_t N : {4096, 11008}) {
      for (int64_t M : {1, 16, 33, 64, 256}) {
        for (int sms : {1, 108, 132}) {
         for (int target : {0, 1, 2, 8, 32}) {
          const dq::LinearProblem p{M, N, 4096, bits, 128};
          const dq::LinearPlan plan = dq::plan_linear(p, sms, {target, -1});
          REQUIRE_MESSAGE(plan.supported, plan.reason);
          const auto& c = dq::kTileConfigs[plan.config_index];
          CHECK(c.bits == bits);
          CHECK((c.block_m == 16) == (M <= dq::kSmallBatchMaxM));
          CHECK(plan.grid_x * c.block_n >= N);
          CHECK(plan.grid_y * c.block_m >= M);
          CHECK(plan.k_tiles * c.block_k == 4096);
          CHECK(plan.grid_z >= 1);
          CHECK(plan.grid_z <= dq::kMaxSplitK);
          std::vector<int> seen(static_cast<size_t>(plan.k_tiles), 0);
          for (int64_t z = 0; z < plan.grid_z; ++z) {
            const dq::KTileRange r = dq::split_k_range(plan.k_tiles, plan.k_tiles_per_split, z);
            REQUIRE(r.end > r.begin);  // no empty split
            for (int64_t t = r.begin; t < r.end; ++t) ++seen[static_cast<size_t>(t)];
          }
          for (int s : seen) REQUIRE(s == 1);
          CHECK(plan.workspace_bytes == (plan.grid_z > 1 ? 4 * M * N : 0));
         }
        }
      }
    }
  }
}

TEST_CASE("split-K targets: two blocks per SM when told, the small-batch tile's eight by default") {
  const dq::LinearPlan plan = dq::plan_linear({1, 4096, 4096, 4, 128}, 132, {2, 0});  // the k32 small tile
  REQUIRE(plan.supported);
  CHECK(plan.grid_x == 32);
  CHECK(plan.grid_z == 9);  // ceil(264 / 32) = 9 splits of ceil(128 / 9) = 15 k tiles (the last 8)
  CHECK(plan.k_tiles_per_split == 15);
  CHECK(plan.workspace_bytes == 4 * 4096);
  const dq::LinearPlan by_default = dq::plan_linear({1, 4096, 4096, 4, 128}, 132);
  CHECK(std::string(dq::kTileConfigs[by_default.config_index].name) == "w4a16_m16n128k64");
  CHECK(by_default.grid_z == 32);  // target 8: ceil(1056 / 32) = 33 splits asked of 64 k tiles, 2 each, 32 splits
  CHECK(by_default.k_tiles_per_split == 2);
  const dq::LinearPlan big = dq::plan_linear({256, 11008, 4096, 4, 128}, 132);
  CHECK(big.grid_z == 1);  // 86 x 4 = 344 blocks already
  CHECK(big.workspace_bytes == 0);
}

TEST_CASE("a larger split-K target splits batch 1 finer, up to one k tile per split") {
  const dq::LinearPlan eight = dq::plan_linear({1, 4096, 4096, 4, 128}, 132, {8, 0});
  REQUIRE(eight.supported);
  CHECK(eight.k_tiles_per_split == 4);  // ceil(1056 / 32) = 33 splits asked, ceil(128 / 33) = 4 k tiles each
  CHECK(eight.grid_z == 32);            // and no empty split: 128 / 4
  const dq::LinearPlan most = dq::plan_linear({1, 4096, 4096, 4, 128}, 132, {1000, 0});
  CHECK(most.grid_z == dq::kMaxSplitK);  // capped: 64 splits of 2 k tiles
  CHECK(most.k_tiles_per_split == 2);
  const dq::LinearPlan few_k = dq::plan_linear({1, 4096, 96, 4, 32}, 132, {1000, -1});
  CHECK(few_k.grid_z == 3);  // never more splits than k tiles
  CHECK(!dq::plan_linear({1, 4096, 4096, 4, 128}, 132, {-1, -1}).supported);
}

TEST_CASE("a tuning names any configuration of the weights' bit width, and only those") {
  const dq::LinearPlan deep = dq::plan_linear({1, 4096, 4096, 4, 128}, 132, {0, 4});
  REQUIRE(deep.supported);
  CHECK(std::string(dq::kTileConfigs[deep.config_index].name) == "w4a16_m16n128k64");
  CHECK(deep.k_tiles == 64);
  CHECK(deep.grid_z == 32);  // the small tile's target: 33 splits asked of 64 k tiles, 2 each
  const dq::LinearPlan small_tile_big_m = dq::plan_linear({256, 4096, 4096, 8, 128}, 132, {0, 2});
  REQUIRE(small_tile_big_m.supported);
  CHECK(small_tile_big_m.grid_y == 16);
  CHECK(dq::plan_linear({1, 4096, 4096, 4, 128}, 132, {0, 2}).reason.find("not one for 4-bit") != std::string::npos);
  CHECK(!dq::plan_linear({1, 4096, 4096, 4, 128}, 132, {0, dq::kTileConfigCount}).supported);
  CHECK(dq::plan_linear({1, 4096, 4064, 4, 32}, 132, {0, 4}).reason.find("multiple of the tile's block_k = 64") !=
        std::string::npos);
  // By default: the k64 tile for small batches when 64 divides K, else the k32 one; k32 for large batches.
  for (int bits : {4, 8}) {
    for (int64_t M : {1, 32, 33, 256}) {
      CAPTURE(M);
      const dq::TileConfig& deep_k = dq::kTileConfigs[dq::plan_linear({M, 4096, 4096, bits, 128}, 132).config_index];
      CHECK(deep_k.block_k == (M <= dq::kSmallBatchMaxM ? 64 : 32));
      const dq::LinearPlan k32_only = dq::plan_linear({M, 4096, 4064, bits, 32}, 132);
      REQUIRE(k32_only.supported);
      CHECK(dq::kTileConfigs[k32_only.config_index].block_k == 32);
      CHECK(dq::kTileConfigs[k32_only.config_index].block_m == (M <= dq::kSmallBatchMaxM ? 16 : 64));
    }
  }
}

TEST_CASE("shapes without a kernel are refused with the shape in the message") {
  const auto reason = [](dq::LinearProblem p) { return dq::plan_linear(p, 132).reason; };
  CHECK(reason({1, 4096, 4040, 4, 128}).find("K must be a multiple") != std::string::npos);
  CHECK(reason({1, 4096, 4040, 4, 128}).find("K=4040") != std::string::npos);
  CHECK(reason({1, 12, 4096, 4, 128}).find("N must be a multiple of 8") != std::string::npos);
  CHECK(reason({1, 4096, 4096, 3, 128}).find("only 4- and 8-bit") != std::string::npos);
  CHECK(reason({1, 4096, 4096, 4, 12}).find("group_size must be a positive multiple of 8") != std::string::npos);
  CHECK(reason({0, 4096, 4096, 4, 128}).find("at least 1") != std::string::npos);
  CHECK(!dq::plan_linear({1, 4096, 4096, 4, 128}, 0).supported);
}

TEST_CASE("shared memory layout: two stages and the W tile do not overlap, start 32-byte aligned, the epilogue fits") {
  for (const dq::TileConfig& c : dq::kTileConfigs) {
    const dq::TileSmemLayout l = dq::tile_smem_layout(c);
    CHECK(l.a_stage_bytes == 2LL * c.block_m * (c.block_k + 8));
    CHECK(l.w_stage_bytes == 4LL * (c.block_k * c.bits / 32) * c.block_n);
    const int64_t starts[] = {l.a_offset[0], l.a_offset[1], l.w_offset[0], l.w_offset[1], l.tile_offset};
    const int64_t sizes[] = {l.a_stage_bytes, l.a_stage_bytes, l.w_stage_bytes, l.w_stage_bytes,
                             2LL * c.block_k * (c.block_n + 8)};
    for (int i = 0; i < 5; ++i) {
      CHECK(starts[i] % 32 == 0);
      CHECK(starts[i] + sizes[i] <= l.total_bytes);
      for (int j = i + 1; j < 5; ++j) CHECK((starts[i] + sizes[i] <= starts[j] || starts[j] + sizes[j] <= starts[i]));
    }
    CHECK(l.epilogue_bytes == 4LL * c.warps_m * c.warps_n * 16 * dq::kFragmentLd);
    CHECK(l.epilogue_bytes <= l.total_bytes);
    // The k32 tiles stay below the single-stage kernel's 33.8 KB fp32 C staging area; the k64 tiles spend more
    // shared memory on fewer barriers per byte (within 48 KiB: the first test case).
    if (c.block_k == 32) CHECK(l.total_bytes < 33792);
  }
}

TEST_CASE("engine choice: legacy by default, stripes only where the layer holds its layout, auto by the table") {
  dq::LinearKernelSetting s;
  CHECK(dq::parse_linear_kernel_setting(nullptr, s).empty());
  CHECK(s == dq::kDefaultLinearKernelSetting);
  CHECK(dq::parse_linear_kernel_setting("", s).empty());
  CHECK(dq::parse_linear_kernel_setting("stripes", s).empty());
  CHECK(s == dq::LinearKernelSetting::Stripes);
  CHECK(dq::parse_linear_kernel_setting("auto", s).empty());
  CHECK(s == dq::LinearKernelSetting::Auto);
  CHECK(dq::parse_linear_kernel_setting("legacy", s).empty());
  CHECK(s == dq::LinearKernelSetting::Legacy);
  CHECK(dq::parse_linear_kernel_setting("wgmma", s).empty());
  CHECK(s == dq::LinearKernelSetting::Wgmma);
  CHECK(std::string(dq::setting_name(s)) == "wgmma");
  CHECK(dq::parse_linear_kernel_setting("fast", s).find("QGRU_CUDA_LINEAR_KERNEL=fast") != std::string::npos);

  for (const int64_t M : {1, 16, 17, 63, 64, 65, 256, 4096}) {
    CAPTURE(M);
    CHECK(dq::choose_engine(M, dq::LinearKernelSetting::Legacy, "").engine == dq::LinearEngine::Tiles);
    CHECK(dq::choose_engine(M, dq::LinearKernelSetting::Stripes, "").engine == dq::LinearEngine::Stripes);
    // wgmma: every M on the stripes layout; a layer without it runs the tile kernel, saying why
    CHECK(dq::choose_engine(M, dq::LinearKernelSetting::Wgmma, "").engine == dq::LinearEngine::Wgmma);
    CHECK(dq::choose_engine(M, dq::LinearKernelSetting::Wgmma, "stripes kernel: group_size").engine == dq::LinearEngine::Tiles);
    // auto never picks it before a benchmark places it in the table
    CHECK(dq::choose_engine(M, dq::LinearKernelSetting::Auto, "").engine != dq::LinearEngine::Wgmma);
    const dq::EngineChoice refused = dq::choose_engine(M, dq::LinearKernelSetting::Auto, "stripes kernel: group_size");
    CHECK(refused.engine == dq::LinearEngine::Tiles);
    CHECK(refused.reason.find("group_size") != std::string::npos);
    const dq::EngineChoice a = dq::choose_engine(M, dq::LinearKernelSetting::Auto, "");
    CHECK(a.engine == (M <= 64 ? dq::LinearEngine::Stripes : dq::LinearEngine::DequantGemm));
    CHECK(!a.reason.empty());
  }
}

TEST_CASE("the engine choice is constant over each row of the engine table (so a layer can choose once per row)") {
  int64_t low = 1;
  for (const dq::EngineRow& row : dq::kEngineTable) {
    const int64_t high = row.max_m == INT64_MAX ? low + 1000 : row.max_m;
    for (const auto setting : {dq::LinearKernelSetting::Legacy, dq::LinearKernelSetting::Stripes, dq::LinearKernelSetting::Auto,
                               dq::LinearKernelSetting::Wgmma})
      for (const std::string& why : {std::string(), std::string("stripes kernel: group_size")}) {
        const dq::EngineChoice at_row = dq::choose_engine(row.max_m, setting, why);
        for (int64_t M = low; M <= high; M += (high - low) / 7 + 1) {
          const dq::EngineChoice c = dq::choose_engine(M, setting, why);
          CHECK(c.engine == at_row.engine);
          CHECK(c.reason == at_row.reason);
        }
      }
    low = row.max_m == INT64_MAX ? low : row.max_m + 1;
  }
}
