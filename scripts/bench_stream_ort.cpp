// Per-frame latency of onnxruntime's GRU stepped one frame at a time through its C API, the peer of
// bench_stream (qgru_rt_step) in scripts/bench_stream.py --pairs c. Not part of the CMake build: it needs the
// onnxruntime wheel's libonnxruntime.so.*, and bench_stream.py compiles it against that library with the
// system compiler:
//   bench_stream_ort <model.onnx> <frames.f32> <H> [frames=10000] [warmup=1000]
// The model is the script's one-step ONNX GRU (X [1, 1, H], initial_h [1, 1, H] -> Y [1, 1, 1, H], Y_h [1, 1, H]);
// frames.f32 holds 64 frames of H float32 values, fed round and round. One intra-op and one inter-op thread, the
// default graph optimization (as the Python peer). The state is carried as a streaming product carries it: the
// input and output tensors wrap buffers made once (one per frame, as qgru_rt_step reads the frame where it lies),
// Y_h is written into one of two state buffers and the next call reads it back as initial_h (the two swap), so a
// step allocates no tensor of its own. Each call timed alone
// (steady_clock) after the warm-up calls; one JSON line: median, p10, p90, p99 and max in microseconds, and the
// sum of the last Y_h (the state after every frame; the Python peer, stepping the same frames, prints it too).
//
// The wheel ships the shared library without the C headers, so the few entries of the C API's function table
// used here are declared from its documented, append-only ABI: OrtGetApiBase() -> OrtApiBase::GetApi(version)
// -> OrtApi, a struct of function pointers whose order never changes between releases (new entries go at the
// end). Each entry below is named with its index in that table; the rest are opaque slots.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

extern "C" {
struct OrtStatus;
struct OrtEnv;
struct OrtSession;
struct OrtSessionOptions;
struct OrtMemoryInfo;
struct OrtValue;
struct OrtRunOptions;

struct OrtApi;
struct OrtApiBase {
  const OrtApi* (*GetApi)(uint32_t version);
  const char* (*GetVersionString)();
};
const OrtApiBase* OrtGetApiBase();
}

namespace {

// The C API version whose table is declared here: the indices below are those of version 13's header, which
// every later version only extends at the end; asking for 13 requires onnxruntime 1.13 or newer. A wrong index
// would call the wrong function: the script checks each run's final state against the Python binding's.
constexpr uint32_t kOrtApiVersion = 13;
constexpr int kOrtLoggingLevelWarning = 2;        // OrtLoggingLevel ORT_LOGGING_LEVEL_WARNING
constexpr int kOrtArenaAllocator = 1;             // OrtAllocatorType
constexpr int kOrtMemTypeDefault = 0;             // OrtMemType
constexpr int kOnnxTensorElementDataFloat = 1;    // ONNXTensorElementDataType FLOAT

using Status = OrtStatus*;
struct OrtApiTable {
  void* slot_0_1[2];                                                                          // 0 CreateStatus, 1 GetErrorCode
  const char* (*GetErrorMessage)(const OrtStatus*);                                           // 2
  Status (*CreateEnv)(int log_severity_level, const char* logid, OrtEnv** out);               // 3
  void* slot_4_6[3];                                                                          // 4..6
  Status (*CreateSession)(const OrtEnv*, const char* model_path, const OrtSessionOptions*, OrtSession** out);  // 7
  void* slot_8;                                                                               // 8 CreateSessionFromArray
  Status (*Run)(OrtSession*, const OrtRunOptions*, const char* const* input_names, const OrtValue* const* inputs,
                size_t input_len, const char* const* output_names, size_t output_names_len, OrtValue** outputs);  // 9
  Status (*CreateSessionOptions)(OrtSessionOptions** out);                                    // 10
  void* slot_11_23[13];                                                                       // 11..23
  Status (*SetIntraOpNumThreads)(OrtSessionOptions*, int);                                    // 24
  Status (*SetInterOpNumThreads)(OrtSessionOptions*, int);                                    // 25
  void* slot_26_48[23];                                                                       // 26..48
  Status (*CreateTensorWithDataAsOrtValue)(const OrtMemoryInfo*, void* data, size_t bytes, const int64_t* shape,
                                           size_t shape_len, int type, OrtValue** out);       // 49
  void* slot_50_68[19];                                                                       // 50..68
  Status (*CreateCpuMemoryInfo)(int allocator_type, int mem_type, OrtMemoryInfo** out);        // 69
  void* slot_70_91[22];                                                                       // 70..91
  void (*ReleaseEnv)(OrtEnv*);                                                                // 92
  void (*ReleaseStatus)(OrtStatus*);                                                          // 93
  void (*ReleaseMemoryInfo)(OrtMemoryInfo*);                                                  // 94
  void (*ReleaseSession)(OrtSession*);                                                        // 95
  void (*ReleaseValue)(OrtValue*);                                                            // 96
  void* slot_97_99[3];                                                                        // 97..99
  void (*ReleaseSessionOptions)(OrtSessionOptions*);                                          // 100
};
static_assert(offsetof(OrtApiTable, GetErrorMessage) == 2 * sizeof(void*), "OrtApi entry 2");
static_assert(offsetof(OrtApiTable, Run) == 9 * sizeof(void*), "OrtApi entry 9");
static_assert(offsetof(OrtApiTable, SetIntraOpNumThreads) == 24 * sizeof(void*), "OrtApi entry 24");
static_assert(offsetof(OrtApiTable, CreateTensorWithDataAsOrtValue) == 49 * sizeof(void*), "OrtApi entry 49");
static_assert(offsetof(OrtApiTable, CreateCpuMemoryInfo) == 69 * sizeof(void*), "OrtApi entry 69");
static_assert(offsetof(OrtApiTable, ReleaseEnv) == 92 * sizeof(void*), "OrtApi entry 92");
static_assert(offsetof(OrtApiTable, ReleaseSessionOptions) == 100 * sizeof(void*), "OrtApi entry 100");

const OrtApiTable* ort = nullptr;

void check(Status status, const char* what) {
  if (status == nullptr) return;
  std::fprintf(stderr, "bench_stream_ort: %s: %s\n", what, ort->GetErrorMessage(status));
  ort->ReleaseStatus(status);
  std::exit(1);
}

OrtValue* float_tensor(const OrtMemoryInfo* memory, float* data, const std::vector<int64_t>& shape) {
  size_t count = 1;
  for (const int64_t d : shape) count *= static_cast<size_t>(d);
  OrtValue* value = nullptr;
  check(ort->CreateTensorWithDataAsOrtValue(memory, data, count * sizeof(float), shape.data(),
                                            shape.size(), kOnnxTensorElementDataFloat, &value),
        "CreateTensorWithDataAsOrtValue");
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 6) {
    std::fprintf(stderr, "usage: bench_stream_ort <model.onnx> <frames.f32> <H> [frames] [warmup]\n");
    return 2;
  }
  const char* model_path = argv[1];
  const int H = std::atoi(argv[3]);
  const int frames = argc > 4 ? std::atoi(argv[4]) : 10000;
  const int warmup = argc > 5 ? std::atoi(argv[5]) : 1000;
  if (H <= 0 || frames <= 0 || warmup < 0) {
    std::fprintf(stderr, "bench_stream_ort: H and frames must be positive, warmup not negative\n");
    return 2;
  }
  const size_t frame_count = 64;  // distinct frames, fed round and round
  const size_t width = static_cast<size_t>(H);
  std::vector<float> x_all(frame_count * width);
  std::ifstream in(argv[2], std::ios::binary);
  in.read(reinterpret_cast<char*>(x_all.data()), static_cast<std::streamsize>(x_all.size() * sizeof(float)));
  if (!in || in.peek() != std::ifstream::traits_type::eof()) {
    std::fprintf(stderr, "bench_stream_ort: %s: expected exactly %zu float32 values (64 frames of H = %d)\n", argv[2],
                 x_all.size(), H);
    return 1;
  }

  const OrtApiBase* base = OrtGetApiBase();
  ort = reinterpret_cast<const OrtApiTable*>(base->GetApi(kOrtApiVersion));
  if (ort == nullptr) {
    std::fprintf(stderr, "bench_stream_ort: onnxruntime %s has no C API version %u\n", base->GetVersionString(),
                 kOrtApiVersion);
    return 1;
  }
  OrtEnv* env = nullptr;
  OrtSessionOptions* options = nullptr;
  OrtSession* session = nullptr;
  OrtMemoryInfo* memory = nullptr;
  check(ort->CreateEnv(kOrtLoggingLevelWarning, "bench_stream_ort", &env), "CreateEnv");
  check(ort->CreateSessionOptions(&options), "CreateSessionOptions");
  check(ort->SetIntraOpNumThreads(options, 1), "SetIntraOpNumThreads");
  check(ort->SetInterOpNumThreads(options, 1), "SetInterOpNumThreads");
  check(ort->CreateSession(env, model_path, options, &session), model_path);
  check(ort->CreateCpuMemoryInfo(kOrtArenaAllocator, kOrtMemTypeDefault, &memory), "CreateCpuMemoryInfo");

  // One input tensor per frame, Y, and the two state buffers: state[current] is read as initial_h, Y_h goes to
  // state[1 - current].
  std::vector<OrtValue*> x_value(frame_count);
  for (size_t i = 0; i < frame_count; ++i) x_value[i] = float_tensor(memory, x_all.data() + i * width, {1, 1, H});
  std::vector<float> y(width);
  std::vector<float> state[2] = {std::vector<float>(width, 0.0f), std::vector<float>(width, 0.0f)};
  OrtValue* y_value = float_tensor(memory, y.data(), {1, 1, 1, H});
  OrtValue* state_value[2] = {float_tensor(memory, state[0].data(), {1, 1, H}),
                              float_tensor(memory, state[1].data(), {1, 1, H})};
  const char* input_names[2] = {"X", "initial_h"};
  const char* output_names[2] = {"Y", "Y_h"};

  std::vector<double> micros(static_cast<size_t>(frames));
  int current = 0;
  for (int f = 0; f < warmup + frames; ++f) {
    const auto start = std::chrono::steady_clock::now();
    const OrtValue* inputs[2] = {x_value[static_cast<size_t>(f) % frame_count], state_value[current]};
    OrtValue* outputs[2] = {y_value, state_value[1 - current]};
    Status status = ort->Run(session, nullptr, input_names, inputs, 2, output_names, 2, outputs);
    const auto stop = std::chrono::steady_clock::now();
    check(status, "Run");
    current = 1 - current;
    if (f >= warmup) micros[static_cast<size_t>(f - warmup)] = std::chrono::duration<double, std::micro>(stop - start).count();
  }
  std::sort(micros.begin(), micros.end());
  auto pct = [&](double p) { return micros[std::min(micros.size() - 1, static_cast<size_t>(p * static_cast<double>(micros.size())))]; };
  double h_sum = 0.0;  // the state after every frame
  for (const float v : state[current]) h_sum += v;
  std::printf("{\"H\": %d, \"frames\": %d, \"executor\": \"onnxruntime %s GRU fp32, C API, 1 thread\", \"median_us\": %.4f, "
              "\"p10_us\": %.4f, \"p90_us\": %.4f, \"p99_us\": %.4f, \"max_us\": %.4f, \"y_sum\": %.9g}\n",
              H, frames, base->GetVersionString(), pct(0.5), pct(0.1), pct(0.9), pct(0.99), micros.back(), h_sum);
  for (OrtValue* value : x_value) ort->ReleaseValue(value);
  ort->ReleaseValue(y_value);
  ort->ReleaseValue(state_value[0]);
  ort->ReleaseValue(state_value[1]);
  ort->ReleaseMemoryInfo(memory);
  ort->ReleaseSession(session);
  ort->ReleaseSessionOptions(options);
  ort->ReleaseEnv(env);
  return 0;
}
