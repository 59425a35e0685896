// `gpumux slurm gres-conf`: the gres.conf and slurm.conf lines for this node's GPUs (real through
// NVML, or simulated), with shard counts derived from GPU memory.
#include <fmt/format.h>

#include <memory>

#include "base/error.h"
#include "cli/commands.h"
#include "core/catalog.h"
#include "core/units.h"
#include "integrations/slurm/gres_conf.h"

namespace gpumux {
namespace {

struct GresConfCliOptions {
  std::string sim;
  int gpus = 1;
  std::string shard_size = "1GiB";
  std::string node = "NODE";
  std::string device_file = "/dev/nvidia{}";
  std::vector<std::string> catalogs;
};

int WriteGresConf(const GresConfCliOptions& o) {
  std::vector<node::Device> gpus;
  if (!o.sim.empty()) {
    Catalog catalog = Catalog::LoadBundled();
    for (const std::string& path : o.catalogs) catalog.AddFile(path);
    const GpuKind& kind = catalog.FindGpu(o.sim);
    for (int i = 0; i < o.gpus; ++i) gpus.push_back(node::SimulatedDevice(kind, i));
  } else {
    for (int i = 0, n = node::RealDeviceCount(); i < n; ++i) gpus.push_back(node::RealDevice(i));
  }
  uint64_t shard = 0;
  try {
    shard = uint64_t(ParseBytes(o.shard_size));
  } catch (const Error& e) {
    throw e.Within("--shard-size");
  }
  fmt::print("{}", slurm::GresConf(gpus, {o.node, shard, o.device_file}));
  return kExitOk;
}

}  // namespace

Command AddSlurmCommand(CLI::App& app) {
  auto o = std::make_shared<GresConfCliOptions>();
  CLI::App* slurm = app.add_subcommand("slurm", "Slurm integration helpers");
  slurm->require_subcommand(1);
  CLI::App* sub = slurm->add_subcommand(
      "gres-conf",
      "Print gres.conf and slurm.conf lines for this node's GPUs (shards from GPU memory)");
  sub->add_option("--sim", o->sim,
                  "describe simulated GPUs of this catalog kind instead of the real ones");
  sub->add_option("--gpus", o->gpus, "how many simulated GPUs (with --sim)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--shard-size", o->shard_size,
                  "memory per shard (gpumuxd --shard-size must match)")
      ->capture_default_str();
  sub->add_option("--node", o->node, "the node's NodeName")->capture_default_str();
  sub->add_option("--device-file", o->device_file, "device file per GPU; {} is the index")
      ->capture_default_str();
  sub->add_option("--catalog", o->catalogs, "extra catalog file with your own GPU kinds");
  return {slurm, [o] { return WriteGresConf(*o); }};
}

}  // namespace gpumux
