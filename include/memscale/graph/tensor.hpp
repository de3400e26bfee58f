// memscale/graph/tensor.hpp: the handle a layer takes and returns: which op made a tensor,
// how many elements it has and their dtype.
//
// Passed by value (16 bytes, two registers), so a layer reads its input's size from the
// handle itself rather than from a side table indexed by op; the op index is what
// graph_builder::keep records.
#pragma once

#include <cstdint>

#include "memscale/dtype.hpp"

namespace memscale::graph_layers {

struct tensor {
  std::uint32_t op_index = 0;  // the op whose output this is (graph_capacity ops fit in 32 bits)
  dtype type = dtype::fp32;
  std::uint64_t elements = 0;
};

}  // namespace memscale::graph_layers
