// memscale-plan: reports for vision models (torchvision, and timm by name).
#include "vision.hpp"

#include <fmt/format.h>

#include <string>
#include <string_view>

#include "memscale/json.hpp"
#include "memscale/vision/device.hpp"
#include "memscale/vision/planner.hpp"
#include "memscale/vision/presets.hpp"
#include "output.hpp"
#include "pictures.hpp"
#include "run_file.hpp"
#include "units.hpp"

namespace memscale_plan {
namespace {

using memscale::json_io::vision_family_name;
using memscale::json_io::from_timm;
using memscale::json_io::vision_model_json;

std::string vision_software_text(const memscale::training_spec& run) {
  const nlohmann::json j = memscale::json_io::vision_software_json(run);
  return fmt::format("torch {}, bitsandbytes {}, {}{}", j.at("torch").get<std::string>(),
                     j.at("bitsandbytes").get<std::string>(),
                     memscale::json_io::cuda_text(run.cuda_version, run.cuda_lazy_loading),
                     run.torch_version == memscale::current_torch_release
                         ? memscale::json_io::current_releases_text
                         : std::string_view{});
}

// --svg and --svg-batch of a vision plan (parse_args checked that a GPU is given).
void write_vision_pictures(const options& opt, const memscale::json_io::run_input& in, const memscale::gpu_spec& gpu,
                           const memscale::plan_result& plan) {
  const std::string name = in.model_description.is_string() ? in.model_description.get<std::string>()
                                                             : std::string(in.vision->name);
  if (!opt.inference.svg.empty()) write_text_file("--svg", opt.inference.svg, plan_svg(name, gpu, plan));
  if (!opt.inference.svg_batch.empty())
    write_text_file("--svg-batch", opt.inference.svg_batch,
                    vision_cliff_svg(name, vision_cliff(in, gpu, plan), in.run, gpu, plan));
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
  if (opt.run.images.per_sample != 0 || opt.run.images.height != 0 || opt.run.images.tower_frozen)
    throw usage_error("--images, --image-size and --frozen-tower describe a multimodal language model's vision tower (Qwen2-VL, "
                      "Qwen2.5-VL, Qwen3-VL); "
                      "a vision --model takes --image");
  // vision/estimate.hpp and the replay checkpoint whole stages whatever the setting (as a vision run document says).
  if (opt.run.ckpt == memscale::checkpointing::selective)
    throw usage_error("--checkpointing selective does not apply to the vision model " +
                      std::string(opt.vision.model->name) +
                      ": its stages are checkpointed whole (torch.utils.checkpoint per stage): none or full");
  memscale::vision::vision_spec m = *opt.vision.model;
  if (image) {
    m.image_height = opt.vision.image_height;
    m.image_width = opt.vision.image_width;
  }
  if (opt.vision.channels_last) m.channels_last = true;  // a --run document may have set it
  return memscale::vision::validate(m);
}

std::string vision_report(const options& opt, const memscale::vision::vision_spec& model) {
  memscale::json_io::run_input in = run_input_of(opt);
  in.vision = model;
  in.model_description = opt.vision.name.empty() ? memscale::json_io::vision_lookup_name(model) : opt.vision.name;
  // --stack, checked as a run document's "software" is (a --run document's was checked when read).
  memscale::json_io::check_vision_stack(in.run, "--stack ");
  // The report (memscale/json/vision_report.hpp) is the web calculator's as well.
  const memscale::json_io::vision_outcome outcome = memscale::json_io::vision_outcome_of(in);
  if (outcome.plan) write_vision_pictures(opt, in, *memscale::json_io::gpu_of(in), *outcome.plan);
  if (opt.json)
    return memscale::json_io::vision_report_json(in, outcome).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
           "\n";
  const std::optional<memscale::gpu_spec> gpu = memscale::json_io::gpu_of(in);
  const memscale::training_spec& run = outcome.run;
  const memscale::device_estimate& d = outcome.device;
  const memscale::estimate_result& r = d.tensors;
  const std::optional<memscale::plan_result>& plan = outcome.plan;
  const std::optional<memscale::device_verdict>& v = outcome.verdict;
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
  out += cliff_text(vision_cliff(in, *gpu, *plan), in.run, *plan);
  return out;
}

std::string vision_model_list_text() {
  std::string out;
  for (const auto& m : memscale::vision::presets::all)
    out += fmt::format("{:<22} {:>14} parameters  {} (torchvision, 224x224)\n", m.name,
                       memscale::vision::parameter_count(m), vision_family_name(m.arch));
  // A timm name may carry a pretrained tag (vit_large_patch16_224.augreg_in21k_ft_in1k): the
  // tag sets only the head's width. A name torchvision also has needs a tag or timm/ to mean timm.
  for (const auto& m : memscale::vision::timm_presets::all)
    out += fmt::format("timm/{:<27} {:>14} parameters  {} (timm, {}x{}, {} classes; .TAG sets the head)\n", m.name,
                       memscale::vision::parameter_count(m), vision_family_name(m.arch), m.image_height, m.image_width,
                       m.classes);
  return out;
}

nlohmann::json vision_model_list_json() {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& m : memscale::vision::presets::all) list.push_back(vision_model_json(m));
  for (const auto& m : memscale::vision::timm_presets::all) list.push_back(vision_model_json(m));
  return list;
}

}  // namespace memscale_plan
