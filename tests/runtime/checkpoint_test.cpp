// Checkpoints read from safetensors headers (json/safetensors.hpp, json/checkpoint.hpp): exact
// counts on a model directory the test writes (an index, two shards, several dtypes), every
// hostile header refused with a message naming the file and the tensor, and the generic model
// of an unknown model_type (generic_model.hpp, json/generic_model.hpp).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "error_capture.hpp"
#include "memscale/estimate.hpp"
#include "memscale/generic_model.hpp"
#include "memscale/json.hpp"
#include "safetensors_writer.hpp"

namespace checkpoint_test {
namespace {

using memscale::bytes;
using memscale::stored_dtype;
using memscale::tensor_role;
using memscale::json_io::json;
using memscale_test::contains;
using memscale_test::error_message;
using memscale_test::fake_tensor;
using memscale_test::temp_folder;

const std::vector<fake_tensor> shard_one{
    {"model.embed_tokens.weight", "BF16", {1000, 64}},
    {"model.layers.0.self_attn.q_proj.weight", "BF16", {64, 64}},
    {"model.layers.0.self_attn.k_proj.weight", "BF16", {32, 64}},
    {"model.layers.0.self_attn.v_proj.weight", "BF16", {32, 64}},
    {"model.layers.0.self_attn.o_proj.weight", "BF16", {64, 64}},
    {"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {8}},
    {"model.layers.0.input_layernorm.weight", "F32", {64}},
};
const std::vector<fake_tensor> shard_two{
    {"model.layers.0.mlp.gate_proj.weight", "F16", {128, 64}},
    {"model.layers.0.mlp.up_proj.weight", "F16", {128, 64}},
    {"model.layers.0.mlp.down_proj.weight", "F16", {64, 128}},
    {"model.layers.0.post_attention_layernorm.weight", "F32", {64}},
    {"model.norm.weight", "F32", {64}},
    {"lm_head.weight", "BF16", {1000, 64}},
    {"model.embeddings.position_ids", "I64", {1, 512}},
    {"model.layers.0.self_attn.causal_mask", "BOOL", {1, 1, 16, 16}},
};
// By hand: BF16 parameters 64,000 + 4,096 + 2,048 + 2,048 + 4,096 + 64,000 = 140,288;
// F16 3 x 8,192 = 24,576; F32 3 x 64 = 192; buffers: inv_freq 8 x 4 B, position_ids
// 512 x 8 B, the bool mask 256 x 1 B.
constexpr std::uint64_t bf16_params = 140'288;
constexpr std::uint64_t f16_params = 24'576;
constexpr std::uint64_t f32_params = 192;
constexpr std::uint64_t all_params = bf16_params + f16_params + f32_params;  // 165,056
constexpr std::uint64_t buffer_bytes = 32 + 4'096 + 256;
constexpr std::uint64_t stored = 2 * bf16_params + 2 * f16_params + 4 * f32_params + buffer_bytes;  // 334,880

void write_sharded(const temp_folder& dir, std::uint64_t total_size) {
  memscale_test::write_safetensors(dir / "model-00001-of-00002.safetensors", shard_one);
  memscale_test::write_safetensors(dir / "model-00002-of-00002.safetensors", shard_two);
  json index{{"metadata", {{"total_size", total_size}}}, {"weight_map", json::object()}};
  for (const auto& t : shard_one) index["weight_map"][t.name] = "model-00001-of-00002.safetensors";
  for (const auto& t : shard_two) index["weight_map"][t.name] = "model-00002-of-00002.safetensors";
  memscale_test::write_text(dir / "model.safetensors.index.json", index.dump());
}

const memscale::dtype_tally& tally(const memscale::weights_inventory& w, tensor_role r, stored_dtype t) {
  return w.of(r)[static_cast<std::size_t>(t)];
}

// A file of the given header text (length first), with `data` bytes after it.
std::string header_error(const temp_folder& dir, const std::string& header, std::uint64_t data) {
  const auto file = dir / "hostile.safetensors";
  memscale_test::write_raw(file, header, data);
  return error_message([&] { (void)memscale::json_io::read_safetensors_header(file); });
}

}  // namespace

TEST_CASE("checkpoint: an index and two shards give exact counts per role and dtype", "[checkpoint]") {
  const temp_folder dir("sharded");
  write_sharded(dir, stored);
  const auto s = memscale::json_io::read_checkpoint(dir.path());
  REQUIRE(s.has_value());
  const auto& w = s->inventory;
  CHECK(s->files.size() == 2);
  CHECK(tally(w, tensor_role::parameter, stored_dtype::bf16).tensors == 6);
  CHECK(tally(w, tensor_role::parameter, stored_dtype::bf16).elements == bf16_params);
  CHECK(tally(w, tensor_role::parameter, stored_dtype::bf16).stored == bytes{2 * bf16_params});
  CHECK(tally(w, tensor_role::parameter, stored_dtype::f16).elements == f16_params);
  CHECK(tally(w, tensor_role::parameter, stored_dtype::f32).tensors == 3);
  CHECK(tally(w, tensor_role::parameter, stored_dtype::f32).elements == f32_params);
  CHECK(tally(w, tensor_role::buffer, stored_dtype::f32).elements == 8);
  CHECK(tally(w, tensor_role::buffer, stored_dtype::i64).stored == bytes{4'096});
  CHECK(tally(w, tensor_role::buffer, stored_dtype::boolean).elements == 256);
  CHECK(memscale::parameter_elements(w) == all_params);
  CHECK(memscale::stored_bytes(w) == bytes{stored});
  CHECK(s->index_total_size == stored);
  // Distinct parameter shapes after compact(): (1000,64), (64,64), (32,64), (128,64), (64,128), (64,) .
  CHECK(w.parameter_shapes.size() == 6);
  // A total_size matching the headers leaves no note about it; the buffers get one.
  CHECK(s->notes.size() == 1);
  CHECK(contains(s->notes.front(), "3 buffers"));
  const json summary = memscale::json_io::checkpoint_summary_json(*s);
  CHECK(summary.at("parameters") == all_params);
  CHECK(summary.at("by_role").at("parameter").at("F16").at("bytes") == 2 * f16_params);
}

TEST_CASE("checkpoint: full fine-tune state from the inventory, by hand", "[checkpoint]") {
  const temp_folder dir("state");
  write_sharded(dir, stored);
  const auto s = memscale::json_io::read_checkpoint(dir.path());
  REQUIRE(s.has_value());
  // fp32 AdamW (foreach, CUDA, torch 2.5): parameters and gradients 4 B, two states of 4 B,
  // no step tensor on the device; one group-sized temporary (step_temporaries_of).
  const memscale::training_spec run{.micro_batch = 1, .seq_len = 16};
  const memscale::checkpoint_state st = memscale::checkpoint_state_of(s->inventory, run);
  CHECK(st.parameters == all_params);
  CHECK(st.parameter_bytes == bytes{4 * all_params + buffer_bytes});
  CHECK(st.gradient_bytes == bytes{4 * all_params});
  CHECK(st.optimizer_bytes == bytes{8 * all_params});
  CHECK(st.step_temporaries == bytes{4 * all_params});
  // pure bf16: everything trained in 2 bytes, buffers as stored.
  const memscale::training_spec bf16{.micro_batch = 1, .seq_len = 16, .prec = memscale::precision::pure_bf16};
  CHECK(memscale::checkpoint_state_of(s->inventory, bf16).parameter_bytes == bytes{2 * all_params + buffer_bytes});
}

TEST_CASE("checkpoint: a total_size that differs from the headers is a note naming both figures", "[checkpoint]") {
  const temp_folder dir("total");
  write_sharded(dir, stored - 4'384);  // as a writer that left the buffers out would say
  const auto s = memscale::json_io::read_checkpoint(dir.path());
  REQUIRE(s.has_value());
  bool noted = false;
  for (const auto& n : s->notes) noted = noted || (contains(n, "330496") && contains(n, "334880"));
  CHECK(noted);
}

TEST_CASE("checkpoint: a directory without an index reads model.safetensors or its one file", "[checkpoint]") {
  const temp_folder dir("single");
  CHECK_FALSE(memscale::json_io::read_checkpoint(dir.path()).has_value());
  memscale_test::write_safetensors(dir / "weights.safetensors", shard_one);
  CHECK(memscale::json_io::read_checkpoint(dir.path())->inventory.of(tensor_role::parameter)[static_cast<std::size_t>(stored_dtype::bf16)].tensors == 5);
  memscale_test::write_safetensors(dir / "other.safetensors", shard_two);
  CHECK(contains(error_message([&] { (void)memscale::json_io::read_checkpoint(dir.path()); }), "several *.safetensors files"));
  memscale_test::write_safetensors(dir / "model.safetensors", shard_two);
  CHECK(memscale::parameter_elements(memscale::json_io::read_checkpoint(dir.path())->inventory) == 3 * 8'192 + 2 * 64 + 64'000);
}

TEST_CASE("safetensors: hostile headers are refused naming the file, the tensor and what was expected", "[checkpoint][hostile]") {
  const temp_folder dir("hostile");
  const auto file = dir / "hostile.safetensors";
  SECTION("truncated: shorter than the length, shorter than the header") {
    memscale_test::write_text(file, "abc");
    CHECK(contains(error_message([&] { (void)memscale::json_io::read_safetensors_header(file); }), "shorter than the 8-byte header length"));
    memscale_test::write_text(file, memscale_test::length_prefix(100) + "{\"a\":");
    CHECK(contains(error_message([&] { (void)memscale::json_io::read_safetensors_header(file); }), "header length 100 runs beyond the file"));
  }
  SECTION("a header length beyond the file, and above the 100 MB limit") {
    memscale_test::write_text(file, memscale_test::length_prefix(1'000) + std::string(100, ' '));
    CHECK(contains(error_message([&] { (void)memscale::json_io::read_safetensors_header(file); }), "runs beyond the file (108 bytes)"));
    memscale_test::write_text(file, memscale_test::length_prefix(100'000'001) + "{}");
    CHECK(contains(error_message([&] { (void)memscale::json_io::read_safetensors_header(file); }), "exceeds the 100000000-byte limit"));
    memscale_test::write_text(file, memscale_test::length_prefix(~0ULL) + "{}");
    CHECK(contains(error_message([&] { (void)memscale::json_io::read_safetensors_header(file); }), "exceeds the 100000000-byte limit"));
  }
  SECTION("not JSON, not an object, nested too deep, repeated names") {
    CHECK(contains(header_error(dir, "{\"a\": nope}", 0), "header is not valid JSON"));
    CHECK(contains(header_error(dir, "[1, 2]", 0), "must begin with '{'"));
    CHECK(contains(header_error(dir, "{\"a\": {\"shape\": [[[[1]]]]}}", 0), "nests deeper"));
    const std::string twice = R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
    CHECK(contains(header_error(dir, twice, 8), "names \"w\" twice"));
    CHECK(contains(header_error(dir, "{\"__metadata__\": {\"format\": 1}}", 0), "__metadata__.\"format\" must be a string"));
  }
  SECTION("unknown dtype, bad shape, overflowing shape") {
    CHECK(contains(header_error(dir, R"({"w": {"dtype": "F12", "shape": [1], "data_offsets": [0, 4]}})", 4), "dtype \"F12\" is not one of BOOL"));
    CHECK(contains(header_error(dir, R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4), "tensor \"w\": shape must hold"));
    const std::string overflow =
        R"({"huge.weight": {"dtype": "F32", "shape": [4294967296, 4294967296, 2], "data_offsets": [0, 4]}})";
    const std::string m = header_error(dir, overflow, 4);
    CHECK(contains(m, "[memscale.overflow]"));
    CHECK(contains(m, "tensor \"huge.weight\""));
    CHECK(contains(m, "tensor element count"));
    CHECK(contains(header_error(dir, R"({"w": {"dtype": "F4", "shape": [3], "data_offsets": [0, 1]}})", 1), "whole bytes"));
  }
  SECTION("offsets inconsistent with dtype x shape, beyond the file, with holes or trailing data") {
    const std::string m = header_error(dir, R"({"w": {"dtype": "F16", "shape": [3, 4], "data_offsets": [0, 10]}})", 10);
    CHECK(contains(m, "hostile.safetensors"));
    CHECK(contains(m, "tensor \"w\": data_offsets [0,10] hold 10 bytes; F16 x shape [3,4] needs 24"));
    CHECK(contains(header_error(dir, R"({"w": {"dtype": "F16", "shape": [3, 4], "data_offsets": [0, 24]}})", 10),
                   "run beyond the file (10 bytes of data after the header)"));
    const std::string hole = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}})";
    CHECK(contains(header_error(dir, hole, 24), "tensor \"b\": data_offsets begin at 16 where the previous tensor ends at 8"));
    CHECK(contains(header_error(dir, R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 12),
                   "the tensors cover 8 bytes but the file holds 12"));
    CHECK(contains(header_error(dir, R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "extra": 1}})", 8),
                   "has the field \"extra\""));
  }
  SECTION("a hostile tensor name is escaped and cut short") {
    const std::string name = "evil\n\x1b[31m" + std::string(10'000, 'x');
    const json h{{name, {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 3}}}}};
    const std::string m = header_error(dir, h.dump(), 3);
    CHECK(contains(m, "tensor \"evil\\n\\x1b[31mxxx"));
    CHECK(contains(m, "\"...(10010 bytes)"));
    CHECK(m.find('\n') == std::string::npos);
    CHECK(m.size() < 600);
  }
  SECTION("not a regular file") {
    std::filesystem::create_directories(dir / "folder.safetensors");
    CHECK(contains(error_message([&] { (void)memscale::json_io::read_safetensors_header(dir / "folder.safetensors"); }),
                   "is not a regular file"));
    CHECK(contains(error_message([&] { (void)memscale::json_io::read_safetensors_header(dir / "missing.safetensors"); }),
                   "does not exist"));
  }
  SECTION("an empty table is a valid file with no tensors") {
    memscale_test::write_raw(file, "{}  ", 0);
    CHECK(memscale::json_io::read_safetensors_header(file).tensors.empty());
  }
}

TEST_CASE("safetensors index: traversal, absolute paths and missing tensors are refused", "[checkpoint][hostile]") {
  const temp_folder dir("index");
  memscale_test::write_safetensors(dir / "a.safetensors", shard_one);
  const auto index_error = [&](const json& weight_map) {
    memscale_test::write_text(dir / "model.safetensors.index.json", json{{"weight_map", weight_map}}.dump());
    return error_message([&] { (void)memscale::json_io::read_checkpoint(dir.path()); });
  };
  CHECK(contains(index_error({{"w", "../a.safetensors"}}), "leaves the model directory"));
  CHECK(contains(index_error({{"w", "sub/../../a.safetensors"}}), "leaves the model directory"));
  CHECK(contains(index_error({{"w", "/etc/passwd"}}), "is an absolute path"));
  CHECK(contains(index_error({{"w", "C:\\a.safetensors"}}), "is an absolute path"));
  CHECK(contains(index_error({{"w", "a\\..\\b"}}), "backslash"));
  CHECK(contains(index_error({{"w", ""}}), "is empty"));
  CHECK(contains(index_error({{"w", 3}}), "must be a shard file name"));
  CHECK(contains(index_error(json::object()), "names no tensor"));
  CHECK(contains(index_error({{"not.there", "a.safetensors"}}), "puts tensor \"not.there\" in \"a.safetensors\", whose header does not hold it"));
  CHECK(contains(index_error({{"w", "b.safetensors"}}), "does not exist"));
  // The same tensor in two shards.
  memscale_test::write_safetensors(dir / "b.safetensors", shard_one);
  CHECK(contains(index_error({{"model.embed_tokens.weight", "a.safetensors"}, {"model.layers.0.input_layernorm.weight", "b.safetensors"}}),
                 "is stored in both"));
}

TEST_CASE("generic model: an unknown model_type with weights is estimated from its checkpoint", "[checkpoint][generic]") {
  const temp_folder dir("generic");
  write_sharded(dir, stored);
  const json config{{"model_type", "internlm9"}, {"hidden_size", 64},        {"num_hidden_layers", 1},
                    {"num_attention_heads", 4},  {"num_key_value_heads", 2}, {"intermediate_size", 128},
                    {"vocab_size", 1000},        {"hidden_act", "silu"},     {"tie_word_embeddings", false}};
  memscale_test::write_text(dir / "config.json", config.dump());
  const auto loaded = memscale::json_io::load_model_or_checkpoint(dir.path().string());
  REQUIRE(loaded.generic.has_value());
  const auto& g = *loaded.generic;
  CHECK(g.model_type == "internlm9");
  CHECK(contains(g.notes.front(), "activations estimated from a generic decoder: band +-35%"));
  CHECK(g.model.decoder.mlp == memscale::mlp_kind::swiglu);
  const memscale::training_spec run{.micro_batch = 2, .seq_len = 64, .prec = memscale::precision::amp_bf16};
  const memscale::estimate_result r = memscale::estimate(g.model, run);
  // Exact: the checkpoint's parameters, trained in fp32 under autocast.
  CHECK(r.parameter_count == all_params);
  CHECK(r.parameter_bytes == bytes{4 * all_params + buffer_bytes});
  CHECK(r.gradient_bytes == bytes{4 * all_params});
  CHECK(r.optimizer_bytes == bytes{8 * all_params});
  CHECK(r.steady.tensor == r.steady.breakdown.total());
  CHECK(r.steady.breakdown.parameters == r.parameter_bytes);
  CHECK(r.steady.breakdown.optimizer == r.optimizer_bytes);
  CHECK(memscale::band_of(memscale::generic_run_class, memscale::band_quantity::tensor).high == 0.35);
}

TEST_CASE("generic model: with a family's own shapes the checkpoint gives the family's exact state", "[checkpoint][generic][property]") {
  // A LLaMA of 2 layers written as its checkpoint would store it: the inventory's state must
  // equal the graph's for every optimizer and precision (orientation, vectors, copies).
  const json config{{"model_type", "llama"},      {"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 64},
                    {"num_hidden_layers", 2},     {"num_attention_heads", 4},              {"num_key_value_heads", 2},
                    {"intermediate_size", 160},   {"vocab_size", 1000},                    {"tie_word_embeddings", false}};
  const memscale::model_spec llama = memscale::json_io::model_from_hf_config(config);
  std::vector<fake_tensor> tensors{{"model.embed_tokens.weight", "BF16", {1000, 64}}, {"model.norm.weight", "BF16", {64}},
                                   {"lm_head.weight", "BF16", {1000, 64}}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const auto& [name, shape] : std::vector<std::pair<std::string, std::vector<std::uint64_t>>>{
             {"self_attn.q_proj.weight", {64, 64}}, {"self_attn.k_proj.weight", {32, 64}}, {"self_attn.v_proj.weight", {32, 64}},
             {"self_attn.o_proj.weight", {64, 64}}, {"mlp.gate_proj.weight", {160, 64}}, {"mlp.up_proj.weight", {160, 64}},
             {"mlp.down_proj.weight", {64, 160}}, {"input_layernorm.weight", {64}}, {"post_attention_layernorm.weight", {64}}})
      tensors.push_back({p + name, "BF16", shape});
  }
  const temp_folder dir("llama");
  memscale_test::write_safetensors(dir / "model.safetensors", tensors);
  const auto s = memscale::json_io::read_checkpoint(dir.path());
  REQUIRE(s.has_value());
  CHECK(memscale::parameter_elements(s->inventory) == memscale::parameter_count(llama));
  using memscale::optimizer_kind;
  using memscale::precision;
  for (const auto opt : {optimizer_kind::adamw, optimizer_kind::adamw_8bit, optimizer_kind::adafactor, optimizer_kind::sgd_momentum,
                         optimizer_kind::lion, optimizer_kind::sgd})
    for (const auto prec : {precision::fp32, precision::amp_bf16, precision::pure_bf16}) {
      const memscale::training_spec run{.micro_batch = 1, .seq_len = 32, .prec = prec, .optimizer = opt};
      const memscale::estimate_result family = memscale::estimate(llama, run);
      const memscale::checkpoint_state st = memscale::checkpoint_state_of(s->inventory, run);
      INFO(memscale::to_string(opt) << " " << memscale::to_string(prec));
      CHECK(st.parameter_bytes == family.parameter_bytes);
      CHECK(st.gradient_bytes == family.gradient_bytes);
      CHECK(st.optimizer_bytes == family.optimizer_bytes);
      // The generic path with the family's own decoder gives the family's peak (to rounding).
      const memscale::estimate_result generic = memscale::estimate(memscale::generic_model{.decoder = llama, .weights = s->inventory}, run);
      CHECK(generic.optimizer_bytes == family.optimizer_bytes);
      const auto diff = generic.steady.tensor.value > family.steady.tensor.value ? generic.steady.tensor.value - family.steady.tensor.value
                                                                                 : family.steady.tensor.value - generic.steady.tensor.value;
      CHECK(diff <= 8);
    }
}

TEST_CASE("generic model: without weights the refusal names the nearest family and a --run model object", "[checkpoint][generic]") {
  const temp_folder dir("refusal");
  const json vl{{"model_type", "qwen2_audio"},
                {"text_config", {{"hidden_size", 3584}, {"num_hidden_layers", 28}, {"num_attention_heads", 28},
                                 {"num_key_value_heads", 4}, {"intermediate_size", 18944}, {"vocab_size", 152064}}}};
  memscale_test::write_text(dir / "config.json", vl.dump());
  const std::string m = error_message([&] { (void)memscale::json_io::load_model_or_checkpoint(dir.path().string()); });
  CHECK(contains(m, "config.model_type \"qwen2_audio\" is not a model_type memscale reads (nearest supported: qwen2)"));
  CHECK(contains(m, "model.safetensors.index.json"));
  CHECK(contains(m, R"({"model": {"family": "llama", "layers": 28, "hidden": 3584, "heads": 28, "kv_heads": 4, "ffn": 18944, "vocab": 152064}})"));
  CHECK(m.find('\n') == std::string::npos);
  // The same refusal from the config object alone; a misspelling finds its family by edit distance.
  CHECK(contains(error_message([] { (void)memscale::json_io::model_from_hf_config(json{{"model_type", "olmo3"}}); }), "nearest supported: olmo2"));
  CHECK_FALSE(contains(error_message([] { (void)memscale::json_io::model_from_hf_config(json{{"model_type", "rwkv"}}); }), "nearest supported"));
  CHECK(contains(error_message([] { (void)memscale::json_io::model_from_hf_config(json{{"model_type", "rwkv"}}); }), "\"layers\": LAYERS"));
}

TEST_CASE("generic model: missing sizes and a quantization_config the headers contradict are errors", "[checkpoint][generic]") {
  const temp_folder dir("generic-errors");
  write_sharded(dir, stored);
  const auto s = memscale::json_io::read_checkpoint(dir.path());
  REQUIRE(s.has_value());
  const json no_layers{{"model_type", "newthing"}, {"hidden_size", 64}, {"num_attention_heads", 4}, {"intermediate_size", 128}, {"vocab_size", 1000}};
  CHECK(contains(error_message([&] { (void)memscale::json_io::generic_model_of(no_layers, *s); }),
                 "config.num_hidden_layers is required (or one of num_hidden_layers, n_layer, num_layers, n_layers, > 0)"));
  json quantized = no_layers;
  quantized["num_hidden_layers"] = 1;
  quantized["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}};
  CHECK(contains(error_message([&] { (void)memscale::json_io::generic_model_of(quantized, *s); }),
                 "names \"gptq\" but the checkpoint's headers hold no quantised tensor"));
}

TEST_CASE("checkpoint: a known model_type loads through its family reader", "[checkpoint][generic]") {
  const temp_folder dir("known");
  memscale_test::write_text(dir / "config.json", json{{"model_type", "gpt2"}}.dump());
  const auto loaded = memscale::json_io::load_model_or_checkpoint(dir.path().string());
  CHECK_FALSE(loaded.generic.has_value());
  CHECK(memscale::parameter_count(loaded.model) == 124'439'808ULL);
}

}  // namespace checkpoint_test
