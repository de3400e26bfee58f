// memscale/lever_options.hpp: the cheaper levers a plan weighs before streaming parameters from
// the host, and what each came to. Types only: memscale/levers.hpp estimates them and
// make_plan (memscale/planner.hpp) chooses among them; a plan_result carries the list.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "memscale/bytes.hpp"
#include "memscale/error_band.hpp"
#include "memscale/training.hpp"

namespace memscale {

enum class lever : std::uint8_t {
  checkpointing,        // recompute each block in backward (one more forward)
  chunked_loss,         // cross-entropy over 128-token chunks (lit-gpt chunked_cross_entropy, Liger)
  optimizer_8bit,       // bitsandbytes AdamW8bit for a full fine-tune
  qlora,                // a 4-bit NF4 base instead of a 16-bit one under LoRA
  smaller_micro_batch,  // micro-batch 1 with the effective batch kept by accumulation
  shorter_sequence,     // half the tokens per sequence
};

constexpr std::string_view to_string(lever l) noexcept {
  switch (l) {
    case lever::checkpointing: return "checkpointing";
    case lever::chunked_loss: return "chunked_loss";
    case lever::optimizer_8bit: return "optimizer_8bit";
    case lever::qlora: return "qlora";
    case lever::smaller_micro_batch: return "smaller_micro_batch";
    case lever::shorter_sequence: return "shorter_sequence";
  }
  return "checkpointing";
}

struct lever_option {
  lever what = lever::checkpointing;
  training_spec run{};  // the request with this lever and the ones before it
  bytes peak{};         // device total, the larger of step 1 and the steady state
  error_band band{};
  peak_range range{};
  verdict v = verdict::does_not_fit;
};

struct lever_list {
  std::array<lever_option, 6> items{};
  std::size_t count = 0;
  std::size_t first_fitting = 6;  // index into items of the first whose band's upper end fits (count: none)
  // The first whose point estimate is within the budget (fits or borderline): the one to
  // advise, since every lever after it costs more step time (count: none).
  std::size_t first_likely = 6;

  [[nodiscard]] constexpr bool any_fits() const { return first_fitting < count; }
  [[nodiscard]] constexpr bool any_likely() const { return first_likely < count; }
  [[nodiscard]] constexpr const lever_option& advised() const { return items[first_likely]; }
};

}  // namespace memscale
