#pragma once
// NumPy .npy (format versions 1.0, 2.0, 3.0; little-endian or byte-order-free dtypes; C order) and
// uncompressed .npz archives. Anything else is refused with a message naming the file.
#include <map>
#include <string>
#include <vector>

#include "qgru/base/tensor.h"

namespace qgru {

Tensor read_npy(const std::string& path);
Tensor parse_npy(const std::vector<uint8_t>& bytes, const std::string& source_name);
std::vector<uint8_t> serialize_npy(const Tensor& tensor);
void write_npy(const std::string& path, const Tensor& tensor);  // atomic

std::map<std::string, Tensor> read_npz(const std::string& path);          // keys without ".npy"
void write_npz(const std::string& path, const std::map<std::string, Tensor>& arrays);  // stored, atomic

// Read .npy or .npz by extension (an .npz must hold exactly one array, or name it as "file.npz:key").
Tensor read_array(const std::string& path_or_path_key);

}  // namespace qgru
