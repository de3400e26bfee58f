// Images through the frozen vision towers of Qwen2.5-VL, Qwen2-VL (graph/layers/vision_tower.hpp)
// and Qwen3-VL (vision_tower_qwen3.hpp): image tokens per image (smart_resize), the CPU traces of
// tools/trace/qwen_vl_image_cases.py, and the refusals of a trainable tower (Gemma 3's tower:
// gemma3_image_test.cpp).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <string>

#include "error_capture.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "vlm_records.hpp"

namespace vlm_image_test {
namespace {

using namespace memscale;
using memscale_test::contains;
using memscale_test::error_message;

std::string config_path(const std::string& name) {
  return std::string(MEMSCALE_SOURCE_DIR) + "/tests/data/hf_configs/ssm-multimodal/" + name + ".json";
}

constexpr vision_tower_spec qwen2_5_vl_7b_tower{.kind = vision_tower_kind::qwen2_5_vl, .depth = 32, .hidden = 1280,
                                                .intermediate = 3420, .heads = 16, .in_channels = 3, .patch = 14,
                                                .temporal_patch = 2, .merge = 2, .out_hidden = 3584,
                                                .window_size = 112, .full_attention_blocks = 4};

constexpr graph_layers::image_grid grid_of(std::uint64_t h, std::uint64_t w) {
  return graph_layers::qwen2_5_vl_image_grid(qwen2_5_vl_7b_tower, image_inputs{.per_sample = 1, .height = h, .width = w});
}

// smart_resize (image_processing_qwen2_vl.py): multiples of 28 kept, others rounded half to even,
// then scaled into [56 * 56, 28 * 28 * 1280] pixels.
static_assert(grid_of(224, 224).rows == 16 && grid_of(224, 224).tokens == 64);
static_assert(grid_of(448, 336).rows == 32 && grid_of(448, 336).cols == 24 && grid_of(448, 336).tokens == 192);
static_assert(grid_of(42, 42).rows == 4);    // 42 / 28 = 1.5 rounds to 2 (half to even)
static_assert(grid_of(70, 70).rows == 4);    // 2.5 rounds to 2
static_assert(grid_of(1024, 1024).rows == 70 && grid_of(1024, 1024).tokens == 1225);  // floor(1024 / 1.0222 / 28) = 35
static_assert(grid_of(28, 28).rows == 4);    // 784 < 3136 pixels: ceil(28 * 2 / 28) = 2 x 28

// Qwen3-VL: patch 16 (factor 32) and its checkpoints' bounds, 65536 to 16777216 pixels.
constexpr vision_tower_spec qwen3_vl_8b_tower{.kind = vision_tower_kind::qwen3_vl, .depth = 27, .hidden = 1152,
                                              .intermediate = 4304, .heads = 16, .in_channels = 3, .patch = 16,
                                              .temporal_patch = 2, .merge = 2, .out_hidden = 4096,
                                              .position_embeddings = 2304, .deepstack_features = 3,
                                              .deepstack_before_last = 3, .min_pixels = 65536, .max_pixels = 16777216};
constexpr graph_layers::image_grid qwen3_grid_of(std::uint64_t h, std::uint64_t w, std::uint64_t min_pixels = 0) {
  return graph_layers::qwen2_5_vl_image_grid(
      qwen3_vl_8b_tower, image_inputs{.per_sample = 1, .height = h, .width = w, .min_pixels = min_pixels});
}
static_assert(qwen3_grid_of(224, 224).rows == 16 && qwen3_grid_of(224, 224).tokens == 64);  // 50176 < 65536: up to 256
static_assert(qwen3_grid_of(224, 224, 56 * 56).rows == 14);  // the run's bound: 224 = 7 x 32 kept
static_assert(qwen3_grid_of(1024, 1024).rows == 64 && qwen3_grid_of(1024, 1024).tokens == 1024);

TEST_CASE("qwen2_5_vl, qwen2_vl and qwen3_vl with images: the frozen towers' CPU traces are met within 2%",
          "[hf_config][tower][images]") {
  CHECK(vlm_records::check_within("cpu-qwen", 2.0) == 8);  // Gemma 3: gemma3_image_test.cpp
}

json_io::json image_record(const std::string& config, json_io::json train) {
  return {{"id", "vlm-image-test"},
          {"device", "cuda"},
          {"model", {{"hf_config", json_io::json::parse(std::ifstream(config_path(config)))}}},
          {"train", std::move(train)}};
}

TEST_CASE("qwen2_5_vl with images: a trainable tower is refused by name",
          "[hf_config][tower][images]") {
  const std::string qwen = "Qwen--Qwen2.5-VL-7B-Instruct";
  const json_io::json frozen{{"batch", 1}, {"seq", 1024}, {"images_per_sample", 2}, {"image", "448x448"},
                             {"precision", "bf16"}, {"frozen", "vision_tower"}, {"attention", "sdpa"}};
  CHECK(json_io::estimate_record(image_record(qwen, frozen)).contains("estimated_bytes"));

  json_io::json trained = frozen;
  trained.erase("frozen");
  const std::string why = json_io::estimate_record(image_record(qwen, trained)).value("error", std::string());
  CHECK(contains(why, "tower_frozen"));
  CHECK(contains(why, "saved activations are not modelled"));

  json_io::json mlp_lora = frozen;
  mlp_lora.erase("frozen");
  mlp_lora.update({{"lora_rank", 16}, {"lora_targets", "q_proj,v_proj,gate_proj,up_proj,down_proj"}});
  CHECK(contains(json_io::estimate_record(image_record(qwen, mlp_lora)).value("error", std::string()),
                 "run.lora_targets"));

  json_io::json short_seq = frozen;
  short_seq["seq"] = 300;  // two 448 x 448 images are 2 x 256 tokens
  CHECK(contains(json_io::estimate_record(image_record(qwen, short_seq)).value("error", std::string()),
                 "run.seq_len"));

  // Qwen2-VL's and Qwen3-VL's towers: frozen they are modelled, trained they are refused by name;
  // their MLPs (fc1/fc2, linear_fc1/linear_fc2) are no LoRA target's match.
  for (const std::string other : {"Qwen--Qwen2-VL-7B-Instruct", "Qwen--Qwen3-VL-8B-Instruct"}) {
    INFO(other);
    CHECK(json_io::estimate_record(image_record(other, frozen)).contains("estimated_bytes"));
    const std::string refused = json_io::estimate_record(image_record(other, trained)).value("error", std::string());
    CHECK(contains(refused, "tower_frozen"));
    CHECK(json_io::estimate_record(image_record(other, mlp_lora)).contains("estimated_bytes"));
  }
  json_io::json no_pixels = frozen;
  no_pixels["min_pixels"] = 0;
  CHECK(contains(json_io::estimate_record(image_record("Qwen--Qwen3-VL-8B-Instruct", no_pixels)).value("error", std::string()),
                 "train.min_pixels"));
}

TEST_CASE("qwen3_vl with images: the deepstack features stay through the language model's forward",
          "[hf_config][tower][images]") {
  const model_spec model = json_io::load_hf_model(config_path("Qwen--Qwen3-VL-8B-Instruct"));
  CHECK(model.vision.kind == vision_tower_kind::qwen3_vl);
  CHECK(model.vision.deepstack_features == 3);
  training_spec text{.micro_batch = 1, .seq_len = 1024, .prec = precision::pure_bf16, .attention = attention_impl::sdpa};
  text.device = device_kind::cuda;
  training_spec images = text;
  images.images = image_inputs{.per_sample = 2, .height = 512, .width = 512, .tower_frozen = true};
  const model_graph g = build(model, images);
  const model_graph t = build(model, text);
  // 512 x 512 pixels: 32 x 32 patches of 16, 256 tokens. image_embeds and three deepstack
  // features (512 tokens x 4096 bf16 each), image_mask (1024 bool), (3, 1, 1024) int64 position ids.
  CHECK(g.stack().held.value - t.stack().held.value == 4 * 512 * 4096 * 2 + 1024 + 3 * 1024 * 8);
  // fp32 pixel_values: 2 images x 32 x 32 patches x 3 x 2 x 16 x 16, and the (2, 3) grid.
  CHECK(g.stack().inputs.value - t.stack().inputs.value == 2 * 1024 * 1536 * 4 + 2 * 3 * 8);
  CHECK(g.stack().tower_forward.value > 0);
}

TEST_CASE("qwen2_5_vl with images: image tokens lengthen nothing but the tower's moment and what the model holds",
          "[hf_config][tower][images]") {
  const model_spec model = json_io::load_hf_model(config_path("Qwen--Qwen2.5-VL-7B-Instruct"));
  training_spec text{.micro_batch = 1, .seq_len = 1024, .prec = precision::pure_bf16, .attention = attention_impl::sdpa};
  text.device = device_kind::cuda;
  training_spec images = text;
  images.images = image_inputs{.per_sample = 2, .height = 448, .width = 448, .tower_frozen = true};
  const model_graph g = build(model, images);
  const model_graph t = build(model, text);
  CHECK(g.stack().tower_forward.value > 0);
  // image_embeds (512 tokens x 3584 bf16), image_mask (1024 bool) and (3, 1, 1024) int64 position ids.
  CHECK(g.stack().held.value - t.stack().held.value == 512 * 3584 * 2 + 1024 + 3 * 1024 * 8);
  // fp32 pixel_values: 2 images x 32 x 32 patches x 3 x 2 x 14 x 14, and the (2, 3) grid.
  CHECK(g.stack().inputs.value - t.stack().inputs.value == 2 * 1024 * 1176 * 4 + 2 * 3 * 8);
  CHECK(estimate(g).steady.tensor.value > estimate(t).steady.tensor.value);
  // The allocator replay has no events for the tower yet: the rounding rule.
  const gpu_spec h100 = *find_gpu("h100-80gb");
  CHECK(estimate_on_device(model, images, &h100).fallback == replay_fallback::image_tower);
}

}  // namespace
}  // namespace vlm_image_test
