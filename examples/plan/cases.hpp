// memscale-plan --cases: estimate every record of a ground-truth file
// (shared/ground-truth/SCHEMA.md) with json_io::estimate_record.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace memscale_plan {

// Reads `path` (a JSON array of record objects) and returns one answer per record, in
// input order: {"id","estimated_bytes","quantity"} or {"id","error"}. A record memscale
// cannot estimate is an answer, not a failure. Throws usage_error when the file cannot
// be read, is not valid JSON, is not an array, or holds something other than objects.
// A non-empty `stack_path` (--cases-stack) names a stack file whose entries are merged into
// the records first (json_io::with_stack); it must be a JSON array.
nlohmann::json run_cases(const std::string& path, const std::string& stack_path);

}  // namespace memscale_plan
