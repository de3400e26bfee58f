// Images through Llama 4's frozen vision model (graph/layers/vision_tower_llama4.hpp): the CPU
// traces of tools/trace/llama4_image_cases.py, the processor's tiles and tokens, what the images
// add to the graph, and the refusals of a trainable tower, of adapters PEFT would also put in the
// tower and of smart_resize bounds.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <fstream>
#include <string>

#include "error_capture.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "vlm_records.hpp"

namespace llama4_image_test {
namespace {

using namespace memscale;
using memscale_test::contains;

const std::string scout = std::string(MEMSCALE_SOURCE_DIR) + "/tests/data/hf_configs/meta-llama--Llama-4-Scout-17B-16E.json";

TEST_CASE("llama4 with images: the frozen tower's CPU traces are met within 2%", "[hf_config][tower][images]") {
  CHECK(vlm_records::check_within("cpu-llama4-", 2.0) == 3);
}

// The tower's own moment: the trace's peak between the marks around get_image_features and the
// projector, over what step 2 began with.
TEST_CASE("llama4 with images: the tower's forward moment meets the trace within 1%", "[hf_config][tower][images]") {
  std::ifstream in(MEMSCALE_SOURCE_DIR "/docs/data/cpu_traced_vlm.json");
  REQUIRE(in);
  int cases = 0;
  for (const auto& record : json_io::json::parse(in)) {
    const std::string id = record.at("id").get<std::string>();
    if (id.rfind("cpu-llama4-", 0) != 0) continue;
    INFO(id);
    const model_spec model = json_io::model_for_record(record);
    const training_spec run = json_io::run_from_record(record);
    const model_graph g = build(model, run);
    const auto& d = record.at("detail");
    CHECK(graph_layers::llama4_tiles(model.vision, run.images).tiles == d.at("tiles_per_image").get<std::uint64_t>());
    CHECK(graph_layers::image_tokens(model.vision, run.images) == d.at("image_tokens_per_image").get<std::uint64_t>());
    const double measured = d.at("s2_tower_peak").get<double>() - d.at("s2_start").get<double>();
    const double error = (static_cast<double>(g.stack().tower_forward.value) - measured) / measured * 100.0;
    CHECK(error > -1.0);
    CHECK(error < 1.0);
    ++cases;
  }
  CHECK(cases == 3);
}

TEST_CASE("llama4 with images: Scout's processor tiles and tokens", "[hf_config][tower][images]") {
  const model_spec model = json_io::load_hf_model(scout);
  REQUIRE(model.vision.kind == vision_tower_kind::llama4);
  const auto tiles = [&](std::uint64_t h, std::uint64_t w) {
    return graph_layers::llama4_tiles(model.vision, image_inputs{.per_sample = 1, .height = h, .width = w});
  };
  // 336 x 336: one tile, no global tile; 144 patch tokens after the 2 x 2 pixel shuffle, between
  // <|image_start|> <|image|> and <|image_end|>.
  CHECK(tiles(336, 336).tiles == 1);
  CHECK(tiles(336, 336).tokens == 144 + 3);
  // 200 x 300 fits 1 x 1 by upscaling 1.12; 672 x 1008 is exactly 2 x 3 tiles, plus the global one:
  // six tiles' patches, one x separator between neighbours (2 x 2) and a y separator per row (2).
  CHECK(tiles(200, 300).tiles == 1);
  const auto grid = tiles(672, 1008);
  CHECK((grid.rows == 2 && grid.columns == 3 && grid.tiles == 7));
  CHECK(grid.tokens == 1 + 6 * 144 + 4 + 2 + 1 + 144 + 1);
  // A 4000 x 4000 image cannot be upscaled onto any canvas: the largest downscale is 4 x 4 tiles.
  CHECK(tiles(4000, 4000).tiles == 17);
  static_assert(graph_layers::llama4_tiles(vision_tower_spec{.kind = vision_tower_kind::llama4, .patch = 14,
                                                             .merge = 2, .image_size = 336, .max_tiles = 16},
                                           image_inputs{.per_sample = 1, .height = 336, .width = 700})
                    .tiles == 4);  // 1 x 3 tiles (scale 1, the height limiting: the smallest upscale) + global
}

json_io::json image_record(json_io::json train) {
  return {{"id", "llama4-image-test"},
          {"device", "cuda"},
          {"model", {{"hf_config", json_io::json::parse(std::ifstream(scout))}}},
          {"train", std::move(train)}};
}

std::string error_of(const json_io::json& train) {
  return json_io::estimate_record(image_record(train)).value("error", std::string());
}

TEST_CASE("llama4 with images: a trainable tower, tower adapters and pixel bounds are refused by name",
          "[hf_config][tower][images]") {
  const json_io::json frozen{{"batch", 1}, {"seq", 2048}, {"images_per_sample", 1}, {"image", "672x1008"},
                             {"precision", "bf16"}, {"frozen", "vision_tower"}, {"attention", "sdpa"}};
  CHECK(json_io::estimate_record(image_record(frozen)).contains("estimated_bytes"));

  json_io::json trained = frozen;
  trained.erase("frozen");
  CHECK(contains(error_of(trained), "tower_frozen"));

  json_io::json o_lora = frozen;
  o_lora.erase("frozen");
  o_lora.update({{"lora_rank", 16}, {"lora_targets", "o_proj"}});
  const std::string o = error_of(o_lora);
  CHECK(contains(o, "run.lora_targets"));
  CHECK(contains(o, "Llama4VisionAttention"));

  json_io::json short_seq = frozen;
  short_seq["seq"] = 1000;  // 7 tiles: 1021 tokens
  CHECK(contains(error_of(short_seq), "run.seq_len"));

  json_io::json bounds = frozen;
  bounds["max_pixels"] = 1000000;
  CHECK(contains(error_of(bounds), "min_pixels"));

  json_io::json odd = image_record(frozen);
  odd["model"]["hf_config"]["vision_config"]["intermediate_size"] = 4096;
  CHECK(contains(json_io::estimate_record(odd).value("error", std::string()), "intermediate_size"));
}

TEST_CASE("llama4 with images: the features and mask the language model holds, the tiles' pixels",
          "[hf_config][tower][images]") {
  const model_spec model = json_io::load_hf_model(scout);
  training_spec text{.micro_batch = 1, .seq_len = 2048, .prec = precision::pure_bf16, .attention = attention_impl::sdpa};
  text.device = device_kind::cuda;
  training_spec images = text;
  images.images = image_inputs{.per_sample = 1, .height = 672, .width = 1008, .tower_frozen = true};
  const model_graph g = build(model, images);
  const model_graph t = build(model, text);
  // 7 tiles x 144 tokens: image_features (x 4096) and projected_vision_flat (x 5120) in bf16, and
  // special_image_mask (2048 bool).
  CHECK(g.stack().held.value - t.stack().held.value == 7 * 144 * (4096 + 5120) * 2 + 2048);
  // bf16 pixel_values, 7 x 3 x 336 x 336.
  CHECK(g.stack().inputs.value - t.stack().inputs.value == 7 * 3 * 336 * 336 * 2);
  // SDPA's largest moment is vision_apply_rotary_emb's in bf16: beside the text embeddings, the
  // layer's input, the norm's output, q, k, v and the two bf16 results (7 x e), the fp32 copies of
  // q and k and their complex products (4 x e fp32), and the rotary table copied to the device
  // (577 x 44 complex64); e = 7 tiles x 577 positions x 1408.
  const std::uint64_t e = 7ULL * 577 * 1408;
  CHECK(g.stack().tower_forward.value == 2048ULL * 5120 * 2 + 7 * e * 2 + 4 * e * 4 + 577ULL * 44 * 8);
  // Eager: the scores and their softmax beside each other, 7 tiles x 16 heads x 577^2 in bf16.
  training_spec eager = images;
  eager.attention = attention_impl::eager;
  CHECK(build(model, eager).stack().tower_forward.value > 2 * 7ULL * 16 * 577 * 577 * 2);
}

}  // namespace
}  // namespace llama4_image_test
