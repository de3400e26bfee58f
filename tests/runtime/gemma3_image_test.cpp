// Images through Gemma 3's frozen SigLIP tower (graph/layers/vision_tower_siglip.hpp): the CPU
// traces of tools/trace/gemma3_image_cases.py, what the images add to the graph, and the refusals
// of a trainable tower, of adapters PEFT would also put in the tower and of smart_resize bounds.
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

namespace gemma3_image_test {
namespace {

using namespace memscale;
using memscale_test::contains;

const std::string gemma_4b = std::string(MEMSCALE_SOURCE_DIR) + "/tests/data/hf_configs/ssm-multimodal/google--gemma-3-4b-it.json";

TEST_CASE("gemma3 with images: the frozen tower's CPU traces are met within 2%", "[hf_config][tower][images]") {
  CHECK(vlm_records::check_within("cpu-gemma3-", 2.0) == 3);
}

// The tower's own moment: the trace's peak between the marks around get_image_features, over
// what step 2 began with (the full runs: the LoRA run's hook adds an embeddings copy before it).
TEST_CASE("gemma3 with images: the tower's forward moment meets the trace within 1%", "[hf_config][tower][images]") {
  std::ifstream in(MEMSCALE_SOURCE_DIR "/docs/data/cpu_traced_vlm.json");
  REQUIRE(in);
  int cases = 0;
  for (const auto& record : json_io::json::parse(in)) {
    const std::string id = record.at("id").get<std::string>();
    if (id.rfind("cpu-gemma3-", 0) != 0 || id.find("-full-") == std::string::npos) continue;
    INFO(id);
    const model_graph g = build(json_io::model_for_record(record), json_io::run_from_record(record));
    const auto& d = record.at("detail");
    const double measured = d.at("s2_tower_peak").get<double>() - d.at("s2_start").get<double>();
    const double error = (static_cast<double>(g.stack().tower_forward.value) - measured) / measured * 100.0;
    CHECK(error > -1.0);
    CHECK(error < 1.0);
    ++cases;
  }
  CHECK(cases == 2);
}

json_io::json image_record(json_io::json train) {
  return {{"id", "gemma3-image-test"},
          {"device", "cuda"},
          {"model", {{"hf_config", json_io::json::parse(std::ifstream(gemma_4b))}}},
          {"train", std::move(train)}};
}

std::string error_of(const json_io::json& train) {
  return json_io::estimate_record(image_record(train)).value("error", std::string());
}

TEST_CASE("gemma3 with images: a trainable tower, tower adapters and pixel bounds are refused by name",
          "[hf_config][tower][images]") {
  const json_io::json frozen{{"batch", 1}, {"seq", 1024}, {"images_per_sample", 2}, {"image", "640x480"},
                             {"precision", "bf16"}, {"frozen", "vision_tower"}, {"attention", "sdpa"}};
  CHECK(json_io::estimate_record(image_record(frozen)).contains("estimated_bytes"));

  json_io::json trained = frozen;
  trained.erase("frozen");
  CHECK(contains(error_of(trained), "tower_frozen"));

  json_io::json qv_lora = frozen;
  qv_lora.erase("frozen");
  qv_lora.update({{"lora_rank", 16}, {"lora_targets", "q_proj,v_proj"}});
  const std::string qv = error_of(qv_lora);
  CHECK(contains(qv, "run.lora_targets"));
  CHECK(contains(qv, "SiglipAttention"));
  json_io::json mlp_lora = qv_lora;
  mlp_lora["lora_targets"] = "o_proj,gate_proj,up_proj,down_proj";
  CHECK(json_io::estimate_record(image_record(mlp_lora)).contains("estimated_bytes"));

  json_io::json short_seq = frozen;
  short_seq["seq"] = 500;  // two images are 2 x (256 + 2) tokens
  CHECK(contains(error_of(short_seq), "run.seq_len"));

  json_io::json odd_tokens = image_record(frozen);
  odd_tokens["model"]["hf_config"]["mm_tokens_per_image"] = 200;  // not a square: the pool cannot make it
  CHECK(contains(json_io::estimate_record(odd_tokens).value("error", std::string()), "mm_tokens_per_image"));

  json_io::json bounds = frozen;
  bounds["max_pixels"] = 1000000;
  CHECK(contains(error_of(bounds), "min_pixels"));
}

TEST_CASE("gemma3 with images: the tower's moment, the features and the masks the language model holds",
          "[hf_config][tower][images]") {
  const model_spec model = json_io::load_hf_model(gemma_4b);
  CHECK(model.vision.kind == vision_tower_kind::siglip_gemma3);
  CHECK(model.vision.image_size == 896);
  // Every image is resized to 896 x 896 and pooled to mm_tokens_per_image, whatever its size.
  CHECK(graph_layers::image_tokens(model.vision, image_inputs{.per_sample = 1, .height = 480, .width = 640}) == 256);
  training_spec text{.micro_batch = 1, .seq_len = 1024, .prec = precision::pure_bf16, .attention = attention_impl::sdpa};
  text.device = device_kind::cuda;
  training_spec images = text;
  images.images = image_inputs{.per_sample = 2, .height = 896, .width = 896, .tower_frozen = true};
  const model_graph g = build(model, images);
  const model_graph t = build(model, text);
  // image_features (512 x 2560 bf16), special_image_mask (1024 bool) and the bool full and sliding masks.
  CHECK(g.stack().held.value - t.stack().held.value == 512 * 2560 * 2 + 1024 + 2 * 1024 * 1024);
  // fp32 pixel_values (2 x 3 x 896 x 896) and int64 token_type_ids.
  CHECK(g.stack().inputs.value - t.stack().inputs.value == 2 * 3 * 896 * 896 * 4 + 1024 * 8);
  // Eager: the tower's scores, 2 images x 16 heads x 4096^2, dominate its forward.
  training_spec eager = images;
  eager.attention = attention_impl::eager;
  CHECK(build(model, eager).stack().tower_forward.value > 2ULL * 16 * 4096 * 4096 * 8);
  CHECK(g.stack().tower_forward.value < 2ULL * 16 * 4096 * 4096 * 2);
}

}  // namespace
}  // namespace gemma3_image_test
