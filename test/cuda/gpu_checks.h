#pragma once
// GPU self-test pieces (test/cuda): each returns the number of failed cases and prints what failed.
// Run only when a GPU is present (selftest_main.cpp decides).
namespace qgru::cuda_test {

// Device dequant (real PRMT/LOP3/f16x2) against the host emulation, bit for bit: every code in every
// position, every 4-bit offset, an 8-bit offset grid and an fp16 scale grid.
int check_dequant_on_device();

// QuantLinear (W4A16/W8A16 GEMM) against a CPU reference in double over edge shapes, both checkpoint
// zero formats, single and multiple groups, act-order, and split-K.
int check_quant_linear();
// The wgmma engine setting over the same shapes (the self-test runs it last).
int check_quant_linear_wgmma();

// GruCellCuda (cuBLAS int8 GEMMs + the shared cell kernel) against a CPU loop over the same cell function.
int check_gru_cell();

// Whole quantized models on the GPU (QuantGruCuda) against the CPU reference executor, code for code: every
// preset, 2 layers, bidirectional, with and without h0 (quant_gru_check.cpp).
int check_quant_gru();

// FloatGruCuda against the CPU float executor within kFloatDeviceTolerance (quant_gru_check.cpp).
int check_float_gru();

// The C API's CUDA device (qgruQuantizeLinearGPTQ on QGRU_DEVICE_CUDA) against the same API's CPU path,
// within fp16 rounding, plus the CUDA path's call-time statuses (capi_check.cpp).
int check_capi_linear();
// The C API's resident weights under the wgmma setting (run last, as check_quant_linear_wgmma).
int check_capi_linear_wgmma();

// The persistent GRU kernel (GruRecurrence::Persistent) against the direct cell loop and the reference executor, code
// for code, each line naming the path taken; small: the short list for compute-sanitizer (persistent_gru_check.cpp).
int check_persistent_gru(bool small);

// QuantGruCuda's whole call on the device (run_codes, run, run_floats) against the reference executor, code for code
// and float for float, on the per-step and persistent paths, with each call's copies as planned (device_flow_check.cpp).
int check_device_flow();
// A few of those cases and one streamed model: the compute-sanitizer list (device_flow_check.cpp).
int check_device_flow_small();

// QuantGruCudaStream frame by frame against one whole reference run, no allocation while streaming
// (device_flow_check.cpp).
int check_cuda_stream();

// The runtime C API's streaming on a CUDA context against one whole reference run, and four threads on one CUDA
// context (states and whole runs at once, device and host flows) against it (capi_stream_check.cpp).
int check_capi_stream();
// GPTQ on the GPU (qgru_cuda/gptq_device.h) against the CPU path: the Hessian within summation-order rounding,
// codes equal up to each row's first near-tie, errors within 1% (gptq_check.cpp).
int check_gptq();

// The resident checkpoint layer of the Python package's QuantLinear(device="cuda") (qgru/gptq/resident_linear.h)
// against the same layer on the CPU within fp16 rounding, and its refusals (resident_linear_check.cpp).
int check_resident_linear();

}  // namespace qgru::cuda_test
