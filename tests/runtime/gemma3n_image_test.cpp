// Images through Gemma 3n's frozen MobileNetV5 tower (graph/layers/vision_tower_mobilenetv5.hpp):
// the moments the reader picks from the block strings, the tower's forward against the traced
// forwards of tools/trace/mobilenetv5_cases.py, the training steps of
// tools/trace/gemma3n_image_cases.py, and what is still refused by name.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <string>

#include "error_capture.hpp"
#include "gemma3n_configs.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "vlm_records.hpp"

namespace gemma3n_image_test {
namespace {

using namespace memscale;
using memscale_test::contains;

constexpr mobilenet_moments moments_300m =
    json_io::hf::mobilenetv5_moments(*json_io::hf::find_mobilenetv5_encoder("mobilenetv5_300m_enc"));
// Stage 1's first block (uir_r1_a3_k5_s2_e6_c256 on stage 0's 128 channels at 1/4 of the image),
// stage 2's kv-strided attention (mqa_r1_k3_h12_v2_s1_d64_c640 at 1/16) and the neck's 1/16 level.
static_assert(moments_300m.expansion_reduction == 4 && moments_300m.expansion_in == 128 &&
              moments_300m.expansion_mid == 768 && moments_300m.expansion_dw_start);
static_assert(moments_300m.attention_reduction == 16 && moments_300m.attention_in == 640 &&
              moments_300m.attention_heads == 12 && moments_300m.attention_key_dim == 64 &&
              moments_300m.attention_kv_stride == 2);
static_assert(moments_300m.neck_reduction == 16 && moments_300m.neck_resolution == 16);

const model_spec& e2b_model() {
  static const model_spec m = json_io::model_from_hf_config(gemma3n_configs::e2b());
  return m;
}

TEST_CASE("gemma3n with images: the reader's tower", "[gemma3n][tower][images]") {
  const model_spec& m = e2b_model();
  CHECK(m.vision.kind == vision_tower_kind::mobilenetv5);
  CHECK(m.vision.hidden == 2048);
  CHECK(m.vision.out_hidden == 2048);
  CHECK(m.vision.tokens_per_image == 256);
  CHECK(graph_layers::image_tokens(m.vision, image_inputs{.per_sample = 1, .height = 768, .width = 768}) == 256);
}

// The traced fp32 forwards (frozen, under torch.no_grad()) above the model and the pixels equal
// the tower's moment: images x (H/4)(W/4) x (2 x 128 + 3 x 768 + 1) x 4 bytes, whatever the side.
TEST_CASE("gemma3n with images: the tower's moment is the traced forward's peak to the byte",
          "[gemma3n][tower][images]") {
  const model_spec& m = e2b_model();
  std::ifstream in(MEMSCALE_SOURCE_DIR "/docs/data/cpu_traced_mobilenetv5.json");
  REQUIRE(in);
  int cases = 0;
  for (const auto& r : json_io::json::parse(in)) {
    INFO(r.at("id").get<std::string>());
    const std::uint64_t images = r.at("input").at("images").get<std::uint64_t>();
    const std::uint64_t side = r.at("input").at("height").get<std::uint64_t>();
    training_spec run{.micro_batch = images, .seq_len = 258, .prec = precision::fp32,
                      .attention = attention_impl::eager};
    run.images = image_inputs{.per_sample = 1, .height = side, .width = side, .tower_frozen = true};
    const graph_layers::tower_bytes t = graph_layers::mobilenetv5_tower_bytes(m, run);
    // Gemma3nModel.forward's inputs_embeds and per_layer_inputs are alive beside it.
    const std::uint64_t text = images * 258 * (m.hidden + m.layers * m.per_layer_input_width) * 4;
    CHECK(t.forward.value - text == r.at("forward_peak_bytes").get<std::uint64_t>());
    CHECK(t.forward.value - text == images * (side / 4) * (side / 4) * (2 * 128 + 3 * 768 + 1) * 4);
    ++cases;
  }
  CHECK(cases == 4);
}

TEST_CASE("gemma3n with images: the CPU-traced training steps are met within 2%", "[gemma3n][tower][images]") {
  CHECK(vlm_records::check_within("cpu-gemma3n-", 2.0) == 4);
}

// The tower's own moment: the trace's peak between the marks around get_image_features, over what
// step 2 began with; the estimate's candidate adds what the ops before the tower saved.
TEST_CASE("gemma3n with images: the tower's forward moment meets the trace within 1%", "[gemma3n][tower][images]") {
  std::ifstream in(MEMSCALE_SOURCE_DIR "/docs/data/cpu_traced_vlm.json");
  REQUIRE(in);
  int cases = 0;
  for (const auto& record : json_io::json::parse(in)) {
    const std::string id = record.at("id").get<std::string>();
    if (id.rfind("cpu-gemma3n-", 0) != 0) continue;
    INFO(id);
    const training_spec run = json_io::run_from_record(record);
    const model_graph g = build(json_io::model_for_record(record), run);
    const auto& d = record.at("detail");
    const double measured = d.at("s2_tower_peak").get<double>() - d.at("s2_start").get<double>();
    const double modelled = static_cast<double>(
        (g.stack().tower_forward + section_saved_bytes(g.stack(), {0, g.stack().tower_after}, run, false)).value);
    const double error = (modelled - measured) / measured * 100.0;
    CHECK(error > -1.0);
    CHECK(error < 1.0);
    ++cases;
  }
  CHECK(cases == 4);
}

TEST_CASE("gemma3n with images: bf16 on a GPU, LoRA and full training of the text model", "[gemma3n][tower][images]") {
  const model_spec& m = e2b_model();
  training_spec text{.micro_batch = 1, .seq_len = 1024, .prec = precision::pure_bf16, .attention = attention_impl::sdpa};
  text.device = device_kind::cuda;
  training_spec full = text;
  full.images = image_inputs{.per_sample = 2, .height = 768, .width = 768, .tower_frozen = true};
  const model_graph g = build(m, full);
  const model_graph t = build(m, text);
  // fp32 pixel_values (2 x 3 x 768 x 768).
  CHECK(g.stack().inputs.value - t.stack().inputs.value == 2ULL * 3 * 768 * 768 * 4);
  // The bf16 moment: the cast pixels and 2 images x 192^2 x 2561 channels, beside the text embeddings.
  const std::uint64_t text_embeds = 1024ULL * (2048 + 30 * 256) * 2;
  CHECK(g.stack().tower_forward.value == text_embeds + 2ULL * 3 * 768 * 768 * 2 + 2ULL * 192 * 192 * 2561 * 2);
  // Held through the text blocks: 512 soft tokens of 2048 (bf16). Saved for backward in full
  // training: embed_vision's fp32 normalised x, the bf16 projection input, the post-projection
  // norm's fp32 input and root, and masked_scatter's (1, 1024) bool mask.
  const std::uint64_t features = 512ULL * 2048 * 2;
  CHECK(g.stack().held.value - t.stack().held.value == features);
  CHECK(estimate(m, full).saved_activation_bytes.value - estimate(m, text).saved_activation_bytes.value ==
        512ULL * (2048 + 2048 + 1) * 4 + 512ULL * 2048 * 2 + 1024);
  // Under LoRA on the text model embed_vision is frozen: only the features and the mask.
  training_spec lora = full;
  lora.target = training_target::lora;
  lora.lora_rank = 16;
  training_spec lora_text = text;
  lora_text.target = training_target::lora;
  lora_text.lora_rank = 16;
  CHECK(build(m, lora).stack().held.value - build(m, lora_text).stack().held.value == features + 1024);
  CHECK_NOTHROW(estimate(m, lora));
  // Eager (timm's attention unfused, as without SDPA): stage 2's scores stay below the expansion at 768.
  training_spec eager = full;
  eager.attention = attention_impl::eager;
  CHECK(build(m, eager).stack().tower_forward.value == g.stack().tower_forward.value);
  // At 2048 x 2048 they pass it: 12 heads x 128^2 queries x 64^2 keys, twice, per image.
  training_spec large = full;
  large.images.height = large.images.width = 2048;
  training_spec large_eager = large;
  large_eager.attention = attention_impl::eager;
  CHECK(build(m, large_eager).stack().tower_forward.value - build(m, large).stack().tower_forward.value >
        2ULL * 2 * 12 * 16384 * 4096 * 2 - 2ULL * 512 * 512 * 2561 * 2);
}

json_io::json image_record(json_io::json train) {
  return {{"id", "gemma3n-image-test"},
          {"device", "cuda"},
          {"model", {{"hf_config", gemma3n_configs::e2b()}}},
          {"train", std::move(train)}};
}

std::string error_of(const json_io::json& train) {
  return json_io::estimate_record(image_record(train)).value("error", std::string());
}

TEST_CASE("gemma3n with images: what is not modelled is refused by its field", "[gemma3n][tower][images]") {
  const json_io::json frozen{{"batch", 1}, {"seq", 1024}, {"images_per_sample", 1}, {"image", "768x768"},
                             {"precision", "bf16"}, {"frozen", "vision_tower"}, {"attention", "sdpa"}};
  CHECK(json_io::estimate_record(image_record(frozen)).contains("estimated_bytes"));

  json_io::json trained = frozen;
  trained.erase("frozen");
  CHECK(contains(error_of(trained), "tower_frozen"));

  json_io::json resized = frozen;
  resized["image"] = "640x480";  // the neck would resize its level bilinearly
  CHECK(contains(error_of(resized), "run.images.height x width"));

  json_io::json short_seq = frozen;
  short_seq["seq"] = 257;  // one image is 256 + boi + eoi tokens
  CHECK(contains(error_of(short_seq), "run.seq_len"));

  json_io::json bounds = frozen;
  bounds["max_pixels"] = 1000000;
  CHECK(contains(error_of(bounds), "min_pixels"));

  json_io::json autocast = frozen;
  autocast["precision"] = "amp_bf16";
  CHECK(contains(error_of(autocast), "run.prec"));

  json_io::json odd_tokens = image_record(frozen);
  odd_tokens["model"]["hf_config"]["vision_soft_tokens_per_image"] = 200;
  CHECK(contains(json_io::estimate_record(odd_tokens).value("error", std::string()), "vision_soft_tokens_per_image"));
}

}  // namespace
}  // namespace gemma3n_image_test
