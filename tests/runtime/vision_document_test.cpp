// A vision model in a run document (memscale/json/vision_document.hpp, run_document.hpp) and its
// report (json/vision_report.hpp), shared by memscale-plan --run/--json and the web calculator:
// the fields read, the errors that name a field, and the report read back to the same document.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <exception>
#include <string>

#include <memscale/json.hpp>
#include <memscale/vision/device.hpp>

namespace vision_document_test {
namespace io = memscale::json_io;
using nlohmann::json;

namespace {

io::run_input read(const json& doc) {
  io::run_input in;
  io::read_run_document(doc, in);
  return in;
}

// The what() of the error reading `doc` throws, or "<no error>".
std::string error_of(const json& doc) {
  try {
    (void)read(doc);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "<no error>";
}

bool says(const std::string& message, const std::string& part) { return message.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("vision document: the model, the image and the shared training settings", "[json][vision]") {
  const io::run_input in = read({{"model", "resnet50"},
                                 {"run",
                                  {{"micro_batch", 64},
                                   {"grad_accum", 2},
                                   {"precision", "amp_bf16"},
                                   {"optimizer", "sgd_momentum"},
                                   {"checkpointing", "full"},
                                   {"image", "384x320"},
                                   {"channels_last", true}}},
                                 {"gpu", "rtx3060-12gb"},
                                 {"headroom", 0.12}});
  REQUIRE(in.vision);
  CHECK(in.vision->name == "resnet50");
  CHECK(in.vision->image_height == 384);
  CHECK(in.vision->image_width == 320);
  CHECK(in.vision->channels_last);
  CHECK(in.run.micro_batch == 64);
  CHECK(in.run.grad_accum == 2);
  CHECK(in.run.prec == memscale::precision::amp_bf16);
  CHECK(in.run.optimizer == memscale::optimizer_kind::sgd_momentum);
  CHECK(in.run.ckpt == memscale::checkpointing::full);
  CHECK(in.gpu == "rtx3060-12gb");
  CHECK(in.headroom == 0.12);
  // A square image as a number; the preset's own size when the run gives none.
  CHECK(read({{"model", "vit_b_16"}, {"run", {{"image", 384}}}}).vision->image_width == 384);
  CHECK(read({{"model", "timm/eva02_base_patch14_448"}}).vision->image_height == 448);
}

TEST_CASE("vision document: a timm name keeps its tag (the head's width) when written back", "[json][vision]") {
  const io::run_input in = read({{"model", "vit_large_patch16_224.augreg_in21k"}});
  REQUIRE(in.vision);
  CHECK(in.vision->source == memscale::vision::model_source::timm);
  CHECK(in.vision->classes == 21843);
  CHECK(io::run_document_json(in).at("model") == "vit_large_patch16_224.augreg_in21k");
}

TEST_CASE("vision document: errors name the field", "[json][vision]") {
  // A transformer run's field in a vision run: named, with the fields a vision run takes.
  const std::string seq = error_of({{"model", "resnet50"}, {"run", {{"seq_len", 512}}}});
  CHECK(says(seq, "run.seq_len"));
  CHECK(says(seq, "is a transformer run's field: the vision model resnet50 takes micro_batch"));
  CHECK(says(error_of({{"model", "resnet50"}, {"run", {{"target", "lora"}}}}), "run.target"));
  CHECK(says(error_of({{"model", "resnet50"}, {"run", {{"attention", "flash"}}}}), "run.attention"));
  // An unknown field: named, with the nearest vision field.
  const std::string unknown = error_of({{"model", "resnet50"}, {"run", {{"imag", 224}}}});
  CHECK(says(unknown, "run.imag is not a field of a run document"));
  CHECK(says(unknown, "image"));
  CHECK(says(error_of({{"model", "resnet50"}, {"attention_kernel", "flash"}}), "attention_kernel"));
  CHECK(says(error_of({{"model", "resnet50"}, {"framework", "torchtune"}}), "framework"));
  CHECK(says(error_of({{"model", "resnet50"}, {"software", {{"transformers", "4.46"}}}}), "software.transformers"));
  CHECK(says(error_of({{"model", "resnet50"}, {"software", {{"torch", "2"}}}}), "software.torch"));
  CHECK(says(error_of({{"model", "resnet50"}, {"run", {{"checkpointing", "selective"}}}}), "run.checkpointing"));
  CHECK(says(error_of({{"model", "resnet50"}, {"run", {{"image", "384x"}}}}), "run.image"));
  CHECK(says(error_of({{"model", "resnet50"}, {"run", {{"image", 16}}}}), "image size must be at least 32x32 pixels"));
  CHECK(says(error_of({{"model", "resnet50"}, {"run", {{"channels_last", "yes"}}}}), "run.channels_last"));
  CHECK(says(error_of({{"model", "vit_b_16"}, {"run", {{"image", 100}}}}), "multiple of the ViT patch size"));
  // A transformer document refuses the vision fields by name.
  CHECK(says(error_of({{"model", "gpt2"}, {"run", {{"image", 224}}}}), "run.image is not a field of a run document"));
  // A misspelt vision name is offered the nearest preset.
  CHECK(says(error_of({{"model", "resnet5"}}), "resnet50"));
}

TEST_CASE("vision document: the report is a run document that reads back to the same report", "[json][vision]") {
  const io::run_input in = read({{"model", "resnet50"},
                                 {"run", {{"micro_batch", 64}, {"image", 384}}},
                                 {"gpu", "rtx3060-12gb"},
                                 {"alloc_conf", "expandable_segments:True"}});
  const json report = io::vision_report_json(in);
  CHECK(report.at("model") == "resnet50");
  CHECK(report.at("architecture").at("family") == "resnet");
  CHECK(report.at("architecture").at("parameters") == memscale::vision::parameter_count(*in.vision));
  CHECK(report.at("run").at("image") == "384x384");
  CHECK_FALSE(report.at("run").contains("seq_len"));
  CHECK_FALSE(report.at("software").contains("transformers"));
  CHECK(report.at("allocator").at("alloc_conf") == "expandable_segments:True");
  REQUIRE(report.contains("plan"));
  // The peak is the device estimate's, the allocator section's reserved and device figures with it.
  const memscale::gpu_spec gpu = *io::gpu_of(in);
  const memscale::device_estimate d = memscale::vision::estimate_on_device(
      *in.vision, memscale::on_gpu(in.run, gpu), &gpu, io::device_options_of(in.alloc_conf, in.context_memory));
  CHECK(report.at("peak").at("reserved") == d.tensors.steady.reserved.value);
  CHECK(report.at("allocator").at("reserved") == d.reserved.value);
  CHECK(io::vision_report_json(read(report)) == report);
  // Without a GPU: no plan; on the CPU: no allocator section.
  const json estimate = io::vision_report_json(read({{"model", "mobilenet_v3_large"}}));
  CHECK_FALSE(estimate.contains("plan"));
  CHECK(estimate.contains("allocator"));
  CHECK_FALSE(io::vision_report_json(read({{"model", "resnet18"}, {"run", {{"device", "cpu"}}}})).contains("allocator"));
}

// cuDNN's v8 API, the one the convolution workspace bound is read off, is the default from torch 2.0.
static_assert(memscale::vision::cudnn_workspace_modelled({.device = memscale::device_kind::cuda, .torch_version = 200}));
static_assert(!memscale::vision::cudnn_workspace_modelled({.device = memscale::device_kind::cuda, .torch_version = 113}));
static_assert(memscale::vision::cudnn_workspace_modelled({.device = memscale::device_kind::cpu, .torch_version = 113}));

TEST_CASE("vision document: the software stack is read, echoed, and refused where the estimate cannot model it",
          "[json][vision]") {
  // The versions the vision estimate reads: torch, bitsandbytes, CUDA's module loading.
  const io::run_input in = read({{"model", "resnet50"},
                                 {"run", {{"micro_batch", 32}, {"optimizer", "adamw_8bit"}}},
                                 {"software", {{"torch", "2.1"}, {"bitsandbytes", "0.43.1"}, {"cuda", "11.6"}}},
                                 {"gpu", "a100-40gb"}});
  CHECK(in.run.torch_version == 201);
  CHECK(in.run.bitsandbytes_version == 4301);
  CHECK_FALSE(in.run.cuda_lazy_loading);
  const json report = io::vision_report_json(in);
  CHECK(report.at("software") == json{{"torch", "2.1"}, {"bitsandbytes", "0.43.1"}, {"cuda", "11.6"}});
  CHECK(io::vision_report_json(read(report)) == report);
  // Each changes the estimate by its own mechanism: bitsandbytes' 8-bit state blocks (2048
  // values per absmax before 0.44, 256 from it) and the context of eagerly loaded modules.
  const json current = io::vision_report_json(read({{"model", "resnet50"},
                                                    {"run", {{"micro_batch", 32}, {"optimizer", "adamw_8bit"}}},
                                                    {"gpu", "a100-40gb"}}));
  CHECK(report.at("breakdown").at("optimizer") < current.at("breakdown").at("optimizer"));
  CHECK(report.at("allocator").at("context").at("total") > current.at("allocator").at("context").at("total"));
  // torch 1.x on CUDA ran cuDNN's v7 API, whose workspaces are not modelled: refused with the
  // mechanism named; on the CPU (oneDNN) it is read as any other release.
  const std::string old = error_of({{"model", "resnet50"}, {"software", {{"torch", "1.13"}}}});
  CHECK(says(old, "software.torch must be 2.0 or later for a CUDA vision run"));
  CHECK(says(old, "cuDNN's convolutions through its v7 API"));
  const io::run_input cpu = read({{"model", "resnet50"}, {"run", {{"device", "cpu"}}}, {"software", {{"torch", "1.13"}}}});
  CHECK(cpu.run.torch_version == 113);
  CHECK(cpu.run.optimizer_impl == memscale::optimizer_implementation::for_loop);
  CHECK(io::vision_report_json(cpu).at("software").at("torch") == "1.13");
  CHECK(says(error_of({{"model", "resnet50"}, {"software", {{"timm", "1.0"}}}}), "software.timm is not a known package"));
}

TEST_CASE("vision document: the OOM cliff is the vision planner's peaks, past the largest micro-batch that fits",
          "[json][vision]") {
  const io::run_input in = read({{"model", "resnet50"},
                                 {"run", {{"micro_batch", 64}, {"image", 384}}},
                                 {"gpu", "rtx3060-12gb"},
                                 {"alloc_conf", "expandable_segments:True"}});
  const io::vision_outcome outcome = io::vision_outcome_of(in);
  REQUIRE(outcome.plan);
  const memscale::plan_result& plan = *outcome.plan;
  const memscale::gpu_spec gpu = *io::gpu_of(in);
  CHECK(plan.device.allocator.expandable_segments);  // the plan records the allocator settings its modes used
  const json cliff = io::vision_cliff_json(in, gpu, plan);
  const auto batches = io::cliff_micro_batches(in.run, plan);
  REQUIRE(cliff.at("micro_batch") == json(batches));
  REQUIRE(plan.max_micro_batch > 0);
  for (std::size_t i = 0; i < plan.modes.size(); ++i) {
    const memscale::mode m = plan.modes[i].m;
    const json& peaks = cliff.at("peak").at(std::string(memscale::to_string(m)));
    REQUIRE(peaks.size() == batches.size());
    for (std::size_t k = 0; k < batches.size(); ++k) {
      memscale::training_spec run = in.run;
      run.micro_batch = batches[k];
      CHECK(peaks[k] == memscale::vision::plan_mode(*in.vision, run, gpu, m, plan.budget, plan.device).peak.value);
      if (k > 0) CHECK(peaks[k] >= peaks[k - 1]);
      // At the run's own micro-batch the cliff is the plan's mode.
      if (batches[k] == in.run.micro_batch) CHECK(peaks[k] == plan.modes[i].peak.value);
    }
    // Four times the largest micro-batch that fits in any mode is over the budget in every mode.
    CHECK(peaks.back().get<std::uint64_t>() > plan.budget.value);
  }
}

TEST_CASE("vision document: a transformer document read after it drops the vision model", "[json][vision]") {
  io::run_input in = read({{"model", "resnet50"}});
  io::read_run_document({{"model", "gpt2"}}, in);
  CHECK_FALSE(in.vision);
  CHECK(io::run_document_json(in).at("model") == "gpt2");
}

}  // namespace vision_document_test
