// memscale-plan: the config options: --config PATH|HUB_ID: a Hugging Face
// config.json, a model directory or a Hub id in the local cache (memscale/json/hf_config.hpp).
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <utility>

#include "memscale/json.hpp"
#include "option_groups.hpp"

namespace memscale_plan {

void add_config_options(CLI::App& app, options& o) {
  add_value(app, group::config, "--config", "PATH|HUB_ID",
            "the model from a Hugging Face config.json: a file, a model directory holding one, or a Hub id "
            "(ORG/NAME) found in the local Hub cache ($HF_HUB_CACHE, else $HF_HOME/hub, else "
            "~/.cache/huggingface/hub); nothing is downloaded",
            [&o](const std::string& v) {
              // Every error names the config it came from, then the field (tests/malformed/configs).
              try {
                auto loaded = memscale::json_io::load_model_or_checkpoint(v);  // an unknown model_type: its checkpoint
                o.model = loaded.model;
                o.config.generic = loaded.generic ? std::make_shared<const memscale::json_io::generic_checkpoint>(std::move(*loaded.generic))
                                                  : nullptr;
              } catch (const memscale::error& e) {
                throw usage_error("--config " + in_quotes(v) + ": " + e.what());
              }
              o.config.source = v;
              o.vision.model.reset();  // the config's model replaces a vision --model given before it
            });
}

}  // namespace memscale_plan
