// memscale-allocator-picture: the caching allocator's segments over two training steps, as
// SVG (docs/pictures/allocator_segments.svg, docs/allocator.md).
//
// x: the event stream (setup, step 1, step 2), y: reserved memory, segments stacked in the
// order cudaMalloc made them. Blue: allocated blocks; grey: cached free space inside
// segments (what max_memory_reserved counts and max_memory_allocated does not).
//
//   memscale-allocator-picture OUT.svg
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <memscale/allocator/replay.hpp>
#include <memscale/memscale.hpp>

namespace {

using namespace memscale;
using namespace memscale::allocator;

constexpr std::size_t capacity = 8192;

struct rect {
  std::size_t t0 = 0;
  std::size_t t1 = 0;
  double y = 0;  // MiB from the bottom
  double h = 0;
  bool allocated = false;
};

struct phase_mark {
  std::size_t t = 0;
  std::string label;
};

// Records the blocks every `every` events; keeps runs of identical blocks as one rectangle.
class picture_sink {
 public:
  explicit picture_sink(std::size_t every) : every_(every) {}

  void alloc(std::uint32_t id, std::uint64_t size) {
    a_->allocate(id, size);
    tick();
  }
  void free(std::uint32_t id) {
    a_->release(id);
    tick();
  }
  void enter(std::uint32_t step, moment m) {
    if (m == moment::prologue_forward || m == moment::epilogue_backward || m == moment::optimizer_step)
      marks_.push_back({column_, "step " + std::to_string(step) + " " +
                                     (m == moment::prologue_forward ? "forward"
                                      : m == moment::epilogue_backward ? "backward" : "optimizer")});
  }

  void finish() {
    snapshot();
    for (auto& [key, r] : open_) done_.push_back(r);
    open_.clear();
  }

  const std::vector<rect>& rects() const { return done_; }
  const std::vector<phase_mark>& marks() const { return marks_; }
  std::size_t columns() const { return column_; }
  double top() const { return top_; }
  const caching_allocator<capacity, capacity>& state() const { return *a_; }

 private:
  void tick() {
    if (++events_ % every_ == 0) snapshot();
  }

  void snapshot() {
    // Segments by address (creation order); each keeps the y offset it got when it appeared.
    std::map<std::uint64_t, std::uint64_t> heads;  // segment address -> mapped size
    std::vector<std::pair<std::uint64_t, block_view>> blocks;
    a_->for_each_block([&](const block_view& b) {
      heads[b.segment] += b.size;
      blocks.emplace_back(b.segment, b);
    });
    for (const auto& [h, size] : heads) {
      if (offset_.count(h) == 0) {
        offset_[h] = next_offset_;
        next_offset_ += static_cast<double>(size) / 1048576.0;
      }
    }
    top_ = std::max(top_, next_offset_);
    std::map<std::string, rect> now;
    for (const auto& [h, b] : blocks) {
      const double y = offset_[h] + static_cast<double>(b.address - h) / 1048576.0;
      const double height = static_cast<double>(b.size) / 1048576.0;
      char key[96];
      std::snprintf(key, sizeof key, "%.4f/%.4f/%d", y, height, b.allocated ? 1 : 0);
      now[key] = rect{column_, column_ + 1, y, height, b.allocated};
    }
    for (auto& [key, r] : now) {
      auto it = open_.find(key);
      if (it != open_.end()) {
        it->second.t1 = column_ + 1;
        r = it->second;
      }
    }
    for (auto& [key, r] : open_)
      if (now.count(key) == 0) done_.push_back(r);
    open_ = now;
    ++column_;
  }

  std::unique_ptr<caching_allocator<capacity, capacity>> a_ = std::make_unique<caching_allocator<capacity, capacity>>();
  std::size_t every_;
  std::size_t events_ = 0;
  std::size_t column_ = 0;
  std::map<std::uint64_t, double> offset_;
  double next_offset_ = 0;
  double top_ = 0;
  std::map<std::string, rect> open_;
  std::vector<rect> done_;
  std::vector<phase_mark> marks_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: memscale-allocator-picture OUT.svg\n");
    return 2;
  }
  // The LLaMA-style model of the H100 runs (docs/gpu-measurements.md: llama-small-b8-s1024-amp_bf16-sdpa,
  // measured 9100 MiB reserved), 8 layers, amp bf16, 8 x 1024, transformers 5.17, torch 2.11.
  model_spec model = presets::llama_base("llama-small", 8, 1024, 16, 4, 2816, 32000);
  model.upcast_logits = true;  // transformers >= 4.48 ForCausalLMLoss (json_io::model_for_record)
  model.shift_labels = true;
  training_spec base{.micro_batch = 8, .seq_len = 1024, .prec = precision::amp_bf16, .torch_version = 211,
                     .transformers_version = 517, .blas_workspace = pytorch_cublas_workspace_sm90_plus};
  const auto built = std::make_unique<model_graph>(build(model, base));
  picture_sink sink(8);
  emit_training_steps<capacity, capacity>(built->stack(), built->run, {}, sink);
  sink.finish();

  const double width = 960;
  const double height = 520;
  const double left = 70;
  const double bottom = 40;
  const double plot_w = width - left - 20;
  const double plot_h = height - bottom - 40;
  const double xs = plot_w / static_cast<double>(sink.columns());
  const double ys = plot_h / sink.top();
  std::ofstream out(argv[1]);
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << left << "\" y=\"20\" font-size=\"13\">Caching-allocator segments over setup and two "
         "training steps (simulated): LLaMA-style 8 layers, amp bf16, 8 x 1024</text>\n";
  auto y_of = [&](double mib) { return height - bottom - mib * ys; };
  for (const rect& r : sink.rects()) {
    out << "<rect x=\"" << left + static_cast<double>(r.t0) * xs << "\" y=\"" << y_of(r.y + r.h) << "\" width=\""
        << static_cast<double>(r.t1 - r.t0) * xs << "\" height=\"" << std::max(r.h * ys, 0.3) << "\" fill=\""
        << (r.allocated ? "#2e6da4" : "#d9d9d9") << "\"/>\n";
  }
  for (const phase_mark& m : sink.marks()) {
    const double x = left + static_cast<double>(m.t) * xs;
    out << "<line x1=\"" << x << "\" y1=\"" << y_of(0) << "\" x2=\"" << x << "\" y2=\"" << y_of(sink.top())
        << "\" stroke=\"#c0392b\" stroke-dasharray=\"3,3\"/>\n"
        // Above the plot: inside it a label lands on the blocks (step 2's backward starts at the top).
        << "<text x=\"" << x + 2 << "\" y=\"" << y_of(sink.top()) - 4
        << "\" fill=\"#c0392b\" font-size=\"9\">" << m.label << "</text>\n";
  }
  for (int gib = 0; gib <= static_cast<int>(sink.top() / 1024.0); ++gib) {
    const double y = y_of(gib * 1024.0);
    out << "<line x1=\"" << left - 4 << "\" y1=\"" << y << "\" x2=\"" << left << "\" y2=\"" << y << "\" stroke=\"black\"/>\n"
        << "<text x=\"" << left - 8 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">" << gib << " GiB</text>\n";
  }
  const auto& st = sink.state().stats();
  // SVG collapses runs of spaces, so the legend's parts are separated by bars.
  out << "<text x=\"" << left << "\" y=\"" << height - 12 << "\">time (allocation events) &#8594; | blue: allocated "
         "blocks | grey: cached free space in segments | reserved peak "
      << st.reserved_peak.value / 1048576 << " MiB, allocated peak " << st.allocated_peak.value / 1048576
      << " MiB</text>\n</svg>\n";
  std::printf("%zu rectangles, %zu columns, reserved %llu MiB\n", sink.rects().size(), sink.columns(),
              static_cast<unsigned long long>(st.reserved_peak.value >> 20));
  return 0;
}
