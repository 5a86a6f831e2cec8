#pragma once
// ZIP record layouts (PKWARE APPNOTE 6.3) shared by the reader and the writer of this area.
#include <cstdint>
#include <string>

#include "qgru/base/error.h"

namespace qgru::zip_format {

inline constexpr uint32_t kLocalHeaderSignature = 0x04034b50;
inline constexpr uint32_t kCentralHeaderSignature = 0x02014b50;
inline constexpr uint32_t kEndSignature = 0x06054b50;
inline constexpr uint32_t kZip64EndSignature = 0x06064b50;
inline constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
inline constexpr uint64_t kLocalHeaderBytes = 30;
inline constexpr uint64_t kCentralHeaderBytes = 46;
inline constexpr uint64_t kEndBytes = 22;
inline constexpr uint64_t kZip64LocatorBytes = 20;
inline constexpr uint64_t kZip64EndBytes = 56;
inline constexpr uint16_t kMethodStored = 0;
inline constexpr uint16_t kMethodDeflate = 8;
inline constexpr uint16_t kFlagEncrypted = 0x0001;
inline constexpr uint16_t kFlagUtf8Name = 0x0800;
inline constexpr uint32_t kSaturated32 = 0xFFFFFFFFu;  // a classic field whose value is in the ZIP64 record
inline constexpr uint16_t kDosDate1980 = (0 << 9) | (1 << 5) | 1;  // 1980-01-01: fixed, so output is reproducible

[[noreturn]] inline void fail(const std::string& source, const std::string& what) { throw Error(source + ": " + what); }

}  // namespace qgru::zip_format
