// Strategy "MIG": each tenant gets its own GPU instance. An instance with k of the S memory slices
// gets k/S of the HBM bandwidth (memory controllers and L2 are partitioned with the slices) and its
// profile's SMs out of the whole GPU's; nothing leaks between instances.
//
// The layout is found by depth-first search over (profile, start) per tenant, checking the driver's
// rules as it goes (allowed starts, no overlap, instance limits, compute slices, one +me). Only the
// base profiles are used for tenants: +me variants hold the same memory and SMs plus media engines.
// At most 7 instances and a handful of starts per profile keep the search small.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "core/units.h"
#include "share/mig.h"

namespace gpumux {
namespace {

struct Candidate {
  const MigProfile* profile;
  double step_rate;
  double slo_ratio;  // min(1, rate / required): 1 when the SLO is met or there is none
  double ratio;      // rate / required (or rate / solo without an SLO): the headroom
};

// What the search maximises, lexicographically: first every SLO met (or as nearly as possible),
// then the fewest running tenants moved off their instances, then the smallest headroom, then the
// fewest slots used. Each term only worsens as tenants are added, so a partial layout already
// worse than the best found is cut.
struct Score {
  double slo = 1;
  int moved = 0;
  double headroom = std::numeric_limits<double>::infinity();
  Score With(const Candidate& c, bool moves) const {
    return {std::min(slo, c.slo_ratio), moved + moves, std::min(headroom, c.ratio)};
  }
  bool operator<(const Score& o) const {
    if (slo != o.slo) return slo < o.slo;
    if (moved != o.moved) return moved > o.moved;
    return headroom < o.headroom;
  }
  bool operator==(const Score& o) const {
    return slo == o.slo && moved == o.moved && headroom == o.headroom;
  }
};

double InstanceBandwidth(const GpuKind& gpu, const MigProfile& p) {
  return gpu.bandwidth * p.memory_slices / gpu.mig->slots;
}

double InstanceFlops(const GpuKind& gpu, const MigProfile& p, DType dtype) {
  return gpu.PeakFlops(dtype) * p.sms / gpu.sms;
}

double StepRateOn(const GpuKind& gpu, const TenantLoad& l, const MigProfile& p) {
  double bw_fraction = double(p.memory_slices) / gpu.mig->slots;
  double sm_fraction = double(p.sms) / gpu.sms;
  double step =
      std::max(l.whole.pace, std::max(l.whole.memory / bw_fraction, l.whole.compute / sm_fraction) +
                                 l.whole.overhead);
  return 1.0 / step;
}

class LayoutSearch {
 public:
  // `enforce_slo`: only consider instances that meet each tenant's SLO and stop at the first layout
  // (the planner's yes/no question). Otherwise find the best layout by Score, SLOs met or not (to
  // report how close MIG comes); when some layout meets every SLO, the best one does.
  // `running_on`: empty, or for each load the instance it runs on now (no profile: none).
  LayoutSearch(const GpuKind& gpu, std::span<const TenantLoad* const> loads, bool enforce_slo,
               std::span<const MigInstance> running_on = {})
      : gpu_(gpu), geo_(*gpu.mig), enforce_slo_(enforce_slo) {
    std::vector<size_t> order(loads.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    // Hardest tenants first: most memory, then highest required rate.
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
      const TenantLoad *a = loads[x], *b = loads[y];
      if (a->memory != b->memory) return a->memory > b->memory;
      return a->min_step_rate > b->min_step_rate;
    });
    for (size_t i : order) {
      loads_.push_back(loads[i]);
      running_.push_back(i < running_on.size() ? running_on[i] : MigInstance{});
    }
    for (size_t i = 0; i < loads_.size(); ++i) {
      const TenantLoad& l = *loads_[i];
      std::vector<Candidate> cands;
      for (const MigProfile& p : geo_.profiles) {
        if (p.holds_media_engines || p.memory_bytes < l.memory) continue;
        double rate = StepRateOn(gpu_, l, p);
        if (enforce_slo_ && !l.MeetsSlo(rate)) continue;
        double ratio = l.min_step_rate > 0 ? rate / l.min_step_rate : rate / l.solo_step_rate();
        double slo_ratio = l.min_step_rate > 0 ? std::min(1.0, ratio * (1 + 1e-9)) : 1.0;
        cands.push_back({&p, rate, slo_ratio, ratio});
      }
      // Smallest instances first: the first layout found wastes least.
      std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
        if (a.profile->memory_slices != b.profile->memory_slices)
          return a.profile->memory_slices < b.profile->memory_slices;
        return a.profile->compute_slices < b.profile->compute_slices;
      });
      candidates_.push_back(std::move(cands));
      // Identical tenants are interchangeable, unless one runs somewhere now.
      same_as_previous_.push_back(i > 0 && SameDemand(*loads_[i - 1], l) && !running_[i].profile &&
                                  !running_[i - 1].profile);
    }
    chosen_.resize(loads_.size());
  }

  // Runs the search; true if a layout was found.
  bool Run() {
    if (loads_.size() > size_t(geo_.compute_slices)) return false;
    for (const auto& c : candidates_) {
      if (c.empty()) return false;
    }
    Search(0, 0, 0, Score{});
    return found_;
  }

  const std::vector<Candidate>& best() const { return best_; }
  const std::vector<int>& best_starts() const { return best_starts_; }
  const std::vector<const TenantLoad*>& loads() const { return loads_; }
  // The first tenant no instance can hold (or satisfy), or null.
  const TenantLoad* Unplaceable() const {
    for (size_t i = 0; i < loads_.size(); ++i) {
      if (candidates_[i].empty()) return loads_[i];
    }
    return nullptr;
  }

 private:
  static bool SameDemand(const TenantLoad& a, const TenantLoad& b) {
    return a.memory == b.memory && a.whole.memory == b.whole.memory &&
           a.whole.compute == b.whole.compute && a.whole.pace == b.whole.pace &&
           a.min_step_rate == b.min_step_rate;
  }

  void Search(size_t i, unsigned occupied, int compute, Score score) {
    if (found_ && enforce_slo_) return;
    if (i == loads_.size()) {
      int slots = __builtin_popcount(occupied);
      if (!found_ || best_score_ < score || (score == best_score_ && slots < best_slots_)) {
        found_ = true;
        best_score_ = score;
        best_slots_ = slots;
        best_.clear();
        best_starts_.clear();
        for (size_t k = 0; k < loads_.size(); ++k) {
          best_.push_back(chosen_[k].candidate);
          best_starts_.push_back(chosen_[k].start);
        }
      }
      return;
    }
    for (size_t c = 0; c < candidates_[i].size(); ++c) {
      const Candidate& cand = candidates_[i][c];
      const MigProfile& p = *cand.profile;
      if (compute + p.compute_slices > geo_.compute_slices) continue;
      if (CountOf(i, &p) >= p.max_instances) continue;
      for (int start : p.placement_starts) {
        const bool moves = running_[i].profile && !(running_[i] == MigInstance{&p, start});
        Score next = score.With(cand, moves);
        if (found_ && next < best_score_) continue;  // scores only fall as tenants are added
        // Identical tenants take (candidate, start) in increasing order: no permuted duplicates.
        if (same_as_previous_[i] && (c < chosen_[i - 1].index || (c == chosen_[i - 1].index &&
                                                                  start <= chosen_[i - 1].start))) {
          continue;
        }
        unsigned mask = ((1u << p.memory_slices) - 1u) << start;
        if (mask & occupied) continue;
        chosen_[i] = {cand, c, start};
        Search(i + 1, occupied | mask, compute + p.compute_slices, next);
      }
    }
  }

  int CountOf(size_t upto, const MigProfile* p) const {
    int n = 0;
    for (size_t k = 0; k < upto; ++k) n += chosen_[k].candidate.profile == p;
    return n;
  }

  struct Choice {
    Candidate candidate{};
    size_t index = 0;
    int start = 0;
  };

  const GpuKind& gpu_;
  const MigGeometry& geo_;
  bool enforce_slo_;
  std::vector<const TenantLoad*> loads_;
  std::vector<MigInstance> running_;  // per load: where it runs now (no profile: nowhere)
  std::vector<std::vector<Candidate>> candidates_;
  std::vector<bool> same_as_previous_;
  std::vector<Choice> chosen_;
  bool found_ = false;
  Score best_score_;
  int best_slots_ = 0;
  std::vector<Candidate> best_;
  std::vector<int> best_starts_;
};

bool FitsMig(const GpuKind& gpu, std::span<const TenantLoad* const> loads) {
  if (!gpu.mig || loads.empty()) return false;
  return LayoutSearch(gpu, loads, /*enforce_slo=*/true).Run();
}

StrategyResult EvaluateMig(const GpuKind& gpu, std::span<const TenantLoad* const> loads) {
  return EvaluateMigAround(gpu, loads, {});
}

bool AppliesToMigGpus(const GpuKind& gpu, size_t) { return gpu.mig.has_value(); }

}  // namespace

StrategyResult EvaluateMigAround(const GpuKind& gpu, std::span<const TenantLoad* const> loads,
                                 std::span<const MigInstance> running_on) {
  StrategyResult r;
  r.kind = ShareMode::kMig;
  if (!gpu.mig) {
    r.verdict = fmt::format("mig: {} does not support MIG", gpu.name);
    return r;
  }
  LayoutSearch search(gpu, loads, /*enforce_slo=*/false, running_on);
  if (!search.Run()) {
    if (const TenantLoad* l = search.Unplaceable()) {
      double largest = 0;
      for (const MigProfile& p : gpu.mig->profiles) largest = std::max(largest, p.memory_bytes);
      r.verdict = fmt::format("mig: no instance holds {} ({}; the largest holds {})",
                              l->tenant->name, FormatBytes(l->memory), FormatBytes(largest));
    } else {
      r.verdict = fmt::format("mig: no valid layout gives {} tenants an instance each on {}",
                              loads.size(), gpu.name);
    }
    return r;
  }
  MigLayout layout;
  for (size_t i = 0; i < search.loads().size(); ++i) {
    const TenantLoad& l = *search.loads()[i];
    const Candidate& c = search.best()[i];
    const MigProfile& p = *c.profile;
    int start = search.best_starts()[i];
    layout.instances.push_back({&p, start});
    TenantOutcome o = MakeOutcome(
        l, c.step_rate,
        fmt::format("MIG {}@{} ({} of bandwidth, {}/{} SMs)", p.name, start,
                    FormatPercent(double(p.memory_slices) / gpu.mig->slots), p.sms, gpu.sms));
    o.stranded_memory = p.memory_bytes - l.memory;
    o.stranded_bandwidth = InstanceBandwidth(gpu, p) - o.bandwidth;
    o.stranded_flops = InstanceFlops(gpu, p, l.tenant->work.compute_dtype) - o.flops;
    r.tenants.push_back(std::move(o));
  }
  std::string cause = "mig: " + layout.Describe();
  r.layout = std::move(layout);
  Conclude(&r, true, cause, /*name_slice=*/true);
  return r;
}

const Strategy& MigStrategy() {
  static const StrategyOf<ShareMode::kMig, AppliesToMigGpus, FitsMig, EvaluateMig> strategy;
  return strategy;
}

}  // namespace gpumux
