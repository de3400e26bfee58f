// Static checks for memscale/presets.hpp: every preset's parameter count equals the
// total published for the checkpoint (Hugging Face model cards / safetensors metadata,
// tied weights counted once). Building this translation unit is the test.
#include "memscale/estimate.hpp"
#include "memscale/presets.hpp"

#include <cstdint>
#include <string_view>

namespace {

using memscale::parameter_count;
namespace presets = memscale::presets;

// GPT-2 (openai-community), tied wte/lm_head, fused c_attn with biases.
// gpt2 by hand: wte 50257*768 + wpe 1024*768 + 12 * 7,087,872 per block + ln_f 2*768
//             = 38,597,376 + 786,432 + 85,054,464 + 1,536 = 124,439,808.
static_assert(parameter_count(presets::gpt2) == 124'439'808);
static_assert(parameter_count(presets::gpt2_medium) == 354'823'168);
static_assert(parameter_count(presets::gpt2_large) == 774'030'080);
static_assert(parameter_count(presets::gpt2_xl) == 1'557'611'200);

// BERT (google-bert), with the pooler and without the MLM head.
static_assert(parameter_count(presets::bert_base_uncased) == 109'482'240);
static_assert(parameter_count(presets::bert_large_uncased) == 335'141'888);

// LLaMA family, untied embeddings.
// llama-2-7b by hand: 2 * 32000*4096 (embed, lm_head) + 32 * (4*4096^2 + 3*4096*11008 + 2*4096) + 4096
//                   = 262,144,000 + 32 * 202,383,360 + 4,096 = 6,738,415,616.
static_assert(parameter_count(presets::llama_2_7b) == 6'738'415'616);
static_assert(parameter_count(presets::llama_2_13b) == 13'015'864'320);
static_assert(parameter_count(presets::llama_2_70b) == 68'976'648'192);  // GQA: 8 kv heads
static_assert(parameter_count(presets::llama_3_8b) == 8'030'261'248);
static_assert(parameter_count(presets::mistral_7b) == 7'241'732'096);
static_assert(parameter_count(presets::mixtral_8x7b) == 46'702'792'704);  // 8 experts + router
static_assert(parameter_count(presets::qwen2_5_7b) == 7'615'616'512);     // q/k/v biases

// The table holds exactly these seventeen, each valid.
static_assert(presets::all.size() == 17);
consteval bool every_preset_validates() {
  for (const auto& m : presets::all) (void)memscale::validate(m);
  return true;
}
static_assert(every_preset_validates());

// Lookup by name.
static_assert(presets::find("gpt2").has_value());
static_assert(presets::find("gpt2")->name == "gpt2");
static_assert(presets::find("gpt2")->layers == 12);
static_assert(presets::find("llama-2-70b").has_value());
static_assert(presets::find("llama-2-70b")->kv_heads == 8);
static_assert(presets::find("qwen2.5-7b")->hidden == 3584);
static_assert(presets::find("mixtral-8x7b")->experts == 8);
static_assert(!presets::find("nope").has_value());
static_assert(!presets::find("").has_value());
static_assert(!presets::find("GPT2").has_value());  // names are exact, case-sensitive
static_assert(!presets::find("gpt2 ").has_value());

consteval bool names_are_unique() {
  for (std::size_t i = 0; i < presets::all.size(); ++i)
    for (std::size_t j = i + 1; j < presets::all.size(); ++j)
      if (presets::all[i].name == presets::all[j].name) return false;
  return true;
}
static_assert(names_are_unique());

consteval bool every_preset_is_found_by_its_name() {
  for (const auto& m : presets::all) {
    const auto found = presets::find(m.name);
    if (!found || found->name != m.name || found->layers != m.layers || found->hidden != m.hidden) return false;
  }
  return true;
}
static_assert(every_preset_is_found_by_its_name());

}  // namespace
