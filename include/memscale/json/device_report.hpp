// memscale/json/device_report.hpp: the "allocator" object of a report: the caching
// allocator's reserved peak (replayed), the CUDA context it assumed and, with a GPU, the
// point verdict of the capped replay at the plan's budget (memscale/device_peak.hpp).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "memscale/allocator/alloc_conf.hpp"
#include "memscale/device_peak.hpp"
#include "memscale/json/band_json.hpp"

namespace memscale::json_io {

// The allocator settings and the context override of a run document or the command line.
// `alloc_conf` is PYTORCH_CUDA_ALLOC_CONF's syntax; its errors name "alloc_conf".
inline device_options device_options_of(const std::string& alloc_conf, bytes context_memory) {
  device_options o{.context_override = context_memory};
  if (!alloc_conf.empty()) o.allocator = allocator::parse_alloc_conf(alloc_conf).settings;
  return o;
}

// `DeviceEstimate`: a training step's device_estimate or a generate() call's inference_device_estimate.
template <class DeviceEstimate>
nlohmann::json context_json(const DeviceEstimate& d) {
  return {{"total", d.context.total().value},
          {"base", d.context.base.value},
          {"kernels", d.context.kernels.value},
          {"communication", d.context.communication.value},
          {"other", d.context.other.value},
          {"module_loading", d.context.eager_loading ? "eager" : "lazy"},
          {"source", std::string(to_string(d.context_from))}};
}

inline nlohmann::json device_fit_json(const device_fit& f) {
  return {{"fits", f.fits},
          {"basis", std::string(to_string(f.basis))},
          {"budget", f.budget.value},
          {"capacity", f.capacity.value},
          {"alloc_retries", f.capped.alloc_retries},
          {"fragmentation", f.fragmentation}};
}

// {"replayed", "fallback", "reason", "alloc_conf", "tensor", "reserved", "device",
//  "replay_allocated", "context": {...}, "fit": {...}, "verdict", "band", "range", "at_budget"
//  (with a budget; at_budget: the device figure the band is applied to, the capped replay's when
//  the allocator releases its cache)}.
template <class DeviceEstimate>
nlohmann::json allocator_json(const DeviceEstimate& d, const std::string& alloc_conf, const device_verdict* verdict) {
  nlohmann::json j{{"replayed", d.replayed()},
                   {"fallback", std::string(to_string(d.fallback))},
                   {"reason", std::string(explain(d.fallback))},
                   {"alloc_conf", alloc_conf},
                   {"tensor", d.tensor.value},
                   {"reserved", d.reserved.value},
                   {"device", d.device.value},
                   {"replay_allocated", d.replay_allocated.value},
                   {"context", context_json(d)}};
  if (verdict == nullptr) return j;
  j["fit"] = device_fit_json(verdict->point);
  j["verdict"] = std::string(to_string(verdict->v));
  j["band"] = band_json(verdict->band);
  j["range"] = {{"low", verdict->range.low.value}, {"high", verdict->range.high.value}};
  j["at_budget"] = verdict->at_budget.value;
  return j;
}

}  // namespace memscale::json_io
