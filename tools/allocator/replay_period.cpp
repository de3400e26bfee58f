// memscale-replay-period: does the caching allocator's state repeat from layer to layer? If it
// did, a replay could walk until it repeats and advance the remaining layers by whole periods
// (an exact skip). This tool replays preset runs unconstrained and, at each layer boundary of
// forward and backward in step 1 and in the steady step 2, writes a canonical form of the state:
//   segments newest first (each cudaMalloc'd segment lies below the ones before it), each as its
//   pool and mapped blocks in address order, a block as its size and either "f" (cached) or the
//   live tensor's label: a block tensor's (layer offset from the current layer, pass, order made
//   within that layer), any other tensor's (step, moment, order made). Addresses do not appear:
//   with segments in creation order and blocks in address order, every best-fit tie-break is
//   fixed by the form.
// Forms are compared on their active part: segments holding a cached block or a tensor of the
// previous, current or next layer. Equal full forms have equal active parts, so an active part
// that never repeats rules out an exact skip. Each layer's decisions (per event the change of
// allocated, reserved and inactive split bytes) are compared too: they may repeat while the
// state does not.
//
//   memscale-replay-period            one line per run, then the counts
//   memscale-replay-period --dump N   the forms of run number N, one boundary a line
#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <memscale/allocator/replay.hpp>
#include <memscale/memscale.hpp>

namespace {

using namespace memscale;
using namespace memscale::allocator;

constexpr std::size_t capacity = 16384;

struct tensor_label {
  std::int64_t layer = -1;  // block layer it was made in; -1: outside the blocks
  std::uint32_t step = 0;
  moment made_in = moment::setup;
  std::uint32_t order = 0;  // made this many tensors after the layer (or moment) began
};

bool is_block(moment m) {
  return m == moment::first_block_forward || m == moment::middle_block_forward || m == moment::last_block_forward ||
         m == moment::first_block_backward || m == moment::middle_block_backward || m == moment::last_block_backward;
}
bool is_backward_block(moment m) {
  return m == moment::first_block_backward || m == moment::middle_block_backward || m == moment::last_block_backward;
}

// The allocator with each tensor's label, and the forms and decisions at the layer boundaries of steps 1 and 2.
class probe {
 public:
  probe(const options& settings, std::uint64_t layers)
      : a_(std::make_unique<caching_allocator<capacity, capacity>>(settings)), layers_(layers), labels_(capacity) {}

  void alloc(std::uint32_t id, std::uint64_t size) {
    const allocator_stats before = a_->stats();
    a_->allocate(id, size);
    labels_[id] = {is_block(moment_) ? layer_ : -1, step_, moment_, order_++};
    note_decision(before, 'a');
  }
  void free(std::uint32_t id) {
    const allocator_stats before = a_->stats();
    a_->release(id);
    note_decision(before, 'f');
  }
  void enter(std::uint32_t step, moment m) {
    if (is_block(moment_) && step_ >= 1 && step_ <= 2)
      (is_backward_block(moment_) ? backward_decisions_ : forward_decisions_)[step_ - 1].push_back(decisions_);
    decisions_.clear();
    if (is_block(m)) {
      const bool backward = is_backward_block(m);
      if (m == moment::first_block_forward) layer_ = 0;
      else if (m == moment::last_block_backward) layer_ = static_cast<std::int64_t>(layers_) - 1;
      else layer_ += backward ? -1 : 1;
      if (step >= 1 && step <= 2) (backward ? backward_ : forward_)[step - 1].push_back(form());
    }
    step_ = step;
    moment_ = m;
    order_ = 0;
  }

  // The forms of step 1 (index 0) and of the steady step 2 (index 1).
  const std::vector<std::string>& forward(std::size_t step) const { return forward_[step]; }
  const std::vector<std::string>& backward(std::size_t step) const { return backward_[step]; }
  // Each layer's decisions: per event the change of allocated, reserved and inactive split bytes.
  const std::vector<std::string>& forward_decisions(std::size_t step) const { return forward_decisions_[step]; }
  const std::vector<std::string>& backward_decisions(std::size_t step) const { return backward_decisions_[step]; }

 private:
  void note_decision(const allocator_stats& before, char kind) {
    const allocator_stats& now = a_->stats();
    const auto delta = [](bytes a, bytes b) { return std::to_string(static_cast<std::int64_t>(a.value - b.value) / 512); };
    decisions_ += kind + delta(now.allocated, before.allocated) + "," + delta(now.reserved, before.reserved) + "," +
                  delta(now.inactive_split, before.inactive_split) + " ";
  }

  std::string label(std::uint32_t owner) const {
    const tensor_label& t = labels_[owner];
    if (t.layer < 0)
      return "s" + std::to_string(t.step) + "m" + std::to_string(static_cast<int>(t.made_in)) + "#" + std::to_string(t.order);
    // The offset and pass only: forward and backward passes of the same layer differ by moment.
    const bool bwd = is_backward_block(t.made_in);
    return "L" + std::to_string(t.layer - layer_) + (bwd ? "b" : "f") + (t.step == step_ ? "" : "o") + "#" +
           std::to_string(t.order);
  }

  // Active segments in creation order (newest first), each "pool[blocks]".
  std::string form() const {
    struct seg {
      std::string text;
      bool active = false;
    };
    std::map<std::uint64_t, seg> segs;  // by address: newest first (expandable ones grow upwards: oldest first)
    a_->for_each_block([&](const block_view& b) {
      seg& s = segs[b.segment];
      if (s.text.empty()) s.text = b.pool == pool_kind::small ? "S[" : "G[";
      if (!b.allocated) {
        s.text += "f" + std::to_string(b.size / 512) + " ";
        s.active = true;
        return;
      }
      const tensor_label& t = labels_[b.owner];
      if (t.layer >= 0 && t.layer - layer_ >= -1 && t.layer - layer_ <= 1) s.active = true;
      s.text += std::to_string(b.size / 512) + ":" + label(b.owner) + " ";
    });
    std::string out;
    for (const auto& [address, s] : segs)
      if (s.active) out += s.text + "] ";
    return out;
  }

  std::unique_ptr<caching_allocator<capacity, capacity>> a_;
  std::uint64_t layers_;
  std::vector<tensor_label> labels_;
  std::array<std::vector<std::string>, 2> forward_, backward_;
  std::array<std::vector<std::string>, 2> forward_decisions_, backward_decisions_;
  std::string decisions_;
  std::int64_t layer_ = -1;
  std::uint32_t step_ = 0;
  moment moment_ = moment::setup;
  std::uint32_t order_ = 0;
};

// The first middle layer k with a period p <= max_period, seen at least twice, such that
// item[j] == item[j + p] for every middle layer j >= k; or none. Items 0 and n - 1 belong to
// the first and the last block and are left out.
struct periodicity {
  bool found = false;
  std::size_t from = 0;
  std::size_t period = 0;
};

periodicity find_period(const std::vector<std::string>& forms, std::size_t max_period) {
  const std::size_t n = forms.size();
  for (std::size_t k = 1; k + 2 < n; ++k)
    for (std::size_t p = 1; p <= max_period && k + 2 * p + 1 <= n; ++p) {
      bool holds = true;
      for (std::size_t j = k; j + p + 1 < n && holds; ++j) holds = forms[j] == forms[j + p];
      if (holds) return {true, k, p};
    }
  return {};
}

// Cached (free) blocks in a form: every segment holding one is active, so this is all of them.
std::size_t cached_blocks(const std::string& form) {
  std::size_t n = 0;
  for (std::size_t i = 0; i + 1 < form.size(); ++i) n += (form[i] == ' ' || form[i] == '[') && form[i + 1] == 'f';
  return n;
}

struct run_case {
  const model_spec* model;
  training_spec run;
  options settings;
  const char* settings_name;
};

std::vector<run_case> preset_runs() {
  static const model_spec* const models[] = {&presets::gpt2,     &presets::gpt2_xl,    &presets::bert_base_uncased,
                                             &presets::llama_2_7b, &presets::llama_3_8b, &presets::mistral_7b,
                                             &presets::qwen2_5_7b, &presets::llama_2_13b, &presets::gpt2_medium};
  options expandable{};
  expandable.expandable_segments = true;
  options max_split{};
  max_split.max_split_size = bytes{512ULL << 20};
  const std::pair<options, const char*> settings[] = {
      {options{}, "default"}, {expandable, "expandable"}, {max_split, "max_split_512MiB"}};
  std::vector<run_case> out;
  for (const model_spec* m : models)
    for (const std::uint64_t mb : {1ULL, 4ULL})
      for (const std::uint64_t seq : {512ULL, 2048ULL})
        for (const precision prec : {precision::fp32, precision::amp_bf16, precision::amp_fp16})
          for (const checkpointing ckpt : {checkpointing::none, checkpointing::full})
            for (const auto& [o, name] : settings)
              out.push_back({m, {.micro_batch = mb, .seq_len = seq, .prec = prec, .ckpt = ckpt}, o, name});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const long dump = argc == 3 && std::string(argv[1]) == "--dump" ? std::atol(argv[2]) : -1;
  const std::vector<run_case> runs = preset_runs();
  int walked = 0, refused = 0;
  std::array<int, 4> periodic{};  // forward and backward of step 1, then of step 2
  std::array<int, 4> decisions_periodic{};
  int passes = 0, cached_changes = 0;  // passes whose cached blocks differ between the first and last middle layer
  const auto describe = [](const periodicity& p) {
    return p.found ? "from " + std::to_string(p.from) + " p " + std::to_string(p.period) : std::string("never");
  };
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (dump >= 0 && static_cast<long>(i) != dump) continue;
    const run_case& c = runs[i];
    try {
      const auto built = std::make_unique<model_graph>(build(*c.model, c.run));
      const graph& g = built->stack();
      probe p(c.settings, g.block_repeats);
      emit_training_steps<capacity, capacity>(g, built->run, {}, p);
      ++walked;
      std::string found;
      for (std::size_t s = 0; s < 2; ++s) {
        for (const std::vector<std::string>* forms : {&p.forward(s), &p.backward(s)}) {
          if (forms->size() < 4) continue;
          const std::size_t first = cached_blocks((*forms)[1]);
          const std::size_t last = cached_blocks((*forms)[forms->size() - 2]);
          ++passes;
          cached_changes += first != last;
          found += " | cached " + std::to_string(first) + " -> " + std::to_string(last);
        }
        const periodicity f = find_period(p.forward(s), 16);
        const periodicity b = find_period(p.backward(s), 16);
        const periodicity fd = find_period(p.forward_decisions(s), 16);
        const periodicity bd = find_period(p.backward_decisions(s), 16);
        periodic[2 * s] += f.found;
        periodic[2 * s + 1] += b.found;
        decisions_periodic[2 * s] += fd.found;
        decisions_periodic[2 * s + 1] += bd.found;
        found += " | step " + std::to_string(s + 1) + " form fwd " + describe(f) + ", bwd " + describe(b) +
                 "; decisions fwd " + describe(fd) + ", bwd " + describe(bd);
      }
      std::printf("%3zu %-18s mb %llu seq %4llu %-9s ckpt %-4s %-17s layers %3llu%s\n", i,
                  std::string(c.model->name).c_str(), static_cast<unsigned long long>(c.run.micro_batch),
                  static_cast<unsigned long long>(c.run.seq_len), std::string(to_string(c.run.prec)).c_str(),
                  c.run.ckpt == checkpointing::full ? "full" : "none", c.settings_name,
                  static_cast<unsigned long long>(g.block_repeats), found.c_str());
      if (dump >= 0)
        for (std::size_t s = 0; s < 2; ++s) {
          for (std::size_t k = 0; k < p.forward(s).size(); ++k)
            std::printf("S%zu F%zu %s\n", s + 1, k, p.forward(s)[k].c_str());
          for (std::size_t k = 0; k < p.backward(s).size(); ++k)
            std::printf("S%zu B%zu %s\n", s + 1, k, p.backward(s)[k].c_str());
        }
    } catch (const memscale::error& e) {
      ++refused;
      if (dump >= 0) std::printf("%3zu refused: %s\n", i, e.what());
    }
  }
  std::printf("\n%d runs walked (%d refused: sequence past a learned position table)\n"
              "passes whose cached blocks differ between the first and the last middle layer: %d of %d\n"
              "active form repeats to the last middle layer: step 1 forward %d, backward %d; step 2 forward %d, "
              "backward %d\nlayer decisions repeat:                       step 1 forward %d, backward %d; step 2 "
              "forward %d, backward %d\n",
              walked, refused, cached_changes, passes, periodic[0], periodic[1], periodic[2], periodic[3], decisions_periodic[0],
              decisions_periodic[1], decisions_periodic[2], decisions_periodic[3]);
  return 0;
}
