// memscale/cluster_planner.hpp: the smallest multi-GPU configuration that fits a run with
// headroom on a given cluster: number of GPUs, engine (DDP, ZeRO stage, FSDP strategy), tensor
// and pipeline degrees, offload, and a micro-batch / accumulation split that keeps the global
// batch exactly. Every candidate considered is kept with its per-GPU breakdown and cost.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "memscale/gpus.hpp"
#include "memscale/graph/model_layout.hpp"
#include "memscale/parallel/per_gpu.hpp"
#include "memscale/precision_support.hpp"

namespace memscale {

struct cluster_spec {
  gpu_spec gpu{};
  std::uint64_t gpus_per_node = 8;
  std::uint64_t nodes = 1;
  bytes host_memory_per_node{};  // zero: host memory not checked
  // Collective bandwidth per GPU, an assumption the caller can change: NVLink-class inside a
  // node, one 200 Gb/s InfiniBand port per GPU between nodes.
  double intra_node_gb_per_s = 150.0;
  double inter_node_gb_per_s = 25.0;
};

struct cluster_options {
  std::uint64_t global_batch = 0;  // sequences per optimizer step; 0: run.micro_batch * run.grad_accum
  double headroom = 0.10;          // share of each GPU's memory left free
  bool allow_tensor_parallel = true;
  bool allow_pipeline_parallel = true;
  bool allow_offload = true;
  bool allow_checkpointing = true;  // may switch full activation checkpointing on
  std::uint8_t strategies = 0x7f;    // bit (1 << strategy) set: the strategy may be chosen
  std::uint64_t tp = 0;              // tensor-parallel degree every candidate uses; 0: searched
  std::uint64_t pp = 0;              // pipeline stages every candidate uses; 0: searched
};

constexpr std::uint8_t strategy_bit(strategy s) { return static_cast<std::uint8_t>(1u << static_cast<unsigned>(s)); }
inline constexpr std::uint8_t deepspeed_strategies = 0x0f;  // ddp, zero1, zero2, zero3
inline constexpr std::uint8_t fsdp_strategies = 0x70;       // fsdp-full, fsdp-grad-op, hsdp

struct cluster_candidate {
  parallel_spec layout{};
  training_spec run{};        // the micro-batch, accumulation and checkpointing tried
  per_gpu_estimate estimate{};
  bool fits_gpu = false;
  bool fits_host = false;
  double collective_seconds = 0.0;  // traffic.collectives at the interconnect bandwidth
  double host_link_seconds = 0.0;   // traffic.host_link at the GPU's host link
  std::uint64_t sacrifices = 0;     // offload and recomputation switched on (fewer is faster)

  [[nodiscard]] constexpr bool fits() const { return fits_gpu && fits_host; }
  [[nodiscard]] constexpr double seconds() const { return collective_seconds + host_link_seconds; }
};

inline constexpr std::size_t cluster_candidate_capacity = 512;

struct cluster_plan {
  std::array<cluster_candidate, cluster_candidate_capacity> considered{};
  std::size_t count = 0;
  std::size_t skipped = 0;  // candidates evaluated beyond the capacity (not listed)
  std::size_t overflowed = 0;  // layouts too large to estimate in 64-bit byte counts (skipped)
  bool found = false;
  cluster_candidate best{};  // the chosen configuration when found
  bytes budget{};           // per GPU
  std::uint64_t global_batch = 0;
};

namespace detail {

// GPU counts to try, smallest first: powers of two inside one node, then whole nodes.
constexpr std::array<std::uint64_t, 64> gpu_counts(const cluster_spec& c, std::size_t& n) {
  std::array<std::uint64_t, 64> out{};
  n = 0;
  for (std::uint64_t g = 1; g < c.gpus_per_node && n < out.size(); g *= 2) out[n++] = g;
  for (std::uint64_t k = 1; k <= c.nodes && n < out.size(); ++k) out[n++] = checked_mul(k, c.gpus_per_node);
  return out;
}

constexpr bool divides(std::uint64_t d, std::uint64_t n) { return d != 0 && n % d == 0; }

constexpr bool better(const cluster_candidate& a, const cluster_candidate& b) {
  if (a.sacrifices != b.sacrifices) return a.sacrifices < b.sacrifices;
  return a.seconds() < b.seconds();
}

// Search bound on the global batch: the per-rank batch's divisors are found by trial division
// up to its square root (2^16 steps at most).
inline constexpr std::uint64_t max_global_batch = std::uint64_t{1} << 32;

// The largest divisor of `n` that is at most `limit` (>= 1).
constexpr std::uint64_t largest_divisor_at_most(std::uint64_t n, std::uint64_t limit) {
  std::uint64_t best = 1;
  for (std::uint64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    if (d <= limit && d > best) best = d;
    if (n / d <= limit && n / d > best) best = n / d;
  }
  return best;
}

// The least offload a candidate may use: what the run itself asks for (0 none, 1 optimizer,
// 2 optimizer and parameters).
constexpr int offload_floor(const training_spec& run) {
  return run.offload_parameters ? 2 : run.offload_optimizer ? 1 : 0;
}

constexpr void validate(const cluster_options& o, const model_spec& model, const cluster_spec& cluster) {
  constexpr auto bad = error_code::invalid_plan_option;
  require(o.headroom >= 0.0 && o.headroom < 1.0, bad, "cluster.headroom", "must be within [0, 1)",
          static_cast<std::uint64_t>(o.headroom * 100.0));
  const std::uint64_t gpus = checked_mul(cluster.gpus_per_node, cluster.nodes);
  const std::uint64_t tp = o.tp == 0 ? 1 : o.tp;
  const std::uint64_t pp = o.pp == 0 ? 1 : o.pp;
  require(tp <= cluster.gpus_per_node, bad, "cluster.tp", "must be at most the GPUs of one node", o.tp);
  require(checked_mul(tp, pp) <= gpus, bad, "cluster.tp * cluster.pp", "must be at most the cluster's GPUs",
          checked_mul(tp, pp));
  const std::uint64_t kv = model.kv_heads == 0 ? model.heads : model.kv_heads;
  require(model.heads % tp == 0 && (kv % tp == 0 || tp % kv == 0), bad, "cluster.tp",
          "must divide the model's attention heads", o.tp);
  if (tp > 1)
    require_attention_mixer(model, "cluster.tp must be 1; its tensor-parallel "
                                   "layout is not modelled yet");
  require(model.layers % pp == 0, bad, "cluster.pp", "must divide the model's layers", o.pp);
  // The per-GPU estimate describes an idle vision tower on one GPU only (parallel/per_gpu.hpp).
  require(model.idle_tower_parameters == 0 || gpus == 1, error_code::unsupported, "cluster.gpus_per_node * cluster.nodes",
          "must be 1 for a model with an idle vision tower (its multi-GPU layout is not modelled yet)", gpus);
  require(layout_of(model) == model_layout::one_stack || (tp == 1 && pp == 1), bad, "cluster.tp * cluster.pp",
          "must be 1 for an encoder-decoder model (its per-GPU estimate covers data parallelism only)",
          checked_mul(tp, pp));
  require((o.tp <= 1 || o.allow_tensor_parallel) && (o.pp <= 1 || o.allow_pipeline_parallel), bad,
          "cluster.tp * cluster.pp", "must be 1 when tensor / pipeline parallelism is not allowed (an engine config "
          "carries neither)", checked_mul(tp, pp));
}

}  // namespace detail

constexpr cluster_plan plan_cluster(const model_spec& model, const training_spec& run, const cluster_spec& cluster,
                                    const cluster_options& o = {}) {
  validate(model);
  validate(run);
  detail::require(cluster.gpu.memory.value > 0, error_code::invalid_gpu, "cluster.gpu.memory", "must be > 0", 0);
  check_precision_support(run.prec, cluster.gpu);
  detail::require(cluster.gpus_per_node > 0, error_code::invalid_run, "cluster.gpus_per_node", "must be > 0", 0);
  detail::require(cluster.nodes > 0, error_code::invalid_run, "cluster.nodes", "must be > 0", 0);
  detail::validate(o, model, cluster);
  cluster_plan plan{};
  plan.global_batch = o.global_batch != 0 ? o.global_batch : detail::checked_mul(run.micro_batch, run.grad_accum);
  detail::require(plan.global_batch <= detail::max_global_batch, error_code::invalid_plan_option,
                  "cluster.global_batch", "must be at most 2^32 sequences per optimizer step", plan.global_batch);
  plan.budget = bytes{static_cast<std::uint64_t>(static_cast<double>(cluster.gpu.memory.value) * (1.0 - o.headroom))};
  const std::uint64_t kv = model.kv_heads == 0 ? model.heads : model.kv_heads;

  auto consider = [&](const cluster_candidate& c) {
    if (c.fits() && (!plan.found || detail::better(c, plan.best))) {
      plan.found = true;
      plan.best = c;
    }
    if (plan.count < plan.considered.size())
      plan.considered[plan.count++] = c;
    else
      ++plan.skipped;
  };

  // One layout at one checkpointing choice: the largest micro-batch dividing the per-rank
  // batch that fits (a larger micro-batch never needs less memory), else micro-batch 1.
  auto evaluate = [&](parallel_spec p, checkpointing ckpt) {
    const std::uint64_t dp = data_parallel_degree(p);
    const std::uint64_t per_rank = plan.global_batch / dp;
    bool overflow = false;
    auto at = [&](std::uint64_t micro) {
      training_spec r = run;
      r.micro_batch = micro;
      r.grad_accum = per_rank / micro;
      r.ckpt = ckpt;
      r.blas_workspace = cluster.gpu.cublas_workspace;
      // no_sync is the loop's choice for the engines that have it; DeepSpeed ZeRO-2/3 run
      // their own accumulation, reducing every micro-step.
      r.no_sync = run.no_sync && p.engine != strategy::zero2 && p.engine != strategy::zero3;
      cluster_candidate c{};
      c.layout = p;
      c.run = r;
      // A layout too large for 64-bit byte counts is skipped and counted, not the end of the plan.
      try {
        c.estimate = estimate_per_gpu(model, r, p);
      } catch (const error& e) {
        if (e.code() != error_code::overflow) throw;
        overflow = true;
        return c;
      }
      c.fits_gpu = c.estimate.peak.device <= plan.budget;
      c.fits_host = c.estimate.host.fits;
      // Tensor-parallel groups sit inside a node; the data-parallel collectives cross nodes when there are several.
      const double link = (p.nodes > 1 ? cluster.inter_node_gb_per_s : cluster.intra_node_gb_per_s) * 1e9;
      const double in_node = static_cast<double>(c.estimate.traffic.tensor_parallel.value);
      const double rest = static_cast<double>((c.estimate.traffic.collectives - c.estimate.traffic.tensor_parallel).value);
      c.collective_seconds = in_node / (cluster.intra_node_gb_per_s * 1e9) + rest / link;
      c.host_link_seconds =
          static_cast<double>(c.estimate.traffic.host_link.value) / (cluster.gpu.host_link_gb_per_s * 1e9);
      c.sacrifices = (p.offload_optimizer ? 1u : 0u) + (p.offload_parameters ? 2u : 0u) +
                     (ckpt == checkpointing::full && run.ckpt != checkpointing::full ? 1u : 0u);
      return c;
    };
    // Micro-batch 1 first: when it does not fit, no larger one does.
    const cluster_candidate smallest = at(1);
    if (overflow) {
      ++plan.overflowed;
      return;
    }
    if (!smallest.fits()) {
      consider(smallest);
      return;
    }
    // The largest micro-batch that fits, by bisection (fitting is monotone in the micro-batch;
    // one too large to estimate does not fit), then the largest divisor of the per-rank batch
    // at or below it.
    std::uint64_t lo = 1;
    std::uint64_t hi = per_rank;
    while (lo < hi) {
      const std::uint64_t mid = lo + (hi - lo + 1) / 2;
      overflow = false;
      const bool fits = at(mid).fits() && !overflow;
      if (fits) lo = mid;
      else hi = mid - 1;
    }
    overflow = false;
    const std::uint64_t micro = detail::largest_divisor_at_most(per_rank, lo);
    consider(micro == 1 ? smallest : at(micro));
  };

  std::size_t counts_n = 0;
  const auto counts = detail::gpu_counts(cluster, counts_n);
  for (std::size_t ci = 0; ci < counts_n && !plan.found; ++ci) {
    const std::uint64_t gpus = counts[ci];
    const std::uint64_t per_node = gpus < cluster.gpus_per_node ? gpus : cluster.gpus_per_node;
    const std::uint64_t nodes = gpus / per_node;
    // An encoder-decoder's per-GPU estimate covers data parallelism only.
    const bool split_model = layout_of(model) == model_layout::one_stack;
    for (std::uint64_t tp = o.tp == 0 ? 1 : o.tp; tp <= per_node; tp = o.tp == 0 ? tp * 2 : per_node + 1) {
      // Layouts parallel/per_gpu.hpp refuses for the model are not candidates: tensor parallelism
      // of a state-space or hybrid stack or of DeepSeek's latent attention, pipeline stages and
      // sharded or streamed layers where the repeated block is not one layer (layers_are_units).
      if (tp > 1 && (!o.allow_tensor_parallel || !split_model || !tensor_parallel_modelled(model))) break;
      if (!detail::divides(tp, model.heads) || !(detail::divides(tp, kv) || detail::divides(kv, tp))) continue;
      for (std::uint64_t pp = o.pp == 0 ? 1 : o.pp; pp <= gpus / tp; pp = o.pp == 0 ? pp * 2 : gpus + 1) {
        if (pp > 1 && (!o.allow_pipeline_parallel || !split_model || !layers_are_units(model))) break;
        if (!detail::divides(pp, model.layers) || !detail::divides(tp * pp, gpus)) continue;
        const std::uint64_t dp = gpus / (tp * pp);
        if (!detail::divides(dp, plan.global_batch)) continue;
        for (strategy s : all_strategies) {
          if ((o.strategies & strategy_bit(s)) == 0) continue;
          if (is_fsdp(s) && (tp > 1 || pp > 1)) continue;  // FSDP configs carry no tensor / pipeline degrees
          if (s != strategy::ddp && dp == 1) continue;
          const sharding shard = sharding_of(s);
          if (!layers_are_units(model) && shard != sharding::none && shard != sharding::optimizer_state) continue;
          if (s == strategy::hsdp && nodes == 1) continue;
          for (int offload = detail::offload_floor(run); offload < 3; ++offload) {
            if (offload > detail::offload_floor(run) && !o.allow_offload) break;
            if (offload == 2 && (sharding_of(s) != sharding::full || !layers_are_units(model))) continue;
            if (offload == 1 && (s == strategy::ddp || is_fsdp(s))) continue;  // FSDP offloads parameters and optimizer together
            parallel_spec p{.engine = s, .gpus_per_node = per_node, .nodes = nodes, .tp = tp, .pp = pp, .sp = tp > 1,
                            .offload_optimizer = offload > 0, .offload_parameters = offload == 2,
                            .offload_activations = run.offload_activations,
                            .host_memory_per_node = cluster.host_memory_per_node};
            evaluate(p, run.ckpt);
            if (o.allow_checkpointing && run.ckpt != checkpointing::full) evaluate(p, checkpointing::full);
          }
        }
      }
    }
  }
  return plan;
}

}  // namespace memscale
