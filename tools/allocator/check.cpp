// memscale-allocator-check: replays every H100 record of docs/data through the allocator
// simulation and compares reserved and nvidia-smi with the measurements, before (the
// estimate's reserved/device) and after (the replay, plus the CUDA context model).
//
//   memscale-allocator-check docs/data/gpu_measured_h100.json docs/data/gpu_heldout_h100.json
//       docs/data/gpu_families_h100.json   (every H100 record: 33 runs and 15 family steps)
//   memscale-allocator-check --sweep FILES...   the budget sweep of docs/accuracy.md: for every
//       training record (transformer or vision) with an nvidia-smi figure M, 41 cards of 0.80 ... 1.20 x M,
//       15% headroom (budget = 0.85 x card): "fits" with M over the budget is unsafe, "does not
//       fit" with M within it a needless refusal; today's rule (rounding rule, class band)
//       against the replay's (memscale/device_peak.hpp verdict_on_device). `--stack FILE` (before
//       the record files) merges the versions the records' sources state (docs/data/gpu_published_stack.json), so
//       the published V100 runs of torch 1.10 are answered with their own stack.
//   memscale-allocator-check --events CASE FILES...   the replay's event stream of the training or
//       generate() record whose id contains CASE, one event a line ("enter STEP MOMENT", "alloc ID SIZE",
//       "free ID"), for tools/allocator/history_compare.py to line up with a recorded history.
//   memscale-allocator-check --capped FILES...   every run measured under
//       set_per_process_memory_fraction (records with cap_bytes and outcome) replayed with the
//       capacity cap_bytes (the CUDA context is outside it): the capped replay's verdict against
//       the measured outcome, and the counts agree / unsafe (replay fits, measured OOM) /
//       needless (replay OOM, measured fits).
// A record's `alloc_conf` (PYTORCH_CUDA_ALLOC_CONF) sets the replay's allocator options.
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <memscale/device_peak.hpp>
#include <memscale/allocator/alloc_conf.hpp>
#include <memscale/allocator/context.hpp>
#include <memscale/allocator/replay.hpp>
#include <memscale/allocator/replay_generate.hpp>
#include <memscale/allocator/replay_vision.hpp>
#include <memscale/vision/device.hpp>
#include <memscale/vision/estimate.hpp>
#include <memscale/vision/run_class.hpp>
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

// nan where the run has no such measurement (timm's records measure allocated memory only).
double pct(double estimated, double measured) {
  return measured > 0 ? (estimated - measured) / measured * 100.0 : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

namespace {

struct sweep_count {
  int fits = 0, borderline = 0, refused = 0, unsafe = 0, needless = 0, budgets = 0;
};

void count(sweep_count& c, memscale::verdict v, double measured, double budget) {
  ++c.budgets;
  if (v == memscale::verdict::fits) {
    ++c.fits;
    if (measured > budget) ++c.unsafe;
  } else if (v == memscale::verdict::borderline) {
    ++c.borderline;
  } else {
    ++c.refused;
    if (measured <= budget) ++c.needless;
  }
}

void print(const char* rule, const sweep_count& c) {
  std::printf("| %s | %d | %d | %d | %d | %d (%.2f%%) | %d (%.2f%%) |\n", rule, c.budgets, c.fits, c.borderline, c.refused,
              c.unsafe, 100.0 * c.unsafe / c.budgets, c.needless, 100.0 * c.needless / c.budgets);
}

int sweep(int argc, char** argv) {
  sweep_count before{}, after{};
  int records = 0;
  json stacks = json::array();
  for (int a = 2; a < argc; ++a) {
    if (std::string(argv[a]) == "--stack" && a + 1 < argc) {
      std::ifstream in(argv[++a]);
      if (!in) {
        std::fprintf(stderr, "cannot read %s\n", argv[a]);
        return 2;
      }
      stacks = json::parse(in);
      continue;
    }
    std::ifstream in(argv[a]);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", argv[a]);
      return 2;
    }
    for (json r : json::parse(in)) {
      r = memscale::json_io::with_stack(r, stacks);
      if (r.at("measure") != "nvidia-smi" || r.contains("infer")) continue;
      const auto gpu = memscale::find_gpu(r.value("device", std::string()));
      if (!gpu) continue;
      const double measured = r.at("measured_bytes").get<double>();
      const bool vision = memscale::json_io::is_vision_record(r);
      const memscale::training_spec run = memscale::on_gpu(
          memscale::json_io::run_from_record(vision ? memscale::json_io::vision_run_record(r) : r), *gpu);
      // The rounding rule with its class band (before), and the device estimate with its verdict (after).
      memscale::estimate_result e{};
      const memscale::error_band* band = nullptr;
      memscale::device_estimate d{};
      std::function<memscale::verdict(memscale::bytes)> replayed;
      if (vision) {
        const memscale::vision::vision_spec model = memscale::json_io::vision_model_from_record(r);
        e = memscale::vision::estimate(model, run);
        band = &memscale::band_of(memscale::vision::class_of(model, run), memscale::band_quantity::device);
        d = memscale::vision::estimate_on_device(model, run, &*gpu);
        replayed = [model, run, d](memscale::bytes budget) {
          return memscale::vision::verdict_on_device(model, run, d, budget).v;
        };
      } else {
        const memscale::model_spec model = memscale::json_io::model_for_record(r);
        e = memscale::estimate(model, run);
        band = &memscale::band_of(memscale::class_of(model, run), memscale::band_quantity::device);
        d = memscale::estimate_on_device(model, run, &*gpu);
        replayed = [model, run, d](memscale::bytes budget) { return memscale::verdict_on_device(model, run, d, budget).v; };
      }
      ++records;
      if (std::getenv("MEMSCALE_SWEEP_ROWS") != nullptr)
        std::printf("%-60s smi %8.0f MiB  rounding %+7.2f%%  replay %+7.2f%% (%s)\n", r.at("id").get<std::string>().c_str(),
                    measured / 1048576.0, pct(static_cast<double>(memscale::overall_peak(e).device.value), measured),
                    pct(static_cast<double>(d.device.value), measured), std::string(memscale::to_string(d.fallback)).c_str());
      for (int k = 0; k <= 40; ++k) {
        const double card = measured * (0.80 + 0.01 * k);
        const memscale::bytes budget{static_cast<std::uint64_t>(card * 0.85)};
        const double b = static_cast<double>(budget.value);
        count(before, memscale::verdict_of(memscale::range_of(memscale::overall_peak(e).device, *band), budget), measured, b);
        count(after, replayed(budget), measured, b);
      }
    }
  }
  std::printf("%d records\n\n| rule | budgets | fits | borderline | does not fit | unsafe fits | needless refusals |\n"
              "|---|---|---|---|---|---|---|\n", records);
  print("rounding rule, class band", before);
  print("allocator replay, replayed band", after);
  return 0;
}

// Prints every event of the replay's stream as it is emitted.
struct printing_sink {
  void alloc(std::uint32_t id, std::uint64_t size) { std::printf("alloc %u %llu\n", id, static_cast<unsigned long long>(size)); }
  void free(std::uint32_t id) { std::printf("free %u\n", id); }
  void enter(std::uint32_t step, memscale::allocator::moment m) {
    std::printf("enter %u %s\n", step, std::string(memscale::allocator::to_string(m)).c_str());
  }
};

int print_events(int argc, char** argv) {
  const std::string wanted = argv[2];
  for (int a = 3; a < argc; ++a) {
    std::ifstream in(argv[a]);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", argv[a]);
      return 2;
    }
    for (const json& r : json::parse(in)) {
      if (r.at("id").get<std::string>().find(wanted) == std::string::npos || r.at("measure") != "max_memory_allocated")
        continue;
      if (memscale::json_io::is_vision_record(r)) {
        const memscale::training_spec run =
            memscale::json_io::run_from_record(memscale::json_io::vision_run_record(r));
        const auto g = std::make_unique<memscale::vision::layer_graph>(
            memscale::vision::build_graph(memscale::json_io::vision_model_from_record(r), run));
        printing_sink sink;
        memscale::allocator::emit_vision_training_steps<16384>(*g, run, {}, sink);
        return 0;
      }
      if (r.contains("infer")) {
        printing_sink sink;
        memscale::allocator::emit_generate<16384>(memscale::json_io::inference_model_for_record(r),
                                                  memscale::json_io::inference_from_record(r), sink);
        return 0;
      }
      const auto built = std::make_unique<memscale::model_graph>(
          memscale::build(memscale::json_io::model_for_record(r), memscale::json_io::run_from_record(r)));
      printing_sink sink;
      memscale::allocator::emit_training_steps<16384, 16384>(built->stack(), built->run, {}, sink);
      return 0;
    }
  }
  std::fprintf(stderr, "no max_memory_allocated record whose id contains %s\n", wanted.c_str());
  return 2;
}

memscale::allocator::options settings_of(const json& r) {
  return r.contains("alloc_conf") ? memscale::allocator::parse_alloc_conf(r.at("alloc_conf").get<std::string>()).settings
                                  : memscale::allocator::options{};
}

// The record's run replayed with `settings` and `capacity` (zero: unconstrained).
memscale::allocator::replay_result replay_record(const json& r, const memscale::allocator::options& settings,
                                                 memscale::bytes capacity) {
  if (memscale::json_io::is_vision_record(r)) {
    const memscale::vision::vision_spec model = memscale::json_io::vision_model_from_record(r);
    const memscale::training_spec run = memscale::json_io::run_from_record(memscale::json_io::vision_run_record(r));
    const auto g = std::make_unique<memscale::vision::layer_graph>(memscale::vision::build_graph(model, run));
    return memscale::allocator::replay_vision_training<16384, 16384>(*g, run, settings, capacity);
  }
  if (r.contains("infer"))
    return memscale::allocator::replay_generate<16384, 16384>(memscale::json_io::inference_model_for_record(r),
                                                              memscale::json_io::inference_from_record(r), settings,
                                                              capacity);
  const auto built = std::make_unique<memscale::model_graph>(
      memscale::build(memscale::json_io::model_for_record(r), memscale::json_io::run_from_record(r)));
  if (capacity.value == 0)
    return memscale::allocator::replay_training<16384, 16384, 16384>(built->stack(), built->run, {.settings = settings});
  return memscale::allocator::replay_training_capped<16384, 16384, 16384>(built->stack(), built->run, capacity,
                                                                          {.settings = settings});
}

struct capped_case {
  json record;  // the allocated record
  double reserved = 0;
  double allocated = 0;
};

int capped(int argc, char** argv) {
  std::map<std::string, capped_case> cases;
  std::vector<std::string> order;
  for (int a = 2; a < argc; ++a) {
    std::ifstream in(argv[a]);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", argv[a]);
      return 2;
    }
    for (const json& r : json::parse(in)) {
      if (!r.contains("cap_bytes") || !r.contains("outcome")) continue;
      std::string id = r.at("id").get<std::string>();
      id = id.substr(0, id.rfind('-'));
      if (!cases.count(id)) order.push_back(id);
      capped_case& c = cases[id];
      if (r.at("measure") == "max_memory_allocated") {
        c.record = r;
        c.allocated = r.at("measured_bytes").get<double>();
      }
      if (r.at("measure") == "max_memory_reserved") c.reserved = r.at("measured_bytes").get<double>();
    }
  }
  int agree = 0, unsafe = 0, needless = 0;
  std::printf("| case | cap MiB | measured | replay | reserved MiB (measured / replay) | allocated MiB (measured / replay) | "
              "retries (measured / replay) | replay's OOM: tried MiB, reserved MiB, where |\n|---|---|---|---|---|---|---|---|\n");
  for (const std::string& id : order) {
    const capped_case& c = cases[id];
    const json& r = c.record;
    const auto cap = r.at("cap_bytes").get<std::uint64_t>();
    const bool measured_oom = r.at("outcome").get<std::string>() == "oom";
    const memscale::allocator::replay_result rep = replay_record(r, settings_of(r), memscale::bytes{cap});
    const json& stats = r.at("detail").value("allocator_stats", json::object());
    if (rep.out_of_memory == measured_oom)
      ++agree;
    else if (measured_oom)
      ++unsafe;
    else
      ++needless;
    const double mib = 1048576.0;
    std::printf("| %s | %.0f | %s | %s | %.0f / %.0f | %.0f / %.0f | %lld / %llu |", id.substr(5).c_str(),
                static_cast<double>(cap) / mib, measured_oom ? "oom" : "fits", rep.out_of_memory ? "oom" : "fits",
                c.reserved / mib, static_cast<double>(rep.reserved_peak.value) / mib, c.allocated / mib,
                static_cast<double>(memscale::max(rep.allocated_peak, rep.first_step_allocated_peak).value) / mib,
                stats.value("num_alloc_retries", -1LL), static_cast<unsigned long long>(rep.alloc_retries));
    if (rep.out_of_memory)
      std::printf(" %.0f, %.0f, step %u %s |\n", static_cast<double>(rep.first_oom.tried.value) / mib,
                  static_cast<double>(rep.first_oom.reserved.value) / mib, rep.oom_step,
                  std::string(memscale::allocator::to_string(rep.oom_moment)).c_str());
    else
      std::printf(" |\n");
  }
  std::printf("\n%zu runs: %d agree, %d unsafe (replay fits, measured OOM), %d needless (replay OOM, measured fits)\n",
              order.size(), agree, unsafe, needless);
  return 0;
}

}  // namespace

namespace {

int run(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--sweep") return sweep(argc, argv);
  if (argc > 3 && std::string(argv[1]) == "--events") return print_events(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "--capped") return capped(argc, argv);
  std::map<std::string, measured_case> cases;
  std::vector<std::string> order;
  for (int a = 1; a < argc; ++a) {
    std::ifstream in(argv[a]);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", argv[a]);
      return 2;
    }
    for (const json& r : json::parse(in)) {
      if (r.contains("cap_bytes")) continue;  // --capped reads these
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
  std::map<std::string, std::pair<double, double>> replayed;  // reserved: measured, replay
  for (const std::string& id : order) {
    const measured_case& c = cases[id];
    const json& r = c.record;
    double est_tensor = 0, est_reserved = 0, est_device = 0;
    memscale::allocator::options expand = settings_of(r);
    expand.expandable_segments = true;
    memscale::allocator::replay_result rep{};
    memscale::allocator::replay_result expandable{};
    try {
      rep = replay_record(r, settings_of(r), {});
      expandable = replay_record(r, expand, {});
    } catch (const memscale::error& e) {  // a run without an event stream (gpt-oss generate()): said, then the next
      std::printf("%-50s not replayed: %s\n", id.substr(5).c_str(), e.what());
      continue;
    }
    memscale::allocator::context_inputs ctx{.streaming_multiprocessors = 132, .max_threads_per_sm = 2048};
    if (memscale::json_io::is_vision_record(r)) {
      const memscale::vision::vision_spec model = memscale::json_io::vision_model_from_record(r);
      const memscale::training_spec run = memscale::json_io::run_from_record(memscale::json_io::vision_run_record(r));
      const memscale::estimate_result est = memscale::vision::estimate(model, run);
      est_tensor = static_cast<double>(est.steady.tensor.value);
      est_reserved = static_cast<double>(est.steady.reserved.value);
      est_device = static_cast<double>(est.steady.device.value);
      ctx.half_precision = run.prec != memscale::precision::fp32;
      ctx.convolutions = true;
    } else if (r.contains("infer")) {
      const memscale::model_spec model = memscale::json_io::inference_model_for_record(r);
      const memscale::inference_spec inf = memscale::json_io::inference_from_record(r);
      const auto est = memscale::estimate_inference(model, inf).peak;
      est_tensor = static_cast<double>(est.tensor.value);
      est_reserved = static_cast<double>(est.reserved.value);
      est_device = static_cast<double>(est.device.value);
      ctx.work = memscale::allocator::workload::inference;
      ctx.half_precision = inf.compute != memscale::dtype::fp32;
      ctx.flash_attention = ctx.half_precision;  // the records' generate() runs SDPA
    } else {
      const memscale::model_spec model = memscale::json_io::model_for_record(r);
      const auto built = std::make_unique<memscale::model_graph>(
          memscale::build(model, memscale::json_io::run_from_record(r)));
      const memscale::estimate_result est = memscale::estimate(*built);
      est_tensor = static_cast<double>(est.steady.tensor.value);
      est_reserved = static_cast<double>(est.steady.reserved.value);
      est_device = static_cast<double>(est.steady.device.value);
      ctx.half_precision = built->run.prec != memscale::precision::fp32;
      ctx.flash_attention = ctx.half_precision && (built->run.attention == memscale::attention_impl::flash ||
                                                   built->run.attention == memscale::attention_impl::sdpa);
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
    replayed[id] = {c.reserved, sim_reserved};
  }
  // A run with PYTORCH_CUDA_ALLOC_CONF options ("h100-<key>-<case>") against the same case
  // without them ("h100-<case>"), when both were read: measured and replayed reserved.
  bool header = false;
  for (const std::string& id : order) {
    const json& r = cases[id].record;
    if (!r.contains("alloc_conf")) continue;
    const std::string conf = r.at("alloc_conf").get<std::string>();
    const std::string prefix = "h100-" + conf.substr(0, conf.find(':')) + "-";
    const auto plain = replayed.find("h100-" + id.substr(prefix.size()));
    if (id.rfind(prefix, 0) != 0 || plain == replayed.end()) continue;
    if (!header)
      std::printf("\n%-70s %-28s | %9s %9s %8s | %9s %9s %8s\n", "case", "alloc_conf", "meas-def", "meas-opt", "meas%",
                  "repl-def", "repl-opt", "repl%");
    header = true;
    const auto [measured_opt, replay_opt] = replayed[id];
    const auto [measured_def, replay_def] = plain->second;
    std::printf("%-70s %-28s | %9.0f %9.0f %+8.2f | %9.0f %9.0f %+8.2f\n", plain->first.substr(5).c_str(), conf.c_str(),
                measured_def / 1048576.0, measured_opt / 1048576.0, pct(measured_opt, measured_def), replay_def / 1048576.0,
                replay_opt / 1048576.0, pct(replay_opt, replay_def));
  }
  return 0;
}

}  // namespace

// A record file of another kind (a history index, a context probe) is named, not a crash.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memscale-allocator-check: %s\n", e.what());
    return 2;
  }
}
