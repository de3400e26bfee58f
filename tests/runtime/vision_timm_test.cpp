// timm vision models (memscale/vision/timm_presets.hpp, vit.hpp's timm path): lookup by
// name, what each timm mechanism adds to the step, the timm CPU traces, and refusals.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <array>
#include <cstdint>
#include <fstream>
#include <string>

#include "error_capture.hpp"
#include "memscale/json.hpp"
#include "memscale/vision/estimate.hpp"
#include "memscale/vision/presets.hpp"

namespace vision_timm_test {
namespace {

using memscale_test::contains;
using memscale_test::error_message;
using namespace memscale;

std::uint64_t runtime_value(std::uint64_t v) {
  volatile std::uint64_t x = v;
  return x;
}

// A small timm ViT (the traces' shape: 128 px, patch 16, 65 tokens, dim 192, 3 heads, depth 4).
vision::vision_spec small_vit() {
  auto v = *vision::presets::find("vit_small_patch16_224");
  v.vit.hidden = runtime_value(192);
  v.vit.heads = 3;
  v.vit.layers = 4;
  v.vit.mlp = 768;
  v.image_height = v.image_width = 128;
  return v;
}

training_spec cpu_run(std::uint64_t batch) {
  return training_spec{.micro_batch = runtime_value(batch), .seq_len = 1, .attention = attention_impl::eager,
                       .device = device_kind::cpu, .torch_version = 113};
}

}  // namespace

TEST_CASE("timm names: the tag sets num_classes only, torchvision names stay torchvision", "[vision][timm]") {
  const std::string tagged = "vit_large_patch16_224.augreg_in21k_ft_in1k";
  const auto l16 = vision::presets::find(tagged);
  REQUIRE(l16);
  CHECK(l16->source == vision::model_source::timm);
  CHECK(l16->classes == 1000);
  CHECK(vision::parameter_count(*l16) == 304'326'632);
  CHECK(vision::presets::find("vit_large_patch16_224.augreg_in21k")->classes == 21843);
  CHECK(vision::presets::find("vit_large_patch14_clip_224.openai_ft_in12k")->classes == 11821);
  CHECK(vision::presets::find("timm/vit_huge_patch14_224.orig_in21k")->classes == 0);
  // Same architecture under every tag.
  const auto a = vision::presets::find("resnet50.a1_in1k");
  const auto b = vision::presets::find("resnet50.tv_in1k");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(vision::parameter_count(*a) == vision::parameter_count(*b));
  // vit_b_16 (torchvision) and vit_base_patch16_224 (timm): equal parameters, different steps.
  const auto tv = *vision::presets::find("vit_b_16");
  const auto timm = *vision::presets::find("vit_base_patch16_224");
  CHECK(tv.source == vision::model_source::torchvision);
  CHECK(vision::parameter_count(tv) == vision::parameter_count(timm));
  const training_spec run{.micro_batch = runtime_value(8), .seq_len = 1, .attention = attention_impl::eager,
                          .device = device_kind::cuda, .torch_version = 113};
  CHECK(vision::estimate(timm, run).saved_activation_bytes < vision::estimate(tv, run).saved_activation_bytes);
  // Every timm preset estimates, and its peak never decreases with the batch.
  for (const auto& m : vision::timm_presets::all) {
    INFO(std::string(m.name));
    bytes previous{};
    for (const std::uint64_t batch : std::array<std::uint64_t, 3>{1, 4, 16}) {
      const training_spec r{.micro_batch = runtime_value(batch), .seq_len = 1, .prec = precision::amp_bf16};
      const auto e = vision::estimate(m, r);
      CHECK(e.steady.tensor >= previous);
      previous = e.steady.tensor;
    }
  }
}

TEST_CASE("timm names: mechanisms not modelled are refused by name", "[vision][timm][error]") {
  const std::string eva_clip = "eva02_large_patch14_clip_224.merged2b";
  CHECK_FALSE(vision::presets::find(eva_clip));
  CHECK(contains(std::string(vision::presets::refusal(eva_clip)), "scale_attn_inner"));
  CHECK(vision::presets::find("eva02_large_patch14_448.mim_m38m_ft_in22k_in1k"));
  CHECK(vision::presets::find("eva02_tiny_patch14_336.mim_in22k_ft_in1k"));
  CHECK(vision::presets::find("eva_giant_patch14_560.m30m_ft_in22k_in1k"));
  CHECK(contains(std::string(vision::presets::refusal("eva_giant_patch14_clip_224.merged2b")), "tag"));
  CHECK(contains(std::string(vision::presets::refusal("eva02_enormous_patch14_clip_224")), "post-norm"));
  CHECK(contains(std::string(vision::presets::refusal("resnet50d.ra2_in1k")), "stem"));
  CHECK(contains(std::string(vision::presets::refusal("vit_base_patch16_224.mae")), "tag"));
  CHECK(vision::presets::refusal("vit_base_patch16_224.augreg2_in21k_ft_in1k").empty());
  CHECK_FALSE(vision::presets::find("vit_not_a_model_224"));
}

TEST_CASE("timm ViT: each mechanism keeps what its code saves", "[vision][timm]") {
  const std::uint64_t B = 4;
  const std::uint64_t N = 65;
  const std::uint64_t C = 192;
  const auto plain = vision::estimate(small_vit(), cpu_run(B)).saved_activation_bytes.value;
  // LayerScale: `y * gamma` saves y on both branches of each of the 4 blocks.
  auto ls = small_vit();
  ls.vit.layer_scale = true;
  CHECK(vision::estimate(ls, cpu_run(B)).saved_activation_bytes.value == plain + 8 * B * N * C * 4);
  // DropPath: a (B, 1, 1) mask per branch, none in block 0 (the rate ramps from 0).
  auto dp = small_vit();
  dp.vit.drop_path = true;
  CHECK(vision::estimate(dp, cpu_run(B)).saved_activation_bytes.value == plain + 6 * B * 4);
  // Fused SDPA (torch >= 2.0 asked for sdpa; CPU flash from 2.2): the N x N probabilities and
  // the q/k/v copies give way to the qkv output, the kernel's output and a log-sum-exp.
  auto fused_run = cpu_run(B);
  fused_run.attention = attention_impl::sdpa;
  fused_run.torch_version = 205;
  auto eager_run = fused_run;
  eager_run.attention = attention_impl::eager;
  const auto fused = vision::estimate(small_vit(), fused_run).saved_activation_bytes.value;
  const auto eager = vision::estimate(small_vit(), eager_run).saved_activation_bytes.value;
  CHECK(eager - fused == 4 * (3 * B * N * N * 4 - 3 * B * N * 4 - B * N * C * 4));
  // Average pooling with fc_norm: the final norm runs on (B, C) after the mean.
  auto gap = small_vit();
  gap.vit.class_token = false;
  gap.vit.avg_pool = true;
  gap.vit.fc_norm = true;
  CHECK(vision::parameter_count(gap) == vision::parameter_count(small_vit()) - C - C);  // no class token or its position
}

TEST_CASE("timm Eva: the fused qkv with q/v biases and GluMlp keep what their code saves", "[vision][timm]") {
  const std::uint64_t B = 4;
  const std::uint64_t N = 65;
  const std::uint64_t C = 192;
  const std::uint64_t H = 512;
  // EVA02 at the traces' shape, scale_mlp's SwiGLU and separate q/k/v (eva02_base's arguments).
  auto eva = *vision::presets::find("eva02_base_patch14_224");
  eva.vit.patch = 16;
  eva.vit.hidden = runtime_value(C);
  eva.vit.heads = 3;
  eva.vit.layers = 4;
  eva.vit.mlp = H;
  eva.image_height = eva.image_width = 128;
  auto glu = eva;
  glu.vit.mlp_norm = false;
  // GluMlp: fc1 (2H wide, one Linear) replaces fc1_g and fc1_x; no LayerNorm on the hidden.
  CHECK(vision::parameter_count(eva) - vision::parameter_count(glu) == 4 * 2 * H);
  // SwiGLU keeps gate, value, SiLU's output, the product and the norm's output, plus the norm's
  // fp32 mean and rstd per token; GluMlp fc1's output (both halves), SiLU's output and the product.
  const auto saved = [&](const vision::vision_spec& v, attention_impl attention) {
    auto run = cpu_run(B);
    run.attention = attention;
    run.torch_version = 205;
    return vision::estimate(v, run).saved_activation_bytes.value;
  };
  CHECK(saved(eva, attention_impl::eager) - saved(glu, attention_impl::eager) == 4 * B * N * (H + 2) * 4);
  // The fused qkv has q_proj's and v_proj's parameters (k unbiased either way); under SDPA v is a
  // view of the qkv output, which then stays saved instead of v_proj's output alone.
  auto fused = glu;
  fused.vit.qv_bias = true;
  CHECK(vision::parameter_count(fused) == vision::parameter_count(glu));
  CHECK(saved(fused, attention_impl::eager) == saved(glu, attention_impl::eager));
  CHECK(saved(fused, attention_impl::sdpa) - saved(glu, attention_impl::sdpa) == 4 * B * N * 2 * C * 4);
  // EVA-01 giant is timm's ViT-g/14 block with those biases, average pooling and fc_norm.
  auto vit_g = *vision::presets::find("vit_giant_patch14_224");
  vit_g.vit.avg_pool = vit_g.vit.fc_norm = true;
  const auto eva01 = *vision::presets::find("eva_giant_patch14_224.clip_ft_in1k");
  CHECK(vision::parameter_count(vit_g) - vision::parameter_count(eva01) == 40 * 1408);
  const training_spec bf16{.micro_batch = runtime_value(std::uint64_t{2}), .seq_len = 1, .prec = precision::amp_bf16};
  CHECK(vision::estimate(eva01, bf16).saved_activation_bytes.value ==
        vision::estimate(vit_g, bf16).saved_activation_bytes.value);
}

// Every mechanism of these steps is modelled: the traced peaks are met within 0.25%.
TEST_CASE("timm ViT and EVA02: the CPU traces are within 0.25%", "[vision][timm][json]") {
  std::size_t timm_records = 0;
  for (const char* file : {MEMSCALE_SOURCE_DIR "/docs/data/cpu_traced_vision_tower.json",
                           MEMSCALE_SOURCE_DIR "/docs/data/cpu_traced_timm_eva.json"}) {
    std::ifstream in(file);
    REQUIRE(in);
    for (const auto& record : json_io::json::parse(in)) {
      if (!json_io::is_timm_record(record)) continue;
      ++timm_records;
      INFO(record.at("id").get<std::string>());
      CHECK(vision::parameter_count(json_io::vision_model_from_record(record)) ==
            record.at("model").at("params").get<std::uint64_t>());
      const auto answer = json_io::estimate_record(record);
      REQUIRE(answer.contains("estimated_bytes"));
      const double measured = record.at("measured_bytes").get<double>();
      const double error = (answer.at("estimated_bytes").get<double>() - measured) / measured * 100.0;
      CHECK(error >= -0.25);
      CHECK(error <= 0.25);
    }
  }
  CHECK(timm_records == 8);
}

TEST_CASE("timm records: an argument memscale does not model is refused by name", "[vision][timm][error]") {
  json_io::json record = json_io::json::parse(R"json({"id": "x", "measure": "cpu-tensor-peak", "device": "cpu",
    "model": {"family": "vit", "timm_args": {"embed_dim": 192, "depth": 2, "num_heads": 3, "img_size": 64,
              "qk_norm": true}},
    "train": {"batch": 1, "image": 64}, "measured_bytes": 1})json");
  auto answer = json_io::estimate_record(record);
  REQUIRE(answer.contains("error"));
  CHECK(contains(answer.at("error").get<std::string>(), "model.timm_args.qk_norm"));
  record["model"]["timm_args"].erase("qk_norm");
  record["model"]["timm_args"]["global_pool"] = "map";
  answer = json_io::estimate_record(record);
  REQUIRE(answer.contains("error"));
  CHECK(contains(answer.at("error").get<std::string>(), "global_pool"));
  record["model"]["timm_args"]["global_pool"] = "avg";
  record["model"]["timm_args"]["num_heads"] = 5;
  answer = json_io::estimate_record(record);
  REQUIRE(answer.contains("error"));
  CHECK(contains(answer.at("error").get<std::string>(), "heads"));
  record["model"]["timm_class"] = "Eva";
  record["model"]["timm_args"] = {{"embed_dim", 192}, {"depth", 2}, {"num_heads", 3}, {"img_size", 64},
                                  {"swiglu_mlp", true}, {"scale_mlp", true}, {"use_rot_pos_emb", true}};
  CHECK(json_io::estimate_record(record).contains("estimated_bytes"));  // qkv_fused: Eva's default
  record["model"]["timm_args"]["use_rot_pos_emb"] = false;
  answer = json_io::estimate_record(record);
  REQUIRE(answer.contains("error"));
  CHECK(contains(answer.at("error").get<std::string>(), "model.timm_args.use_rot_pos_emb"));
  record["model"]["timm_args"] = {{"embed_dim", 192}, {"depth", 2}, {"num_heads", 3}, {"img_size", 64},
                                  {"qkv_fused", false}};
  answer = json_io::estimate_record(record);
  REQUIRE(answer.contains("error"));
  CHECK(contains(answer.at("error").get<std::string>(), "model.timm_args.qkv_fused"));
  CHECK(contains(error_message([] {
                   auto v = *vision::presets::find("vit_small_patch16_224");
                   v.vit.code = vision::vit_code::torchvision;
                   v.vit.layer_scale = true;
                   (void)vision::parameter_count(v);
                 }),
                 "timm"));
}

}  // namespace vision_timm_test
