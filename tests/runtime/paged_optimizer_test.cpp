// bitsandbytes' paged optimizers (run.paged_optimizer) and the 8-bit state's block size by
// bitsandbytes release (estimate/optimizer.hpp).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>

#include "error_capture.hpp"
#include "memscale/allocator/replay.hpp"
#include "memscale/memscale.hpp"

namespace paged_optimizer_test {
namespace {

using namespace memscale;
using memscale_test::contains;
using memscale_test::error_message;

training_spec paged_run(optimizer_kind o) {
  return {.micro_batch = 1, .seq_len = 256, .prec = precision::pure_bf16, .optimizer = o, .paged_optimizer = true};
}

TEST_CASE("paged optimizer: state of tensors from 1e5 elements leaves the device, the rest stays", "[optimizer][paged]") {
  const training_spec adamw = paged_run(optimizer_kind::adamw);
  // 32-bit: fp32 moments whatever the parameter dtype (get_state_buffer(p, dtype=torch.float32)),
  // no step tensor; a tensor under 1e5 elements keeps both on the device.
  CHECK(tensor_state_bytes(1, 99'999, adamw) == bytes{8 * 99'999});
  CHECK(paged_state_bytes(99'999, adamw) == bytes{});
  CHECK(tensor_state_bytes(1, 100'000, adamw) == bytes{});
  CHECK(paged_state_bytes(100'000, adamw) == bytes{800'000});
  // 8-bit: uint8 moments paged, the absmax blocks (256 values each from bitsandbytes 0.44) stay.
  const training_spec eight = paged_run(optimizer_kind::adamw_8bit);
  CHECK(tensor_state_bytes(4096, 4096, eight) == bytes{2 * 4 * (4096 * 4096 / 256)});
  CHECK(paged_state_bytes(4096 * 4096, eight) == bytes{2 * 4096 * 4096});
  // Lion keeps one moment.
  CHECK(paged_state_bytes(100'000, paged_run(optimizer_kind::lion)) == bytes{400'000});
  // bitsandbytes' kernels step each tensor in place: no step temporaries.
  CHECK(step_temporaries_of(100'000, 1'000'000, adamw) == bytes{});
}

TEST_CASE("paged optimizer: the estimate reports the unified memory beside its peaks", "[optimizer][paged]") {
  training_spec plain = paged_run(optimizer_kind::adamw_8bit);
  plain.paged_optimizer = false;
  const estimate_result on_device = estimate(presets::llama_2_7b, plain);
  const estimate_result paged = estimate(presets::llama_2_7b, paged_run(optimizer_kind::adamw_8bit));
  CHECK(on_device.paged_optimizer_bytes == bytes{});
  // What leaves the optimizer's bytes is what the paged figure holds: the same state, elsewhere.
  CHECK(paged.paged_optimizer_bytes.value > 0);
  CHECK(paged.optimizer_bytes + paged.paged_optimizer_bytes == on_device.optimizer_bytes);
  CHECK(paged.steady.tensor + paged.paged_optimizer_bytes == on_device.steady.tensor);
  // The allocator's stream leaves the paged moments out as well: its tensor peak is the estimate's.
  const model_graph g = build(presets::llama_2_7b, paged_run(optimizer_kind::adamw_8bit));
  const auto replayed = allocator::replay_training<16384, 16384, 16384>(g.stack(), g.run);
  const model_graph g_plain = build(presets::llama_2_7b, plain);
  const auto replayed_plain = allocator::replay_training<16384, 16384, 16384>(g_plain.stack(), g_plain.run);
  CHECK(replayed.requested_peak.value + paged.paged_optimizer_bytes.value == replayed_plain.requested_peak.value);
}

TEST_CASE("paged optimizer: what it does not apply to is refused by name", "[optimizer][paged]") {
  CHECK(contains(error_message([] { estimate(presets::gpt2, paged_run(optimizer_kind::sgd_momentum)); }),
                 "run.paged_optimizer needs optimizer adam, adamw, adamw_8bit or lion"));
  CHECK(contains(error_message([] { estimate(presets::gpt2, paged_run(optimizer_kind::sgd_momentum)); }),
                 "(got sgd_momentum)"));
  training_spec offloaded = paged_run(optimizer_kind::adamw);
  offloaded.offload_optimizer = true;
  CHECK(contains(error_message([&] { estimate(presets::gpt2, offloaded); }), "run.paged_optimizer is modelled on one"));
}

TEST_CASE("8-bit state: one absmax per 2048 values before bitsandbytes 0.44, per 256 from it", "[optimizer]") {
  training_spec run{.optimizer = optimizer_kind::adamw_8bit};
  run.bitsandbytes_version = 4302;
  CHECK(tensor_state_bytes(4096, 4096, run) == bytes{2 * 4096 * 4096 + 2 * 4 * (4096 * 4096 / 2048)});
  run.bitsandbytes_version = 4400;
  CHECK(tensor_state_bytes(4096, 4096, run) == bytes{2 * 4096 * 4096 + 2 * 4 * (4096 * 4096 / 256)});
}

}  // namespace
}  // namespace paged_optimizer_test
