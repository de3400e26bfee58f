// memscale/json/checkpoint.hpp: a model's stored tensors, summed up from safetensors headers.
//
//   read_safetensors_index("model.safetensors.index.json")  weight_map + every shard's header
//   read_checkpoint("DIR")    the index, model.safetensors, or the one *.safetensors file of a
//                             model directory (a Hub cache snapshot is one); nullopt when it
//                             holds none
//
// The summary counts tensors, elements and bytes per dtype and per role (parameter,
// quantised storage, buffer, metadata: json/checkpoint_roles.hpp) into a weights_inventory,
// the core's view of a checkpoint (memscale/weights_inventory.hpp).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "memscale/error.hpp"
#include "memscale/json/checkpoint_roles.hpp"
#include "memscale/json/fields.hpp"
#include "memscale/json/safetensors.hpp"
#include "memscale/weights_inventory.hpp"

namespace memscale::json_io {

struct checkpoint_summary {
  std::vector<std::string> files;          // the safetensors files read, in order
  std::uint64_t header_bytes = 0;          // header bytes read in all (the only bytes read)
  weights_inventory inventory;             // per role and dtype; parameter shapes
  std::array<dtype_tally, quant_part_count> quantized_parts{};  // quantised storage by part
  std::optional<std::uint64_t> index_total_size;  // the index's metadata.total_size
  std::vector<std::string> notes;          // what the reader noticed, one sentence each
};

namespace detail {

// Adds one header's tensors to `s`, classified by `roles`.
inline void add_header(checkpoint_summary& s, const safetensors_header& h, const tensor_classifier& roles) {
  s.files.push_back(h.file);
  s.header_bytes = memscale::detail::checked_add(s.header_bytes, h.header_bytes);
  for (const auto& t : h.tensors) {
    const tensor_class c = roles.classify(t.name, t.type, t.shape);
    add_tensor(s.inventory, c.role, t.type, t.shape);
    if (c.role != tensor_role::quantized) continue;
    const tensor_size size = size_of_tensor(t.type, t.shape);
    dtype_tally& part = s.quantized_parts[static_cast<std::size_t>(c.part)];
    part.tensors = memscale::detail::checked_add(part.tensors, 1);
    part.elements = memscale::detail::checked_add(part.elements, size.elements);
    part.stored += size.stored;
  }
}

// Notes every reader of the summary should see: buffers saved with the weights.
inline void note_buffers(checkpoint_summary& s) {
  const dtype_tally buffers = total(s.inventory, tensor_role::buffer);
  if (buffers.tensors > 0)
    s.notes.push_back("the checkpoint stores " + std::to_string(buffers.tensors) + " buffers (" +
                      std::to_string(buffers.stored.value) +
                      " bytes: rotary inv_freq, causal masks, position ids, ...): counted as stored, not as parameters");
}

inline checkpoint_summary summarize(const std::vector<safetensors_header>& headers) {
  std::vector<std::string_view> names;
  for (const auto& h : headers)
    for (const auto& t : h.tensors) names.push_back(t.name);
  const tensor_classifier roles(names);
  checkpoint_summary s{};
  for (const auto& h : headers) add_header(s, h, roles);
  compact(s.inventory);
  note_buffers(s);
  return s;
}

// A shard named by an index: a relative path below the index's folder. Absolute paths,
// "..", "." and empty components, backslashes and NUL are refused, so an index cannot make
// memscale read a file outside the model directory.
inline void check_shard_name(const std::string& index, const std::string& tensor, const std::string& shard) {
  const auto refuse = [&](const std::string& why) {
    throw error(error_code::invalid_model, "safetensors index " + memscale::detail::quoted_path(index) + ": weight_map[" + memscale::detail::quoted(tensor) +
                                               "] = " + memscale::detail::quoted(shard) + " " + why);
  };
  if (shard.empty()) refuse("is empty; it must name a shard file beside the index");
  if (shard.front() == '/' || (shard.size() > 1 && shard[1] == ':'))
    refuse("is an absolute path; it must name a shard file beside the index");
  if (shard.find('\\') != std::string::npos || shard.find('\0') != std::string::npos)
    refuse("holds a backslash or NUL; it must name a shard file beside the index");
  std::size_t start = 0;
  while (start <= shard.size()) {
    const auto slash = shard.find('/', start);
    const std::string part = shard.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == "..")
      refuse("leaves the model directory or has an empty path component; it must name a shard file beside the index");
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
}

}  // namespace detail

// The tensors of a sharded checkpoint: the index's weight_map (tensor -> shard file, beside
// the index) and each shard's header. Every tensor the weight_map names must be in its
// shard, and no tensor in two shards. metadata.total_size is compared with the bytes the
// headers hold: huggingface_hub (serialization/_base.py @ ee0a4510,
// split_state_dict_into_shards_factory) adds up every saved tensor's storage size, buffers
// included (Llama-2-7b: 13,476,839,424 = 6,738,415,616 parameters x 2 bytes + 32 fp32
// inv_freq tensors of 64), but a storage larger than its tensor (a saved view) counts whole,
// and other writers count differently, while no loader reads the figure: a mismatch is a
// note, not an error.
inline checkpoint_summary read_safetensors_index(const std::filesystem::path& index) {
  const std::string name = index.string();
  const std::uint64_t size = detail::regular_file_size(index, "safetensors index");
  if (size > max_safetensors_index)
    bad_field(error_code::invalid_model, "safetensors index", name,
              "is " + std::to_string(size) + " bytes, above the " + std::to_string(max_safetensors_index) + "-byte limit");
  const json doc = parse_document(detail::read_start(index, size, "safetensors index"), "safetensors index " + memscale::detail::quoted_path(name));
  const std::string where = "safetensors index " + memscale::detail::quoted_path(name);
  if (!doc.is_object()) bad_field(error_code::invalid_model, where, doc, "must be a JSON object");
  if (!doc.contains("weight_map") || !doc.at("weight_map").is_object())
    bad_field(error_code::invalid_model, where + ": weight_map", doc.value("weight_map", json()), "must be an object of tensor -> shard file");
  std::optional<std::uint64_t> total_size;
  if (doc.contains("metadata") && !doc.at("metadata").is_null()) {
    const json& meta = doc.at("metadata");
    if (!meta.is_object()) bad_field(error_code::invalid_model, where + ": metadata", meta, "must be an object");
    if (meta.contains("total_size") && !meta.at("total_size").is_null()) {
      total_size = detail::whole_number(meta.at("total_size"));
      if (!total_size) bad_field(error_code::invalid_model, where + ": metadata.total_size", meta.at("total_size"), "must be a non-negative integer");
    }
  }
  std::map<std::string, std::vector<std::string>> by_shard;  // shard -> tensors the index puts there
  for (const auto& item : doc.at("weight_map").items()) {
    if (!item.value().is_string())
      bad_field(error_code::invalid_model, where + ": weight_map[" + memscale::detail::quoted(item.key()) + "]", item.value(), "must be a shard file name");
    const std::string shard = item.value().get<std::string>();
    detail::check_shard_name(name, item.key(), shard);
    by_shard[shard].push_back(item.key());
  }
  if (by_shard.empty()) bad_field(error_code::invalid_model, where + ": weight_map", doc.at("weight_map"), "names no tensor");
  const std::filesystem::path folder = index.parent_path();
  std::vector<safetensors_header> headers;
  std::map<std::string, std::string> stored_in;  // tensor -> the shard whose header holds it
  std::uint64_t unlisted = 0;
  for (const auto& [shard, tensors] : by_shard) {
    headers.push_back(read_safetensors_header(folder / shard));
    std::set<std::string_view> held;
    for (const auto& t : headers.back().tensors) {
      held.insert(t.name);
      const auto [at, fresh] = stored_in.emplace(t.name, shard);
      if (!fresh)
        throw error(error_code::invalid_model, where + ": tensor " + memscale::detail::quoted(t.name) + " is stored in both " +
                                                   memscale::detail::quoted(at->second) + " and " + memscale::detail::quoted(shard));
    }
    for (const auto& t : tensors)
      if (held.count(t) == 0)
        throw error(error_code::invalid_model, where + ": weight_map puts tensor " + memscale::detail::quoted(t) + " in " +
                                                   memscale::detail::quoted(shard) + ", whose header does not hold it");
    unlisted += headers.back().tensors.size() - tensors.size();
  }
  checkpoint_summary s = detail::summarize(headers);
  s.index_total_size = total_size;
  if (unlisted > 0)
    s.notes.push_back(std::to_string(unlisted) + " tensors of the shards are not in the weight_map (counted: the loader reads whole shards)");
  const bytes stored = stored_bytes(s.inventory);
  if (total_size && *total_size != stored.value)
    s.notes.push_back("metadata.total_size says " + std::to_string(*total_size) + " bytes, the headers hold " +
                      std::to_string(stored.value) + " (the headers are used)");
  return s;
}

// One safetensors file's tensors.
inline checkpoint_summary read_safetensors_file(const std::filesystem::path& file) {
  return detail::summarize({read_safetensors_header(file)});
}

// The checkpoint of a model directory, a safetensors file or an index: an index
// (*.safetensors.index.json, model.safetensors.index.json first) wins, then
// model.safetensors, then a single *.safetensors file; several unindexed files are an
// error (they may be alternatives, as Mistral's consolidated.safetensors beside the
// shards). nullopt when the directory holds no safetensors file.
inline std::optional<checkpoint_summary> read_checkpoint(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string name = path.filename().string();
  if (fs::is_regular_file(path, ec)) {
    if (detail::ends_with(name, ".safetensors.index.json")) return read_safetensors_index(path);
    if (detail::ends_with(name, ".safetensors")) return read_safetensors_file(path);
    bad_path(error_code::invalid_model, "checkpoint", path.string(), "is neither a *.safetensors file nor a *.safetensors.index.json index");
  }
  if (!fs::is_directory(path, ec)) bad_path(error_code::invalid_model, "checkpoint", path.string(), "is neither a file nor a directory");
  if (fs::is_regular_file(path / "model.safetensors.index.json", ec)) return read_safetensors_index(path / "model.safetensors.index.json");
  if (fs::is_regular_file(path / "model.safetensors", ec)) return read_safetensors_file(path / "model.safetensors");
  std::vector<fs::path> indexes;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string entry = it->path().filename().string();
    if (!fs::is_regular_file(it->path(), ec)) continue;
    if (detail::ends_with(entry, ".safetensors.index.json")) indexes.push_back(it->path());
    else if (detail::ends_with(entry, ".safetensors")) files.push_back(it->path());
  }
  const auto listing = [](std::vector<fs::path> v) {
    std::sort(v.begin(), v.end());
    std::string s;
    for (std::size_t i = 0; i < v.size() && i < 5; ++i) s += (i ? ", " : "") + memscale::detail::quoted(v[i].filename().string());
    return v.size() > 5 ? s + ", ..." : s;
  };
  if (indexes.size() == 1) return read_safetensors_index(indexes.front());
  if (indexes.size() > 1)
    bad_path(error_code::invalid_model, "checkpoint", path.string(), "holds several indexes (" + listing(indexes) + "); name one");
  if (files.size() == 1) return read_safetensors_file(files.front());
  if (files.size() > 1)
    bad_path(error_code::invalid_model, "checkpoint", path.string(),
              "holds several *.safetensors files and no index (" + listing(files) + "); name one");
  return std::nullopt;
}

// The summary as JSON: per role and dtype {tensors, elements, bytes}, the parameter count,
// the quantised parts, the files and the notes.
inline json checkpoint_summary_json(const checkpoint_summary& s) {
  json j = json::object();
  json roles = json::object();
  for (std::size_t r = 0; r < tensor_role_count; ++r) {
    json dtypes = json::object();
    for (std::size_t d = 0; d < stored_dtype_count; ++d) {
      const dtype_tally& t = s.inventory.by_role[r][d];
      if (t.tensors == 0) continue;
      dtypes[std::string(stored_dtypes[d].name)] = {{"tensors", t.tensors}, {"elements", t.elements}, {"bytes", t.stored.value}};
    }
    if (!dtypes.empty()) roles[std::string(to_string(static_cast<tensor_role>(r)))] = dtypes;
  }
  j["by_role"] = roles;
  j["parameters"] = parameter_elements(s.inventory);
  j["stored_bytes"] = stored_bytes(s.inventory).value;
  json parts = json::object();
  for (std::size_t p = 0; p < quant_part_count; ++p)
    if (s.quantized_parts[p].tensors > 0)
      parts[std::string(to_string(static_cast<quant_part>(p)))] = {
          {"tensors", s.quantized_parts[p].tensors}, {"elements", s.quantized_parts[p].elements}, {"bytes", s.quantized_parts[p].stored.value}};
  if (!parts.empty()) j["quantized"] = parts;
  j["files"] = s.files;
  if (s.index_total_size) j["index_total_size"] = *s.index_total_size;
  j["notes"] = s.notes;
  return j;
}

}  // namespace memscale::json_io
