#pragma once
// --device cpu|cuda|auto, shared by the subcommands that execute models.
#include <string>

namespace qgru::cli {

enum class Device { Cpu, Cuda };

// cpu: the CPU. auto: CUDA when this build has it and a device is present, else the CPU (logged either
// way). cuda: CUDA, or a qgru::Error naming the cause (built without CUDA; no driver; no device).
Device resolve_device(const std::string& requested);

const char* device_name(Device device);

}  // namespace qgru::cli
