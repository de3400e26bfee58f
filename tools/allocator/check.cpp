// memscale-allocator-check: replays every H100 record of docs/data through the allocator
// simulation and compares reserved and nvidia-smi with the measurements, before (the
// estimate's reserved/device) and after (the replay, plus the CUDA context model).
//
//   memscale-allocator-check docs/data/gpu_measured_h100.json docs/data/gpu_heldout_h100.json
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <memscale/allocator/context.hpp>
#include <memscale/allocator/replay.hpp>
#include <memscale/allocator/replay_generate.hpp>
#include <memscale/allocator/replay_vision.hpp>
#include <memscale/vision/estimate.hpp>
#include <memscale/json.hpp>
#include <memscale/memscale.hpp>

namespace {

using nlohmann::json;

struct measured_case {
  json record;  // the allocated record (model, run, stack)
  double allocated = 0;
  double reserved = 0;
  double smi = 0;
};

double pct(double estimated, double measured) { return (estimated - measured) / measured * 100.0; }

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, measured_case> cases;
  std::vector<std::string> order;
  for (int a = 1; a < argc; ++a) {
    std::ifstream in(argv[a]);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", argv[a]);
      return 2;
    }
    for (const json& r : json::parse(in)) {
      std::string id = r.at("id").get<std::string>();
      const std::string measure = r.at("measure").get<std::string>();
      id = id.substr(0, id.rfind('-'));
      if (!cases.count(id)) order.push_back(id);
      measured_case& c = cases[id];
      const double v = r.at("measured_bytes").get<double>();
      if (measure == "max_memory_allocated") {
        c.allocated = v;
        c.record = r;
      } else if (measure == "max_memory_reserved") {
        c.reserved = v;
      } else {
        c.smi = v;
      }
    }
  }
  std::printf("%-50s %8s %8s | %7s %8s %8s | %8s %8s | %7s %6s | %8s\n", "case", "alloc", "reserved", "alloc%",
              "res-bef%", "res-aft%", "smi-bef%", "smi-aft%", "simal%", "ctx", "expand%");
  for (const std::string& id : order) {
    const measured_case& c = cases[id];
    const json& r = c.record;
    double est_tensor = 0, est_reserved = 0, est_device = 0;
    memscale::allocator::replay_result rep{};
    memscale::allocator::replay_result expandable{};
    memscale::allocator::options expand{};
    expand.expandable_segments = true;
    memscale::allocator::context_inputs ctx{.streaming_multiprocessors = 132, .max_threads_per_sm = 2048};
    if (memscale::json_io::is_vision_record(r)) {
      const memscale::vision::vision_spec model = memscale::json_io::vision_model_from_record(r);
      const memscale::training_spec run = memscale::json_io::run_from_record(memscale::json_io::vision_run_record(r));
      const memscale::estimate_result est = memscale::vision::estimate(model, run);
      est_tensor = static_cast<double>(est.steady.tensor.value);
      est_reserved = static_cast<double>(est.steady.reserved.value);
      est_device = static_cast<double>(est.steady.device.value);
      const auto g = std::make_unique<memscale::vision::layer_graph>(memscale::vision::build_graph(model, run));
      rep = memscale::allocator::replay_vision_training<16384, 16384>(*g, run);
      expandable = memscale::allocator::replay_vision_training<16384, 16384>(*g, run, expand);
      ctx.half_precision = run.prec != memscale::precision::fp32;
      ctx.convolutions = true;
    } else if (r.contains("infer")) {
      const memscale::model_spec model = memscale::json_io::model_for_record(r);
      const memscale::inference_spec inf = memscale::json_io::inference_from_record(r);
      const auto est = memscale::estimate_inference(model, inf).peak;
      est_tensor = static_cast<double>(est.tensor.value);
      est_reserved = static_cast<double>(est.reserved.value);
      est_device = static_cast<double>(est.device.value);
      rep = memscale::allocator::replay_generate<16384, 16384>(model, inf);
      expandable = memscale::allocator::replay_generate<16384, 16384>(model, inf, expand);
      ctx.work = memscale::allocator::workload::inference;
      ctx.half_precision = inf.compute != memscale::dtype::fp32;
    } else {
      const memscale::model_spec model = memscale::json_io::model_for_record(r);
      const memscale::training_spec run =
          memscale::with_resolved_adapters(model, memscale::json_io::run_from_record(r));
      const memscale::estimate_result est = memscale::estimate(model, run);
      est_tensor = static_cast<double>(est.steady.tensor.value);
      est_reserved = static_cast<double>(est.steady.reserved.value);
      est_device = static_cast<double>(est.steady.device.value);
      const auto g = std::make_unique<memscale::graph>(memscale::build_graph(model, run));
      rep = memscale::allocator::replay_training<16384, 16384, 16384>(*g, run);
      expandable = memscale::allocator::replay_training<16384, 16384, 16384>(*g, run, {.settings = expand});
      ctx.half_precision = run.prec != memscale::precision::fp32;
    }
    const auto context = memscale::allocator::context_memory(ctx).total();
    const double sim_reserved = static_cast<double>(rep.reserved_peak.value);
    const double sim_device = sim_reserved + static_cast<double>(context.value);
    std::printf("%-50s %8.0f %8.0f | %+7.2f %+8.2f %+8.2f | %+8.2f %+8.2f | %+7.2f %6.0f | %+8.2f\n", id.substr(5).c_str(),
                c.allocated / 1048576.0, c.reserved / 1048576.0, pct(est_tensor, c.allocated),
                pct(est_reserved, c.reserved), pct(sim_reserved, c.reserved), pct(est_device, c.smi),
                pct(sim_device, c.smi), pct(static_cast<double>(rep.allocated_peak.value), c.allocated),
                (c.smi - c.reserved) / 1048576.0,
                pct(static_cast<double>(expandable.reserved_peak.value), static_cast<double>(rep.reserved_peak.value)));
  }
}
