#include "node/agent/device_slot.h"

#include <sys/stat.h>
#include <unistd.h>

#include <optional>

#include "service/log.h"

namespace gpumux::agent {
namespace {

// Opens gpumuxd's own ledger at `path` for `d`, or makes it anew (saying why) when what is there is
// not one for this device: cut short, foreign, of another version or of another GPU.
// gpumuxd writes them alone (Ledger::OpenSole, MakeSole: no lock anyone could hold); `mode`:
// 0644 for the view tenants map, 0600 for the authority.
std::unique_ptr<node::Ledger> OpenOrRemake(const std::string& path, const node::Device& d,
                                           mode_t mode) {
  std::string problem;
  if (std::optional<node::Ledger> ledger = node::OpenDeviceLedger(path, d, &problem, mode)) {
    chmod(path.c_str(), mode);
    return std::make_unique<node::Ledger>(std::move(*ledger));
  }
  service::Log("warn", "ledger made anew: what was there cannot be used",
               {{"ledger", path}, {"reason", problem}});
  node::Ledger::Retire(path);  // for the processes that still map it (node/shim/governor.h)
  return std::make_unique<node::Ledger>(node::Ledger::MakeSole(path, d.memory, d.name, mode));
}

}  // namespace

DeviceSlot DeviceSlot::Open(const node::Device& d, const std::string& runtime_dir,
                            std::unique_ptr<DeviceMeter> meter) {
  std::string path = runtime_dir + "/" + node::DeviceStem(d) + ".ledger";
  // Tenant processes of every user map it, read-only: gpumuxd alone writes it.
  std::unique_ptr<node::Ledger> ledger = OpenOrRemake(path, d, 0644);
  std::string private_dir = runtime_dir + "/private";
  mkdir(private_dir.c_str(), 0700);
  chmod(private_dir.c_str(), 0700);
  std::string authority_path = private_dir + "/" + node::DeviceStem(d) + ".ledger";
  std::unique_ptr<node::Ledger> authority = OpenOrRemake(authority_path, d, 0600);
  return {d, path, std::move(ledger), authority_path, std::move(authority), std::move(meter)};
}

uint64_t DeviceSlot::ReclaimDead() {
  uint64_t bytes = authority->ReclaimDead();
  PublishUsage();
  return bytes;
}

void DeviceSlot::PublishUsage() {
  ledger->CopyProcessesFrom(*authority);
  // The usage tenants read is what gpumuxd granted, whatever was written there since.
  for (const node::TenantUsage& a : authority->Snapshot()) {
    if (std::optional<int> s = ledger->FindTenant(a.id)) ledger->SetTenantUsed(*s, a.used);
  }
}

void DeviceSlot::RemakeView() {
  service::Log("warn",
               "view ledger overwritten outside gpumuxd; made anew (memory grants are unaffected)",
               {{"ledger", ledger_path}});
  node::Ledger::Retire(ledger_path);
  ledger = std::make_unique<node::Ledger>(
      node::Ledger::MakeSole(ledger_path, device.memory, device.name, 0644));
}

void DeviceSlot::Forget(const std::string& id) {
  for (node::Ledger* l : {ledger.get(), authority.get()}) {
    if (std::optional<int> s = l->FindTenant(id)) l->RemoveTenant(*s);
  }
  seen.erase(id);
  memory.erase(id);
  memory_kills.erase(id);
}

void DeviceSlot::RemoveFiles() const {
  unlink(ledger_path.c_str());
  unlink(authority_path.c_str());
}

}  // namespace gpumux::agent
