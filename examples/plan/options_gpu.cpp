// memscale-plan: planning on a GPU (--gpu, --headroom).
#include <CLI/CLI.hpp>
#include <charconv>
#include <string>
#include <system_error>

#include "memscale/gpus.hpp"
#include "option_groups.hpp"

namespace memscale_plan {

void add_gpu_options(CLI::App& app, options& o) {
  const auto g = group::gpu;
  add_value(app, g, "--gpu", "NAME", "plan the run on this GPU (see --list-gpus)", [&o](const std::string& v) {
    if (!memscale::find_gpu(v)) throw usage_error("--gpu must be a GPU from --list-gpus (got " + in_quotes(v) + ")");
    o.gpu = v;
  });
  add_value(app, g, "--headroom", "FRACTION", "share of VRAM kept free with --gpu, 0.10-0.15; default 0.15",
            [&o](const std::string& v) {
              double value = 0.0;
              const char* const last = v.data() + v.size();
              const auto [ptr, ec] = std::from_chars(v.data(), last, value);
              if (v.empty() || ec != std::errc{} || ptr != last)
                throw usage_error("--headroom must be a decimal fraction such as 0.15 (got " + in_quotes(v) + ")");
              o.headroom = value;
            });
}

}  // namespace memscale_plan
