// memscale-plan: the config options (h9-config): --config PATH|HUB_ID: a Hugging Face
// config.json, a model directory or a Hub id in the local cache (memscale/json/hf_config.hpp).
#include <CLI/CLI.hpp>
#include <string>

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
                o.model = memscale::json_io::load_hf_model(v);
              } catch (const memscale::error& e) {
                throw usage_error("--config " + in_quotes(v) + ": " + e.what());
              }
              o.config.source = v;
              o.vision.model.reset();  // the config's model replaces a vision --model given before it
            });
}

}  // namespace memscale_plan
