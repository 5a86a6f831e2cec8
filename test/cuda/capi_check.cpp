// The C API's CUDA device (qgruQuantizeLinearGPTQ on QGRU_DEVICE_CUDA) against the same API's CPU path, on
// the same GPTQ output (quantized by the CPU descriptor). Both compute c = Ŵ·a; they differ by roundings:
// the GPU rounds a and b_scale to fp16 (F32 only), each weight to fp16 (RN_fp16(s·(q − z))), accumulates in
// fp32 and rounds c to fp16; the CPU keeps s·(q − z) in fp32 and accumulates in fp32 (c rounded to fp16 for
// F16). Tolerance per output (the linear self-test's bound, doubled for two fp32 sums and widened by the
// extra fp16 roundings): 2^-10·|ref| + 3·2^-11·mag + 2·K·2^-23·mag + 2^-22, mag = Σ|a·ŵ| in double.
// Also: the call-time statuses of the CUDA path (NULL pointers, workspace, a zero point the kernel cannot
// hold, GPTQ refused on a CUDA descriptor, a device_id beyond the devices).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu_checks.h"
#include "qgru/capi/qgru_gptq.h"
#include "qgru/half.h"
#include "qgru_cuda/device_buffer.h"

namespace qgru::cuda_test {

namespace {

struct CapiShape {
  int64_t N, K, M, G;
  qgruDtype_t dtype;
  int64_t pad;  // extra elements at the end of every row of every tensor (row stride = columns + pad)
};

// Host tensor in the API's dtype with padded rows.
struct HostTensor {
  int64_t rows, cols, stride;
  size_t esize;
  std::vector<unsigned char> bytes;
  HostTensor(int64_t r, int64_t c, int64_t pad, size_t es)
      : rows(r), cols(c), stride(c + pad), esize(es), bytes(static_cast<size_t>(r * (c + pad)) * es, 0xA5) {}
  void* data() { return bytes.data(); }
  double get(qgruDtype_t dtype, int64_t r, int64_t c) const {
    const unsigned char* p = bytes.data() + static_cast<size_t>(r * stride + c) * esize;
    if (dtype == QGRU_DTYPE_F16) {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      return qgru::half_bits_to_float(bits);
    }
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  void set(qgruDtype_t dtype, int64_t r, int64_t c, float v) {
    unsigned char* p = bytes.data() + static_cast<size_t>(r * stride + c) * esize;
    if (dtype == QGRU_DTYPE_F16) {
      const uint16_t bits = qgru::float_to_half_bits(v);
      std::memcpy(p, &bits, 2);
    } else {
      std::memcpy(p, &v, 4);
    }
  }
  qgruTensorDescriptor_t describe(qgruDtype_t dtype) const {
    const int64_t shape[2] = {rows, cols}, strides[2] = {stride, 1};
    qgruTensorDescriptor_t desc = nullptr;
    if (qgruCreateTensorDescriptor(&desc, dtype, 2, shape, strides) != QGRU_STATUS_SUCCESS) return nullptr;
    return desc;
  }
};

int report(const char* what, qgruStatus_t got, qgruStatus_t want) {
  if (got == want) return 0;
  std::printf("  %s: %s, expected %s (%s)\n", what, qgruStatusString(got), qgruStatusString(want), qgruGetLastErrorMessage());
  return 1;
}

// qgruQuantizeGPTQ on the CUDA descriptor (GPTQ on the GPU, docs/GPTQ.md "On the GPU") against the CPU descriptor's
// outputs on the same a and b. The same algorithm with the device's roundings (cuSOLVER, cuBLAS) in place of the
// CPU's, so a code or a zero point may part at a near-tie, and a row's later codes after it: at most 2% of the codes
// and 1% of the zero points differ, scales agree within 1e-3 relative wherever the zero points do; the padding
// of every output row is left as it was (0xA5).
int check_cuda_gptq(const CapiShape& s, qgruQuantizeGPTQDescriptor_t gpu_desc, const cuda::DeviceBuffer& ws,
                    size_t gpu_bytes, const cuda::DeviceBuffer& a_dev, const std::vector<unsigned char>& b_bytes,
                    const HostTensor& packed, const HostTensor& scale, const HostTensor& zero) {
  HostTensor packed_gpu = packed, scale_gpu = scale, zero_gpu = zero;
  for (HostTensor* t : {&packed_gpu, &scale_gpu, &zero_gpu}) std::fill(t->bytes.begin(), t->bytes.end(), 0xA5);
  const cuda::DeviceBuffer b_dev = cuda::DeviceBuffer::from(b_bytes);
  cuda::DeviceBuffer p_dev = cuda::DeviceBuffer::from(packed_gpu.bytes), s_dev = cuda::DeviceBuffer::from(scale_gpu.bytes);
  cuda::DeviceBuffer z_dev = cuda::DeviceBuffer::from(zero_gpu.bytes);
  int bad = report("GPTQ on a CUDA descriptor", qgruQuantizeGPTQ(gpu_desc, ws.data(), gpu_bytes, p_dev.data(), s_dev.data(),
                                                                 z_dev.data(), a_dev.data(), b_dev.data(), nullptr),
                   QGRU_STATUS_SUCCESS);
  if (bad) return bad;
  p_dev.download(packed_gpu.data(), packed_gpu.bytes.size());
  s_dev.download(scale_gpu.data(), scale_gpu.bytes.size());
  z_dev.download(zero_gpu.data(), zero_gpu.bytes.size());
  const auto code = [](const HostTensor& t, int64_t n, int64_t k) {
    uint32_t word = 0;
    std::memcpy(&word, t.bytes.data() + static_cast<size_t>(n * t.stride + k / 8) * 4, 4);
    return (word >> (4 * (k % 8))) & 15u;
  };
  int64_t codes_apart = 0, zeros_apart = 0, scales_apart = 0, padding_written = 0;
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t k = 0; k < s.K; ++k) codes_apart += code(packed_gpu, n, k) != code(packed, n, k);
    for (int64_t g = 0; g < s.G; ++g) {
      const bool zero_equal = zero_gpu.get(s.dtype, n, g) == zero.get(s.dtype, n, g);
      zeros_apart += !zero_equal;
      const double want = scale.get(s.dtype, n, g), got = scale_gpu.get(s.dtype, n, g);
      scales_apart += zero_equal && !(std::fabs(got - want) <= 1e-3 * std::fabs(want));
    }
    for (const HostTensor* t : {&packed_gpu, &scale_gpu, &zero_gpu}) {
      for (size_t i = static_cast<size_t>(n * t->stride + t->cols) * t->esize; i < static_cast<size_t>((n + 1) * t->stride) * t->esize; ++i) {
        padding_written += t->bytes[i] != 0xA5;
      }
    }
  }
  if (codes_apart * 50 > s.N * s.K || zeros_apart * 100 > s.N * s.G || scales_apart > 0 || padding_written > 0) {
    std::printf("FAIL capi GPTQ on CUDA [N %lld, K %lld, G %lld]: codes apart %lld, zero points apart %lld, scales apart "
                "%lld, padding bytes written %lld\n",
                static_cast<long long>(s.N), static_cast<long long>(s.K), static_cast<long long>(s.G),
                static_cast<long long>(codes_apart), static_cast<long long>(zeros_apart),
                static_cast<long long>(scales_apart), static_cast<long long>(padding_written));
    return 1;
  }
  std::printf("  capi GPTQ on CUDA: %lld of %lld codes and %lld of %lld zero points apart from the CPU descriptor's\n",
              static_cast<long long>(codes_apart), static_cast<long long>(s.N * s.K), static_cast<long long>(zeros_apart),
              static_cast<long long>(s.N * s.G));
  return 0;
}

struct Descriptors {
  qgruTensorDescriptor_t c, a, p, s, z;
  ~Descriptors() {
    for (auto d : {c, a, p, s, z}) qgruDestroyTensorDescriptor(d);
  }
};

// resident: "" for the per-call path; else the QGRU_CUDA_LINEAR_KERNEL setting under which the weights are made
// resident (qgruSetQuantizeGPTQWeights), the linear then called with NULL weight pointers, twice, and the
// host-transfer count required unchanged across those calls.
int run_case(const CapiShape& s, uint32_t seed, bool check_statuses, const std::string& resident) {
  const size_t es = s.dtype == QGRU_DTYPE_F16 ? 2 : 4;
  HostTensor a(s.K, s.M, s.pad, es), c_cpu(s.N, s.M, s.pad, es), c_gpu(s.N, s.M, s.pad, es);
  HostTensor packed(s.N, s.K / 8, s.pad, 4), scale(s.N, s.G, s.pad, es), zero(s.N, s.G, s.pad, es);
  std::vector<float> b(static_cast<size_t>(s.N * s.K));
  std::mt19937 rng(seed);
  std::normal_distribution<float> act(0.0f, 1.0f), wdist(0.0f, 0.05f);
  for (int64_t k = 0; k < s.K; ++k)
    for (int64_t m = 0; m < s.M; ++m) a.set(s.dtype, k, m, act(rng));
  std::vector<unsigned char> b_bytes(b.size() * es);
  for (size_t i = 0; i < b.size(); ++i) {
    b[i] = wdist(rng);
    if (s.dtype == QGRU_DTYPE_F16) {
      const uint16_t bits = qgru::float_to_half_bits(b[i]);
      std::memcpy(b_bytes.data() + 2 * i, &bits, 2);
    } else {
      std::memcpy(b_bytes.data() + 4 * i, &b[i], 4);
    }
  }
  const Descriptors t{c_cpu.describe(s.dtype), a.describe(s.dtype), packed.describe(QGRU_DTYPE_I32), scale.describe(s.dtype),
                      zero.describe(s.dtype)};
  if (!t.c || !t.a || !t.p || !t.s || !t.z) {
    std::printf("FAIL capi: tensor descriptors: %s\n", qgruGetLastErrorMessage());
    return 1;
  }

  // CPU: GPTQ (the weights both paths read) and the reference linear.
  qgruHandle_t cpu = nullptr, gpu = nullptr;
  qgruQuantizeGPTQDescriptor_t cpu_desc = nullptr, gpu_desc = nullptr;
  int bad = 0;
  bad += report("CPU handle", qgruCreateHandle(&cpu, QGRU_DEVICE_CPU, 0), QGRU_STATUS_SUCCESS);
  bad += report("CPU descriptor", qgruCreateQuantizeGPTQDescriptor(cpu, &cpu_desc, t.c, t.a, t.p, t.s, t.z), QGRU_STATUS_SUCCESS);
  size_t cpu_bytes = 0;
  if (!bad) bad += report("CPU workspace size", qgruGetQuantizeGPTQWorkspaceSize(cpu_desc, &cpu_bytes), QGRU_STATUS_SUCCESS);
  std::vector<unsigned char> cpu_ws(cpu_bytes);
  if (!bad) {
    bad += report("CPU GPTQ", qgruQuantizeGPTQ(cpu_desc, cpu_ws.data(), cpu_bytes, packed.data(), scale.data(), zero.data(),
                                               a.data(), b_bytes.data(), nullptr), QGRU_STATUS_SUCCESS);
  }
  if (!bad) {
    bad += report("CPU linear", qgruQuantizeLinearGPTQ(cpu_desc, cpu_ws.data(), cpu_bytes, c_cpu.data(), a.data(), packed.data(),
                                                       scale.data(), zero.data(), nullptr), QGRU_STATUS_SUCCESS);
  }

  // GPU: the same operands in device memory (padding included), the CUDA descriptor and its linear.
  bad += report("CUDA handle", qgruCreateHandle(&gpu, QGRU_DEVICE_CUDA, 0), QGRU_STATUS_SUCCESS);
  if (!bad) bad += report("CUDA descriptor", qgruCreateQuantizeGPTQDescriptor(gpu, &gpu_desc, t.c, t.a, t.p, t.s, t.z), QGRU_STATUS_SUCCESS);
  size_t gpu_bytes = 0;
  if (!bad) bad += report("CUDA workspace size", qgruGetQuantizeGPTQWorkspaceSize(gpu_desc, &gpu_bytes), QGRU_STATUS_SUCCESS);
  double max_err = 0, ref_norm = 0;
  if (!bad) {
    cuda::DeviceBuffer a_dev = cuda::DeviceBuffer::from(a.bytes), p_dev = cuda::DeviceBuffer::from(packed.bytes);
    cuda::DeviceBuffer s_dev = cuda::DeviceBuffer::from(scale.bytes), z_dev = cuda::DeviceBuffer::from(zero.bytes);
    cuda::DeviceBuffer c_dev = cuda::DeviceBuffer::from(c_gpu.bytes);  // 0xA5 sentinels in the padding
    cuda::DeviceBuffer ws;
    if (resident.empty()) {
      ws = cuda::DeviceBuffer(gpu_bytes);
      bad += report("CUDA linear", qgruQuantizeLinearGPTQ(gpu_desc, ws.data(), gpu_bytes, c_dev.data(), a_dev.data(), p_dev.data(),
                                                          s_dev.data(), z_dev.data(), nullptr), QGRU_STATUS_SUCCESS);
    } else {
      setenv("QGRU_CUDA_LINEAR_KERNEL", resident.c_str(), 1);
      bad += report("CUDA resident weights", qgruSetQuantizeGPTQWeights(gpu_desc, p_dev.data(), s_dev.data(), z_dev.data(), nullptr),
                    QGRU_STATUS_SUCCESS);
      unsetenv("QGRU_CUDA_LINEAR_KERNEL");
      if (!bad) bad += report("CUDA workspace size (resident)", qgruGetQuantizeGPTQWorkspaceSize(gpu_desc, &gpu_bytes), QGRU_STATUS_SUCCESS);
      // NaN bits in the workspace: the setting before this one ran the same layer and activations, and a partial
      // sum the stripes engine reads before writing must not find that run's right values in reused memory.
      ws = cuda::DeviceBuffer::from(std::vector<unsigned char>(gpu_bytes, 0xFFu));
      const int64_t transfers = cuda::host_transfer_count();
      for (int call = 0; call < 2 && !bad; ++call) {
        bad += report("CUDA linear (resident)", qgruQuantizeLinearGPTQ(gpu_desc, ws.data(), gpu_bytes, c_dev.data(), a_dev.data(),
                                                                       nullptr, nullptr, nullptr, nullptr), QGRU_STATUS_SUCCESS);
      }
      if (cuda::host_transfer_count() != transfers) {
        std::printf("  resident linear made %lld host<->device copies in 2 calls, expected 0\n",
                    static_cast<long long>(cuda::host_transfer_count() - transfers));
        ++bad;
      }
    }
    c_dev.download(c_gpu.data(), c_gpu.bytes.size());
    if (check_statuses) {
      bad += report("CUDA linear, NULL c", qgruQuantizeLinearGPTQ(gpu_desc, ws.data(), gpu_bytes, nullptr, a_dev.data(), p_dev.data(),
                                                                  s_dev.data(), z_dev.data(), nullptr), QGRU_STATUS_NULL_POINTER);
      bad += report("CUDA linear, short workspace", qgruQuantizeLinearGPTQ(gpu_desc, ws.data(), gpu_bytes - 1, c_dev.data(), a_dev.data(),
                                                                           p_dev.data(), s_dev.data(), z_dev.data(), nullptr),
                    QGRU_STATUS_INSUFFICIENT_WORKSPACE);
      bad += check_cuda_gptq(s, gpu_desc, ws, gpu_bytes, a_dev, b_bytes, packed, scale, zero);
      HostTensor half_zero = zero;
      half_zero.set(s.dtype, s.N - 1, s.G - 1, 2.5f);
      const cuda::DeviceBuffer hz_dev = cuda::DeviceBuffer::from(half_zero.bytes);
      bad += report("CUDA linear, zero point 2.5", qgruQuantizeLinearGPTQ(gpu_desc, ws.data(), gpu_bytes, c_dev.data(), a_dev.data(),
                                                                          p_dev.data(), s_dev.data(), hz_dev.data(), nullptr),
                    QGRU_STATUS_BAD_PARAM);
      int count = 0;
      bad += report("CUDA device count", qgruGetDeviceCount(QGRU_DEVICE_CUDA, &count), QGRU_STATUS_SUCCESS);
      qgruHandle_t beyond = nullptr;
      qgruQuantizeGPTQDescriptor_t none = nullptr;
      bad += report("CUDA handle beyond the devices", qgruCreateHandle(&beyond, QGRU_DEVICE_CUDA, count), QGRU_STATUS_SUCCESS);
      bad += report("CUDA descriptor beyond the devices", qgruCreateQuantizeGPTQDescriptor(beyond, &none, t.c, t.a, t.p, t.s, t.z),
                    QGRU_STATUS_DEVICE_UNAVAILABLE);
      qgruDestroyHandle(beyond);
    }
  }

  // Compare, and check the padding of c was left alone.
  int mismatches = 0;
  if (!bad) {
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t m = 0; m < s.M; ++m) {
        double mag = 0;
        for (int64_t k = 0; k < s.K; ++k) {
          const double sc = scale.get(s.dtype, n, k / (s.K / s.G)), z = zero.get(s.dtype, n, k / (s.K / s.G));
          uint32_t word;
          std::memcpy(&word, packed.bytes.data() + static_cast<size_t>(n * packed.stride + k / 8) * 4, 4);
          mag += std::fabs(a.get(s.dtype, k, m) * sc * (static_cast<double>((word >> (4 * (k % 8))) & 15u) - z));
        }
        const double ref = c_cpu.get(s.dtype, n, m), got = c_gpu.get(s.dtype, n, m);
        const double tol = std::ldexp(std::fabs(ref), -10) + 3.0 * std::ldexp(mag, -11) +
                           2.0 * static_cast<double>(s.K) * std::ldexp(mag, -23) + std::ldexp(1.0, -22);
        const double err = std::fabs(got - ref);
        max_err = std::max(max_err, err);
        ref_norm += ref * ref;
        if (!(err <= tol) && ++mismatches <= 3) {
          std::printf("  mismatch at n=%lld m=%lld: cuda %.8g cpu %.8g (tol %.3g)\n", static_cast<long long>(n),
                      static_cast<long long>(m), got, ref, tol);
        }
      }
      for (int64_t pad = s.M; pad < c_gpu.stride; ++pad) {
        const size_t at = static_cast<size_t>(n * c_gpu.stride + pad) * es;
        for (size_t i = 0; i < es; ++i) {
          if (c_gpu.bytes[at + i] != 0xA5 && ++mismatches <= 3) std::printf("  padding of c row %lld overwritten\n", static_cast<long long>(n));
        }
      }
    }
  }
  qgruDestroyQuantizeGPTQDescriptor(cpu_desc);
  qgruDestroyQuantizeGPTQDescriptor(gpu_desc);
  qgruDestroyHandle(cpu);
  qgruDestroyHandle(gpu);
  const bool fail = bad || mismatches || !(ref_norm > 0);
  std::printf("%s capi CUDA (%s) vs CPU %s N=%lld K=%lld M=%lld groups=%lld pad=%lld: max |err| %.3g\n", fail ? "FAIL" : "ok  ",
              resident.empty() ? "per call" : ("resident, " + resident).c_str(), s.dtype == QGRU_DTYPE_F16 ? "F16" : "F32",
              static_cast<long long>(s.N), static_cast<long long>(s.K), static_cast<long long>(s.M), static_cast<long long>(s.G),
              static_cast<long long>(s.pad), max_err);
  return fail ? 1 : 0;
}

// The shapes of the C API's checks.
const std::vector<CapiShape>& capi_shapes() {
  static const std::vector<CapiShape> shapes = {
      {128, 256, 1, 2, QGRU_DTYPE_F16, 0}, {136, 512, 5, 4, QGRU_DTYPE_F32, 3}, {64, 128, 40, 1, QGRU_DTYPE_F16, 8},
      {256, 1024, 33, 8, QGRU_DTYPE_F32, 0}, {256, 512, 64, 4, QGRU_DTYPE_F16, 0},
  };
  return shapes;
}

}  // namespace

int check_capi_linear() {
  // M = 1 (split-K), M not a multiple of 16, across the small/large tile boundary; N not a multiple of 128;
  // one group and several; padded rows; both dtypes.
  // Resident weights: the same shapes under every engine setting but wgmma (check_capi_linear_wgmma), and M = 1
  // contiguous fp16 (no transposes) and M = 64 (auto: the dequantize + cuBLAS engine).
  const std::vector<CapiShape>& shapes = capi_shapes();
  int failures = 0;
  uint32_t seed = 100;
  bool first = true;
  for (const CapiShape& s : shapes) {
    for (const char* resident : {"", "legacy", "stripes", "auto"}) {
      failures += run_case(s, seed, first, resident);
      first = false;
    }
    ++seed;
  }
  return failures;
}

int check_capi_linear_wgmma() {
  int failures = 0;
  uint32_t seed = 100;
  for (const CapiShape& s : capi_shapes()) failures += run_case(s, seed++, false, "wgmma");
  return failures;
}

}  // namespace qgru::cuda_test
