// memscale-plan: the multi-GPU options (--gpus, --nodes, --host-memory, --strategy, --tp, --pp,
// --sp, --no-sync, --global-batch, --ds-precision, --emit; --offload is a run option, options_run.cpp).
#include <CLI/CLI.hpp>
#include <string>

#include "memscale/parallel/strategy.hpp"
#include "option_groups.hpp"

namespace memscale_plan {

void add_cluster_options(CLI::App& app, options& o) {
  const auto g = group::cluster;
  auto& c = o.cluster;
  add_value(app, g, "--gpus", "N", "GPUs in all (per node: N / --nodes); per-GPU estimate or cluster plan",
            [&c](const std::string& v) { c.gpus = parse_positive("--gpus", v); });
  add_value(app, g, "--nodes", "M", "nodes the GPUs are spread over; default 1",
            [&c](const std::string& v) { c.nodes = parse_positive("--nodes", v); });
  add_value(app, g, "--host-memory", "SIZE", "RAM of each node, e.g. 512GiB: checked against offload needs",
            [&c](const std::string& v) { c.host_memory = memscale::bytes{parse_size(v, "--host-memory")}; });
  add_value(app, g, "--strategy", "S", "ddp | zero0 | zero1 | zero2 | zero3 | fsdp-full | fsdp-grad-op | hsdp (zero0: DeepSpeed "
                                       "without ZeRO, with --ds-precision); "
                                       "without it the cluster planner chooses (needs --gpu)",
            [&c](const std::string& v) {
              const auto s = memscale::strategy_from_string(v);
              if (!s)
                throw usage_error("--strategy must be one of ddp, zero0, zero1, zero2, zero3, fsdp-full, fsdp-grad-op, hsdp (got " +
                                  in_quotes(v) + ")");
              c.engine = *s;
            });
  add_value(app, g, "--tp", "N", "tensor-parallel degree; default 1 (the planner: searched unless given)",
            [&c](const std::string& v) {
              c.tp = parse_positive("--tp", v);
              c.tp_given = true;
            });
  add_value(app, g, "--pp", "N", "pipeline stages (1F1B); default 1 (the planner: searched unless given)",
            [&c](const std::string& v) {
              c.pp = parse_positive("--pp", v);
              c.pp_given = true;
            });
  add_value(app, g, "--cp", "N", "context-parallel degree (--framework torchtitan: ring attention, allgather); default 1",
            [&c](const std::string& v) { c.cp = parse_positive("--cp", v); });
  add_flag(app, g, "--sp", "sequence parallelism (with --tp > 1)", [&c] { c.sp = true; });
  add_flag(app, g, "--no-sync",
           "the loop accumulates under no_sync() (DDP, FSDP): FSDP keeps unsharded gradients between micro-steps",
           [&o] { o.run.no_sync = true; });
  add_value(app, g, "--global-batch", "N", "sequences per optimizer step the planner keeps; default batch x grad-accum",
            [&c](const std::string& v) { c.global_batch = parse_positive("--global-batch", v); });
  add_value(app, g, "--ds-precision", "P",
            "fp16 | bf16: DeepSpeed's own 16-bit engine (ds_config \"fp16\"/\"bf16\" enabled; fp32 "
            "master in its optimizer wrapper); needs --strategy zero0|zero1|zero2|zero3 and --precision "
            "pure_fp16|pure_bf16",
            [&c](const std::string& v) {
              const auto e = memscale::engine_precision_from_string(v);
              if (!e || *e == memscale::engine_precision::none)
                throw usage_error("--ds-precision must be fp16 or bf16 (got " + in_quotes(v) + ")");
              c.ds_precision = *e;
            });
  add_value(app, g, "--emit", "FORMAT", "print the engine config instead of the report: deepspeed (ds_config.json) "
                                        "| accelerate-fsdp (Accelerate config YAML) | torchtitan (job TOML; with "
                                        "--framework torchtitan) | torchtune (recipe config YAML: one GPU, or full_finetune_distributed with --gpus N)",
            [&c](const std::string& v) {
              if (v == "deepspeed") c.emit = emit_format::deepspeed;
              else if (v == "accelerate-fsdp") c.emit = emit_format::accelerate_fsdp;
              else if (v == "torchtitan") c.emit = emit_format::torchtitan;
              else if (v == "torchtune") c.emit = emit_format::torchtune;
              else
                throw usage_error("--emit must be deepspeed, accelerate-fsdp, torchtitan or torchtune (got " + in_quotes(v) +
                                  ")");
            });
}

}  // namespace memscale_plan
