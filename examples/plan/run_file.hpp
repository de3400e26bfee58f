// memscale-plan --run FILE: a whole run (model, training settings, GPU) as one JSON
// document, and the same document written back by --json (docs/run-json.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "args.hpp"
#include "memscale/json/run_document.hpp"

namespace memscale_plan {

// Reads `path` into `o` (model, run, GPU, headroom). Also accepts a ground-truth record
// ({"model": {...}, "train": {...}}, tests/data/ground-truth/SCHEMA.md). Throws usage_error,
// one line naming the file and the field.
void read_run_file(const std::string& path, options& o);

// Reads the run document `doc` (see read_run_file); errors name `source`.
void read_run_document(const nlohmann::json& doc, const std::string& source, options& o);

// The run-document view of the options (model, run, GPU, headroom, LoRA alpha).
memscale::json_io::run_input run_input_of(const options& o);

// The input part of the --json output: "model", "run", and with a GPU "gpu" and "headroom".
nlohmann::json run_document(const options& o);

// The whole text of a regular file of at most 64 MiB (json_io::read_input_file); throws
// memscale::error naming `option` and the path.
std::string read_text_file(const std::string& option, const std::string& path);

}  // namespace memscale_plan
