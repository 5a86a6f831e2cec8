// The runtime C API (contract in qgru/qgru_runtime.h): handles over the runtime's C++ objects, every
// exception answered as a status with a one-line message.
#include <algorithm>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "qgru/base/error.h"
#include "qgru/runtime/artifact.h"
#include "qgru/version.h"
#include "runtime_capi_internal.h"

using qgru::runtime_capi::Context;
using qgru::runtime_capi::StatusError;

namespace {

thread_local std::string last_error;  // qgru_rt_last_error(); cleared (no allocation) after a success

// Runs fn, answering QGRU_RT_OK or the status of what it threw: StatusError its own, qgru::Error
// `error_status` (what a library error means for this call), std::bad_alloc OUT_OF_MEMORY.
template <class Fn>
qgru_rt_status guarded(qgru_rt_status error_status, Fn&& fn) noexcept {
  try {
    fn();
    last_error.clear();
    return QGRU_RT_OK;
  } catch (const StatusError& e) {
    last_error = e.message;
    return e.status;
  } catch (const std::bad_alloc&) {
    last_error = "out of memory";
    return QGRU_RT_OUT_OF_MEMORY;
  } catch (const qgru::ExecutorError& e) {  // the chooser's device (qgru/runtime/executor.h)
    last_error = e.what();
    switch (e.kind()) {
      case qgru::ExecutorError::Kind::NotBuilt: return QGRU_RT_DEVICE_NOT_BUILT;
      case qgru::ExecutorError::Kind::NoDevice: return QGRU_RT_DEVICE_UNAVAILABLE;
      case qgru::ExecutorError::Kind::NotSupported: return QGRU_RT_NOT_SUPPORTED;
      case qgru::ExecutorError::Kind::Failed: return QGRU_RT_EXECUTION_FAILED;
    }
    return QGRU_RT_EXECUTION_FAILED;
  } catch (const qgru::Error& e) {
    last_error = e.what();
    return error_status;
  } catch (const std::exception& e) {
    last_error = std::string("internal error: ") + e.what();
    return QGRU_RT_INTERNAL_ERROR;
  } catch (...) {
    last_error = "internal error: unknown exception";
    return QGRU_RT_INTERNAL_ERROR;
  }
}

[[noreturn]] void invalid(const std::string& message) { throw StatusError{QGRU_RT_INVALID_ARGUMENT, message}; }

void require(const void* pointer, const char* function, const char* name) {
  if (!pointer) invalid(std::string(function) + ": " + name + " is NULL");
}

void require_positive(int value, const char* function, const char* name) {
  if (value < 1) invalid(std::string(function) + ": " + name + " = " + std::to_string(value) + ", expected >= 1");
}

// The input codes of a run or a step, checked before anything runs (CODE_OUT_OF_RANGE with the reader's message).
void check_x_codes(const qgru::QuantizedGru& model, const int32_t* q_x, int T, int N) {
  try {
    qgru::check_input_codes(model, q_x, T, N);
  } catch (const qgru::Error& e) {
    throw StatusError{QGRU_RT_CODE_OUT_OF_RANGE, e.what()};
  }
}

// Codes [cells, N, H], block c in the h space of model.cells[c * stride] (stride 1: h0 of every cell; stride
// D: the state, one block per layer).
void check_h_codes(const qgru::QuantizedGru& model, const int32_t* q_h, int cells, int stride, int N, const char* what) {
  const size_t per_cell = static_cast<size_t>(N) * model.hidden_size;
  for (int c = 0; c < cells; ++c) {
    const qgru::TensorQuant& h = model.cells[static_cast<size_t>(c * stride)].q(qgru::GruTensor::h);
    for (size_t i = 0; i < per_cell; ++i) {
      const int32_t q = q_h[static_cast<size_t>(c) * per_cell + i];
      if (q < h.qmin() || q > h.qmax()) {
        throw StatusError{QGRU_RT_CODE_OUT_OF_RANGE, std::string(what) + " code " + std::to_string(q) + " at flat index " +
                                                         std::to_string(static_cast<size_t>(c) * per_cell + i) +
                                                         " is outside h's code range [" + std::to_string(h.qmin()) +
                                                         ", " + std::to_string(h.qmax()) + "] of layer " +
                                                         std::to_string(c * stride / model.num_directions)};
      }
    }
  }
}

qgru_rt_status open_model(qgru_rt_model** out, const std::function<qgru::QuantizedGru()>& read) {
  return guarded(QGRU_RT_BAD_ARTIFACT, [&] {
    require(out, "qgru_rt_model_open", "model");
    *out = nullptr;
    auto model = std::make_unique<qgru_rt_model>();
    model->gru = std::make_shared<const qgru::QuantizedGru>(read());
    *out = model.release();
  });
}

// "cpu fast (<level>)", "cpu reference (fast path: <why not>)" or "cpu reference (requested)".
std::string cpu_description(const Context& c) {
  if (c.options.executor == QGRU_RT_EXECUTOR_REFERENCE) return "cpu reference (requested)";
  return "cpu " + c.executor->name();
}

void fill_state_with_zero_codes(qgru_rt_state& s) {
  const qgru::QuantizedGru& model = *s.context->model;
  const size_t per_layer = static_cast<size_t>(s.N) * model.hidden_size;
  for (int l = 0; l < model.num_layers; ++l) {
    std::fill_n(s.q_h.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(l) * per_layer), per_layer,
                model.cell(l, 0).q(qgru::GruTensor::h).zp);
  }
  if (s.device) s.device->set_codes(s.q_h.data());
}

// One frame's codes advanced through the state: the CPU stepper, or a whole run of `frames` on a device.
void advance(qgru_rt_state& s, const int32_t* q_x, int frames, int32_t* y_codes) {
  const Context& c = *s.context;
  const qgru::QuantizedGru& model = *c.model;
  if (s.stepper) {
    qgru::step_layer_loop(model, q_x, frames, s.q_h.data(), y_codes, s.next_x.data(), *s.stepper);
    return;
  }
  const qgru::QuantGruResult r = c.run_codes(q_x, frames, s.N, s.q_h.data());  // h0 = the state, h_n = the next one
  s.q_h = r.h_n_codes;
  if (y_codes) std::copy(r.output_codes.begin(), r.output_codes.end(), y_codes);
}

}  // namespace

extern "C" {

int qgru_rt_api_version(void) { return QGRU_RT_API_VERSION; }

const char* qgru_rt_library_version(void) { return QGRU_VERSION_STRING; }

const char* qgru_rt_status_name(qgru_rt_status status) {
  switch (status) {
    case QGRU_RT_OK: return "QGRU_RT_OK";
    case QGRU_RT_INVALID_ARGUMENT: return "QGRU_RT_INVALID_ARGUMENT";
    case QGRU_RT_BAD_ARTIFACT: return "QGRU_RT_BAD_ARTIFACT";
    case QGRU_RT_CODE_OUT_OF_RANGE: return "QGRU_RT_CODE_OUT_OF_RANGE";
    case QGRU_RT_NOT_SUPPORTED: return "QGRU_RT_NOT_SUPPORTED";
    case QGRU_RT_DEVICE_NOT_BUILT: return "QGRU_RT_DEVICE_NOT_BUILT";
    case QGRU_RT_DEVICE_UNAVAILABLE: return "QGRU_RT_DEVICE_UNAVAILABLE";
    case QGRU_RT_EXECUTION_FAILED: return "QGRU_RT_EXECUTION_FAILED";
    case QGRU_RT_OUT_OF_MEMORY: return "QGRU_RT_OUT_OF_MEMORY";
    case QGRU_RT_INTERNAL_ERROR: return "QGRU_RT_INTERNAL_ERROR";
  }
  return "QGRU_RT_UNKNOWN_STATUS";
}

const char* qgru_rt_last_error(void) { return last_error.c_str(); }

qgru_rt_status qgru_rt_model_open(const char* json_path, qgru_rt_model** model) {
  if (!json_path) return guarded(QGRU_RT_INVALID_ARGUMENT, [] { invalid("qgru_rt_model_open: json_path is NULL"); });
  return open_model(model, [&] { return qgru::read_artifact(json_path); });
}

qgru_rt_status qgru_rt_model_open_memory(const char* json, size_t json_size, const void* tensors, size_t tensors_size,
                                         qgru_rt_model** model) {
  if (!json || (!tensors && tensors_size > 0)) {
    return guarded(QGRU_RT_INVALID_ARGUMENT, [] { invalid("qgru_rt_model_open_memory: json or tensors is NULL"); });
  }
  return open_model(model, [&] {
    return qgru::read_artifact_memory(std::string(json, json_size), static_cast<const uint8_t*>(tensors), tensors_size,
                                      "(memory)");
  });
}

void qgru_rt_model_close(qgru_rt_model* model) { delete model; }

qgru_rt_status qgru_rt_model_shape(const qgru_rt_model* model, qgru_rt_shape* shape) {
  return guarded(QGRU_RT_INTERNAL_ERROR, [&] {
    require(model, "qgru_rt_model_shape", "model");
    require(shape, "qgru_rt_model_shape", "shape");
    const qgru::QuantizedGru& m = *model->gru;
    *shape = qgru_rt_shape{m.input_size, m.hidden_size, m.num_layers, m.num_directions, m.num_directions * m.hidden_size};
  });
}

qgru_rt_status qgru_rt_model_quant(const qgru_rt_model* model, qgru_rt_tensor tensor, int layer, int direction,
                                   qgru_rt_quant* quant) {
  return guarded(QGRU_RT_INTERNAL_ERROR, [&] {
    require(model, "qgru_rt_model_quant", "model");
    require(quant, "qgru_rt_model_quant", "quant");
    const qgru::QuantizedGru& m = *model->gru;
    if (tensor != QGRU_RT_TENSOR_X && tensor != QGRU_RT_TENSOR_H) {
      invalid("qgru_rt_model_quant: tensor " + std::to_string(static_cast<int>(tensor)) + " is not QGRU_RT_TENSOR_X or _H");
    }
    if (layer < 0 || layer >= m.num_layers || direction < 0 || direction >= m.num_directions) {
      invalid("qgru_rt_model_quant: cell (layer " + std::to_string(layer) + ", direction " + std::to_string(direction) +
              ") outside the model's " + std::to_string(m.num_layers) + " layer(s) x " + std::to_string(m.num_directions) +
              " direction(s)");
    }
    const qgru::TensorQuant& q = m.cell(layer, direction).q(tensor == QGRU_RT_TENSOR_X ? qgru::GruTensor::x : qgru::GruTensor::h);
    *quant = qgru_rt_quant{q.bits, q.is_unsigned ? 1 : 0, q.shift, q.zp, q.qmin(), q.qmax(), q.scale()};
  });
}

qgru_rt_context_options qgru_rt_context_options_default(void) {
  return qgru_rt_context_options{QGRU_RT_DEVICE_CPU, 0, 0, QGRU_RT_EXECUTOR_FAST};
}

qgru_rt_status qgru_rt_context_create(const qgru_rt_model* model, const qgru_rt_context_options* options,
                                      qgru_rt_context** context) {
  return guarded(QGRU_RT_INTERNAL_ERROR, [&] {
    require(context, "qgru_rt_context_create", "context");
    *context = nullptr;
    require(model, "qgru_rt_context_create", "model");
    auto impl = std::make_shared<Context>();
    impl->model = model->gru;
    impl->options = options ? *options : qgru_rt_context_options_default();
    const qgru_rt_context_options& o = impl->options;
    if (o.threads < 0) invalid("qgru_rt_context_create: threads = " + std::to_string(o.threads) + ", expected >= 0");
    // The executor by the one chooser (qgru/runtime/executor.h); its device failures answer as statuses (guarded).
    qgru::ExecutorRequest request;
    request.fast.threads = o.threads;
    if (o.device == QGRU_RT_DEVICE_CPU) {
      if (o.executor == QGRU_RT_EXECUTOR_REFERENCE) {
        request.executor = "reference";
      } else if (o.executor != QGRU_RT_EXECUTOR_FAST) {
        invalid("qgru_rt_context_create: executor " + std::to_string(static_cast<int>(o.executor)) +
                " is not QGRU_RT_EXECUTOR_FAST or _REFERENCE");
      }
      impl->executor = qgru::make_executor(*impl->model, request);
      impl->description = cpu_description(*impl);
    } else if (o.device == QGRU_RT_DEVICE_CUDA) {
      if (o.device_id < 0) invalid("qgru_rt_context_create: device_id = " + std::to_string(o.device_id) + ", expected >= 0");
      request.device = qgru::ExecutorDevice::Cuda;
      request.device_id = o.device_id;
      impl->executor = qgru::make_executor(*impl->model, request);
      impl->description = impl->executor->describe();
    } else {
      invalid("qgru_rt_context_create: device " + std::to_string(static_cast<int>(o.device)) +
              " is not QGRU_RT_DEVICE_CPU or _CUDA");
    }
    *context = new qgru_rt_context{std::move(impl)};
  });
}

void qgru_rt_context_destroy(qgru_rt_context* context) { delete context; }

const char* qgru_rt_context_describe(const qgru_rt_context* context) {
  return context ? context->impl->description.c_str() : "";
}

namespace {

// Each length in [0, T] (the executors' contract: check_sequence_lengths), said with the function's name.
void check_lengths(const char* function, const int32_t* lengths, int T, int N) {
  if (!lengths) return;
  for (int n = 0; n < N; ++n) {
    if (lengths[n] < 0 || lengths[n] > T) {
      invalid(std::string(function) + ": lengths[" + std::to_string(n) + "] = " + std::to_string(lengths[n]) +
              ", expected a length in [0, T = " + std::to_string(T) + "]");
    }
  }
}

qgru_rt_status run_codes_checked(const char* function, const qgru_rt_context* context, const int32_t* x_codes, int T,
                                 int N, const int32_t* lengths, const int32_t* h0_codes, int32_t* y_codes,
                                 int32_t* hn_codes) {
  return guarded(QGRU_RT_EXECUTION_FAILED, [&] {
    require(context, function, "context");
    if (T < 0) invalid(std::string(function) + ": T = " + std::to_string(T) + ", expected >= 0");
    require_positive(N, function, "N");
    if (T > 0) require(x_codes, function, "x_codes");
    const Context& c = *context->impl;
    const qgru::QuantizedGru& model = *c.model;
    check_x_codes(model, x_codes, T, N);
    if (h0_codes) check_h_codes(model, h0_codes, static_cast<int>(model.cells.size()), 1, N, "h0");
    check_lengths(function, lengths, T, N);
    const qgru::QuantGruResult r = c.run_codes(x_codes, T, N, h0_codes, lengths);
    if (y_codes) std::copy(r.output_codes.begin(), r.output_codes.end(), y_codes);
    if (hn_codes) std::copy(r.h_n_codes.begin(), r.h_n_codes.end(), hn_codes);
  });
}

qgru_rt_status run_checked(const char* function, const qgru_rt_context* context, const float* x, int T, int N,
                           const int32_t* lengths, const float* h0, float* y, float* h_n) {
  return guarded(QGRU_RT_EXECUTION_FAILED, [&] {
    require(context, function, "context");
    if (T < 0) invalid(std::string(function) + ": T = " + std::to_string(T) + ", expected >= 0");
    require_positive(N, function, "N");
    if (T > 0) require(x, function, "x");
    check_lengths(function, lengths, T, N);
    const qgru::QuantGruResult r = context->impl->run(x, T, N, h0, lengths);
    if (y) std::copy(r.output.begin(), r.output.end(), y);
    if (h_n) std::copy(r.h_n.begin(), r.h_n.end(), h_n);
  });
}

}  // namespace

qgru_rt_status qgru_rt_run_codes(const qgru_rt_context* context, const int32_t* x_codes, int T, int N,
                                 const int32_t* h0_codes, int32_t* y_codes, int32_t* hn_codes) {
  return run_codes_checked("qgru_rt_run_codes", context, x_codes, T, N, nullptr, h0_codes, y_codes, hn_codes);
}

qgru_rt_status qgru_rt_run_codes_lengths(const qgru_rt_context* context, const int32_t* x_codes, int T, int N,
                                         const int32_t* lengths, const int32_t* h0_codes, int32_t* y_codes,
                                         int32_t* hn_codes) {
  return run_codes_checked("qgru_rt_run_codes_lengths", context, x_codes, T, N, lengths, h0_codes, y_codes, hn_codes);
}

qgru_rt_status qgru_rt_run(const qgru_rt_context* context, const float* x, int T, int N, const float* h0, float* y,
                           float* h_n) {
  return run_checked("qgru_rt_run", context, x, T, N, nullptr, h0, y, h_n);
}

qgru_rt_status qgru_rt_run_lengths(const qgru_rt_context* context, const float* x, int T, int N,
                                   const int32_t* lengths, const float* h0, float* y, float* h_n) {
  return run_checked("qgru_rt_run_lengths", context, x, T, N, lengths, h0, y, h_n);
}

qgru_rt_status qgru_rt_state_create(const qgru_rt_context* context, int N, qgru_rt_state** state) {
  return guarded(QGRU_RT_INTERNAL_ERROR, [&] {
    require(state, "qgru_rt_state_create", "state");
    *state = nullptr;
    require(context, "qgru_rt_state_create", "context");
    require_positive(N, "qgru_rt_state_create", "N");
    const qgru::QuantizedGru& model = *context->impl->model;
    const std::string refusal = qgru::streaming_refusal(model);
    if (!refusal.empty()) throw StatusError{QGRU_RT_NOT_SUPPORTED, "qgru_rt_state_create: " + refusal};
    auto s = std::make_unique<qgru_rt_state>();
    s->context = context->impl;
    s->N = N;
    const size_t NH = static_cast<size_t>(N) * model.hidden_size;
    s->q_h.resize(static_cast<size_t>(model.num_layers) * NH);
    s->next_x.resize(NH);
    s->frame_x.resize(static_cast<size_t>(N) * model.input_size);
    s->frame_y.resize(NH);
    s->stepper = context->impl->make_stepper(N);
    if (!s->stepper) s->device = context->impl->make_device_stepper(N);  // a device: its own state, kept there
    fill_state_with_zero_codes(*s);
    *state = s.release();
  });
}

void qgru_rt_state_destroy(qgru_rt_state* state) { delete state; }

qgru_rt_status qgru_rt_state_reset(qgru_rt_state* state) {
  return guarded(QGRU_RT_INTERNAL_ERROR, [&] {
    require(state, "qgru_rt_state_reset", "state");
    fill_state_with_zero_codes(*state);
  });
}

qgru_rt_status qgru_rt_state_get_codes(const qgru_rt_state* state, int32_t* h_codes) {
  return guarded(QGRU_RT_INTERNAL_ERROR, [&] {
    require(state, "qgru_rt_state_get_codes", "state");
    require(h_codes, "qgru_rt_state_get_codes", "h_codes");
    if (state->device) {
      state->device->get_codes(h_codes);
    } else {
      std::copy(state->q_h.begin(), state->q_h.end(), h_codes);
    }
  });
}

qgru_rt_status qgru_rt_state_set_codes(qgru_rt_state* state, const int32_t* h_codes) {
  return guarded(QGRU_RT_INTERNAL_ERROR, [&] {
    require(state, "qgru_rt_state_set_codes", "state");
    require(h_codes, "qgru_rt_state_set_codes", "h_codes");
    const qgru::QuantizedGru& model = *state->context->model;
    check_h_codes(model, h_codes, model.num_layers, model.num_directions, state->N, "state");
    std::copy(h_codes, h_codes + state->q_h.size(), state->q_h.begin());
    if (state->device) state->device->set_codes(h_codes);
  });
}

qgru_rt_status qgru_rt_step_codes(qgru_rt_state* state, const int32_t* x_codes, int frames, int32_t* y_codes) {
  return guarded(QGRU_RT_EXECUTION_FAILED, [&] {
    require(state, "qgru_rt_step_codes", "state");
    require(x_codes, "qgru_rt_step_codes", "x_codes");
    require_positive(frames, "qgru_rt_step_codes", "frames");
    check_x_codes(*state->context->model, x_codes, frames, state->N);
    if (state->device) {
      state->device->step_codes(x_codes, frames, y_codes);
      return;
    }
    advance(*state, x_codes, frames, y_codes);
  });
}

qgru_rt_status qgru_rt_step(qgru_rt_state* state, const float* x, int frames, float* y) {
  return guarded(QGRU_RT_EXECUTION_FAILED, [&] {
    require(state, "qgru_rt_step", "state");
    require(x, "qgru_rt_step", "x");
    require_positive(frames, "qgru_rt_step", "frames");
    qgru_rt_state& s = *state;
    if (s.device) {  // one frame in, one frame out per device step: quantized, stepped and dequantized there
      s.device->step(x, frames, y);
      return;
    }
    const qgru::QuantizedGru& model = *s.context->model;
    const qgru::TensorQuant& xq = model.input_quant();
    const qgru::TensorQuant& yq = model.cell(model.num_layers - 1, 0).q(qgru::GruTensor::h);
    const size_t frame_in = s.frame_x.size(), frame_out = s.frame_y.size();
    for (int f = 0; f < frames; ++f) {  // one frame at a time through the preallocated frame buffers
      const float* xf = x + static_cast<size_t>(f) * frame_in;
      qgru::quantize_fast(xq, xf, frame_in, s.frame_x.data());  // TensorQuant::quantize, saturating: always in range
      advance(s, s.frame_x.data(), 1, s.frame_y.data());
      if (y) {
        float* yf = y + static_cast<size_t>(f) * frame_out;
        for (size_t i = 0; i < frame_out; ++i) yf[i] = static_cast<float>(yq.dequantize(s.frame_y[i]));
      }
    }
  });
}

}  // extern "C"
