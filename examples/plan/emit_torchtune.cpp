// memscale-plan --emit torchtune (emit_torchtune.hpp).
#include "emit_torchtune.hpp"

#include <string>

#include "memscale/json/emit_torchtune.hpp"

namespace memscale_plan {

void check_torchtune_emit(const options& opt) {
  if (opt.cluster.emit != emit_format::torchtune) return;
  if (opt.run.framework != memscale::framework_kind::torchtune)
    throw usage_error("--emit torchtune describes a torchtune run: add --framework torchtune");
  if (opt.vision.model || opt.inference.enabled || opt.config.generic)
    throw usage_error("--emit torchtune writes a training recipe config for a decoder model torchtune builds");
}

std::string torchtune_config(const options& opt) {
  return memscale::json_io::emit_torchtune_config(opt.model, opt.run, opt.lora_alpha.value_or(0.0));
}

}  // namespace memscale_plan
