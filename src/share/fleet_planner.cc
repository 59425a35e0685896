#include "share/fleet_planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "base/error.h"
#include "core/mig_layout.h"
#include "share/node_plan.h"
#include "share/strategy_registry.h"

namespace gpumux {
namespace {

struct Bin {
  size_t kind = 0;
  std::vector<size_t> classes;  // one entry per tenant (its class)
  std::vector<const TenantLoad*> loads;
  // For the tenants that are one GPU's part of a tensor-parallel job, by their index in `classes`:
  // which job of the class (its instance) and which part; entries past its end, or with part -1,
  // are whole tenants.
  struct Part {
    int instance = -1, part = -1;
  };
  std::vector<Part> parts;
  int node_gpu = -1;  // with a live node: the node GPU it is for (MatchToNode)
};

// Sum of what the tenants of a bin need at their SLO rate, as fractions of one GPU: a cheap
// necessary condition every strategy obeys (MIG splits, MPS shares, time-slicing takes turns).
struct Need {
  double memory = 0, bandwidth = 0, compute = 0;
  void Add(const TenantLoad& l, double gpu_memory, int sign = 1) {
    memory += sign * l.memory / gpu_memory;
    bandwidth += sign * l.min_step_rate * l.bandwidth_use;
    compute += sign * l.min_step_rate * l.compute_use;
  }
  bool Within() const {
    return memory <= 1 + 1e-12 && bandwidth <= 1 + 1e-12 && compute <= 1 + 1e-12;
  }
};

class Planner {
 public:
  explicit Planner(const PlanInput& in) : in_(in) {
    if (in.fleet.empty()) throw BadInput("the fleet lists no GPU kind");
    for (const FleetEntry& f : in.fleet) {
      if (f.count < 0)
        throw BadInput(fmt::format("fleet: {} count {} is negative", f.gpu->name, f.count));
    }
    const size_t kinds = in.fleet.size();
    loads_.resize(in.classes.size());
    alone_.resize(in.classes.size());
    size_.resize(in.classes.size(), 0);
    home_.resize(in.classes.size(), 0);
    for (size_t c = 0; c < in.classes.size(); ++c) {
      for (size_t k = 0; k < kinds; ++k) {
        const GpuKind& gpu = *in.fleet[k].gpu;
        loads_[c].push_back(MakeLoad(in.classes[c].tenant, gpu));
        const TenantLoad* l = &loads_[c][k];
        bool ok = FitsAny(gpu, std::span(&l, 1), in.allowed);
        alone_[c].push_back(ok);
        if (ok && size_[c] == 0) {
          home_[c] = k;
          size_[c] = std::max({l->memory / gpu.memory_bytes, l->min_step_rate * l->bandwidth_use,
                               l->min_step_rate * l->compute_use, 1e-12});
        }
      }
    }
    order_.resize(in.classes.size());
    std::iota(order_.begin(), order_.end(), 0);
    std::stable_sort(order_.begin(), order_.end(),
                     [&](size_t a, size_t b) { return size_[a] > size_[b]; });
  }

  Plan Run() {
    Plan plan;
    bool spread = std::any_of(in_.classes.begin(), in_.classes.end(),
                              [](const TenantClass& tc) { return Parts(tc) > 1; });
    std::vector<int> remaining(in_.classes.size());
    size_t tenants = 0;
    for (size_t c = 0; c < in_.classes.size(); ++c) {
      const TenantClass& tc = in_.classes[c];
      if (std::none_of(alone_[c].begin(), alone_[c].end(), [](bool b) { return b; })) {
        for (int i = 0; i < tc.count; ++i) {
          plan.unplaced.push_back({TenantName(c, i), WhyNowhere(c)});
        }
        continue;
      }
      remaining[c] = tc.count;
      tenants += tc.count;
    }
    std::vector<Bin> bins;
    if (tenants <= kExactTenantLimit && !spread) {
      bins = Exact(remaining, &plan);
      plan.exact = true;
    } else {
      bins = Greedy(remaining, &plan);
    }
    if (in_.live) MatchToNode(&bins);
    Report(bins, &plan);
    Baseline(&plan);
    return plan;
  }

 private:
  // GPUs one tenant of the class spans (tensor parallelism), each holding one part.
  static int Parts(const TenantClass& tc) { return tc.tenant.work.tensor_parallel; }

  std::string TenantName(size_t c, int i) const {
    const TenantClass& tc = in_.classes[c];
    return tc.count == 1 ? tc.tenant.name : fmt::format("{}#{}", tc.tenant.name, i + 1);
  }

  std::string WhyNowhere(size_t c) const {
    std::string why;
    for (size_t k = 0; k < in_.fleet.size(); ++k) {
      const TenantLoad* l = &loads_[c][k];
      StrategyResult r =
          StrategyFor(ShareMode::kWhole).Evaluate(*in_.fleet[k].gpu, std::span(&l, 1));
      why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", in_.fleet[k].gpu->name, r.verdict);
    }
    return "fits no GPU kind of the fleet even alone (" + why + ")";
  }

  bool Fits(const Bin& bin) const {
    return FitsAny(*in_.fleet[bin.kind].gpu, bin.loads, in_.allowed);
  }

  struct Cost {
    size_t unplaced = 0;
    size_t gpus = 0;
    double price = 0;
    auto Key() const { return std::make_tuple(unplaced, gpus, price); }
  };

  // ---- Greedy: first-fit decreasing over tenant classes, under a few orderings. ----
  //
  // Identical tenants are placed together: a GPU that refused one tenant of a class refuses the
  // rest (adding tenants never helps any strategy), so each class scans the open GPUs once. A GPU
  // that has refused kMaxRefusals tenants is closed to further scans, which bounds the work when
  // every tenant is different. Which order packs best depends on the mix (memory-heavy, SLO-tight,
  // bandwidth-bound), so three are tried and the best plan kept.
  static constexpr int kMaxRefusals = 64;

  struct OpenBin {
    Bin bin;
    Need need;
    int refusals = 0;
  };

  struct Packing {
    std::vector<Bin> bins;
    std::vector<std::pair<size_t, int>> unplaced;  // class, how many
    Cost cost;
  };

  std::vector<Bin> Greedy(const std::vector<int>& remaining, Plan* plan) {
    std::vector<std::vector<size_t>> orders = {order_, order_, order_};
    auto tolerance = [&](size_t c) {  // how much slowdown its SLO allows (large = loose)
      const TenantLoad& l = loads_[c][home_[c]];
      return l.min_step_rate > 0 ? l.solo_step_rate() / l.min_step_rate : INFINITY;
    };
    std::stable_sort(orders[1].begin(), orders[1].end(),
                     [&](size_t a, size_t b) { return tolerance(a) < tolerance(b); });
    std::stable_sort(orders[2].begin(), orders[2].end(), [&](size_t a, size_t b) {
      return loads_[a][home_[a]].memory > loads_[b][home_[b]].memory;
    });
    std::optional<Packing> best;
    for (const auto& order : orders) {
      Packing p = FirstFitDecreasing(order, remaining);
      if (!best || p.cost.Key() < best->cost.Key()) best = std::move(p);
    }
    for (auto [c, count] : best->unplaced) {
      for (int i = 0; i < count; ++i) {
        plan->unplaced.push_back(
            {TenantName(c, remaining[c] - count + i), "no GPU left in the fleet that can hold it"});
      }
    }
    return std::move(best->bins);
  }

  Packing FirstFitDecreasing(const std::vector<size_t>& order, std::vector<int> remaining) const {
    Packing out;
    std::vector<OpenBin> open;
    std::vector<int> inventory;
    for (const FleetEntry& f : in_.fleet) inventory.push_back(f.count);
    for (size_t c : order) {
      if (Parts(in_.classes[c]) > 1) {
        for (; remaining[c] > 0; --remaining[c]) {
          int instance = in_.classes[c].count - remaining[c];
          if (!PlaceParts(c, instance, &open, &inventory, &out.cost)) {
            out.unplaced.push_back({c, remaining[c]});
            break;
          }
        }
        continue;
      }
      size_t b = 0;  // GPUs before b have refused this class
      while (remaining[c] > 0) {
        for (; b < open.size(); ++b) {
          if (open[b].refusals < kMaxRefusals && TryAdd(&open[b], c)) break;
        }
        if (b == open.size()) {
          std::optional<size_t> k = NewGpuKind(c, inventory);
          if (!k) {
            out.unplaced.push_back({c, remaining[c]});
            break;
          }
          --inventory[*k];
          out.cost.gpus += 1;
          out.cost.price += in_.fleet[*k].price_per_hour;
          open.push_back({Bin{*k, {}, {}, {}}, {}, 0});
          TryAdd(&open.back(), c);  // holds it alone by construction
        }
        --remaining[c];
      }
    }
    for (const auto& u : out.unplaced) out.cost.unplaced += u.second;
    for (OpenBin& ob : open) out.bins.push_back(std::move(ob.bin));
    return out;
  }

  // Adds one tenant of class `c` to the GPU if every check passes. Hot path: the necessary check
  // (Need) rejects most misfits before any strategy is asked.
  bool TryAdd(OpenBin* ob, size_t c) const {
    Bin& bin = ob->bin;
    if (!alone_[c][bin.kind]) return false;
    const GpuKind& gpu = *in_.fleet[bin.kind].gpu;
    const TenantLoad& l = loads_[c][bin.kind];
    Need need = ob->need;
    need.Add(l, gpu.memory_bytes);
    if (need.Within() && bin.loads.size() < size_t(kMpsMaxClients)) {
      bin.loads.push_back(&l);
      if (bin.loads.size() == 1 || Fits(bin)) {
        bin.classes.push_back(c);
        ob->need = need;
        return true;
      }
      bin.loads.pop_back();
    }
    ++ob->refusals;
    return false;
  }

  // Takes back the last tenant TryAdd added to the GPU.
  void Undo(OpenBin* ob) const {
    Bin& bin = ob->bin;
    ob->need.Add(*bin.loads.back(), in_.fleet[bin.kind].gpu->memory_bytes, -1);
    bin.loads.pop_back();
    bin.classes.pop_back();
    if (bin.parts.size() > bin.classes.size()) bin.parts.pop_back();
  }

  // Places job `instance` of tensor-parallel class `c`: its parts on as many distinct GPUs of one
  // kind (one node's, as far as the fleet is a list of kinds), first those open that take one
  // (first fit), then new ones; all or none. Returns whether it did.
  bool PlaceParts(size_t c, int instance, std::vector<OpenBin>* open, std::vector<int>* inventory,
                  Cost* cost) const {
    const size_t parts = size_t(Parts(in_.classes[c]));
    // Every kind that holds a part, in NewGpuKind's order (open GPUs of a kind with none left
    // count too).
    std::vector<int> untried(in_.fleet.size(), 1);
    while (std::optional<size_t> k = NewGpuKind(c, untried)) {
      untried[*k] = 0;
      std::vector<size_t> taken;
      for (size_t b = 0; b < open->size() && taken.size() < parts; ++b) {
        OpenBin& ob = (*open)[b];
        if (ob.bin.kind == *k && ob.refusals < kMaxRefusals && TryAdd(&ob, c)) taken.push_back(b);
      }
      size_t fresh = parts - taken.size();
      if (fresh > size_t((*inventory)[*k])) {
        for (size_t b : taken) Undo(&(*open)[b]);
        continue;
      }
      for (size_t i = 0; i < fresh; ++i) {
        --(*inventory)[*k];
        cost->gpus += 1;
        cost->price += in_.fleet[*k].price_per_hour;
        open->push_back({Bin{*k, {}, {}, {}}, {}, 0});
        TryAdd(&open->back(), c);  // holds a part alone by construction
        taken.push_back(open->size() - 1);
      }
      for (size_t i = 0; i < parts; ++i) {
        Bin& bin = (*open)[taken[i]].bin;
        bin.parts.resize(bin.classes.size());
        bin.parts.back() = {instance, int(i)};
      }
      return true;
    }
    return false;
  }

  // The kind to open for a tenant of class `c`: for the fewest GPUs, the one with the most
  // bandwidth among those that hold it and have GPUs left (then the cheapest).
  std::optional<size_t> NewGpuKind(size_t c, const std::vector<int>& inventory) const {
    std::optional<size_t> best;
    for (size_t k = 0; k < in_.fleet.size(); ++k) {
      if (inventory[k] == 0 || !alone_[c][k]) continue;
      const FleetEntry& f = in_.fleet[k];
      if (!best || f.gpu->bandwidth > in_.fleet[*best].gpu->bandwidth ||
          (f.gpu->bandwidth == in_.fleet[*best].gpu->bandwidth &&
           f.price_per_hour < in_.fleet[*best].price_per_hour)) {
        best = k;
      }
    }
    return best;
  }

  // ---- Exact: branch and bound over every assignment (small inputs). ----
  std::vector<Bin> Exact(const std::vector<int>& remaining, Plan* plan) {
    units_.clear();
    for (size_t c : order_) {
      for (int i = 0; i < remaining[c]; ++i) units_.push_back(c);
    }
    inventory_.clear();
    for (const FleetEntry& f : in_.fleet) inventory_.push_back(f.count);
    bins_.clear();
    assigned_.assign(units_.size(), -1);
    best_cost_ = {std::numeric_limits<size_t>::max(), 0, 0};
    Branch(0, {});
    // Placed tenants are named from #1 up (Report); the unplaced take the last names of their
    // class.
    std::vector<int> unplaced(in_.classes.size(), 0);
    for (size_t i = 0; i < units_.size(); ++i) {
      if (best_assigned_[i] < 0) {
        size_t c = units_[i];
        plan->unplaced.push_back({TenantName(c, remaining[c] - 1 - unplaced[c]++),
                                  "no GPU left in the fleet that can hold it"});
      }
    }
    return best_bins_;
  }

  void Branch(size_t i, Cost cost) {
    if (cost.Key() >= best_cost_.Key()) return;
    if (i == units_.size()) {
      best_cost_ = cost;
      best_bins_ = bins_;
      best_assigned_ = assigned_;
      return;
    }
    size_t c = units_[i];
    // Identical tenants go to bins in non-decreasing order: no permuted duplicates.
    int lowest = (i > 0 && units_[i - 1] == c) ? std::max(assigned_[i - 1], 0) : 0;
    for (size_t b = size_t(lowest); b < bins_.size(); ++b) {
      // Index, never hold a reference across Branch: deeper levels push bins and may reallocate.
      bins_[b].loads.push_back(&loads_[c][bins_[b].kind]);
      if (Fits(bins_[b])) {
        bins_[b].classes.push_back(c);
        assigned_[i] = int(b);
        Branch(i + 1, cost);
        bins_[b].classes.pop_back();
      }
      bins_[b].loads.pop_back();
    }
    for (size_t k = 0; k < in_.fleet.size(); ++k) {
      if (inventory_[k] == 0 || !alone_[c][k]) continue;
      --inventory_[k];
      bins_.push_back({k, {c}, {&loads_[c][k]}, {}});
      assigned_[i] = int(bins_.size() - 1);
      Branch(i + 1, {cost.unplaced, cost.gpus + 1, cost.price + in_.fleet[k].price_per_hour});
      bins_.pop_back();
      ++inventory_[k];
    }
    assigned_[i] = -1;
    Branch(i + 1, {cost.unplaced + 1, cost.gpus, cost.price});
  }

  // ---- A live node (PlanInput::live) ----

  // Where the node's tenants run, for those the plan names: the class of each, by node GPU.
  std::map<int, std::map<size_t, int>> RunningClassesByGpu() const {
    std::map<std::string, size_t> class_of;  // gpumuxd id -> class
    for (size_t c = 0; c < in_.classes.size(); ++c) {
      for (int k = 0; k < in_.classes[c].count; ++k) {
        class_of[TenantIdFor(TenantName(c, k))] = c;
        for (int part = 0; Parts(in_.classes[c]) > 1 && part < Parts(in_.classes[c]); ++part)
          class_of[TenantIdFor(fmt::format("{}.tp{}", TenantName(c, k), part))] = c;
      }
    }
    std::map<int, std::map<size_t, int>> running;
    for (const auto& [id, where] : in_.live->tenants) {
      if (auto c = class_of.find(id); c != class_of.end()) ++running[where.gpu][c->second];
    }
    return running;
  }

  // Gives each of `bins` a node GPU (Bin::node_gpu) and orders them by it: the node GPU of its
  // kind where most of its tenants' classes run (greedily, the pair with the most first); the
  // others, in order, the first node GPU of their kind where nothing runs, else the first free one
  // of their kind. A node GPU's kind is its size (SameKindOfGpu); one of unknown size is of the
  // kind the plan numbered there. A plan of more GPUs than the node numbers the rest past the
  // node's (the apply then says what the node lacks).
  void MatchToNode(std::vector<Bin>* bins) const {
    const size_t n = bins->size(), node = std::max(n, in_.live->gpus.size());
    std::vector<size_t> numbered_kind(n);  // the kind the plan numbered at each position
    for (size_t g = 0; g < n; ++g) numbered_kind[g] = (*bins)[g].kind;
    auto of_kind = [&](size_t b, size_t g) {
      const uint64_t shown = g < in_.live->gpus.size() ? in_.live->gpus[g].memory_bytes : 0;
      if (shown > 0)
        return SameKindOfGpu(shown, uint64_t(in_.fleet[(*bins)[b].kind].gpu->memory_bytes));
      return g >= n || numbered_kind[g] == (*bins)[b].kind;
    };
    std::map<int, std::map<size_t, int>> running = RunningClassesByGpu();
    std::vector<bool> busy(node, false);  // some tenant, the plan's or not, runs there
    for (const auto& [id, where] : in_.live->tenants)
      if (where.gpu >= 0 && size_t(where.gpu) < node) busy[size_t(where.gpu)] = true;
    std::vector<std::vector<int>> overlap(n, std::vector<int>(node, 0));
    for (size_t b = 0; b < n; ++b) {
      std::map<size_t, int> planned;
      for (size_t c : (*bins)[b].classes) ++planned[c];
      for (size_t g = 0; g < node; ++g) {
        if (!of_kind(b, g)) continue;
        for (auto [c, count] : planned) overlap[b][g] += std::min(count, running[int(g)][c]);
      }
    }
    std::vector<int> position(n, -1);
    std::vector<bool> taken(node, false);
    for (;;) {
      size_t best_b = n, best_g = node;
      for (size_t b = 0; b < n; ++b) {
        for (size_t g = 0; g < node && position[b] < 0; ++g) {
          if (!taken[g] && overlap[b][g] > 0 &&
              (best_b == n || overlap[b][g] > overlap[best_b][best_g]))
            best_b = b, best_g = g;
        }
      }
      if (best_b == n) break;
      position[best_b] = int(best_g);
      taken[best_g] = true;
    }
    for (bool idle_only : {true, false}) {
      for (size_t b = 0; b < n; ++b) {
        for (size_t g = 0; g < node && position[b] < 0; ++g) {
          if (!taken[g] && of_kind(b, g) && !(idle_only && busy[g]))
            position[b] = int(g), taken[g] = true;
        }
      }
    }
    for (size_t b = 0; b < n; ++b) {  // no GPU of its kind left: the first free one
      for (size_t g = 0; g < node && position[b] < 0; ++g)
        if (!taken[g]) position[b] = int(g), taken[g] = true;
    }
    for (size_t b = 0; b < n; ++b) (*bins)[b].node_gpu = position[b];
    std::stable_sort(bins->begin(), bins->end(),
                     [](const Bin& x, const Bin& y) { return x.node_gpu < y.node_gpu; });
  }

  // The node GPU of bins[b]: its node_gpu, or (no live node) its position.
  static int NodeGpuOf(const std::vector<Bin>& bins, size_t b) {
    return bins[b].node_gpu >= 0 ? bins[b].node_gpu : int(b);
  }

  // Which of its class's names (instance indices) each tenant of each bin takes; tensor-parallel
  // parts keep their job's (Bin::Part). In order; with a live node, a running tenant keeps its
  // name on the GPU it runs on, and the other tenants take the names left, those running nowhere
  // on the node first.
  std::vector<std::vector<int>> NameIndices(const std::vector<Bin>& bins, const Plan& plan) const {
    std::vector<std::vector<int>> index(bins.size());
    std::vector<int> next(in_.classes.size(), 0);
    for (size_t b = 0; b < bins.size(); ++b) {
      for (size_t c : bins[b].classes) index[b].push_back(in_.live ? -1 : next[c]++);
    }
    if (!in_.live) return index;
    auto is_part = [&](size_t b, size_t i) {
      return i < bins[b].parts.size() && bins[b].parts[i].part >= 0;
    };
    std::vector<std::vector<int>> gpu_of(in_.classes.size());  // where name k of class c runs
    for (size_t c = 0; c < in_.classes.size(); ++c) {
      for (int k = 0; k < in_.classes[c].count; ++k) {
        auto t = in_.live->tenants.find(TenantIdFor(TenantName(c, k)));
        gpu_of[c].push_back(t == in_.live->tenants.end() ? -1 : t->second.gpu);
      }
    }
    auto runs_on = [&](size_t c, int k) { return gpu_of[c][size_t(k)]; };
    std::set<std::pair<size_t, int>> taken;
    for (const UnplacedTenant& u : plan.unplaced) {
      for (size_t c = 0; c < in_.classes.size(); ++c) {
        for (int k = 0; k < in_.classes[c].count; ++k)
          if (TenantName(c, k) == u.name) taken.insert({c, k});
      }
    }
    auto take = [&](size_t b, size_t i, auto&& wanted) {
      const size_t c = bins[b].classes[i];
      for (int k = 0; index[b][i] < 0 && k < in_.classes[c].count; ++k) {
        if (!taken.count({c, k}) && wanted(runs_on(c, k))) {
          index[b][i] = k;
          taken.insert({c, k});
        }
      }
    };
    for (size_t b = 0; b < bins.size(); ++b) {
      for (size_t i = 0; i < bins[b].classes.size(); ++i)
        if (!is_part(b, i)) take(b, i, [&](int gpu) { return gpu == NodeGpuOf(bins, b); });
    }
    for (size_t b = 0; b < bins.size(); ++b) {
      for (size_t i = 0; i < bins[b].classes.size(); ++i)
        if (!is_part(b, i)) take(b, i, [](int gpu) { return gpu < 0; });
    }
    for (size_t b = 0; b < bins.size(); ++b) {
      for (size_t i = 0; i < bins[b].classes.size(); ++i)
        if (!is_part(b, i)) take(b, i, [](int) { return true; });
    }
    return index;
  }

  // The strategy for the planned GPU that is node GPU `position`: with a live node whose GPU there
  // runs some of `named`, one that keeps them where they run (ChooseStrategyKeeping).
  GpuChoice Choose(const GpuKind& gpu, const std::vector<Tenant>& named,
                   std::span<const TenantLoad* const> loads, size_t position) const {
    const LiveGpu now =
        in_.live && position < in_.live->gpus.size() ? in_.live->gpus[position] : LiveGpu{};
    MigLayout instances;  // the GPU's instances now, placed as the driver placed them
    if (now.mode == ShareMode::kMig && gpu.mig) {
      try {
        instances = PlaceInCreationOrder(*gpu.mig, now.layout);
      } catch (const Error&) {
        // Another geometry than the plan's kind: its instances cannot be kept as such.
      }
    }
    std::vector<MigInstance> running_on(named.size());
    bool runs_here = false;
    for (size_t i = 0; in_.live && i < named.size(); ++i) {
      auto t = in_.live->tenants.find(TenantIdFor(named[i].name));
      if (t == in_.live->tenants.end() || t->second.gpu != int(position)) continue;
      runs_here = true;
      if (size_t k = size_t(t->second.instance); k < instances.instances.size())
        running_on[i] = instances.instances[k];
    }
    if (!runs_here) return ChooseStrategy(gpu, loads, in_.allowed);
    return ChooseStrategyKeeping(gpu, loads, in_.allowed, now.mode, running_on);
  }

  // ---- Reporting ----
  void Report(const std::vector<Bin>& bins, Plan* plan) const {
    const std::vector<std::vector<int>> name_index = NameIndices(bins, *plan);
    double mem_cap = 0, bw_cap = 0, flops_cap = 0;
    double mem = 0, bw = 0, flops = 0;
    for (size_t b = 0; b < bins.size(); ++b) {
      const Bin& bin = bins[b];
      const GpuKind& gpu = *in_.fleet[bin.kind].gpu;
      std::vector<Tenant> named;
      named.reserve(bin.classes.size());
      for (size_t i = 0; i < bin.classes.size(); ++i) {
        size_t c = bin.classes[i];
        named.push_back(in_.classes[c].tenant);
        // A tensor-parallel job's part: "<job>.tp<part>" (a tenant id gpumuxd takes).
        Bin::Part p = i < bin.parts.size() ? bin.parts[i] : Bin::Part{};
        named.back().name = p.part >= 0 ? fmt::format("{}.tp{}", TenantName(c, p.instance), p.part)
                                        : TenantName(c, name_index[b][i]);
      }
      std::vector<TenantLoad> loads;
      loads.reserve(named.size());
      for (const Tenant& t : named) loads.push_back(MakeLoad(t, gpu));
      std::vector<const TenantLoad*> ptrs;
      for (const TenantLoad& l : loads) ptrs.push_back(&l);
      GpuChoice choice = Choose(gpu, named, ptrs, size_t(NodeGpuOf(bins, b)));
      PlannedGpu pg;
      pg.fleet_index = bin.kind;
      pg.node_gpu = bin.node_gpu;
      for (const Tenant& t : named) pg.tenant_names.push_back(t.name);
      pg.chosen = *choice.chosen;  // the bin was admitted by FitsAny, so a strategy fits
      pg.considered = std::move(choice.considered);
      for (const TenantOutcome& o : pg.chosen.tenants) {
        mem += o.memory;
        bw += o.bandwidth;
        flops += o.flops;
      }
      mem_cap += gpu.memory_bytes;
      bw_cap += gpu.bandwidth;
      flops_cap += gpu.PeakFlops(DType::kBf16);
      plan->shared.price_per_hour += in_.fleet[bin.kind].price_per_hour;
      plan->gpus.push_back(std::move(pg));
    }
    plan->shared.gpus = int(bins.size());
    if (!bins.empty()) {
      plan->shared.memory = mem / mem_cap;
      plan->shared.bandwidth = bw / bw_cap;
      plan->shared.flops = flops / flops_cap;
    }
  }

  void Baseline(Plan* plan) const {
    std::vector<int> inventory;
    for (const FleetEntry& f : in_.fleet) inventory.push_back(f.count);
    double mem_cap = 0, bw_cap = 0, flops_cap = 0, mem = 0, bw = 0, flops = 0;
    Utilisation& u = plan->baseline;
    for (size_t c = 0; c < in_.classes.size(); ++c) {
      const int parts = Parts(in_.classes[c]);
      for (int i = 0; i < in_.classes[c].count; ++i) {
        size_t k = 0;
        while (k < in_.fleet.size() && !(inventory[k] >= parts && alone_[c][k])) ++k;
        if (k == in_.fleet.size()) {
          plan->baseline_unplaced.push_back(
              {TenantName(c, i),
               std::none_of(alone_[c].begin(), alone_[c].end(), [](bool b) { return b; })
                   ? WhyNowhere(c)
                   : "no GPU left in the fleet that can hold it"});
          continue;
        }
        inventory[k] -= parts;
        const GpuKind& gpu = *in_.fleet[k].gpu;
        const TenantLoad& l = loads_[c][k];
        u.gpus += parts;
        u.price_per_hour += parts * in_.fleet[k].price_per_hour;
        mem += parts * l.memory;
        bw += parts * l.solo_step_rate() * in_.classes[c].tenant.work.bytes_per_step;
        flops += parts * l.solo_step_rate() * in_.classes[c].tenant.work.flops_per_step;
        mem_cap += parts * gpu.memory_bytes;
        bw_cap += parts * gpu.bandwidth;
        flops_cap += parts * gpu.PeakFlops(DType::kBf16);
      }
    }
    if (u.gpus > 0) {
      u.memory = mem / mem_cap;
      u.bandwidth = bw / bw_cap;
      u.flops = flops / flops_cap;
    }
  }

  const PlanInput& in_;
  std::vector<std::vector<TenantLoad>> loads_;  // [class][fleet kind]
  std::vector<std::vector<bool>> alone_;        // fits that kind alone
  std::vector<double> size_;                    // largest demand fraction, for ordering
  std::vector<size_t> home_;                    // first kind that holds the class alone
  std::vector<size_t> order_;                   // classes, largest first
  // Exact search state.
  std::vector<size_t> units_;
  std::vector<int> inventory_;
  std::vector<Bin> bins_, best_bins_;
  std::vector<int> assigned_, best_assigned_;
  Cost best_cost_;
};

}  // namespace

Plan PlanFleet(const PlanInput& input) { return Planner(input).Run(); }

double GpuLowerBound(const PlanInput& input) {
  // Every tenant uses, on whichever kind it lands, at least the smallest fraction of one GPU it
  // would need on any kind: the sum of those fractions bounds the GPU count, per dimension.
  double mem = 0, bw = 0, compute = 0;
  for (const TenantClass& tc : input.classes) {
    double m = INFINITY, b = INFINITY, c = INFINITY;
    for (const FleetEntry& f : input.fleet) {
      TenantLoad l = MakeLoad(tc.tenant, *f.gpu);
      m = std::min(m, l.memory / f.gpu->memory_bytes);
      b = std::min(b, l.min_step_rate * l.bandwidth_use);
      c = std::min(c, l.min_step_rate * l.compute_use);
    }
    double gpus_each = tc.count * tc.tenant.work.tensor_parallel;  // every part counts
    mem += gpus_each * m;
    bw += gpus_each * b;
    compute += gpus_each * c;
  }
  return std::max({mem, bw, compute});
}

}  // namespace gpumux
