#pragma once
// Internals shared by the .npy and .npz readers and writers.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qgru/base/tensor.h"

namespace qgru::io_detail {

// Reads `size` bytes at `offset` (relative to the start of the .npy bytes) into `out`. The .npy reader
// calls it with increasing, contiguous ranges that together cover the whole array, so a caller may hash
// what passes through (the .npz reader checks each member's CRC-32 this way).
using ReadAt = std::function<void(uint64_t offset, void* out, uint64_t size)>;

// Parses and validates one .npy held in `total_size` bytes reachable through `read_at`. `source` names it
// in messages ("file.npy", or "file.npz: array 'x'").
Tensor read_npy_bytes(const ReadAt& read_at, uint64_t total_size, const std::string& source);

// The .npy preamble and header (magic, version, header length, header dict, padding) for `tensor`; the
// data bytes follow it unchanged. Throws qgru::Error naming `target` for dtypes .npy cannot hold.
std::vector<uint8_t> npy_header_bytes(const Tensor& tensor, const std::string& target);

}  // namespace qgru::io_detail
