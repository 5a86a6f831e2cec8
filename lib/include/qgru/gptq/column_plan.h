#pragma once
// Where GPTQ's per-column choices come from, decided from diag(H) and the options alone (never from W), so
// the CPU path (gptq.cpp) and the CUDA driver (cuda/src/gptq_device.cpp) take them from one function:
// the processing order, which row of the parameter tables each processed column quantizes with, at which
// processed columns a group's parameters are found (from W as earlier blocks left it), and g_idx.
#include <cstdint>
#include <vector>

#include "qgru/gptq/gptq.h"

namespace qgru::gptq {

struct ColumnPlan {
  int64_t K = 0;
  int64_t group_width = 0;   // gs: columns per group (K for one group per row, clamped to K)
  int64_t tables = 1;        // rows of the parameter tables scale[tables, N], zero[tables, N] (= G)
  bool grouped = false;      // group_size != -1
  std::vector<int64_t> perm; // [K] processing order: perm[p] = original column
  std::vector<int32_t> slot; // [K] parameter table row of processed column p
  // Non-static groups: the processed columns p (in order) at which table row find_slot[i] is filled from
  // W[:, p, p + group_width) (processing order) before the block holding p runs. Empty otherwise: the tables
  // are filled once, before the blocks, from W (dead columns zeroed) in original order (static groups:
  // row g from columns [g·gs, (g+1)·gs); no groups: row 0 from the original W, before dead columns).
  std::vector<int64_t> find_at;
  std::vector<int32_t> find_slot;
  std::vector<int32_t> g_idx; // [K] group of each original column, as the checkpoint stores it
};

// The lazy-update blocks of block_size columns (the last one shorter; a block wider than K is K wide), each
// with the range [find_begin, find_end) of the plan's find_at entries that fall inside it: the group
// parameters found, from W as the earlier blocks left it, before the block's rows run.
struct PlanBlock {
  int64_t begin = 0, end = 0;
  size_t find_begin = 0, find_end = 0;
};
std::vector<PlanBlock> plan_blocks(const ColumnPlan& plan, int64_t block_size);

// The processing order (gptq.h step 4) of K columns from diag(H) after the dead-column fix.
std::vector<int64_t> column_order(const std::vector<double>& diagonal, int64_t group_size, const GptqOptions& options);

// The whole plan; `diagonal` is diag(H) after dead columns were set to 1. Options must be valid (check_options).
ColumnPlan plan_columns(const std::vector<double>& diagonal, const GptqOptions& options);

}  // namespace qgru::gptq
