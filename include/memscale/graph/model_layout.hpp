// memscale/graph/model_layout.hpp: how a model's training step is laid out, the one reading
// of the model's architecture kind that decides which stacks build() writes.
#pragma once

#include <cstdint>

#include "memscale/model.hpp"

namespace memscale {

// One stack (decoder or encoder), or an encoder and a decoder with the tensors that cross
// between them.
enum class model_layout : std::uint8_t { one_stack, encoder_decoder };

constexpr model_layout layout_of(const model_spec& model) {
  return model.arch == architecture::encoder_decoder ? model_layout::encoder_decoder : model_layout::one_stack;
}

}  // namespace memscale
