#include "integrations/kubernetes/mig_maker.h"

#include <cstdio>

#include "base/error.h"

namespace gpumux::k8s {

using nlohmann::json;

MigMaker::MigMaker(agent::AgentClient* agent, std::string record_path,
                   std::chrono::milliseconds idle_grace)
    : agent_(agent), idle_grace_(idle_grace), made_(std::move(record_path)) {}

std::optional<MigGpu> MigMaker::Read(const json& g, const json& tenants,
                                     const std::set<std::string>& made) {
  std::optional<MigGpu> mig = MigGpu::Read(g, tenants);
  if (mig)
    for (MigGpu::Instance& i : mig->instances)
      i.kept = !made.count(MadeMigInstances::Key(mig->gpu, i.placement.Entry()));
  return mig;
}

std::set<std::string> MigMaker::made() const {
  std::lock_guard lock(made_mu_);
  return made_.keys();
}

MigGpu::Instance MigMaker::Make(const std::string& device, const std::string& where) {
  std::optional<int> gpu = GpuOfMigPlacementDevice(device);
  auto find = [&]() -> std::pair<std::optional<MigGpu>, std::optional<MigPlacement>> {
    if (!gpu) return {};
    json gpus = agent_->Gpus(), tenants = agent_->Tenants();
    for (const json& g : gpus.at("gpus")) {
      if (g.value("index", -1) != *gpu) continue;
      std::optional<MigGpu> mig = Read(g, tenants, made());
      if (mig) return {mig, mig->Offered(device)};
    }
    return {};
  };
  auto [mig, placement] = find();
  if (!placement)
    throw NotFound(where + ": device " + device +
                   " is not one this node offers now (its GPU is not in MIG mode, or another "
                   "tenant holds an instance there)");
  const std::string key = MadeMigInstances::Key(*gpu, placement->Entry());
  if (!mig->InstanceAt(*placement)) {
    try {
      agent_->SetMode(*gpu, {{"mode", "mig"}, {"layout", mig->LayoutMaking(*placement)}});
    } catch (const Error& e) {
      throw e.Within(where + ": making MIG instance " + placement->Entry() + " on GPU " +
                     std::to_string(*gpu));
    }
    try {
      std::lock_guard lock(made_mu_);
      made_.Add(key);
    } catch (const Error& e) {  // the tenant runs; only its instance's removal once idle is lost
      std::fprintf(stderr, "gpumux: %s\n", e.what());
    }
    std::tie(mig, placement) = find();
  }
  const MigGpu::Instance* made = mig && placement ? mig->InstanceAt(*placement) : nullptr;
  if (!made) throw Unavailable(where + ": the MIG instance of " + device + " was not made");
  idle_since_.erase(key);
  return *made;
}

std::vector<std::string> MigMaker::RemoveIdle() {
  std::vector<std::string> removed;
  std::lock_guard lock(layout_mu_);
  json gpus = agent_->Gpus(), tenants = agent_->Tenants();
  const std::set<std::string> made_keys = made();
  const auto now = std::chrono::steady_clock::now();
  std::map<std::string, std::chrono::steady_clock::time_point> idle;
  std::vector<std::string> gone;  // made here, no longer there (removed by someone else)
  for (const json& g : gpus.at("gpus")) {
    std::optional<MigGpu> mig = Read(g, tenants, made_keys);
    if (!mig && g.value("mode", "") == "mig") continue;  // no geometry in the answer: cannot tell
    std::set<std::string> here;  // the instances of this GPU now, by their keys
    if (mig)
      for (const MigGpu::Instance& i : mig->instances)
        here.insert(MadeMigInstances::Key(mig->gpu, i.placement.Entry()));
    const std::string prefix = MadeMigInstances::Key(g.value("index", -1), "");
    for (const std::string& key : made_keys)
      if (key.rfind(prefix, 0) == 0 && !here.count(key)) gone.push_back(key);
    if (!mig) continue;
    std::set<int> expired;  // idle for the grace period: removed together, in one change
    std::vector<std::string> keys, named;  // theirs, and as the answer names them
    for (const MigGpu::Instance& i : mig->instances) {
      std::string key = MadeMigInstances::Key(mig->gpu, i.placement.Entry());
      if (!i.idle() || i.kept) continue;
      auto since = idle_since_.find(key);
      idle[key] = since == idle_since_.end() ? now : since->second;
      if (now - idle[key] < idle_grace_) continue;
      expired.insert(i.index);
      keys.push_back(key);
      named.push_back("GPU " + std::to_string(mig->gpu) + " " + i.placement.Entry());
    }
    if (expired.empty()) continue;
    try {
      agent_->SetMode(mig->gpu, {{"mode", "mig"}, {"layout", mig->LayoutWithout(expired)}});
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kConflict) throw;
      continue;  // a tenant came, or a process gpumuxd does not know runs there: next call
    }
    for (const std::string& key : keys) idle.erase(key);
    gone.insert(gone.end(), keys.begin(), keys.end());
    removed.insert(removed.end(), named.begin(), named.end());
  }
  idle_since_ = std::move(idle);
  std::lock_guard made_lock(made_mu_);
  made_.Forget(gone);
  return removed;
}

}  // namespace gpumux::k8s
