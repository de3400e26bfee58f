// The graphs written from the shared layers (graph/recipes/) are the graphs of the builders
// they replace (build_graph, build_encoder_decoder_graph), op for op and field for field,
// and both refuse the same input with the same error. Random (model, run) pairs: every
// preset and every config in tests/data/hf_configs, each as it is or with some of its
// features switched, under random runs (precisions, optimizers, checkpointing, attention
// kinds, LoRA / QLoRA / DoRA / rsLoRA on any targets including the head and the router,
// chunked loss, devices, framework versions, dropout) and some invalid or overflowing ones.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "memscale/encoder_decoder.hpp"
#include "memscale/graph/recipes/decoder_stack.hpp"
#include "memscale/graph/recipes/encoder_decoder.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace {

using namespace memscale;

// ---- comparison (constexpr: also used in constant evaluation below) -------------------

// The first field in which two ops differ, or nullptr. The bindings stop compiling when op
// gains or loses a member, so no field can be left out.
constexpr const char* first_difference(const op& a, const op& b) {
  const auto& [kind, selective, transient, weight, bias, role, frozen, borrows, grad_exists, released, out, extra, fwd,
               bwd, grad_in, grad_out] = a;
  const auto& [b_kind, b_selective, b_transient, b_weight, b_bias, b_role, b_frozen, b_borrows, b_grad_exists,
               b_released, b_out, b_extra, b_fwd, b_bwd, b_grad_in, b_grad_out] = b;
  const auto same_tensor = [](const param_tensor& x, const param_tensor& y) {
    return x.rows == y.rows && x.cols == y.cols && x.count == y.count;
  };
  if (kind != b_kind) return "kind";
  if (selective != b_selective) return "recomputed_by_selective";
  if (transient != b_transient) return "transient";
  if (!same_tensor(weight, b_weight)) return "weight";
  if (!same_tensor(bias, b_bias)) return "bias";
  if (role != b_role) return "role";
  if (frozen != b_frozen) return "frozen";
  if (borrows != b_borrows) return "borrows_weight";
  if (grad_exists != b_grad_exists) return "weight_grad_exists";
  if (released != b_released) return "released_by";
  if (out != b_out) return "out";
  if (extra != b_extra) return "extra_saved";
  if (fwd != b_fwd) return "fwd_temp";
  if (bwd != b_bwd) return "bwd_temp";
  if (grad_in != b_grad_in) return "grad_in";
  if (grad_out != b_grad_out) return "grad_out";
  return nullptr;
}

struct graph_difference {
  const char* field = nullptr;  // nullptr: identical
  std::size_t op_index = 0;     // for an op field
};

constexpr graph_difference first_difference(const graph& a, const graph& b) {
  const auto& [a_ops, a_size, a_begin, a_end, a_repeats, a_inputs, a_buffers, a_stream_grad, a_carried, a_held] = a;
  const auto& [b_ops, b_size, b_begin, b_end, b_repeats, b_inputs, b_buffers, b_stream_grad, b_carried, b_held] = b;
  if (a_size != b_size) return {"size"};
  for (std::size_t i = 0; i < a_size; ++i)
    if (const char* field = first_difference(a_ops[i], b_ops[i])) return {field, i};
  if (a_begin != b_begin) return {"block_begin"};
  if (a_end != b_end) return {"block_end"};
  if (a_repeats != b_repeats) return {"block_repeats"};
  if (a_inputs != b_inputs) return {"inputs"};
  if (a_buffers != b_buffers) return {"buffers"};
  if (a_stream_grad != b_stream_grad) return {"stream_grad"};
  if (a_carried != b_carried) return {"carried"};
  if (a_held != b_held) return {"held"};
  return {};
}

constexpr graph_difference first_difference(const encoder_decoder_graph& a, const encoder_decoder_graph& b) {
  const auto& [a_encoder, a_decoder, a_output, a_saved, a_output_grad, a_encoder_held, a_decoder_held,
               a_encoder_bias_grad, a_decoder_bias_grad, a_cache] = a;
  const auto& [b_encoder, b_decoder, b_output, b_saved, b_output_grad, b_encoder_held, b_decoder_held,
               b_encoder_bias_grad, b_decoder_bias_grad, b_cache] = b;
  if (const auto d = first_difference(a_encoder, b_encoder); d.field) return {d.field, d.op_index};
  if (const auto d = first_difference(a_decoder, b_decoder); d.field) return {d.field, d.op_index + 1000};
  if (a_output != b_output) return {"encoder_output"};
  if (a_saved != b_saved) return {"encoder_output_saved"};
  if (a_output_grad != b_output_grad) return {"encoder_output_grad"};
  if (a_encoder_held != b_encoder_held) return {"encoder_held"};
  if (a_decoder_held != b_decoder_held) return {"decoder_held"};
  if (a_encoder_bias_grad != b_encoder_bias_grad) return {"encoder_bias_grad"};
  if (a_decoder_bias_grad != b_decoder_bias_grad) return {"decoder_bias_grad"};
  if (a_cache != b_cache) return {"decoder_cache"};
  return {};
}

constexpr bool same_decoder_stack(const model_spec& model, const training_spec& run) {
  const graph old_graph = build_graph(model, run);
  const graph new_graph = recipes::build_decoder_stack(model, run);
  return first_difference(old_graph, new_graph).field == nullptr;
}

constexpr bool same_encoder_decoder(const model_spec& model, const training_spec& run) {
  return first_difference(build_encoder_decoder_graph(model, run), recipes::build_encoder_decoder(model, run)).field ==
         nullptr;
}

// The new builders run in constant evaluation and agree with the old ones there too.
constexpr training_spec amp_bf16_run{.micro_batch = 2, .seq_len = 256, .prec = precision::amp_bf16};
constexpr training_spec qlora_run{.micro_batch = 1,
                                  .seq_len = 512,
                                  .prec = precision::pure_bf16,
                                  .target = training_target::qlora,
                                  .lora_rank = 16,
                                  .lora_targets = lora_all_linear | lora_target::head};
static_assert(recipes::build_decoder_stack(presets::llama_2_7b, amp_bf16_run).size == 31);
static_assert(same_decoder_stack(presets::gpt2, amp_bf16_run));
static_assert(same_decoder_stack(presets::mixtral_8x7b, qlora_run));
static_assert(same_encoder_decoder(presets::flan_t5_base, amp_bf16_run));

// ---- the random pairs -----------------------------------------------------------------

struct rng_picker {
  std::mt19937_64 engine;
  std::uint64_t operator()(std::uint64_t n) { return engine() % n; }
  bool chance(std::uint64_t one_in) { return engine() % one_in == 0; }
};

std::vector<model_spec> base_models() {
  std::vector<model_spec> models(presets::all.begin(), presets::all.end());
  const std::filesystem::path dir = std::filesystem::path(MEMSCALE_SOURCE_DIR) / "tests/data/hf_configs";
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());  // directory order is not stable across file systems
  for (const auto& file : files) models.push_back(json_io::load_hf_model(file.string()));
  return models;
}

// Switches one feature of `m`; some switches make an invalid model, which both builders
// must refuse alike.
void mutate(model_spec& m, rng_picker& pick) {
  switch (pick(30)) {
    case 0: m.impl = m.impl == implementation::litgpt ? implementation::hf_transformers : implementation::litgpt; break;
    case 1: m.dropout = !m.dropout; break;
    case 2: m.fused_qkv = !m.fused_qkv; break;
    case 3: m.attention_keeps_locals = !m.attention_keeps_locals; break;
    case 4: m.attention_softcap = !m.attention_softcap; break;
    case 5: m.logit_softcap = !m.logit_softcap; break;
    case 6: m.qk_norm = static_cast<qk_norm_kind>(pick(3)); break;
    case 7: m.block_norms = static_cast<branch_norms>(pick(3)); break;
    case 8:
      m.shift_labels = pick(2) == 0;
      m.upcast_logits = pick(2) == 0;
      m.softmax_fp32 = pick(2) == 0;
      break;
    case 9: m.scale_embeddings = !m.scale_embeddings; break;
    case 10: m.builds_attention_mask = !m.builds_attention_mask; break;
    case 11: m.alibi = !m.alibi; break;
    case 12: m.head = static_cast<head_kind>(pick(4)); break;
    case 13: m.tied_embeddings = !m.tied_embeddings; break;
    case 14:
      m.norm = static_cast<norm_kind>(pick(2));
      m.norm_bias = pick(2) == 0;
      break;
    case 15: m.mlp = static_cast<mlp_kind>(pick(5)); break;
    case 16:
      m.layout = static_cast<block_layout>(pick(3));
      m.shared_attention_norm = pick(2) == 0;
      break;
    case 17: m.extra_norms_per_block = pick(3); break;
    case 18:
      if (m.experts == 0) {
        m.experts = 4 + pick(5);
        m.experts_per_token = 1 + pick(3);
      } else {
        m.shared_expert_ffn = m.ffn / 2 + 1;
        m.shared_expert_gate = pick(2) == 0;
      }
      break;
    case 19: m.kv_heads = m.heads % 2 == 0 ? m.heads / 2 : 1; break;
    case 20: m.positions = static_cast<position_kind>(pick(3)); break;
    case 21:
      m.type_vocab = pick(2) * 2;
      m.embedding_norm = pick(2) == 0;
      m.final_norm = pick(2) == 0;
      m.pooler = pick(2) == 0;
      break;
    case 22: m.arch = static_cast<architecture>(pick(3)); break;
    case 23:
      m.qkv_bias = pick(2) == 0;
      m.attn_out_bias = pick(2) == 0;
      m.mlp_bias = pick(2) == 0;
      m.lm_head_bias = pick(2) == 0;
      break;
    case 24: m.head_dim = m.heads == 0 ? 0 : 2 * (m.hidden / m.heads); break;
    case 25: m.buffer_bytes_per_layer = pick(2) * 1024 * 1024; break;
    case 26: m.num_labels = pick(6); break;
    case 27: m.relative_attention_buckets = pick(2) * 32; break;
    case 28: m.decoder_layers = pick(5); break;
    default: m.max_positions = m.max_positions == 0 ? 2048 : 0; break;
  }
}

training_spec random_run(rng_picker& pick) {
  training_spec r{};
  r.micro_batch = 1 + pick(16);
  r.seq_len = 16 * (1 + pick(pick.chance(4) ? 256 : 32));  // mostly within every model's context
  r.prec = static_cast<precision>(pick(5));
  r.optimizer = static_cast<optimizer_kind>(pick(7));
  r.optimizer_impl = static_cast<optimizer_implementation>(pick(3));
  r.grad_accum = 1 + pick(4);
  r.ckpt = static_cast<checkpointing>(pick(3));
  r.attention = static_cast<attention_impl>(pick(4));
  r.target = static_cast<training_target>(pick(3));
  if (is_lora(r)) {
    r.lora_rank = 1 + pick(128);
    r.lora_targets = static_cast<lora_modules>(1 + pick(511));  // every flag up to head and router
    r.lora_kind = static_cast<lora_variant>(pick(3));
    r.lora_dropout = pick(2) == 0;
    r.quant = static_cast<base_quant>(pick(2));
  }
  r.adapters = static_cast<adapter_dtype>(pick(3));
  r.dropout = pick(2) == 0;
  r.loss = static_cast<loss_impl>(pick(2));
  r.loss_chunk = pick.chance(3) ? 1 + pick(8192) : 128;
  r.device = pick.chance(4) ? device_kind::cpu : device_kind::cuda;
  constexpr std::array<std::uint32_t, 5> torch{113, 200, 205, 211, 212};
  constexpr std::array<std::uint32_t, 6> transformers{0, 440, 448, 451, 500, 517};
  constexpr std::array<std::uint32_t, 4> bitsandbytes{4200, 4301, 4302, 4902};
  r.torch_version = torch[pick(torch.size())];
  r.transformers_version = transformers[pick(transformers.size())];
  r.bitsandbytes_version = bitsandbytes[pick(bitsandbytes.size())];
  r.target_len = pick.chance(3) ? 16 * (1 + pick(64)) : 0;
  r.offload_optimizer = pick.chance(4);
  r.offload_activations = pick.chance(4);
  r.zero_grad_to_none = pick(2) == 0;
  if (pick.chance(20)) {
    // Invalid or overflowing: both builders must refuse it with the same error.
    switch (pick(9)) {
      case 0: r.micro_batch = 0; break;
      case 1: r.seq_len = 0; break;
      case 2: r.lora_rank = is_lora(r) ? 0 : 8; break;
      case 3: r.lora_targets = 0; r.target = training_target::lora; r.lora_rank = 4; break;
      case 4: r.seq_len = std::uint64_t{1} << (20 + pick(24)); break;           // past a context, or s^2 overflows
      case 5:  // a product of sizes overflows somewhere: tokens, scores, logits, masks
        r.micro_batch = std::uint64_t{1} << (10 + pick(50));
        r.seq_len = std::uint64_t{1} << pick(34);
        break;
      case 6: r.loss = loss_impl::chunked; r.loss_chunk = 0; break;
      case 7: r.grad_accum = 0; break;
      default: r.shard = sharding::full; r.data_parallel = 1; break;
    }
  }
  return r;
}

std::string describe(const model_spec& m, const training_spec& r) {
  std::ostringstream s;
  s << m.name << " arch " << int(m.arch) << " impl " << int(m.impl) << " | b " << r.micro_batch << " s " << r.seq_len
    << " prec " << int(r.prec) << " ckpt " << int(r.ckpt) << " attn " << int(r.attention) << " target "
    << int(r.target) << " rank " << r.lora_rank << " targets " << r.lora_targets << " kind " << int(r.lora_kind)
    << " adapters " << int(r.adapters) << " loss " << int(r.loss) << " chunk " << r.loss_chunk << " device "
    << int(r.device) << " torch " << r.torch_version << " tf " << r.transformers_version << " bnb "
    << r.bitsandbytes_version;
  return s.str();
}

// A builder's answer: its result, or the error it raised (message and code).
template <class Graph>
struct outcome {
  std::optional<Graph> result;
  std::string error;
  int code = -1;
};

template <class Build>
auto run_builder(Build build) -> outcome<decltype(build())> {
  outcome<decltype(build())> o;
  try {
    o.result.emplace(build());
  } catch (const memscale::error& e) {
    o.error = e.what();
    o.code = static_cast<int>(e.code());
  } catch (const std::exception& e) {
    o.error = std::string("std::exception: ") + e.what();
  }
  return o;
}

// Whether both builders gave the same graph or the same error; says what differs otherwise.
template <class Graph>
bool same_outcome(const outcome<Graph>& old_outcome, const outcome<Graph>& new_outcome, std::string& why) {
  if (old_outcome.result.has_value() != new_outcome.result.has_value()) {
    why = "one built, the other failed: old '" + old_outcome.error + "', new '" + new_outcome.error + "'";
    return false;
  }
  if (!old_outcome.result) {
    if (old_outcome.error == new_outcome.error && old_outcome.code == new_outcome.code) return true;
    why = "errors differ: old '" + old_outcome.error + "', new '" + new_outcome.error + "'";
    return false;
  }
  const graph_difference d = first_difference(*old_outcome.result, *new_outcome.result);
  if (d.field == nullptr) return true;
  why = std::string("graphs differ in ") + d.field + " (op " + std::to_string(d.op_index) + ")";
  return false;
}

// What the random pairs reached, so a generator that stops reaching a feature fails.
struct coverage {
  int built = 0, refused = 0, overflowed = 0, encoder_decoder_built = 0, encoder_decoder_refused = 0;
  int litgpt = 0, lora = 0, qlora = 0, dora = 0, rslora = 0, head_adapter = 0, router_adapter = 0;
  int chunked = 0, cpu = 0, old_torch = 0, sdpa_gqa = 0, old_bnb = 0, fp32_adapters = 0, dropout = 0;
  int moe = 0, softcap = 0, frame_locals = 0, fused_litgpt_lora = 0, post_norm = 0, parallel = 0;
  int masked_lm = 0, classification = 0, bare = 0;
};

void count(coverage& c, const model_spec& m, const training_spec& r) {
  c.litgpt += m.impl == implementation::litgpt;
  c.lora += r.target == training_target::lora;
  c.qlora += r.target == training_target::qlora;
  c.dora += is_lora(r) && r.lora_kind == lora_variant::dora;
  c.rslora += is_lora(r) && r.lora_kind == lora_variant::rslora;
  c.head_adapter += is_lora(r) && has(r.lora_targets, lora_target::head);
  c.router_adapter += is_lora(r) && m.experts > 0 && has(r.lora_targets, lora_target::router);
  c.chunked += r.loss == loss_impl::chunked;
  c.cpu += r.device == device_kind::cpu;
  c.old_torch += r.torch_version < 200;
  c.sdpa_gqa += kv_heads_of(m) != m.heads && r.transformers_version >= 500 && r.attention == attention_impl::flash;
  c.old_bnb += r.target == training_target::qlora && r.bitsandbytes_version < bnb_drops_matmul_input;
  c.fp32_adapters += is_lora(r) && r.adapters == adapter_dtype::fp32;
  c.dropout += r.dropout && m.dropout;
  c.moe += m.experts > 0;
  c.softcap += m.attention_softcap || m.logit_softcap;
  c.frame_locals += m.attention_keeps_locals;
  c.fused_litgpt_lora += m.fused_qkv && m.impl == implementation::litgpt && is_lora(r);
  c.post_norm += m.layout == block_layout::post_norm;
  c.parallel += m.layout == block_layout::parallel;
  c.masked_lm += m.head == head_kind::masked_lm;
  c.classification += m.head == head_kind::sequence_classification;
  c.bare += m.head == head_kind::none;
}

}  // namespace

TEST_CASE("graph layers: the recipes build the old builders' graphs and errors", "[graph][equivalence]") {
  const std::vector<model_spec> models = base_models();
  REQUIRE(models.size() >= presets::all.size() + 33);  // every preset and every config file
  rng_picker pick{std::mt19937_64{20261125}};
  coverage c;
  constexpr int pairs = 40'000;
  int failures = 0;
  for (int i = 0; i < pairs && failures < 5; ++i) {
    model_spec model = models[pick(models.size())];
    if (pick.chance(6)) model.impl = implementation::litgpt;
    if (pick(2) == 0) {
      const auto switches = 1 + pick(4);
      for (std::uint64_t s = 0; s < switches; ++s) mutate(model, pick);
    }
    training_spec run = random_run(pick);
    if (model.arch == architecture::encoder_decoder && pick(2) == 0 && run.lora_rank != 0) {
      // T5 refuses adapters: half its pairs train every weight, so that it builds.
      run.target = training_target::full;
      run.lora_rank = 0;
    }
    if (pick(2) == 0) run = with_resolved_adapters(model, run);
    count(c, model, run);

    std::string why;
    const auto old_stack = run_builder([&] { return build_graph(model, run); });
    const auto new_stack = run_builder([&] { return recipes::build_decoder_stack(model, run); });
    const bool stack_same = same_outcome(old_stack, new_stack, why);
    if (!stack_same) {
      ++failures;
      FAIL_CHECK("decoder stack, pair " << i << ": " << describe(model, run) << ": " << why);
    }
    if (old_stack.result) ++c.built;
    else ++c.refused;
    if (old_stack.code == static_cast<int>(error_code::overflow)) ++c.overflowed;

    const auto old_pair = run_builder([&] { return build_encoder_decoder_graph(model, run); });
    const auto new_pair = run_builder([&] { return recipes::build_encoder_decoder(model, run); });
    if (!same_outcome(old_pair, new_pair, why)) {
      ++failures;
      FAIL_CHECK("encoder-decoder, pair " << i << ": " << describe(model, run) << ": " << why);
    }
    if (old_pair.result) ++c.encoder_decoder_built;
    else ++c.encoder_decoder_refused;
  }
  CHECK(failures == 0);
  // Each feature was reached often enough to mean something.
  CHECK(c.built > 20'000);
  CHECK(c.refused > 1'000);
  CHECK(c.overflowed > 25);  // the next test case walks every product past 2^64 in turn
  CHECK(c.encoder_decoder_built > 1'000);
  CHECK(c.encoder_decoder_refused > 1'000);
  for (const int reached : {c.litgpt, c.lora, c.qlora, c.dora, c.rslora, c.head_adapter, c.router_adapter, c.chunked,
                            c.cpu, c.old_torch, c.sdpa_gqa, c.old_bnb, c.fp32_adapters, c.dropout, c.moe, c.softcap,
                            c.frame_locals, c.fused_litgpt_lora, c.post_norm, c.parallel, c.masked_lm,
                            c.classification, c.bare})
    CHECK(reached > 100);
}

TEST_CASE("graph layers: every model overflows at the same product, named the same way", "[graph][equivalence]") {
  // Sizes 2^k and 3 x 2^k walk each product of sizes (tokens, scores, logits, masks, the
  // decoder's cache) past 2^64 in turn, so each overflow check is the first to fail somewhere.
  std::vector<std::uint64_t> sizes;
  for (unsigned k = 0; k < 64; ++k) {
    sizes.push_back(std::uint64_t{1} << k);
    if (k < 62) sizes.push_back(std::uint64_t{3} << k);
  }
  int overflows = 0;
  int failures = 0;
  for (const model_spec& model : base_models()) {
    for (const precision prec : {precision::fp32, precision::amp_bf16, precision::pure_bf16}) {
      for (const std::uint64_t size : sizes) {
        const std::uint64_t root = std::uint64_t{1} << (std::bit_width(size) / 2);
        const training_spec runs[] = {{.micro_batch = size, .seq_len = 1, .prec = prec},
                                      {.micro_batch = 1, .seq_len = size, .prec = prec},
                                      {.micro_batch = size, .seq_len = root, .prec = prec}};
        for (const training_spec& run : runs) {
          std::string why;
          const auto old_stack = run_builder([&] { return build_graph(model, run); });
          if (!same_outcome(old_stack, run_builder([&] { return recipes::build_decoder_stack(model, run); }), why) &&
              ++failures < 5)
            FAIL_CHECK("decoder stack: " << describe(model, run) << ": " << why);
          const auto old_pair = run_builder([&] { return build_encoder_decoder_graph(model, run); });
          if (!same_outcome(old_pair, run_builder([&] { return recipes::build_encoder_decoder(model, run); }), why) &&
              ++failures < 5)
            FAIL_CHECK("encoder-decoder: " << describe(model, run) << ": " << why);
          overflows += old_stack.code == static_cast<int>(error_code::overflow);
          overflows += old_pair.code == static_cast<int>(error_code::overflow);
        }
      }
    }
  }
  CHECK(failures == 0);
  CHECK(overflows > 5'000);
}
