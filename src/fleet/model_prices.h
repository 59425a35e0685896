// What a GPU of each model is worth to the pods that can use only some models, as the fleet fills:
// gpumux's price for consuming free GPU milli of a model (policies/gpumux_policy.cc).
//
// Fragmentation measures (fragmentation.h) ask whether the shapes still fit on a node. A pod that
// may go anywhere and takes a whole free GPU of a scarce model leaves those shapes fitting, so no
// fragment grows, yet the pods confined to that model have one GPU fewer; FGD's measure lets
// flexible pods eat the scarce models while the plentiful one is left over. The price of model m
// is, over the sets of models M that the target workload's gpu_spec shapes are confined to and
// that contain m, the largest ratio of demand to supply: the GPU request share of the shapes
// confined to M (or to a subset of it) times the fleet's free GPU milli (what is still to come, if
// arrivals go on until the fleet is full), over the free GPU milli of M's models. Consuming g milli
// of model m then costs price(m) x g milli of confined demand that has one GPU less to go to: 0 for
// models no constrained shape is confined to, more than g where their demand already exceeds what
// is left. A workload without gpu_spec shapes prices every model at 0.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "fleet/cluster.h"
#include "fleet/fragmentation.h"

namespace gpumux::fleet {

class ModelPrices {
 public:
  // The confined model sets of `target`'s GPU shapes and their request shares. `target` need not
  // outlive this.
  ModelPrices(const Cluster& cluster, const TargetWorkload& target);

  // Whether any shape is confined to some models (else every price is 0).
  bool any() const { return !confined_.empty(); }

  // The price per GPU milli of `model` (an index into Cluster::models()) for `cluster` as it is
  // now, recomputed only when the allocated share of the fleet's GPU has moved by kStep since the
  // last computation (prices move slowly; walking every node on every call would not). Not
  // thread-safe (one per policy, one policy per run).
  double Of(const Cluster& cluster, int model);

  static constexpr double kStep = 0.005;  // of the fleet's GPU capacity

 private:
  void Recompute(const Cluster& cluster);
  std::vector<std::pair<ModelMask, double>> confined_;  // model set, share of the GPU request
  std::vector<double> price_;                           // per model
  int64_t from_ = 1, to_ = 0;  // the allocated milli price_ holds for: [from_, to_)
};

}  // namespace gpumux::fleet
