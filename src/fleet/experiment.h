// An experiment: several policies, several seeds, on one cluster and trace; and the curves the FGD
// paper reports, computed the way its analysis scripts compute them (reference A.1 C13): the value
// at "X% arrived" is the mean over the per-pod rows whose arrived GPU request, as a percentage of
// capacity, rounds (half to even) to X; if no row does, the window widens to X±1 (and further, one
// point at a time, on small clusters where pods arrive in bigger steps).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fleet/simulator.h"

namespace gpumux::fleet {

struct CurvePoint {
  double allocation_pct = 0;     // allocated GPU milli / capacity
  double unallocated_pct = 0;    // 100 - allocation
  double frag_capacity_pct = 0;  // fragmentation / capacity
  double frag_idle_pct = 0;      // fragmentation / idle GPU milli
  double failed_pods = 0;
  bool present = false;  // some row fell in the window
};

// Points at arrived = 0, 1, ..., max_pct.
std::vector<CurvePoint> Curve(const Simulation& sim, int max_pct);

struct ExperimentOptions {
  std::vector<std::string> policies;
  int seeds = 10;
  uint64_t first_seed = 42;  // the artifact's seeds are 42..51
  double inflation = 1.3;
  int max_pct = 130;
  int jobs = 1;                  // runs in parallel
  bool scan_every_node = false;  // every node for every pod (Simulate's): the bench's baseline
  std::function<void(int done, int total)> progress;  // called from the calling thread
};

struct PolicyCurves {
  std::string policy;
  std::vector<std::vector<CurvePoint>> per_seed;
  std::vector<double> seconds_per_run;
};

struct Stat {
  double mean = 0, sd = 0;  // population standard deviation over seeds
};
Stat At(const PolicyCurves& curves, int pct, double CurvePoint::*field);
// Mean and population standard deviation of `values`; NaN for none.
Stat MeanAndSd(const std::vector<double>& values);

// Runs every (policy, seed). Throws Error (bad input) for an unknown policy before running
// anything.
std::vector<PolicyCurves> RunExperiment(const std::vector<NodeSpec>& nodes,
                                        const std::vector<PodSpec>& pods,
                                        const ExperimentOptions& options);

struct PolicyChurn {
  std::string policy;
  std::vector<ChurnResult> per_seed;
};
// The departures experiment (SimulateDepartures at `time_scale`) for every (policy, seed) of
// `options` (its inflation and max_pct do not apply). Throws Error (bad input) for an unknown
// policy before running anything, and for pods without times.
std::vector<PolicyChurn> RunDeparturesExperiment(const std::vector<NodeSpec>& nodes,
                                                 const std::vector<PodSpec>& pods,
                                                 const ExperimentOptions& options,
                                                 double time_scale);

}  // namespace gpumux::fleet
