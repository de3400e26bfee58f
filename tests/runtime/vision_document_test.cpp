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
  CHECK(says(error_of({{"model", "resnet50"}, {"software", {{"torch", "2.3"}}}}), "software.torch must be 2.5"));
  CHECK(says(error_of({{"model", "resnet50"}, {"software", {{"cuda", "11.6"}}}}), "software.cuda does not apply"));
  CHECK(read({{"model", "resnet50"}, {"software", {{"torch", "2.5"}}}}).vision);
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

TEST_CASE("vision document: a transformer document read after it drops the vision model", "[json][vision]") {
  io::run_input in = read({{"model", "resnet50"}});
  io::read_run_document({{"model", "gpt2"}}, in);
  CHECK_FALSE(in.vision);
  CHECK(io::run_document_json(in).at("model") == "gpt2");
}

}  // namespace vision_document_test
