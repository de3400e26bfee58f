// memscale-plan: planning on a GPU (--gpu, --headroom).
#include <CLI/CLI.hpp>
#include <array>
#include <charconv>
#include <cstdint>
#include <utility>
#include <string>
#include <system_error>

#include "memscale/allocator/alloc_conf.hpp"
#include "memscale/gpus.hpp"
#include "memscale/json/run_settings.hpp"
#include "memscale/json/software_stack.hpp"
#include "memscale/planner.hpp"
#include "option_groups.hpp"
#include "suggest.hpp"

namespace memscale_plan {

std::uint64_t parse_size(std::string_view text, const std::string& field) {
  return memscale::json_io::parse_size(text, field);  // memscale/json/run_settings.hpp
}

void add_gpu_options(CLI::App& app, options& o) {
  const auto g = group::gpu;
  add_value(app, g, "--gpu", "NAME", "plan the run on this GPU (see --list-gpus)", [&o](const std::string& v) {
    if (!memscale::find_gpu(v)) {
      // Compared as find_gpu reads names: without vendor words, case or separators.
      const auto key = memscale::make_gpu_name_key(v);
      nearest_name nearest(key.valid ? key.view() : std::string_view(v));
      for (const auto& gpu : memscale::gpu_catalog) nearest.offer(gpu.name);
      throw usage_error("--gpu must be a GPU from --list-gpus (got " + in_quotes(v) + ")" + nearest.hint());
    }
    o.gpu = v;
    o.custom_gpu.reset();
  });
  add_value(app, g, "--gpu-memory", "SIZE", "plan on a GPU described by its memory: 24GiB, 80GB, 24gb (units in any case)",
            [&o](const std::string& v) {
              const std::uint64_t memory = memscale::json_io::checked_gpu_memory(parse_size(v, "--gpu-memory"), "--gpu-memory", v);
              o.custom_gpu = memscale::custom_gpu(memscale::bytes{memory});
              o.gpu.clear();
            });
  add_value(app, g, "--headroom", "FRACTION", "share of VRAM kept free with --gpu or --gpu-memory, 0.10-0.15; default 0.15",
            [&o](const std::string& v) {
              double value = 0.0;
              const char* const last = v.data() + v.size();
              const auto [ptr, ec] = std::from_chars(v.data(), last, value);
              if (v.empty() || ec != std::errc{} || ptr != last)
                throw usage_error("--headroom must be a decimal fraction such as 0.15 (got " + in_quotes(v) + ")");
              // Written so that NaN fails too; the value is quoted as typed ("nan", "inf", "0.150001").
              if (!(value >= memscale::min_headroom && value <= memscale::max_headroom))
                throw usage_error("--headroom must be within 0.10-0.15 (got " + in_quotes(v) + ")");
              o.headroom = value;
            });
  add_value(app, g, "--alloc-conf", "STRING",
            "PYTORCH_CUDA_ALLOC_CONF for the allocator replay: expandable_segments:True, max_split_size_mb:N, "
            "roundup_power2_divisions:N",
            [&o](const std::string& v) {
              try {
                (void)memscale::allocator::parse_alloc_conf(v);
              } catch (const memscale::error& e) {
                throw usage_error("--alloc-conf " + in_quotes(v) + ": " + e.what());
              }
              o.alloc_conf = v;
            });
  add_value(app, g, "--context-memory", "SIZE",
            "the CUDA context and non-PyTorch memory as measured (nvidia-smi - max_memory_reserved), e.g. 760MiB; "
            "default: modelled from the GPU",
            [&o](const std::string& v) {
              const std::uint64_t size = parse_size(v, "--context-memory");
              if (size == 0) throw usage_error("--context-memory must be > 0 (got " + in_quotes(v) + ")");
              o.context_memory = memscale::bytes{size};
            });
  add_value(app, g, "--stack", "LIST",
            "the software assumed, e.g. torch=2.5,transformers=4.46,bitsandbytes=0.43.2,cuda=12.4; default: the current "
            "releases, torch 2.11, transformers 5.17, bitsandbytes 0.49.2, CUDA >= 12.2",
            [&o](const std::string& v) {
              memscale::json_io::read_stack_option(v, o.run, "--stack");
              o.stack += (o.stack.empty() ? "" : ",") + v;  // a later --stack adds to an earlier one
            });
}

}  // namespace memscale_plan
