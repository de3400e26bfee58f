// memscale/json/hf/t5.hpp: the T5 entry of the config.json reader's family table
// (model_type "t5" and "mt5": T5ForConditionalGeneration, MT5ForConditionalGeneration, the
// bare T5Model / MT5Model). The reader itself is json_io::t5_from_hf_config (hf_t5.hpp).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf_t5.hpp"

namespace memscale::json_io::hf {

// Takes any config view with raw() (hf::config); the table's function pointer picks it.
template <class Config>
model_spec t5(const Config& c) {
  return t5_from_hf_config(c.raw());
}

}  // namespace memscale::json_io::hf
