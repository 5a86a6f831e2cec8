#include "qgru/gptq/column_plan.h"

#include <algorithm>
#include <numeric>

namespace qgru::gptq {

// act_order: descending over all columns. group_aware: storage groups [g·gs, (g+1)·gs) stay whole, each in
// descending order inside, groups in descending order of their largest entry; a shorter last group stays
// last in column order (GPTQModel's compute_local_perms / compute_global_perm / extend_perm_with_tail).
// Sorts are stable, so equal entries keep column order. Natural: the identity.
std::vector<int64_t> column_order(const std::vector<double>& diagonal, int64_t gs, const GptqOptions& options) {
  const int64_t K = static_cast<int64_t>(diagonal.size());
  std::vector<int64_t> perm(static_cast<size_t>(K));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  auto diag = [&](int64_t i) { return diagonal[static_cast<size_t>(i)]; };
  auto descending = [&](int64_t a, int64_t b) { return diag(a) > diag(b); };
  if (options.act_order) {
    std::stable_sort(perm.begin(), perm.end(), descending);
  } else if (options.group_aware) {
    const int64_t full_groups = K / gs;
    std::vector<int64_t> group_order(static_cast<size_t>(full_groups));
    std::vector<double> group_max(static_cast<size_t>(full_groups));
    std::iota(group_order.begin(), group_order.end(), int64_t{0});
    for (int64_t g = 0; g < full_groups; ++g) {
      auto first = perm.begin() + g * gs;
      std::stable_sort(first, first + gs, descending);
      group_max[static_cast<size_t>(g)] = diag(*first);
    }
    std::stable_sort(group_order.begin(), group_order.end(), [&](int64_t a, int64_t b) {
      return group_max[static_cast<size_t>(a)] > group_max[static_cast<size_t>(b)];
    });
    std::vector<int64_t> within = perm;
    for (int64_t j = 0; j < full_groups; ++j) {
      const int64_t g = group_order[static_cast<size_t>(j)];
      std::copy(within.begin() + g * gs, within.begin() + (g + 1) * gs, perm.begin() + j * gs);
    }
  }
  return perm;
}

ColumnPlan plan_columns(const std::vector<double>& diagonal, const GptqOptions& options) {
  ColumnPlan plan;
  const int64_t K = static_cast<int64_t>(diagonal.size());
  plan.K = K;
  plan.grouped = options.group_size != -1;
  // A group wider than K is K wide for the parameters (one group, g_idx all 0), so g·gs and col + gs stay in
  // range; the order takes the group size as asked: a group wider than K is a shorter last group, which
  // group-aware order keeps in column order (with gs clamped to K it would be one full group, sorted).
  const int64_t gs = plan.grouped ? std::min(options.group_size, K) : K;
  plan.group_width = gs;
  plan.tables = group_count(K, options.group_size);
  plan.perm = column_order(diagonal, plan.grouped ? options.group_size : K, options);
  plan.slot.assign(static_cast<size_t>(K), 0);
  plan.g_idx.assign(static_cast<size_t>(K), 0);
  if (!plan.grouped) return plan;
  int32_t active = 0;
  for (int64_t col = 0; col < K; ++col) {
    const int64_t original = plan.perm[static_cast<size_t>(col)];
    if (options.static_groups) {
      active = static_cast<int32_t>(original / gs);
    } else if (col % gs == 0) {
      // The group that starts here, in storage terms: act-order numbers groups in processing order (g_idx
      // follows the permutation); natural and group-aware order keep the storage groups, which a
      // group-aware permutation moves whole.
      active = static_cast<int32_t>(options.act_order ? col / gs : original / gs);
      plan.find_at.push_back(col);
      plan.find_slot.push_back(active);
    }
    plan.slot[static_cast<size_t>(col)] = active;
  }
  if (options.act_order && !options.static_groups) {
    for (int64_t p = 0; p < K; ++p) plan.g_idx[static_cast<size_t>(plan.perm[static_cast<size_t>(p)])] = static_cast<int32_t>(p / gs);
  } else {
    for (int64_t k = 0; k < K; ++k) plan.g_idx[static_cast<size_t>(k)] = static_cast<int32_t>(k / gs);
  }
  return plan;
}

std::vector<PlanBlock> plan_blocks(const ColumnPlan& plan, int64_t block_size) {
  const int64_t B = std::min(block_size, plan.K);
  std::vector<PlanBlock> blocks;
  size_t next = 0;
  for (int64_t begin = 0; begin < plan.K; begin += B) {
    PlanBlock block;
    block.begin = begin;
    block.end = std::min(begin + B, plan.K);
    block.find_begin = next;
    while (next < plan.find_at.size() && plan.find_at[next] < block.end) ++next;
    block.find_end = next;
    blocks.push_back(block);
  }
  return blocks;
}

}  // namespace qgru::gptq
