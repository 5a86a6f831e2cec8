// qgru runtime, C++ wrapper: header-only RAII classes over the C API (qgru/qgru_runtime.h, whose contract
// and shapes apply unchanged). A failed call throws qgru_rt::Error carrying the status and the C API's
// message; handles are move-only and free themselves. C++11 or later.
//
//   qgru_rt::Model model("model.qgru.json");
//   qgru_rt::Context context(model);                  // CPU, fast executor
//   qgru_rt::State state(context, 1);                 // one stream
//   state.step_codes(x_codes, 1, y_codes);            // x_codes [1, 1, C] -> y_codes [1, 1, H]
#ifndef QGRU_QGRU_RUNTIME_HPP_
#define QGRU_QGRU_RUNTIME_HPP_

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "qgru/qgru_runtime.h"

namespace qgru_rt {

class Error : public std::runtime_error {
 public:
  Error(qgru_rt_status status, const std::string& message)
      : std::runtime_error(std::string(qgru_rt_status_name(status)) + ": " + message), status_(status) {}
  qgru_rt_status status() const { return status_; }

 private:
  qgru_rt_status status_;
};

inline void check(qgru_rt_status status) {
  if (status != QGRU_RT_OK) throw Error(status, qgru_rt_last_error());
}

// A move-only owner of one C handle (Deleter: the C API's destroy function).
template <class T, void (*Destroy)(T*)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T* raw) : raw_(raw) {}
  ~Handle() { Destroy(raw_); }
  Handle(Handle&& other) noexcept : raw_(other.raw_) { other.raw_ = nullptr; }
  Handle& operator=(Handle&& other) noexcept {
    std::swap(raw_, other.raw_);
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  T* get() const { return raw_; }

 private:
  T* raw_ = nullptr;
};

class Model {
 public:
  explicit Model(const std::string& json_path) {
    qgru_rt_model* raw = nullptr;
    check(qgru_rt_model_open(json_path.c_str(), &raw));
    handle_ = ModelHandle(raw);
  }
  // From memory: the JSON text and the tensor file's bytes (both may be freed afterwards).
  Model(const std::string& json, const void* tensors, size_t tensors_size) {
    qgru_rt_model* raw = nullptr;
    check(qgru_rt_model_open_memory(json.data(), json.size(), tensors, tensors_size, &raw));
    handle_ = ModelHandle(raw);
  }
  qgru_rt_shape shape() const {
    qgru_rt_shape s;
    check(qgru_rt_model_shape(handle_.get(), &s));
    return s;
  }
  qgru_rt_quant quant(qgru_rt_tensor tensor, int layer = 0, int direction = 0) const {
    qgru_rt_quant q;
    check(qgru_rt_model_quant(handle_.get(), tensor, layer, direction, &q));
    return q;
  }
  const qgru_rt_model* get() const { return handle_.get(); }

 private:
  typedef Handle<qgru_rt_model, qgru_rt_model_close> ModelHandle;
  ModelHandle handle_;
};

class Context {
 public:
  explicit Context(const Model& model, const qgru_rt_context_options& options = qgru_rt_context_options_default()) {
    qgru_rt_context* raw = nullptr;
    check(qgru_rt_context_create(model.get(), &options, &raw));
    handle_ = ContextHandle(raw);
  }
  std::string describe() const { return qgru_rt_context_describe(handle_.get()); }
  // Whole sequences (qgru_rt_run_codes / qgru_rt_run); pass null for what is not wanted.
  void run_codes(const int32_t* x_codes, int T, int N, const int32_t* h0_codes, int32_t* y_codes,
                 int32_t* hn_codes) const {
    check(qgru_rt_run_codes(handle_.get(), x_codes, T, N, h0_codes, y_codes, hn_codes));
  }
  void run(const float* x, int T, int N, const float* h0, float* y, float* h_n) const {
    check(qgru_rt_run(handle_.get(), x, T, N, h0, y, h_n));
  }
  // Padded batches (qgru_rt_run_codes_lengths / qgru_rt_run_lengths): lengths [N], each in [0, T].
  void run_codes(const int32_t* x_codes, int T, int N, const int32_t* lengths, const int32_t* h0_codes,
                 int32_t* y_codes, int32_t* hn_codes) const {
    check(qgru_rt_run_codes_lengths(handle_.get(), x_codes, T, N, lengths, h0_codes, y_codes, hn_codes));
  }
  void run(const float* x, int T, int N, const int32_t* lengths, const float* h0, float* y, float* h_n) const {
    check(qgru_rt_run_lengths(handle_.get(), x, T, N, lengths, h0, y, h_n));
  }
  const qgru_rt_context* get() const { return handle_.get(); }

 private:
  typedef Handle<qgru_rt_context, qgru_rt_context_destroy> ContextHandle;
  ContextHandle handle_;
};

class State {
 public:
  State(const Context& context, int N) {
    qgru_rt_state* raw = nullptr;
    check(qgru_rt_state_create(context.get(), N, &raw));
    handle_ = StateHandle(raw);
  }
  void reset() { check(qgru_rt_state_reset(handle_.get())); }
  void get_codes(int32_t* h_codes) const { check(qgru_rt_state_get_codes(handle_.get(), h_codes)); }
  void set_codes(const int32_t* h_codes) { check(qgru_rt_state_set_codes(handle_.get(), h_codes)); }
  // x [frames, N, C] -> y [frames, N, H] (y may be null).
  void step_codes(const int32_t* x_codes, int frames, int32_t* y_codes) {
    check(qgru_rt_step_codes(handle_.get(), x_codes, frames, y_codes));
  }
  void step(const float* x, int frames, float* y) { check(qgru_rt_step(handle_.get(), x, frames, y)); }
  qgru_rt_state* get() const { return handle_.get(); }

 private:
  typedef Handle<qgru_rt_state, qgru_rt_state_destroy> StateHandle;
  StateHandle handle_;
};

}  // namespace qgru_rt

#endif  // QGRU_QGRU_RUNTIME_HPP_
