// memscale-plan: reports for vision models (torchvision, and timm by name).
#include "vision.hpp"

#include <fmt/format.h>

#include <string>

#include "memscale/json.hpp"
#include "memscale/vision/device.hpp"
#include "memscale/vision/planner.hpp"
#include "memscale/vision/presets.hpp"
#include "output.hpp"
#include "units.hpp"

namespace memscale_plan {
namespace {

std::string_view family_name(memscale::vision::family f) {
  switch (f) {
    case memscale::vision::family::resnet: return "resnet";
    case memscale::vision::family::mobilenet_v3: return "mobilenet_v3";
    case memscale::vision::family::efficientnet: return "efficientnet";
    case memscale::vision::family::vit: return "vit";
    case memscale::vision::family::convnext: return "convnext";
  }
  return "resnet";
}

bool from_timm(const memscale::vision::vision_spec& m) { return m.source == memscale::vision::model_source::timm; }

nlohmann::json vision_json(const memscale::vision::vision_spec& m) {
  return {{"name", std::string(m.name)},
          {"source", from_timm(m) ? "timm" : "torchvision"},
          {"family", std::string(family_name(m.arch))},
          {"classes", m.classes},
          {"image", std::to_string(m.image_height) + "x" + std::to_string(m.image_width)},
          {"channels_last", m.channels_last},
          {"parameters", memscale::vision::parameter_count(m)}};
}

// The stack a vision step reads: torch (the allocator, cuBLAS in it from 2.0), bitsandbytes (the
// 8-bit AdamW of AGGRESSIVE) and how CUDA loads its modules; no transformers.
nlohmann::json vision_software_json(const memscale::training_spec& run) {
  nlohmann::json j = memscale::json_io::software_json(run);
  j.erase("transformers");
  return j;
}

std::string vision_software_text(const memscale::training_spec& run) {
  const nlohmann::json j = vision_software_json(run);
  return fmt::format("torch {}, bitsandbytes {}, CUDA modules loaded {}", j.at("torch").get<std::string>(),
                     j.at("bitsandbytes").get<std::string>(), run.cuda_lazy_loading ? "lazily" : "eagerly");
}

}  // namespace

std::optional<memscale::vision::vision_spec> vision_model_of(const options& opt) {
  const bool image = opt.vision.image_height != 0;
  if (!opt.vision.model) {
    if (image || opt.vision.channels_last)
      throw usage_error(std::string(image ? "--image" : "--channels-last") +
                        " needs a vision --model (resnet50, vit_b_16, ... see --list-models)");
    return std::nullopt;
  }
  if (opt.run.images.per_sample != 0 || opt.run.images.height != 0)
    throw usage_error("--images and --image-size feed a multimodal language model's vision tower (Qwen2-VL, "
                      "Qwen2.5-VL, Qwen3-VL); "
                      "a vision --model takes --image");
  memscale::vision::vision_spec m = *opt.vision.model;
  if (image) {
    m.image_height = opt.vision.image_height;
    m.image_width = opt.vision.image_width;
  }
  m.channels_last = opt.vision.channels_last;
  return memscale::vision::validate(m);
}

std::string vision_report(const options& opt, const memscale::vision::vision_spec& model) {
  std::optional<memscale::gpu_spec> gpu = opt.custom_gpu;
  if (!gpu && !opt.gpu.empty()) gpu = memscale::find_gpu(opt.gpu);  // checked by parse_args
  // With a GPU the step is estimated on it (its BLAS workspace), as the plan does.
  const memscale::training_spec run = gpu ? memscale::on_gpu(opt.run, *gpu) : opt.run;
  const memscale::device_options o = memscale::json_io::device_options_of(opt.alloc_conf, opt.context_memory);
  // The peaks' reserved and device figures are the allocator section's (one figure per quantity).
  const memscale::device_estimate d = memscale::vision::estimate_on_device(model, run, gpu ? &*gpu : nullptr, o);
  const memscale::estimate_result& r = d.tensors;
  const memscale::plan_options plan_opts{.headroom = opt.headroom.value_or(memscale::default_headroom)};
  std::optional<memscale::plan_result> plan;
  if (gpu) plan = memscale::vision::make_plan(model, opt.run, *gpu, plan_opts, o);
  std::optional<memscale::device_verdict> v;
  if (gpu && run.device == memscale::device_kind::cuda)
    v = memscale::vision::verdict_on_device(model, run, d, plan->budget, o);
  if (opt.json) {
    nlohmann::json j = memscale::json_io::estimate_to_json(r);
    j["model"] = vision_json(model);
    j["run"] = run_to_json(opt.run);
    j["run"].erase("seq_len");
    j["software"] = vision_software_json(run);
    if (run.device == memscale::device_kind::cuda)
      j["allocator"] = memscale::json_io::allocator_json(d, opt.alloc_conf, v ? &*v : nullptr);
    if (plan) j["plan"] = plan_json(*plan);
    return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  std::string out = fmt::format("{}{} ({} parameters), image {}x{}{}, batch {}, {}, {}\n",
                                from_timm(model) ? "timm/" : "", model.name,
                                memscale::vision::parameter_count(model), model.image_height, model.image_width,
                                model.channels_last ? " channels_last" : "", opt.run.micro_batch,
                                memscale::to_string(opt.run.prec), memscale::to_string(opt.run.optimizer));
  const auto& b = r.steady.breakdown;
  out += fmt::format("  parameters {}, gradients {}, optimizer {}, saved activations {}\n", size_text(r.parameter_bytes, 3),
                     size_text(r.gradient_bytes, 3), size_text(r.optimizer_bytes, 3),
                     size_text(r.saved_activation_bytes, 3));
  out += fmt::format("  peak ({}): allocated {} (activations {:.3f}, workspace {:.3f}), reserved {}, device {}\n",
                     memscale::to_string(r.steady.at), size_text(r.steady.tensor, 3), in_size_unit(b.activations),
                     in_size_unit(b.workspace), size_text(r.steady.reserved, 3), size_text(r.steady.device, 3));
  out += "  cuDNN workspace (cudnn.benchmark): bounded by the free memory at each convolution; never required to fit\n";
  out += fmt::format("\nsoftware       {}\n", vision_software_text(run));
  if (run.device == memscale::device_kind::cuda)
    out += device_figures_text({.fallback = d.fallback, .tensor = d.tensor, .reserved = d.reserved, .device = d.device,
                                .context = d.context, .context_from = d.context_from},
                               gpu ? &*gpu : nullptr, opt.alloc_conf, "setup and two steps", v ? &*v : nullptr,
                               "a smaller batch");
  if (!plan) return out;
  out += plan_text(*gpu, *plan);
  out += "  (vision modes: conservative = checkpointed stages; balanced = + mixed precision; aggressive = + 8-bit AdamW)\n";
  return out;
}

std::string vision_model_list_text() {
  std::string out;
  for (const auto& m : memscale::vision::presets::all)
    out += fmt::format("{:<22} {:>14} parameters  {} (torchvision, 224x224)\n", m.name,
                       memscale::vision::parameter_count(m), family_name(m.arch));
  // A timm name may carry a pretrained tag (vit_large_patch16_224.augreg_in21k_ft_in1k): the
  // tag sets only the head's width. A name torchvision also has needs a tag or timm/ to mean timm.
  for (const auto& m : memscale::vision::timm_presets::all)
    out += fmt::format("timm/{:<27} {:>14} parameters  {} (timm, {}x{}, {} classes; .TAG sets the head)\n", m.name,
                       memscale::vision::parameter_count(m), family_name(m.arch), m.image_height, m.image_width,
                       m.classes);
  return out;
}

nlohmann::json vision_model_list_json() {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& m : memscale::vision::presets::all) list.push_back(vision_json(m));
  for (const auto& m : memscale::vision::timm_presets::all) list.push_back(vision_json(m));
  return list;
}

}  // namespace memscale_plan
