// The bit-width presets, embedded so that `qgru quantize --config int8` needs no source tree.
// Each text is byte-for-byte configs/<name>.json (test/unit/quant/bitwidth_config_test.cpp checks it);
// edit the JSON file and paste it here.
#include <map>

#include "qgru/base/error.h"
#include "qgru/quant/bitwidth_config.h"

namespace qgru {

namespace {

const std::map<std::string, std::string>& presets() {
  static const std::map<std::string, std::string> texts = {
      {"int8", R"json({
  "schema": "qgru.bitwidth_config",
  "version": 1,
  "name": "int8",
  "description": "Seed 001 Appendix A: INT8 everywhere; x, h and the linears/gate inputs asymmetric; W, R, bw, br symmetric per output channel; sigmoid outputs UINT8 asymmetric; tanh output INT8 symmetric. Ranges: seed 001's per-step EMA for every tensor (on examples/digits 30.0 dB output SQNR against 25.8 for minmax+pow2 and 23.5 for minmax); qgru quantize --range-method overrides it.",
  "range_method": "ema",
  "gemm_accumulator": "auto",
  "tensors": {
    "x": {"bits": 8, "signed": true, "symmetric": false},
    "h": {"bits": 8, "signed": true, "symmetric": false},
    "W": {"bits": 8, "signed": true, "symmetric": true, "granularity": "per_channel"},
    "R": {"bits": 8, "signed": true, "symmetric": true, "granularity": "per_channel"},
    "bw": {"bits": 8, "signed": true, "symmetric": true, "granularity": "per_channel"},
    "br": {"bits": 8, "signed": true, "symmetric": true, "granularity": "per_channel"},
    "weight_ih_linear": {"bits": 8, "signed": true, "symmetric": false},
    "weight_hh_linear": {"bits": 8, "signed": true, "symmetric": false},
    "update_gate_input": {"bits": 8, "signed": true, "symmetric": false},
    "update_gate_output": {"bits": 8, "signed": false, "symmetric": false},
    "reset_gate_input": {"bits": 8, "signed": true, "symmetric": false},
    "reset_gate_output": {"bits": 8, "signed": false, "symmetric": false},
    "new_gate_input": {"bits": 8, "signed": true, "symmetric": false},
    "new_gate_output": {"bits": 8, "signed": true, "symmetric": true}
  },
  "activations": {
    "update_gate": {"impl": "table"},
    "reset_gate": {"impl": "table"},
    "new_gate": {"impl": "table"}
  }
}
)json"},
      {"int16-activations", R"json({
  "schema": "qgru.bitwidth_config",
  "version": 1,
  "name": "int16-activations",
  "description": "Every activation 16 bits, weights W and R 8 bits (an int8 x int16 GEMM). Biases 16 bits: the bias is added at the fine GEMM scale S_W*S_x and feeds 16-bit linears, so an 8-bit bias (relative error 2^-8 of the channel's bias) would dominate the linear's error; a wider bias costs nothing (one int32 per channel, added once per element).",
  "range_method": "minmax+pow2",
  "gemm_accumulator": "auto",
  "tensors": {
    "x": {"bits": 16, "signed": true, "symmetric": false},
    "h": {"bits": 16, "signed": true, "symmetric": false},
    "W": {"bits": 8, "signed": true, "symmetric": true, "granularity": "per_channel"},
    "R": {"bits": 8, "signed": true, "symmetric": true, "granularity": "per_channel"},
    "bw": {"bits": 16, "signed": true, "symmetric": true, "granularity": "per_channel"},
    "br": {"bits": 16, "signed": true, "symmetric": true, "granularity": "per_channel"},
    "weight_ih_linear": {"bits": 16, "signed": true, "symmetric": false},
    "weight_hh_linear": {"bits": 16, "signed": true, "symmetric": false},
    "update_gate_input": {"bits": 16, "signed": true, "symmetric": false},
    "update_gate_output": {"bits": 16, "signed": false, "symmetric": false},
    "reset_gate_input": {"bits": 16, "signed": true, "symmetric": false},
    "reset_gate_output": {"bits": 16, "signed": false, "symmetric": false},
    "new_gate_input": {"bits": 16, "signed": true, "symmetric": false},
    "new_gate_output": {"bits": 16, "signed": true, "symmetric": true}
  },
  "activations": {
    "update_gate": {"impl": "pwl"},
    "reset_gate": {"impl": "pwl"},
    "new_gate": {"impl": "pwl"}
  }
}
)json"},
      {"int16", R"json({
  "schema": "qgru.bitwidth_config",
  "version": 1,
  "name": "int16",
  "description": "Every tensor 16 bits (W and R included); sigmoid outputs UINT16 asymmetric, tanh output INT16 symmetric; piecewise-linear activations.",
  "range_method": "minmax+pow2",
  "gemm_accumulator": "auto",
  "tensors": {
    "x": {"bits": 16, "signed": true, "symmetric": false},
    "h": {"bits": 16, "signed": true, "symmetric": false},
    "W": {"bits": 16, "signed": true, "symmetric": true, "granularity": "per_channel"},
    "R": {"bits": 16, "signed": true, "symmetric": true, "granularity": "per_channel"},
    "bw": {"bits": 16, "signed": true, "symmetric": true, "granularity": "per_channel"},
    "br": {"bits": 16, "signed": true, "symmetric": true, "granularity": "per_channel"},
    "weight_ih_linear": {"bits": 16, "signed": true, "symmetric": false},
    "weight_hh_linear": {"bits": 16, "signed": true, "symmetric": false},
    "update_gate_input": {"bits": 16, "signed": true, "symmetric": false},
    "update_gate_output": {"bits": 16, "signed": false, "symmetric": false},
    "reset_gate_input": {"bits": 16, "signed": true, "symmetric": false},
    "reset_gate_output": {"bits": 16, "signed": false, "symmetric": false},
    "new_gate_input": {"bits": 16, "signed": true, "symmetric": false},
    "new_gate_output": {"bits": 16, "signed": true, "symmetric": true}
  },
  "activations": {
    "update_gate": {"impl": "pwl"},
    "reset_gate": {"impl": "pwl"},
    "new_gate": {"impl": "pwl"}
  }
}
)json"},
  };
  return texts;
}

}  // namespace

std::vector<std::string> bitwidth_preset_names() { return {"int8", "int16-activations", "int16"}; }

const std::string& bitwidth_preset_text(const std::string& name) {
  auto it = presets().find(name);
  if (it == presets().end()) throw Error("no bit-width preset named '" + name + "' (presets: int8, int16-activations, int16)");
  return it->second;
}

}  // namespace qgru
