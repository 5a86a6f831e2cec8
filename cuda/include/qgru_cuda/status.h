#pragma once
// The three ways a CUDA-side call can end without a result, as exception types (all qgru::Error, so the
// CLI prints them as one line and exits 1). Host-only, no CUDA headers needed.
//   NoDevice:     there is no usable GPU ("no CUDA device: <reason>").
//   NotSupported: the request is valid but no kernel/configuration exists for it; the message names the
//                 shape that asked. Nothing was launched.
//   CudaFailure:  a CUDA runtime or cuBLAS call failed; the message has the call text and file:line.
#include <string>

#include "qgru/base/error.h"

namespace qgru::cuda {

class NoDevice : public Error {
 public:
  explicit NoDevice(const std::string& reason) : Error("no CUDA device: " + reason) {}
};

class NotSupported : public Error {
 public:
  explicit NotSupported(const std::string& what) : Error("not supported: " + what) {}
};

class CudaFailure : public Error {
 public:
  explicit CudaFailure(const std::string& what) : Error(what) {}
};

}  // namespace qgru::cuda
