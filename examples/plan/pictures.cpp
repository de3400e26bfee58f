// memscale-plan: pictures of a plan (see pictures.hpp).
#include "pictures.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "memscale/json/run_report.hpp"
#include "memscale/json/vision_report.hpp"
#include "memscale/svg.hpp"
#include "output.hpp"
#include "units.hpp"
#include "memscale/validate.hpp"

namespace memscale_plan {
namespace {

namespace svg = memscale::svg;

constexpr std::array all_modes{memscale::mode::none, memscale::mode::conservative, memscale::mode::balanced,
                               memscale::mode::aggressive};

// Sizes in the --units unit (units.hpp), in the pictures as in the text.
double gib(memscale::bytes b) { return in_size_unit(b); }

std::vector<svg::reference_line> vram_and_budget(memscale::bytes vram, memscale::bytes budget) {
  return {{.label = "VRAM", .value = gib(vram), .color = "#c0392b", .dashed = false},
          {.label = "budget", .value = gib(budget), .color = "#e67e22", .dashed = true}};
}

// Device peak of one mode at another sequence length (the micro-batch cliff's come from its plan_at).
double mode_peak(const memscale::model_spec& model, const memscale::training_spec& run, const memscale::gpu_spec& gpu,
                 memscale::mode m, const memscale::plan_result& plan) {
  return gib(memscale::json_io::cliff_peak(model, run, run.micro_batch, gpu, m, plan.budget, plan.device));
}

// Device peak of one mode at another micro-batch, as the web page's cliff.
double cliff_peak_at(const micro_batch_cliff& cliff, std::uint64_t micro_batch, memscale::mode m) {
  return gib(cliff.plan_at(micro_batch, m).peak);
}

// Doubling steps from `first` up to `last` (both included).
std::vector<std::uint64_t> doublings(std::uint64_t first, std::uint64_t last) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t v = first; v <= last; v *= 2) out.push_back(v);
  if (out.empty() || out.back() != last) out.push_back(last);
  return out;
}

std::uint64_t seq_range(const memscale::model_spec& model, const memscale::training_spec& run) {
  std::uint64_t last = std::max<std::uint64_t>(run.seq_len * 4, 4096);
  // No longer than the model takes (max_position_embeddings, a learned table): validate.hpp.
  if (const std::uint64_t limit = memscale::sequence_limit_of(model).tokens; limit > 0) last = std::min(last, limit);
  return last;
}

// The mode with the smallest device peak at micro-batch 1: what the cliff would start from.
memscale::mode_plan least_at_one(const micro_batch_cliff& cliff) {
  memscale::mode_plan least = cliff.plan_at(1, memscale::mode::none);
  for (const auto m : all_modes) {
    const memscale::mode_plan p = cliff.plan_at(1, m);
    if (p.peak < least.peak) least = p;
  }
  return least;
}

// Why the micro-batch cliff is not drawn: not even micro-batch 1 fits in any mode. A point
// estimate under the budget does not fit when its band's upper end is over it ("fits" needs
// the upper end within the budget): the text names that figure.
std::string no_micro_batch_fits(const micro_batch_cliff& cliff, const memscale::plan_result& plan) {
  const memscale::mode_plan least = least_at_one(cliff);
  const std::string where = fmt::format("no mode fits even micro-batch 1 at {}: the smallest peak, {:.1f} GiB ({})",
                                        cliff.fixed, gib(least.peak), memscale::to_string(least.m));
  if (plan.budget < least.peak) return fmt::format("{}, is over the budget of {:.1f} GiB", where, gib(plan.budget));
  return fmt::format("{}, could reach {:.1f} GiB (the upper end of its class's band), over the budget of {:.1f} GiB",
                     where, gib(least.range.high), gib(plan.budget));
}

// The SVG footer's and the text's name of the plan's answer.
std::string chosen_text(const memscale::plan_result& plan) {
  if (!plan.has_chosen_mode()) return fmt::format("nothing ({})", memscale::to_string(plan.status));
  std::string out(memscale::to_string(plan.chosen));
  if (plan.status == memscale::plan_status::smaller_micro_batch)
    out += fmt::format(" at micro-batch {} x accumulation {}", plan.micro_batch, plan.grad_accumulation);
  if (plan.status == memscale::plan_status::parameter_offload) out += " + parameter offload";
  if (plan.status == memscale::plan_status::cheaper_levers) {
    for (std::size_t i = 0; i <= plan.levers.first_likely; ++i)
      if (plan.levers.items[i].what != memscale::lever::checkpointing)
        out += fmt::format(" + {}", memscale::to_string(plan.levers.items[i].what));
    out += plan.lever_plan.fits ? "" : " (likely fits)";
  }
  return out;
}

// Peak against micro-batch per mode, with VRAM, the budget and the plan's largest micro-batch.
svg::chart micro_batch_chart(const micro_batch_cliff& cliff, const memscale::training_spec& run,
                             const memscale::plan_result& plan) {
  svg::chart by_batch{.title = fmt::format("peak vs micro-batch ({})", cliff.fixed),
                      .x_label = "micro-batch",
                      .y_label = std::string(size_unit_label())};
  const auto batches = memscale::json_io::cliff_micro_batches(run, plan);
  for (const auto m : all_modes) {
    svg::series sb{.label = std::string(memscale::to_string(m))};
    for (const auto b : batches) sb.points.push_back({static_cast<double>(b), cliff_peak_at(cliff, b, m)});
    by_batch.lines.push_back(sb);
  }
  by_batch.references = vram_and_budget(plan.vram, plan.budget);
  by_batch.y_cap = 2.0 * gib(plan.vram);  // the cliff, not the far end of the curve
  // The plan's own largest micro-batch and the mode that reaches it, as the text report says.
  if (plan.max_micro_batch > 0) {
    by_batch.markers.push_back({.label = fmt::format("max micro-batch {} ({})", plan.max_micro_batch,
                                                     memscale::to_string(plan.max_micro_batch_mode)),
                                .x = static_cast<double>(plan.max_micro_batch)});
  } else {
    // Every curve would lie over the budget: a note says so instead of an empty chart.
    by_batch.lines.clear();
    by_batch.note = no_micro_batch_fits(cliff, plan);
  }
  return by_batch;
}

}  // namespace

micro_batch_cliff transformer_cliff(const memscale::model_spec& model, const memscale::training_spec& run,
                                    const memscale::gpu_spec& gpu, const memscale::plan_result& plan) {
  return {.plan_at = [model, run, gpu, budget = plan.budget, device = plan.device](std::uint64_t b, memscale::mode m) {
            return memscale::json_io::cliff_plan(model, run, b, gpu, m, budget, device);
          },
          .fixed = fmt::format("seq {}", run.seq_len)};
}

micro_batch_cliff vision_cliff(const memscale::json_io::run_input& in, const memscale::gpu_spec& gpu,
                               const memscale::plan_result& plan) {
  const memscale::vision::vision_spec model = *in.vision;
  return {.plan_at = [model, run = in.run, gpu, budget = plan.budget, device = plan.device](std::uint64_t b,
                                                                                          memscale::mode m) {
            return memscale::json_io::vision_cliff_plan(model, run, b, gpu, m, budget, device);
          },
          .fixed = fmt::format("image {}x{}", model.image_height, model.image_width)};
}

std::string plan_svg(std::string_view model_name, const memscale::gpu_spec& gpu, const memscale::plan_result& plan) {
  svg::chart c{.title = fmt::format("{} on {}: peak by mode", model_name, gpu.label), .y_label = std::string(size_unit_label())};
  for (const auto& m : plan.modes) {
    const memscale::memory_breakdown& b = m.breakdown;
    // The breakdown is tensor bytes; the gap to the device peak is allocator rounding and the CUDA context.
    const double rest = gib(m.peak) - gib(b.total());
    svg::bar bar{.label = std::string(memscale::to_string(m.m)) + "\n" + verdict_words(m.v),
                 .segments = {{"parameters", gib(b.parameters)},
                              {"gradients", gib(b.gradients)},
                              {"optimizer", gib(b.optimizer)},
                              {"activations", gib(b.activations)},
                              {"workspace", gib(b.workspace)},
                              {"context + rounding", rest > 0 ? rest : 0.0}}};
    c.bars.push_back(bar);
  }
  c.references = vram_and_budget(plan.vram, plan.budget);
  return svg::figure({c}, fmt::format("device peak (nvidia-smi) per mode; chosen: {}", chosen_text(plan)));
}

std::string cliff_svg(const memscale::model_spec& model, const memscale::training_spec& run,
                      const memscale::gpu_spec& gpu, const memscale::plan_result& plan) {
  const svg::chart by_batch = micro_batch_chart(transformer_cliff(model, run, gpu, plan), run, plan);
  svg::chart by_seq{.title = fmt::format("peak vs sequence length (micro-batch {})", run.micro_batch),
                    .x_label = "sequence length",
                    .y_label = std::string(size_unit_label())};
  const auto seqs = doublings(std::min<std::uint64_t>(64, run.seq_len), seq_range(model, run));
  for (const auto m : all_modes) {
    svg::series ss{.label = std::string(memscale::to_string(m))};
    for (const auto s : seqs) {
      memscale::training_spec t = run;
      t.seq_len = s;
      ss.points.push_back({static_cast<double>(s), mode_peak(model, t, gpu, m, plan)});
    }
    by_seq.lines.push_back(ss);
  }
  by_seq.references = by_batch.references;
  by_seq.y_cap = by_batch.y_cap;
  const memscale::longest_sequence max_seq = memscale::longest_sequence_that_fits(model, run, gpu, plan.budget, seqs.back(),
                                                                                  plan.device);
  if (max_seq.length > 0) {
    by_seq.markers.push_back({.label = fmt::format("max seq {} ({})", max_seq.length, memscale::to_string(max_seq.in)),
                              .x = static_cast<double>(max_seq.length)});
  } else {
    by_seq.lines.clear();
    by_seq.note = fmt::format("no mode fits micro-batch {} even at sequence length 1", run.micro_batch);
  }
  return svg::figure({by_batch, by_seq},
                     fmt::format("memscale-plan: the OOM cliff of {} on {} (device peak, nvidia-smi)", model.name,
                                 gpu.label));
}

std::string vision_cliff_svg(std::string_view model_name, const micro_batch_cliff& cliff,
                             const memscale::training_spec& run, const memscale::gpu_spec& gpu,
                             const memscale::plan_result& plan) {
  // One panel is half the transformer figure's width: a shorter caption.
  return svg::figure({micro_batch_chart(cliff, run, plan)},
                     fmt::format("OOM cliff of {} on {}: device peak (nvidia-smi)", model_name, gpu.label));
}

std::string cliff_text(const micro_batch_cliff& cliff, const memscale::training_spec& run,
                       const memscale::plan_result& plan) {
  // Rows are peak levels (top: 1.5 x VRAM), columns micro-batches 1, 2, 4, ...; each mode
  // plots its initial (N, C, B, A); '-' marks the budget row, '=' the VRAM row.
  if (plan.max_micro_batch == 0)
    return fmt::format("\nOOM cliff: not drawn; {}\n", no_micro_batch_fits(cliff, plan));
  constexpr int rows = 10;
  const auto batches = memscale::json_io::cliff_micro_batches(run, plan);
  const double vram = in_size_unit(plan.vram);
  const double top = vram * 1.5;
  const auto row_of = [&](double v) { return std::clamp(static_cast<int>((1.0 - v / top) * rows + 0.5), 0, rows); };
  std::vector<std::string> grid(rows + 1, std::string(batches.size() * 5, ' '));
  const int budget_row = row_of(in_size_unit(plan.budget));
  const int vram_row = row_of(vram);
  for (std::size_t c = 0; c < grid[0].size(); ++c) {
    grid[static_cast<std::size_t>(budget_row)][c] = '-';
    grid[static_cast<std::size_t>(vram_row)][c] = '=';
  }
  const char letters[] = {'N', 'C', 'B', 'A'};
  for (std::size_t i = 0; i < all_modes.size(); ++i)
    for (std::size_t k = 0; k < batches.size(); ++k) {
      const double peak = cliff_peak_at(cliff, batches[k], all_modes[i]);
      if (peak > top) continue;
      grid[static_cast<std::size_t>(row_of(peak))][k * 5 + 1 + i] = letters[i];
    }
  std::string out = fmt::format("\nOOM cliff: device peak vs micro-batch ({}); N none, C conservative, B balanced, "
                                "A aggressive; '-' budget {:.1f} {}, '=' VRAM {:.1f} {}\n",
                                cliff.fixed, in_size_unit(plan.budget), size_unit_label(), vram, size_unit_label());
  for (int r = 0; r <= rows; ++r)
    out += fmt::format("  {:>6.1f} |{}\n", top * (1.0 - static_cast<double>(r) / rows), grid[static_cast<std::size_t>(r)]);
  std::string axis;
  for (const auto b : batches) axis += fmt::format("{:>5}", b);
  out += fmt::format("  {:>6} +{}\n  {:>6}  {}  micro-batch\n", size_unit_label(), std::string(batches.size() * 5, '-'), "", axis);
  out += fmt::format("  largest micro-batch that fits ({}): {}\n", memscale::to_string(plan.max_micro_batch_mode),
                     plan.max_micro_batch);
  return out;
}

std::string inference_svg(const memscale::model_spec& model, const memscale::inference_spec& run,
                          const memscale::inference_result& result, const memscale::inference_plan* plan) {
  svg::chart c{.title = fmt::format("{} inference: batch {} x context {} + {} new tokens", model.name, run.batch,
                                    run.context, run.new_tokens),
               .y_label = std::string(size_unit_label())};
  for (const auto* p : {&result.prefill, &result.decode}) {
    const memscale::inference_breakdown& b = p->breakdown;
    const double rest = gib(p->device) - gib(b.total());
    c.bars.push_back({.label = std::string(memscale::to_string(p->at)),
                      .segments = {{"weights", gib(b.weights)},
                                   {"KV cache", gib(b.kv_cache)},
                                   {"activations", gib(b.activations)},
                                   {"logits", gib(b.logits)},
                                   {"workspace", gib(b.workspace)},
                                   {"context + rounding", rest > 0 ? rest : 0.0}}});
  }
  if (plan != nullptr) {
    c.references = vram_and_budget(plan->vram, plan->budget);
    if (plan->device.replayed())
      c.references.push_back({.label = "replayed peak", .value = gib(plan->device.device),
                              .color = "#2c3e50", .dashed = true});
  }
  return svg::figure({c}, "memscale-plan --inference: prefill and decoding (bars: tensors + rounding rule)");
}

std::string inference_cliff_svg(const memscale::model_spec& model, const memscale::inference_spec& run,
                                const memscale::gpu_spec& gpu, const memscale::inference_plan& plan,
                                const memscale::device_options& device) {
  svg::chart by_batch{.title = fmt::format("peak vs batch (context {})", run.context), .x_label = "batch",
                      .y_label = std::string(size_unit_label())};
  svg::chart by_ctx{.title = fmt::format("peak vs context (batch {})", run.batch), .x_label = "context tokens",
                    .y_label = std::string(size_unit_label())};
  // The device peak and the upper end of its band (what the searches compare with the budget).
  struct figures {
    double peak = 0.0;
    double upper = 0.0;
  };
  const auto estimate = [&](std::uint64_t batch, std::uint64_t context) {
    memscale::inference_spec t = memscale::inference_at(run, batch, context);
    t.blas_workspace = gpu.cublas_workspace;
    const memscale::inference_device_estimate d = memscale::estimate_inference_on_device(model, t, &gpu, device);
    return figures{gib(d.device), gib(memscale::range_of(d.device, memscale::inference_band_of(model, t, d)).high)};
  };
  const auto add_series = [](svg::chart& chart, const std::vector<std::pair<double, figures>>& at) {
    svg::series peak{.label = "device peak"};
    svg::series upper{.label = "band's upper end"};
    for (const auto& [x, f] : at) {
      peak.points.push_back({x, f.peak});
      upper.points.push_back({x, f.upper});
    }
    chart.lines.push_back(peak);
    chart.lines.push_back(upper);
  };
  std::vector<std::pair<double, figures>> batches;
  for (const auto b : doublings(1, std::clamp<std::uint64_t>(plan.max_batch * 4, 8, 4096)))
    batches.emplace_back(static_cast<double>(b), estimate(b, run.context));
  add_series(by_batch, batches);
  std::uint64_t last_ctx = std::max<std::uint64_t>(plan.max_context * 2, 4096);
  if (const std::uint64_t limit = memscale::sequence_limit_of(model).tokens; limit > run.new_tokens)
    last_ctx = std::min(last_ctx, limit - run.new_tokens);
  std::vector<std::pair<double, figures>> contexts;
  for (const auto c : doublings(std::min<std::uint64_t>(128, run.context), last_ctx))
    contexts.emplace_back(static_cast<double>(c), estimate(run.batch, c));
  add_series(by_ctx, contexts);
  by_batch.references = vram_and_budget(plan.vram, plan.budget);
  by_ctx.references = by_batch.references;
  by_batch.y_cap = by_ctx.y_cap = 2.0 * gib(plan.vram);
  if (plan.max_batch > 0) {
    by_batch.markers.push_back({.label = fmt::format("max batch {}", plan.max_batch), .x = static_cast<double>(plan.max_batch)});
  } else {
    by_batch.lines.clear();
    by_batch.note = fmt::format("not even batch 1 fits at context {}: the band's upper end at batch 1 is {:.1f} GiB, the "
                                "budget {:.1f} GiB",
                                run.context, estimate(1, run.context).upper, gib(plan.budget));
  }
  if (plan.max_context > 0) {
    by_ctx.markers.push_back({.label = fmt::format("max context {}", plan.max_context),
                              .x = static_cast<double>(plan.max_context)});
  } else {
    by_ctx.lines.clear();
    by_ctx.note = fmt::format("not even a short context fits at batch {}", run.batch);
  }
  return svg::figure({by_batch, by_ctx}, fmt::format("memscale-plan --inference: the OOM cliff of {} on {}",
                                                     model.name, gpu.label));
}

}  // namespace memscale_plan

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "args.hpp"
#include "option_groups.hpp"

namespace memscale_plan {

void write_text_file(const std::string& option, const std::string& path, const std::string& text) {
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!file) throw usage_error(option + " cannot write " + path_in_quotes(path) + ": " + std::strerror(errno));
  if (std::fwrite(text.data(), 1, text.size(), file.get()) != text.size() || std::fflush(file.get()) != 0)
    throw usage_error(option + " cannot write " + path_in_quotes(path) + ": " + std::strerror(errno));
}

void write_plan_pictures(const options& opt, const memscale::gpu_spec& gpu, const memscale::plan_result& plan) {
  if (!opt.inference.svg.empty()) write_text_file("--svg", opt.inference.svg, plan_svg(opt.model.name, gpu, plan));
  if (!opt.inference.svg_batch.empty())
    write_text_file("--svg-batch", opt.inference.svg_batch, cliff_svg(opt.model, opt.run, gpu, plan));
}

}  // namespace memscale_plan
