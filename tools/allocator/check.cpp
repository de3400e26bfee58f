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

#include <memscale/allocator/replay.hpp>
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
  std::printf("%-52s %9s %9s | %8s %8s %8s | %8s %8s\n", "case", "alloc", "reserved", "alloc%", "res-bef%", "res-aft%",
              "simalloc", "retries");
  for (const std::string& id : order) {
    const measured_case& c = cases[id];
    const json& r = c.record;
    if (memscale::json_io::is_vision_record(r) || r.contains("infer")) continue;
    const memscale::model_spec model = memscale::json_io::model_for_record(r);
    const memscale::training_spec run =
        memscale::with_resolved_adapters(model, memscale::json_io::run_from_record(r));
    const memscale::estimate_result est = memscale::estimate(model, run);
    const auto g = std::make_unique<memscale::graph>(memscale::build_graph(model, run));
    const auto rep = memscale::allocator::replay_training<16384, 16384, 16384>(*g, run, {.full_walk = true});
    std::printf("%-52s %9.0f %9.0f | %+8.2f %+8.2f %+8.2f | %+8.2f %8llu\n", id.c_str(), c.allocated / 1048576.0,
                c.reserved / 1048576.0, pct(static_cast<double>(est.steady.tensor.value), c.allocated),
                pct(static_cast<double>(est.steady.reserved.value), c.reserved),
                pct(static_cast<double>(rep.reserved_peak.value), c.reserved),
                pct(static_cast<double>(rep.allocated_peak.value), c.allocated),
                static_cast<unsigned long long>(rep.alloc_retries));
  }
}
