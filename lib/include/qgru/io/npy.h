#pragma once
// NumPy .npy (format versions 1.0, 2.0, 3.0; little-endian or byte-order-free dtypes; C order) and
// uncompressed .npz archives. Anything else is refused with a message naming the file.
//
// Read: descr '<f8' '<f4' '<f2' '<i8' '<i4' '<i2' '|i1' '|u1' ('<i1', '<u1' too) map to F64 F32 F16 I64 I32
// I16 I8 U8. Refused, each with its own message: big-endian ('>'), bool, other dtypes, structured dtypes,
// fortran_order True, a header dict with missing, repeated or extra keys, data bytes that differ from
// product(shape) x itemsize (truncated or trailing), and, in .npz, compressed or encrypted members and
// members whose CRC-32 does not match.
// Write: format 1.0 (2.0 when the header needs it), C order, little-endian, data aligned to 64 bytes as
// NumPy does. BF16 has no NumPy dtype and is refused. .npz members are stored ("key.npy"), with a fixed
// 1980-01-01 timestamp so that equal arrays give equal files.
#include <map>
#include <string>
#include <vector>

#include "qgru/base/tensor.h"

namespace qgru {

Tensor read_npy(const std::string& path);
Tensor parse_npy(const std::vector<uint8_t>& bytes, const std::string& source_name);
std::vector<uint8_t> serialize_npy(const Tensor& tensor);
void write_npy(const std::string& path, const Tensor& tensor);  // atomic

std::map<std::string, Tensor> read_npz(const std::string& path);  // keys without ".npy"; ZIP64 understood
std::map<std::string, Tensor> parse_npz(const std::vector<uint8_t>& bytes, const std::string& source_name);
void write_npz(const std::string& path, const std::map<std::string, Tensor>& arrays);  // stored, atomic, ZIP64 past 4 GiB

// Read .npy or .npz by extension (an .npz must hold exactly one array, or name it as "file.npz:key");
// a path with neither extension is recognised by its magic bytes.
Tensor read_array(const std::string& path_or_path_key);
// The file read_array reads: "file.npz:key" -> "file.npz", anything else as it is.
std::string array_file_path(const std::string& path_or_path_key);

}  // namespace qgru
