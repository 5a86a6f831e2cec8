#include "qgru/gptq/device_plan.h"

#include <algorithm>
#include <cstdio>

namespace qgru::gptq {
namespace {

constexpr uint64_t kAlign = 256;

// a · b · c bytes rounded up to kAlign, added to `total`; false on overflow.
bool add_buffer(uint64_t& total, uint64_t& part, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(a, b, &bytes) || __builtin_mul_overflow(bytes, c, &bytes)) return false;
  if (bytes > UINT64_MAX - kAlign) return false;
  bytes = (bytes + kAlign - 1) / kAlign * kAlign;
  if (__builtin_add_overflow(part, bytes, &part) || __builtin_add_overflow(total, bytes, &total)) return false;
  return true;
}

}  // namespace

int64_t hessian_chunk_rows(int64_t K, int64_t M, uint64_t budget_bytes) {
  if (K <= 0 || M <= 0) return 1;
  const uint64_t per_row = static_cast<uint64_t>(K) * (sizeof(float) + sizeof(double));
  const uint64_t fit = budget_bytes / per_row;
  const int64_t limit = std::min<int64_t>(M, int64_t{2147483647});
  return std::max<int64_t>(1, static_cast<int64_t>(std::min<uint64_t>(fit, static_cast<uint64_t>(limit))));
}

DeviceGptqBytes device_gptq_bytes(int64_t N, int64_t K, int64_t block_size, int64_t tables, int bits, bool tie_margin) {
  DeviceGptqBytes b;
  const uint64_t n = static_cast<uint64_t>(std::max<int64_t>(N, 0)), k = static_cast<uint64_t>(std::max<int64_t>(K, 0));
  const uint64_t block = static_cast<uint64_t>(std::clamp<int64_t>(block_size, 1, std::max<int64_t>(K, 1)));
  const uint64_t words = k * static_cast<uint64_t>(bits) / 32;
  bool ok = add_buffer(b.total, b.weight, n, k, 8) && add_buffer(b.total, b.weight, k, n, 8) &&
            add_buffer(b.total, b.matrices, k, k, 8) && add_buffer(b.total, b.matrices, k, k, 8) &&
            add_buffer(b.total, b.matrices, k, k, 8) && add_buffer(b.total, b.block, block, n, 8) &&
            add_buffer(b.total, b.tables, static_cast<uint64_t>(std::max<int64_t>(tables, 1)), n, 16) &&
            add_buffer(b.total, b.codes, k, n, 4) && add_buffer(b.total, b.codes, k, n, 4) &&
            add_buffer(b.total, b.codes, words, n, 4) && add_buffer(b.total, b.small, k, 8, 1) &&
            add_buffer(b.total, b.small, k, 8, 1) && add_buffer(b.total, b.small, k, 4, 1) &&
            add_buffer(b.total, b.small, k, 8, 1);
  if (ok && tie_margin) ok = add_buffer(b.total, b.tie_margin, k, n, 8);
  if (!ok) b.total = UINT64_MAX;
  return b;
}

std::string device_memory_refusal(int64_t N, int64_t K, uint64_t needed, uint64_t free_bytes) {
  if (needed <= free_bytes) return "";
  char text[200];
  std::snprintf(text, sizeof text,
                "gptq --device cuda: a [%lld, %lld] layer needs %.2f GiB of device memory, %.2f GiB are free",
                static_cast<long long>(N), static_cast<long long>(K), static_cast<double>(needed) / 1073741824.0,
                static_cast<double>(free_bytes) / 1073741824.0);
  return text;
}

}  // namespace qgru::gptq
