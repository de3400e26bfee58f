// LoRA target names and adapter placement, at compile time (memscale/lora.hpp).
#include "memscale/memscale.hpp"

namespace {

using namespace memscale;

static_assert(parse_lora_targets("q_proj,v_proj") == (lora_target::q | lora_target::v));
static_assert(!has(parse_lora_targets("q_proj,v_proj"), lora_target::o));
static_assert(parse_lora_targets(" q , v , proj , mlp , head ") ==
              (lora_target::q | lora_target::v | lora_target::o | lora_target::gate | lora_target::up |
               lora_target::down | lora_target::head));
static_assert(parse_lora_targets("all-linear") == lora_all_linear);
static_assert(!has(lora_all_linear, lora_target::head));  // PEFT leaves the output embedding out
static_assert(parse_lora_targets("c_attn") == (lora_target::q | lora_target::k | lora_target::v));
static_assert(parse_lora_targets("c_proj") == (lora_target::o | lora_target::down));  // both GPT-2 c_proj
static_assert(parse_lora_targets("query_key_value,dense,dense_h_to_4h,dense_4h_to_h") ==
              (lora_target::q | lora_target::k | lora_target::v | lora_target::o | lora_target::up |
               lora_target::down));

// Every listed name parses (the list feeds "did you mean" hints).
constexpr bool every_listed_name_parses() {
  for (const auto name : lora_module_names)
    if (lora_module(name) == 0) return false;
  return true;
}
static_assert(every_listed_name_parses());

// PEFT all-linear, r = 16, on Llama-2-7B: 32 * 16 * (4 * 8192 + 3 * 15,104) = 39,976,960.
constexpr training_spec all_linear{.prec = precision::pure_bf16,
                                   .target = training_target::lora,
                                   .lora_rank = 16,
                                   .lora_targets = parse_lora_targets("all-linear")};
static_assert(trainable_parameter_count(build(presets::llama_2_7b, all_linear).stack()) == 39'976'960);
// GPT-2 c_attn r8 (PEFT adapts the fused module whole): 12 * 8 * (768 + 2304) = 294,912,
// what the CPU trace's model reports (docs/data/cpu_traced_lora.json).
constexpr training_spec c_attn{.target = training_target::lora, .lora_rank = 8, .lora_targets = parse_lora_targets("c_attn")};
static_assert(trainable_parameter_count(build(presets::gpt2, c_attn).stack()) == 294'912);

}  // namespace
