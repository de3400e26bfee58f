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
nlohmann::json run_cases(const std::string& path);

}  // namespace memscale_plan
