// How long reading one ground-truth record takes (target: <= 10 us), from its
// JSON text and from an already parsed document. The record is the first GPU record of
// tests/data/ground-truth/gpu_published_dev.json's kind (a GPT-2 run with every field set).
#include <benchmark/benchmark.h>

#include <string>

#include "memscale/json.hpp"

namespace {

const std::string record_text = R"({
  "id": "bench-gpt2-b8-s512",
  "measure": "max_memory_allocated",
  "device": "cuda",
  "torch": "2.1.0",
  "cuda": "12.1",
  "model": {"family": "gpt2", "name": "gpt2", "layers": 12, "hidden": 768, "heads": 12, "kv_heads": 12,
            "ffn": 3072, "vocab": 50257, "max_pos": 1024, "tied_embeddings": true, "impl": "hf-transformers"},
  "train": {"batch": 8, "seq": 512, "precision": "amp_fp16", "optimizer": "adamw", "checkpointing": "none",
            "attention": "sdpa", "grad_accum": 1, "lora_rank": 0, "zero_stage": 0, "dp": 1, "tp": 1}
})";

// Text to model_spec + training_spec: parse_document, model_from_record, run_from_record.
void read_record_from_json_text(benchmark::State& state) {
  for ([[maybe_unused]] auto _ : state) {
    const auto doc = memscale::json_io::parse_document(record_text, "bench");
    auto model = memscale::json_io::model_from_record(doc.at("model"));
    auto run = memscale::json_io::run_from_record(doc);
    benchmark::DoNotOptimize(model);
    benchmark::DoNotOptimize(run);
  }
}
BENCHMARK(read_record_from_json_text);

// The same without the text parse: the readers' own cost on a parsed document.
void read_record_from_parsed_json(benchmark::State& state) {
  const auto doc = memscale::json_io::parse_document(record_text, "bench");
  for ([[maybe_unused]] auto _ : state) {
    auto model = memscale::json_io::model_from_record(doc.at("model"));
    auto run = memscale::json_io::run_from_record(doc);
    benchmark::DoNotOptimize(model);
    benchmark::DoNotOptimize(run);
  }
}
BENCHMARK(read_record_from_parsed_json);

// The text parse alone (nlohmann::json plus the depth pre-scan).
void parse_record_json_text(benchmark::State& state) {
  for ([[maybe_unused]] auto _ : state) {
    auto doc = memscale::json_io::parse_document(record_text, "bench");
    benchmark::DoNotOptimize(doc);
  }
}
BENCHMARK(parse_record_json_text);

}  // namespace
