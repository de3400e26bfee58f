// memscale/json.hpp: opt-in nlohmann_json adapter (target memscale::json).
//
// Reads model and run descriptions (ground-truth records as in
// shared/ground-truth/SCHEMA.md) and writes estimates. Unknown keys and unknown enum
// strings are errors that name the field and the value: nlohmann's own enum macro would
// silently map them to the first enumerator.
#pragma once

#include "memscale/json/checkpoint.hpp"  // IWYU pragma: export
#include "memscale/json/band_json.hpp"  // IWYU pragma: export
#include "memscale/json/device_report.hpp"  // IWYU pragma: export
#include "memscale/json/fields.hpp"   // IWYU pragma: export
#include "memscale/json/generic_model.hpp"  // IWYU pragma: export
#include "memscale/json/hf_config.hpp"  // IWYU pragma: export
#include "memscale/json/hf/t5.hpp"   // IWYU pragma: export
#include "memscale/json/inference.hpp"  // IWYU pragma: export
#include "memscale/json/read_file.hpp"  // IWYU pragma: export
#include "memscale/json/records.hpp"  // IWYU pragma: export
#include "memscale/json/record_stack.hpp"  // IWYU pragma: export
#include "memscale/json/parallel_record.hpp"  // IWYU pragma: export
#include "memscale/json/report.hpp"   // IWYU pragma: export
#include "memscale/json/run_document.hpp"  // IWYU pragma: export
#include "memscale/json/run_report.hpp"  // IWYU pragma: export
#include "memscale/json/run_settings.hpp"  // IWYU pragma: export
#include "memscale/json/software_stack.hpp"  // IWYU pragma: export
#include "memscale/json/vision_document.hpp"  // IWYU pragma: export
#include "memscale/json/vision_report.hpp"  // IWYU pragma: export
