// memscale-plan: the multi-GPU options (--gpus, --nodes, --host-memory, --strategy, --tp, --pp,
// --sp, --offload, --global-batch, --emit).
#include <CLI/CLI.hpp>
#include <charconv>
#include <string>
#include <system_error>

#include "memscale/parallel/strategy.hpp"
#include "option_groups.hpp"

namespace memscale_plan {
namespace {

// "512GiB", "1.5TiB", "768GB", "1099511627776": a size with an optional IEC or SI unit.
memscale::bytes parse_host_size(const std::string& option, const std::string& text) {
  double value = 0.0;
  const char* const first = text.data();
  const char* const last = first + text.size();
  const auto [ptr, ec] = std::from_chars(first, last, value);
  const std::string unit(ptr, last);
  struct unit_scale {
    const char* name;
    double scale;
  };
  constexpr unit_scale units[] = {{"", 1.0},         {"B", 1.0},        {"KiB", 1024.0},    {"MiB", 1048576.0},
                                  {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}, {"KB", 1e3}, {"MB", 1e6},
                                  {"GB", 1e9},       {"TB", 1e12}};
  if (ec == std::errc{} && value > 0.0)
    for (const auto& u : units)
      if (unit == u.name && value * u.scale < 1.8e19) return memscale::bytes{static_cast<std::uint64_t>(value * u.scale)};
  throw usage_error(option + " must be a size such as 512GiB or 768GB (got " + in_quotes(text) + ")");
}

}  // namespace

void add_cluster_options(CLI::App& app, options& o) {
  const auto g = group::cluster;
  auto& c = o.cluster;
  add_value(app, g, "--gpus", "N", "GPUs in all (per node: N / --nodes); per-GPU estimate or cluster plan",
            [&c](const std::string& v) { c.gpus = parse_positive("--gpus", v); });
  add_value(app, g, "--nodes", "M", "nodes the GPUs are spread over; default 1",
            [&c](const std::string& v) { c.nodes = parse_positive("--nodes", v); });
  add_value(app, g, "--host-memory", "SIZE", "RAM of each node, e.g. 512GiB: checked against offload needs",
            [&c](const std::string& v) { c.host_memory = parse_host_size("--host-memory", v); });
  add_value(app, g, "--strategy", "S", "ddp | zero1 | zero2 | zero3 | fsdp-full | fsdp-grad-op | hsdp; "
                                       "without it the cluster planner chooses (needs --gpu)",
            [&c](const std::string& v) {
              const auto s = memscale::strategy_from_string(v);
              if (!s)
                throw usage_error("--strategy must be one of ddp, zero1, zero2, zero3, fsdp-full, fsdp-grad-op, hsdp (got " +
                                  in_quotes(v) + ")");
              c.engine = *s;
            });
  add_value(app, g, "--tp", "N", "tensor-parallel degree; default 1",
            [&c](const std::string& v) { c.tp = parse_positive("--tp", v); });
  add_value(app, g, "--pp", "N", "pipeline stages (1F1B); default 1",
            [&c](const std::string& v) { c.pp = parse_positive("--pp", v); });
  add_flag(app, g, "--sp", "sequence parallelism (with --tp > 1)", [&c] { c.sp = true; });
  add_value(app, g, "--offload", "WHAT", "none | optimizer | optimizer+params, optionally +activations",
            [&c](const std::string& v) {
              c.offload_optimizer = c.offload_parameters = c.offload_activations = false;
              std::string rest = v;
              while (!rest.empty()) {
                const auto cut = rest.find_first_of("+,");
                const std::string part = rest.substr(0, cut);
                rest = cut == std::string::npos ? "" : rest.substr(cut + 1);
                if (part == "optimizer") c.offload_optimizer = true;
                else if (part == "params" || part == "parameters") c.offload_parameters = true;
                else if (part == "activations") c.offload_activations = true;
                else if (part != "none")
                  throw usage_error("--offload must name optimizer, params or activations joined by + (got " +
                                    in_quotes(v) + ")");
              }
            });
  add_value(app, g, "--global-batch", "N", "sequences per optimizer step the planner keeps; default batch x grad-accum",
            [&c](const std::string& v) { c.global_batch = parse_positive("--global-batch", v); });
  add_value(app, g, "--emit", "FORMAT", "print the engine config instead of the report: deepspeed (ds_config.json) "
                                        "| accelerate-fsdp (Accelerate config YAML)",
            [&c](const std::string& v) {
              if (v == "deepspeed") c.emit = emit_format::deepspeed;
              else if (v == "accelerate-fsdp") c.emit = emit_format::accelerate_fsdp;
              else throw usage_error("--emit must be deepspeed or accelerate-fsdp (got " + in_quotes(v) + ")");
            });
}

}  // namespace memscale_plan
