#include "node/agent/agent.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/cgroup.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/process.h"
#include "core/mig_layout.h"
#include "core/units.h"
#include "node/agent/agent_client.h"
#include "node/agent/metrics.h"
#include "node/agent/request_body.h"
#include "service/log.h"

namespace gpumux::agent {
namespace {

using nlohmann::json;

// Text in an answer that did not come from gpumuxd (an id, a UUID) may hold bytes that are not
// UTF-8; they are replaced rather than allowed to fail the answer.
HttpResponse Json(int status, const json& body) {
  return {status, body.dump(2, ' ', false, json::error_handler_t::replace) + "\n"};
}
// Where a tenant is and its compute cap: what the admission answer and the tenant list share.
json TenantJson(const TenantRecord& t) {
  json gpus = json::array(), places = json::array();
  for (auto [gpu, instance] : t.Places()) {
    gpus.push_back(gpu);
    places.push_back(std::to_string(gpu) + (instance < 0 ? "" : "." + std::to_string(instance)));
  }
  return {{"id", t.id},
          {"gpu", t.gpu},
          {"gpus", gpus},
          {"places", places},  // "GPU" or "GPU.INSTANCE", each device it is admitted on
          {"instance", t.instance},
          {"compute_cap_percent", t.limits.cap_permille / 10.0}};
}
// The answer for a request gpumuxd refuses: HttpStatus maps the error's code (base/error.h).
HttpResponse Refusal(const Error& e) { return Json(HttpStatus(e.code()), {{"error", e.what()}}); }

}  // namespace

Agent::Agent(AgentConfig config, std::unique_ptr<ShareBackend> backend)
    : config_(std::move(config)),
      backend_(std::move(backend)),
      store_(config_.state_path),
      memory_(config_.context_allowance, config_.kill_over_quota) {
  mkdir(config_.runtime_dir.c_str(), 0755);
  chmod(config_.runtime_dir.c_str(), 0755);  // tenants of every user map the ledgers in it
  // Tenants' activity files were files here before they were sealed memory files (2026-12-06);
  // processes that still map one keep it.
  std::error_code ignored;
  std::filesystem::remove_all(config_.runtime_dir + "/activity", ignored);
  for (const node::Device& d : config_.gpus) gpus_.push_back({d, ShareMode::kTimeSlice, {}, {}});
  MatchCalibrations();
  for (const AgentStore::GpuMode& m : store_.GpuModes()) {
    if (m.gpu < 0 || size_t(m.gpu) >= gpus_.size()) continue;
    gpus_[size_t(m.gpu)].mode = ShareMode(m.mode);
    gpus_[size_t(m.gpu)].layout = m.layout;
  }
  for (Gpu& g : gpus_) {
    std::vector<node::Device> instances;
    try {
      if (g.mode != ShareMode::kMig) backend_->Prepare(g.device, g.mode);
      if (g.mode != ShareMode::kTimeSlice)
        instances = backend_->SetMode(g.device, g.mode, g.layout);
    } catch (const Error& e) {  // the driver refuses, or a stored layout the GPU no longer takes
      service::Log("warn", "cannot restore the GPU's sharing mode",
                   {{"gpu", std::to_string(g.device.index)}, {"reason", e.what()}});
    }
    // A MIG layout that could not be restored leaves the GPU without slots: its tenants wait in the
    // store.
    BuildSlots(g, g.mode == ShareMode::kMig ? instances : std::vector<node::Device>{g.device});
  }
  for (const TenantRecord& t : store_.All()) {
    if (!Everywhere(t)) {
      service::Log(
          "warn",
          "stored tenant names a GPU or MIG instance this node no longer has; kept in the store, "
          "not admitted",
          {{"tenant", t.id},
           {"gpu", std::to_string(t.gpu)},
           {"instance", std::to_string(t.instance)}});
      continue;
    }
    Apply(t);
    service::Log("info", "tenant restored", {{"tenant", t.id}, {"gpu", std::to_string(t.gpu)}});
  }
  const std::vector<TenantRecord> tenants = store_.All();
  for (Gpu& g : gpus_) {
    for (DeviceSlot& slot : g.slots) {
      const std::vector<const TenantRecord*> here = TenantsOn(slot, tenants);
      memory_.AdoptUngranted(slot, here);
      // The limits the driver holds for tenants whose processes ran on meanwhile: their groups
      // learnt again from them.
      std::vector<std::pair<pid_t, int>> processes;
      slot.authority->ProcessTenants(&processes);
      for (const TenantRecord* t : here) {
        std::optional<int> index = slot.authority->FindTenant(t->id);
        for (auto [pid, of] : processes)
          if (index && of == *index) HoldInDriver(slot, *t, pid);
      }
    }
  }
}

void Agent::BuildSlots(Gpu& g, const std::vector<node::Device>& devices) {
  std::vector<DeviceSlot> slots;
  for (const node::Device& d : devices) {
    slots.push_back(DeviceSlot::Open(d, config_.runtime_dir, backend_->Meter(d)));
    slots.back().enforcement = backend_->Enforcement(d);
  }
  g.slots = std::move(slots);
}

void Agent::RebuildSharedLedger(DeviceSlot& slot) {
  slot.RemakeView();
  for (const TenantRecord& t : store_.All()) {
    if (IsOn(t, slot))
      slot.ledger->AddTenant(t.id, t.LimitsAt(slot.device.index, slot.device.mig_instance), false);
  }
}

std::vector<const TenantRecord*> Agent::TenantsOn(const DeviceSlot& slot,
                                                  const std::vector<TenantRecord>& tenants) {
  std::vector<const TenantRecord*> here;
  for (const TenantRecord& t : tenants)
    if (IsOn(t, slot)) here.push_back(&t);
  return here;
}

DeviceSlot* Agent::SlotOf(int gpu, int instance) {
  if (gpu < 0 || size_t(gpu) >= gpus_.size()) return nullptr;
  Gpu& g = gpus_[size_t(gpu)];
  if (g.mode == ShareMode::kMig)
    return instance >= 0 && size_t(instance) < g.slots.size() ? &g.slots[size_t(instance)]
                                                              : nullptr;
  return instance < 0 ? &g.slots[0] : nullptr;
}

std::optional<std::pair<int, int>> Agent::SlotWithUuid(const std::string& uuid) const {
  for (const Gpu& g : gpus_) {
    for (const DeviceSlot& slot : g.slots) {
      if (!uuid.empty() && slot.device.uuid == uuid)
        return std::make_pair(g.device.index, slot.device.mig_instance);
    }
  }
  return std::nullopt;
}

bool Agent::Everywhere(const TenantRecord& t) {
  for (auto [gpu, instance] : t.Places())
    if (!SlotOf(gpu, instance)) return false;
  return true;
}

bool Agent::OnGpu(const TenantRecord& t, int gpu) {
  for (auto [on, instance] : t.Places())
    if (on == gpu) return true;
  return false;
}

bool Agent::IsOn(const TenantRecord& t, const DeviceSlot& slot) {
  for (auto [gpu, instance] : t.Places())
    if (SlotOf(gpu, instance) == &slot) return true;
  return false;
}

void Agent::Apply(const TenantRecord& t, bool strict) {
  const std::vector<std::pair<int, int>> places = t.Places();
  for (size_t k = 0; k < places.size(); ++k) {
    auto [gpu, instance] = places[k];
    DeviceSlot* slot = SlotOf(gpu, instance);
    slot->authority->AddTenant(t.id, t.LimitsAt(gpu, instance), strict);
    slot->ledger->AddTenant(t.id, t.LimitsAt(gpu, instance), false);
    slot->seen[t.id].gpu = int(k);
  }
  OpenActivity(t);
}

void Agent::OpenActivity(const TenantRecord& t) {
  std::unique_ptr<node::ActivityReader>& file = activity_[t.id];
  if (file) return;
  // After a restart, its processes still running publish into the file they were handed: found
  // among the descriptors of one registered under it (the same process: its pid and start time).
  for (auto [gpu, instance] : t.Places()) {
    DeviceSlot* slot = SlotOf(gpu, instance);
    std::optional<int> tenant = slot ? slot->authority->FindTenant(t.id) : std::nullopt;
    if (!tenant) continue;
    std::vector<std::pair<pid_t, int>> processes;
    slot->authority->ProcessTenants(&processes);
    for (auto [pid, of] : processes) {
      if (of != *tenant || !slot->authority->FindProcess(pid)) continue;
      if ((file = node::ActivityReader::FoundIn(pid))) {
        service::Log("info", "tenant's activity file taken up from its running process",
                     {{"tenant", t.id}, {"pid", std::to_string(pid)}});
        return;
      }
    }
  }
  file = std::make_unique<node::ActivityReader>();
}

void Agent::Unapply(DeviceSlot& slot, const std::string& id) {
  ReleaseGroupLimit(slot, id);
  slot.Forget(id);
  activity_.erase(id);
}

void Agent::HoldInDriver(DeviceSlot& slot, const TenantRecord& t, pid_t pid) {
  if (slot.enforcement != QuotaEnforcement::kDriver || t.cgroup.empty()) return;
  uint64_t hard = 0;
  if (__builtin_add_overflow(t.LimitsAt(slot.device.index, slot.device.mig_instance).memory,
                             config_.context_allowance.per_tenant, &hard))
    hard = std::numeric_limits<uint64_t>::max() - 1;  // not "no limit"
  auto held = slot.group_limits.find(t.id);
  if (held != slot.group_limits.end() && held->second.hard == hard) return;  // or refused at it
  std::string dir = held != slot.group_limits.end() && !held->second.group_dir.empty()
                        ? held->second.group_dir
                        : V2GroupNamed(CgroupDirsOf(pid), t.cgroup).value_or("");
  if (dir.empty()) return;  // none of its processes seen in its group yet
  try {
    backend_->SetGroupLimit(slot.device, dir, hard);
    slot.group_limits[t.id] = {dir, hard};
    service::Log("info", "the driver holds the tenant's cgroup to its quota",
                 {{"tenant", t.id},
                  {"device", node::DeviceStem(slot.device)},
                  {"cgroup", dir},
                  {"hard_limit_bytes", std::to_string(hard)}});
  } catch (const Error& e) {
    slot.group_limits[t.id] = {"", hard};  // not asked again until its quota changes
    service::Log("warn", "the driver did not take the tenant's memory limit; the shim holds it",
                 {{"tenant", t.id}, {"cgroup", dir}, {"reason", e.what()}});
  }
}

void Agent::ReleaseGroupLimit(DeviceSlot& slot, const std::string& id) {
  auto held = slot.group_limits.find(id);
  if (held == slot.group_limits.end()) return;
  if (!held->second.group_dir.empty()) {
    try {
      backend_->SetGroupLimit(slot.device, held->second.group_dir, std::nullopt);
    } catch (const Error& e) {  // a group already removed takes its limits along
      service::Log("warn", "cannot clear the tenant's memory limit in the driver",
                   {{"tenant", id}, {"cgroup", held->second.group_dir}, {"reason", e.what()}});
    }
  }
  slot.group_limits.erase(held);
}

bool Agent::IsOperator(const HttpRequest& r) const {
  if (!r.has_credentials || r.tenant_socket) return false;
  if (r.uid == 0) return true;
  if (config_.operator_group.empty()) return false;
  group* g = getgrnam(config_.operator_group.c_str());
  if (!g) return false;
  if (r.gid == g->gr_gid) return true;
  passwd* pw = getpwuid(r.uid);
  if (!pw) return false;
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) < 0) {
    groups.resize(size_t(n));
    getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n);
  }
  for (int i = 0; i < n; ++i) {
    if (groups[size_t(i)] == g->gr_gid) return true;
  }
  return false;
}

HttpResponse Agent::Handle(const HttpRequest& r) {
  // Liveness takes no lock: it answers while another request holds the agent.
  if (r.method == "GET" && r.path == "/v1/health") return Json(200, {{"status", "ok"}});
  std::lock_guard<std::mutex> lock(mu_);
  try {
    return Route(r);
  } catch (const Error& e) {
    return Refusal(e);
  } catch (const json::exception& e) {
    return Refusal(BadInput(std::string("request body: ") + e.what()));
  }
}

void Agent::MatchCalibrations() {
  for (const CalibrationFile& c : config_.calibrations) {
    bool used = false;
    std::string names;
    for (Gpu& g : gpus_) {
      names += (names.empty() ? "" : ", ") + g.device.name;
      if (!MeasuredOn(c.figures, g.device)) continue;
      if (g.calibration)
        throw BadInput(c.path + ": GPU " + std::to_string(g.device.index) +
                       " already has the calibration " + g.calibration->path);
      g.calibration = &c;
      used = true;
    }
    if (!used)
      throw BadInput(c.path + ": measured on '" + c.figures.device_name + "'" +
                     (c.figures.simulated ? " (simulated)" : "") +
                     ", which is none of this node's GPUs (" + (names.empty() ? "none" : names) +
                     ")");
  }
}

HttpResponse Agent::Route(const HttpRequest& r) {
  const std::string prefix = "/v1/tenants";
  std::string id = r.path.rfind(prefix + "/", 0) == 0 ? r.path.substr(prefix.size() + 1) : "";
  bool tenants = r.path == prefix || !id.empty();
  if (!id.empty()) node::CheckTenantId(id);
  if (r.method == "GET" && r.path == "/metrics")
    return {200, MetricsText(), "text/plain; version=0.0.4"};
  if (r.method == "GET" && r.path == "/v1/gpus") {
    json gpus = json::array();
    for (const Gpu& g : gpus_) {
      json j = {{"index", g.device.index},
                {"name", g.device.name},
                {"memory_bytes", g.device.memory},
                {"mode", ShareModeName(g.mode)},
                {"simulated", g.device.simulated},
                {"shards", g.device.memory / config_.shard_bytes},
                {"memory_enforcement", g.mode == ShareMode::kMig || g.slots.empty()
                                           ? EnforcementName(QuotaEnforcement::kMig)
                                           : EnforcementName(g.slots[0].enforcement)},
                {"healthy", backend_->Healthy(g.device)}};
      if (!g.device.uuid.empty()) j["uuid"] = g.device.uuid;
      if (g.calibration) {
        j["calibration"] = CalibrationToJson(g.calibration->figures);
        j["calibration_file"] = g.calibration->path;
      }
      if (g.device.mig) j["mig_geometry"] = MigGeometryJson(*g.device.mig);
      if (g.mode == ShareMode::kMig) {
        // Where each instance lies (the layout as the driver placed it).
        std::optional<MigLayout> placed;
        if (g.device.mig) placed = PlaceInCreationOrder(*g.device.mig, g.layout);
        json instances = json::array();
        for (const DeviceSlot& slot : g.slots) {
          json instance = {{"instance", slot.device.mig_instance},
                           {"name", slot.device.name},
                           {"memory_bytes", slot.device.memory},
                           {"ledger", slot.ledger_path}};
          if (!slot.device.uuid.empty()) instance["uuid"] = slot.device.uuid;
          if (size_t k = size_t(slot.device.mig_instance); placed && k < placed->instances.size()) {
            instance["profile"] = placed->instances[k].profile->name;
            instance["start"] = placed->instances[k].start;
          }
          instances.push_back(instance);
        }
        j["instances"] = instances;
        j["layout"] =
            g.layout;  // as it was set: profile names, "NAME@START" where placed explicitly
        // What the planner would run for the same layout (the catalog's geometry; real GPUs are
        // laid out by gpumuxd itself through NVML).
        if (g.device.mig)
          j["nvidia_smi"] =
              PlaceInCreationOrder(*g.device.mig, g.layout).CreateCommand(*g.device.mig);
      } else {
        j["ledger"] = g.slots[0].ledger_path;
      }
      gpus.push_back(j);
    }
    return Json(200, {{"gpus", gpus}});
  }
  if (r.method == "PUT" && r.path.rfind("/v1/gpus/", 0) == 0) {
    if (!IsOperator(r)) throw PermissionDenied("only operators may change a GPU's sharing mode");
    return SetMode(r, r.path.substr(9));
  }
  if (r.method == "POST" && (r.path == "/v1/grants" || r.path == "/v1/grants/return")) {
    return Grant(r, r.path == "/v1/grants/return");
  }
  if (!tenants) throw NotFound("no such endpoint: " + r.method + " " + r.path);
  if (r.method == "GET") return ListTenants(r, id);
  if (!IsOperator(r)) {
    throw PermissionDenied(
        "only root or members of the operator group" +
        (config_.operator_group.empty() ? std::string() : " '" + config_.operator_group + "'") +
        " may change tenants (caller uid " + std::to_string(r.uid) + ")");
  }
  if (r.method == "POST" && id.empty()) return Admit(r, "");
  if (r.method == "PUT" && !id.empty()) return Admit(r, id);
  if (r.method == "DELETE" && !id.empty()) return Remove(id);
  return Json(405, {{"error", r.method + " is not allowed on " + r.path}});
}

void Agent::PlaceTenant(const TenantRequest& q, TenantRecord* t) {
  std::vector<TenantPlace> places = q.gpus;
  for (const std::string& uuid : q.devices) {
    std::optional<std::pair<int, int>> where = SlotWithUuid(uuid);
    if (!where)
      throw BadInput("devices: no GPU or MIG instance of this node has UUID '" + uuid + "'");
    places.push_back({where->first, where->second, 0});
  }
  for (size_t i = 0; i < places.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (places[i].gpu == places[j].gpu && places[i].instance == places[j].instance)
        throw BadInput("devices: a GPU or instance is named twice");
  if (!places.empty()) {
    t->gpu = places[0].gpu, t->instance = places[0].instance;
    t->more.assign(places.begin() + 1, places.end());
  }
  if (q.gpu) t->gpu = *q.gpu, t->instance = -1, t->more.clear();
  if (q.instance) t->instance = *q.instance;
  if (q.device) {  // a UUID, as CUDA_VISIBLE_DEVICES names a device
    std::optional<std::pair<int, int>> where = SlotWithUuid(*q.device);
    if (!where)
      throw BadInput("device: no GPU or MIG instance of this node has UUID '" + *q.device + "'");
    t->gpu = where->first, t->instance = where->second;
    t->more.clear();
  }
  for (auto [gpu, instance] : t->Places()) {
    if (gpu < 0 || size_t(gpu) >= gpus_.size()) {
      throw BadInput(std::string(t->spans_several() ? "gpus" : "gpu") +
                     ": this node has GPUs 0 to " + std::to_string(gpus_.size() - 1) + ", not " +
                     std::to_string(gpu));
    }
    // Its processes see all its GPUs through one environment: time-sliced GPUs or MIG
    // instances (an MPS server is set up for one device).
    if (t->spans_several() && gpus_[size_t(gpu)].mode == ShareMode::kMps) {
      throw BadInput(
          "gpus: a tenant over several GPUs runs on time-sliced GPUs or MIG instances; GPU " +
          std::to_string(gpu) + " is in mps mode");
    }
    if (SlotOf(gpu, instance)) continue;
    const Gpu& g = gpus_[size_t(gpu)];
    if (g.mode == ShareMode::kMig && g.slots.empty()) {
      throw Unavailable("GPU " + std::to_string(gpu) +
                        ": its MIG layout could not be restored (see gpumuxd's log); set it again");
    }
    throw BadInput(g.mode == ShareMode::kMig
                       ? "instance: GPU " + std::to_string(gpu) +
                             " is in MIG mode with instances 0 to " +
                             std::to_string(g.slots.size() - 1) + "; name one"
                       : "instance: GPU " + std::to_string(gpu) + " is not in MIG mode");
  }
}

void Agent::CheckFitsItsPlaces(const TenantRecord& t) {
  for (auto [gpu, instance] : t.Places()) {
    const node::Device& d = SlotOf(gpu, instance)->device;
    uint64_t quota = t.LimitsAt(gpu, instance).memory;
    if (quota > d.memory) {
      throw DoesNotFit("memory " + FormatBytes(double(quota)) + " is more than the " +
                       FormatBytes(double(d.memory)) + " of " + d.name);
    }
    // NVML has no per-process utilisation on a MIG-enabled GPU, so the governor cannot measure
    // the GPU time that caps and weights divide; the instance's own slices are its compute.
    // (Priority still works: it acts on launch activity, not on measured time.)
    if (!d.simulated && d.mig_instance >= 0 &&
        (t.limits.cap_permille < node::kNoCap || t.limits.weight != 1)) {
      throw BadInput(
          "compute: a compute cap or weight cannot be enforced inside a MIG instance of a real "
          "GPU (NVML measures no per-process GPU time in MIG mode); its slices are its compute");
    }
  }
}

json Agent::AdmissionAnswer(const TenantRecord& t) {
  json env = json::object();
  const Gpu& gpu = gpus_[size_t(t.gpu)];
  const DeviceSlot& slot = *SlotOf(t.gpu, t.instance);
  std::vector<node::Device> devices;
  std::vector<std::string> ledgers;
  for (auto [g, instance] : t.Places()) {
    devices.push_back(SlotOf(g, instance)->device);
    ledgers.push_back(SlotOf(g, instance)->ledger_path);
  }
  for (const auto& [k, v] : node::TenantEnvironment(devices, ledgers, t.id, config_.bin_dir))
    env[k] = v;
  for (const auto& [k, v] : backend_->ClientEnvironment(slot.device, gpu.mode, t.limits))
    env[k] = v;
  // The shim then takes its memory as grants from gpumuxd (POST /v1/grants), not from the ledger.
  std::string grants =
      config_.tenant_socket_path.empty() ? config_.socket_path : config_.tenant_socket_path;
  if (!grants.empty()) env["GPUMUX_AGENT"] = grants;
  json per_gpu = json::array();
  for (auto [g, instance] : t.Places()) {
    json place = {{"gpu", g}, {"memory_bytes", t.LimitsAt(g, instance).memory}};
    if (instance >= 0) place["instance"] = instance;
    per_gpu.push_back(place);
  }
  json answer = TenantJson(t);
  answer.update({{"memory_bytes", t.limits.memory}, {"env", env}});
  if (t.spans_several()) answer["per_gpu"] = per_gpu;
  return answer;
}

HttpResponse Agent::Admit(const HttpRequest& r, const std::string& id_from_path) {
  TenantRequest q = ParseTenantRequest(r.body);
  if (!q.old_forms.empty()) {
    std::string keys;
    for (const std::string& k : q.old_forms) keys += (keys.empty() ? "" : ", ") + k;
    service::Log("warn", "request in a form read until the next release",
                 {{"keys", keys}, {"now", "memory in bytes, compute a number (percent)"}});
  }
  TenantRecord t;
  std::optional<TenantRecord> existing;
  bool joined = false;  // an existing tenant joined as it is ("join": true)
  {
    t.id = id_from_path.empty() ? q.id : id_from_path;
    if (t.id.empty()) throw BadInput("id: give the tenant's id");
    node::CheckTenantId(t.id);
    existing = store_.Find(t.id);
    if (!id_from_path.empty() && !existing) throw NotFound("no tenant '" + t.id + "'");
    if (existing) t = *existing;  // PUT and a repeated POST change only what they give
    PlaceTenant(q, &t);
    joined = existing && q.join;
    const node::Device& device = SlotOf(t.gpu, t.instance)->device;
    // What Slurm granted, converted: shards are shard_bytes each; an MPS percentage is that share
    // of the GPU's memory and its compute cap.
    if (q.shards) {
      if (*q.shards > device.memory / config_.shard_bytes + 1)
        throw BadInput("shards: " + std::to_string(*q.shards) + " shards of " +
                       FormatBytes(double(config_.shard_bytes)) + " are more than " + device.name +
                       " holds");
      t.limits.memory = *q.shards * config_.shard_bytes;
    }
    if (q.mps_percent) {
      t.limits.memory = uint64_t(double(device.memory) * *q.mps_percent / 100);
      t.limits.cap_permille = uint32_t(std::lround(*q.mps_percent * 10));
    }
    if (q.memory_per_gpu && q.memory.size() != t.more.size() + 1)
      throw BadInput("memory: " + std::to_string(q.memory.size()) + " quotas for the tenant's " +
                     std::to_string(t.more.size() + 1) + " GPUs; give one for each, or one");
    if (!q.memory.empty()) {
      t.limits.memory = q.memory[0];
      for (size_t k = 0; k < t.more.size(); ++k)
        t.more[k].memory = q.memory_per_gpu ? q.memory[k + 1] : 0;
    }
    if (q.compute_percent) t.limits.cap_permille = uint32_t(std::lround(*q.compute_percent * 10));
    if (q.weight) t.limits.weight = *q.weight;
    if (q.priority) t.limits.priority = *q.priority;
    // "learn": the uid of the first process of its cgroup that draws on it (a pod's, whose uid
    // its spec need not say); a tenant that has an owner keeps it.
    if (q.learn_owner && !existing) t.owner = kOwnerUnknown;
    if (q.owner_uid) t.owner = *q.owner_uid;
    if (q.source) t.source = *q.source;
    if (q.cgroup) t.cgroup = *q.cgroup;
    for (const TenantLabels::Field& f : TenantLabels::kFields)
      if (!(q.labels.*f.value).empty()) t.labels.*f.value = q.labels.*f.value;
    if (t.source.empty()) t.source = "api";
    if (t.owner_unknown() && t.cgroup.empty())
      throw BadInput(
          "owner_uid: \"learn\" takes the owner from the first process of the tenant's cgroup; "
          "give the cgroup, or a uid");
    if (t.limits.memory == 0)
      throw BadInput("memory: give the quota (memory, shards or mps_percent)");
    CheckFitsItsPlaces(t);
    if (existing && existing->Places() != t.Places()) {
      std::string where;
      for (auto [gpu, instance] : existing->Places())
        where += (where.empty() ? "" : ", ") + std::to_string(gpu) +
                 (instance >= 0 ? " instance " + std::to_string(instance) : "");
      throw Conflict("tenant '" + t.id + "' is on GPU " + where);
    }
    if (joined) {
      t = *existing;  // its processes join the tenant under the limits it has
    } else {
      try {
        // Checked against the authority's quotas, which no tenant can have rewritten; on every
        // GPU of the tenant, or on none.
        Apply(t, config_.strict);
        store_.Put(t);
        for (auto [gpu, instance] : t.Places())  // a limit the driver holds follows the quota
          HoldInDriver(*SlotOf(gpu, instance), t, 0);
      } catch (const Error& e) {
        // A refused or failed admission leaves nothing behind: an update puts the limits it had
        // back, a new tenant is taken out of every ledger.
        if (existing) {
          Apply(*existing);
        } else {
          for (auto [gpu, instance] : t.Places()) Unapply(*SlotOf(gpu, instance), t.id);
        }
        if (e.code() != ErrorCode::kDoesNotFit) throw;
        service::Log("info", "tenant refused",
                     {{"tenant", t.id}, {"gpu", std::to_string(t.gpu)}, {"reason", e.what()}});
        throw e.Within("does not fit");
      }
    }
  }
  service::Log("info",
               joined     ? "tenant joined"
               : existing ? "tenant updated"
                          : "tenant admitted",
               {{"tenant", t.id},
                {"gpu", std::to_string(t.gpu)},
                {"memory", std::to_string(t.limits.memory)},
                {"compute_permille", std::to_string(t.limits.cap_permille)},
                {"priority", node::PriorityName(t.limits.priority)},
                {"source", t.source}});
  return Json(existing ? 200 : 201, AdmissionAnswer(t));
}

std::vector<std::string> Agent::KeepBusyInstances(const Gpu& g, const MigGeometry& geo,
                                                  const std::vector<std::string>& layout) {
  std::map<int, std::string> holders;  // instance -> "tenant 'a', 'b'"
  for (const TenantRecord& t : store_.All()) {
    for (auto [gpu, instance] : t.Places()) {
      if (gpu != g.device.index || instance < 0) continue;
      std::string& who = holders[instance];
      who += (who.empty() ? "tenant '" : ", '") + t.id + "'";
    }
  }
  std::vector<KeptInstance> kept;
  for (const auto& [instance, who] : holders) kept.push_back({instance, "holding " + who});
  try {
    return KeepingInstances(geo, PlaceInCreationOrder(geo, g.layout), kept, layout);
  } catch (const Error& e) {
    throw e.Within("GPU " + std::to_string(g.device.index));
  }
}

HttpResponse Agent::SetMode(const HttpRequest& r, const std::string& index) {
  char* end = nullptr;
  long gpu = std::strtol(index.c_str(), &end, 10);
  if (index.empty() || *end || gpu < 0 || size_t(gpu) >= gpus_.size())
    throw NotFound("no GPU '" + index + "'");
  Gpu& g = gpus_[size_t(gpu)];
  const char* expected =
      "expected {\"mode\": \"timeslice\" or \"mps\"} or {\"mode\": \"mig\", \"layout\": [...]}";
  std::optional<ShareMode> mode;
  std::vector<std::string> layout;
  RequestBody body(r.body);
  body.AllowOnly({"mode", "layout"});
  mode = ParseShareMode(body.Text("mode", 16).value_or(""));
  if (mode == ShareMode::kMig) {
    std::optional<std::vector<std::string>> profiles = body.TextList("layout", 8);
    if (!profiles) throw BadInput(std::string("layout: ") + expected);
    layout = *profiles;
  }
  // "whole" is a plan's word for a GPU with one tenant: on a node that is time-slicing.
  if (!mode || *mode == ShareMode::kWhole) throw BadInput(expected);
  // From one MIG layout to another, instance by instance: those with tenants stay where they are
  // (and keep their numbers), running; the others may go, and new ones come.
  const bool live = *mode == ShareMode::kMig && g.mode == ShareMode::kMig && !g.slots.empty();
  std::vector<bool> kept_slots;  // (live) which of the GPU's slots the new layout keeps
  if (live) {
    const MigGeometry geo = backend_->MigGeometryOf(g.device);
    layout = KeepBusyInstances(g, geo, layout);
    MigLayout before = PlaceInCreationOrder(geo, g.layout),
              after = PlaceInCreationOrder(geo, layout);
    for (size_t k = 0; k < g.slots.size(); ++k)
      kept_slots.push_back(k < after.instances.size() && k < before.instances.size() &&
                           after.instances[k] == before.instances[k]);
  } else {
    for (DeviceSlot& slot : g.slots) {
      slot.ReclaimDead();
      for (const node::TenantUsage& u : slot.Usage()) {
        if (!u.processes.empty())
          throw Conflict("tenant '" + u.id + "' runs on GPU " + index +
                         "; change the mode when it is idle");
      }
    }
  }
  // Into or out of MIG the GPU's slots change: its tenants must be gone first.
  bool reslice = *mode == ShareMode::kMig || g.mode == ShareMode::kMig;
  if (reslice && !live) {
    for (const TenantRecord& t : store_.All()) {
      if (OnGpu(t, int(gpu)))
        throw Conflict("GPU " + index + " has tenants ('" + t.id +
                       "'); remove them before changing its MIG layout");
    }
  }
  // A tenant over several GPUs needs them time-sliced (Admit).
  if (*mode != ShareMode::kTimeSlice) {
    for (const TenantRecord& t : store_.All()) {
      if (t.spans_several() && OnGpu(t, int(gpu)))
        throw Conflict("GPU " + index + " holds tenant '" + t.id +
                       "', which spans several GPUs and needs them time-sliced; remove it first");
    }
  }
  Gpu next{g.device, *mode, layout, {}};
  try {
    std::vector<node::Device> instances = backend_->SetMode(g.device, *mode, layout);
    if (reslice) {
      // The slots that go hold no tenant (checked above); new slots may reuse their names. Those
      // the layout keeps stay as they are, with their tenants' ledgers.
      for (size_t k = 0; k < g.slots.size(); ++k)
        if (k >= kept_slots.size() || !kept_slots[k]) g.slots[k].RemoveFiles();
      BuildSlots(next, *mode == ShareMode::kMig ? instances : std::vector<node::Device>{g.device});
      for (size_t k = 0; k < kept_slots.size(); ++k)
        if (kept_slots[k]) next.slots[k] = std::move(g.slots[k]);
    }
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kBadInput) throw e.Within("layout");
    throw;
  }
  if (reslice) g.slots = std::move(next.slots);
  g.mode = *mode;
  g.layout = layout;
  store_.SetGpuMode({int(gpu), int(*mode), layout});
  service::Log("info", "sharing mode set",
               {{"gpu", index}, {"mode", std::string(ShareModeName(*mode))}});
  json answer = {{"gpu", gpu}, {"mode", ShareModeName(*mode)}};
  if (*mode == ShareMode::kMig) answer["instances"] = g.slots.size();
  return Json(200, answer);
}

HttpResponse Agent::Remove(const std::string& id) {
  auto t = store_.Find(id);
  if (!t) throw NotFound("no tenant '" + id + "'");
  std::vector<DeviceSlot*> slots;  // where it is now (a GPU or instance gone holds nothing)
  for (auto [gpu, instance] : t->Places())
    if (DeviceSlot* slot = SlotOf(gpu, instance)) slots.push_back(slot);
  for (DeviceSlot* slot : slots) {
    slot->ReclaimDead();
    for (const node::TenantUsage& u : slot->Usage()) {
      if (u.id != id) continue;
      if (!u.processes.empty()) {
        throw Conflict("tenant '" + id + "' still has " + std::to_string(u.processes.size()) +
                       " live process(es), pid " + std::to_string(u.processes[0].first));
      }
    }
  }
  store_.Remove(id);
  for (DeviceSlot* slot : slots) Unapply(*slot, id);
  service::Log("info", "tenant removed", {{"tenant", id}, {"gpu", std::to_string(t->gpu)}});
  return Json(200, {{"removed", id}});
}

HttpResponse Agent::Grant(const HttpRequest& r, bool give_back) {
  if (!r.has_credentials) throw PermissionDenied("grants go to processes on this node's socket");
  if (r.pid <= 0) {
    // The kernel reports the caller's pid in gpumuxd's PID namespace, 0 where it is not there.
    throw PermissionDenied(
        "the calling process has no pid in gpumuxd's PID namespace, so its grants cannot be "
        "counted: run gpumuxd in the node's PID namespace (Kubernetes: hostPID: true)");
  }
  RequestBody body(r.body);
  body.AllowOnly({"tenant", "bytes", "least", "part"});
  std::string id = body.Text("tenant", 63).value_or("");
  node::CheckTenantId(id);
  std::optional<TenantRecord> t = store_.Find(id);
  // A process may draw only on a tenant its user owns (root's may draw on any, but not through
  // the tenants' socket, where root is a container's), and only from the tenant's cgroup.
  bool root = r.uid == 0 && !r.tenant_socket;
  if (!t || (!root && r.uid != t->owner && !t->owner_unknown())) {
    throw PermissionDenied("no tenant '" + id + "' that uid " + std::to_string(r.uid) +
                           " may draw on");
  }
  if (!t->cgroup.empty() && !ProcessInCgroup(r.pid, t->cgroup)) {
    throw PermissionDenied("process " + std::to_string(r.pid) + " is not in tenant '" + id +
                           "''s cgroup (" + t->cgroup +
                           ", a group of that name that root made and gpumuxd can see)");
  }
  // Only while it is the process that connected: once that one has exited, its pid may be a
  // neighbour's new process, which must not be registered, nor teach a tenant its owner, as this
  // caller's. Checked after the cgroup was read above, so that what was read was the caller's.
  if (!r.caller || !r.caller->Alive() || ProcessStartTime(r.pid) != r.caller->start_time()) {
    throw PermissionDenied("process " + std::to_string(r.pid) +
                           " that made this request has exited");
  }
  if (t->owner_unknown() && !root) {
    // The first process of its cgroup to draw on it (the administrator's aside): its user owns
    // the tenant from now on.
    t->owner = r.uid;
    store_.Put(*t);
    service::Log("info", "tenant's owner learned from its first process",
                 {{"tenant", id}, {"uid", std::to_string(r.uid)}, {"pid", std::to_string(r.pid)}});
  }
  // Which of its GPUs (a tenant over several has a credit on each; 0: its first).
  std::vector<std::pair<int, int>> places = t->Places();
  int64_t part = body.Integer("part", 0, int64_t(places.size()) - 1).value_or(0);
  DeviceSlot* slot = SlotOf(places[size_t(part)].first, places[size_t(part)].second);
  if (!slot) throw Unavailable("tenant '" + id + "': its GPU or MIG instance is gone");
  const uint64_t quota =
      t->LimitsAt(places[size_t(part)].first, places[size_t(part)].second).memory;
  node::Ledger& authority = *slot->authority;
  std::optional<int> tenant_slot = authority.FindTenant(id);
  if (!tenant_slot) throw Internal("tenant '" + id + "' is missing from the authority ledger");
  uint64_t bytes = body.Bytes("bytes").value_or(0);
  // Grants are counted against the calling process (its pid from the socket, not the request).
  std::optional<int> process = authority.FindProcess(r.pid);
  if (process && authority.ProcessTenant(*process) != *tenant_slot) {
    throw Conflict("process " + std::to_string(r.pid) + " already draws on another tenant");
  }
  uint64_t granted = 0;
  if (give_back) {
    granted = process ? std::min(bytes, authority.ProcessUsed(*process)) : 0;
    if (granted) authority.Release(*process, granted);
  } else {
    std::optional<uint64_t> least = body.Bytes("least");
    if (bytes > 0 && (least.value_or(bytes) == 0 || least.value_or(bytes) > bytes))
      throw BadInput("least: expected 1 to \"bytes\" bytes");
    if (bytes == 0 && least.value_or(0) != 0)
      throw BadInput("least: a registration (\"bytes\": 0) grants nothing");
    if (!process) {
      process = authority.RegisterProcess(*tenant_slot, r.pid, r.caller->start_time());
      slot->ledger->CopyProcessesFrom(authority);
    }
    // Before its first allocation: its cgroup held by the driver where the driver can.
    HoldInDriver(*slot, *t, r.pid);
    granted = bytes ? authority.ReserveUpTo(*process, bytes, least.value_or(bytes)) : 0;
    if (granted == 0 && bytes > 0) {
      throw DoesNotFit("tenant '" + id + "': " + FormatBytes(double(least.value_or(bytes))) +
                       " more would pass its quota of " + FormatBytes(double(quota)) + " (" +
                       FormatBytes(double(authority.TenantUsed(*tenant_slot))) + " granted)");
    }
  }
  if (std::optional<int> s = slot->ledger->FindTenant(id)) {
    slot->ledger->SetTenantUsed(*s, authority.TenantUsed(*tenant_slot));
  }
  HttpResponse answer = Json(200, {{"granted", granted},
                                   {"used_bytes", authority.TenantUsed(*tenant_slot)},
                                   {"quota_bytes", quota}});
  // A registration: the process gets the tenant's activity file (and only a registered process).
  if (!give_back && bytes == 0) {
    if (auto a = activity_.find(id); a != activity_.end() && a->second)
      answer.descriptor = service::PassDescriptor(a->second->Share());
  }
  return answer;
}

HttpResponse Agent::ListTenants(const HttpRequest& r, const std::string& only_id) {
  bool op = IsOperator(r);
  json list = json::array();
  std::map<const DeviceSlot*, std::vector<node::TenantUsage>> snapshots;
  for (Gpu& g : gpus_) {
    for (const DeviceSlot& slot : g.slots) snapshots[&slot] = slot.Usage();
  }
  for (const TenantRecord& t : store_.All()) {
    if (!only_id.empty() && t.id != only_id) continue;
    if (!op && (!r.has_credentials || t.owner != r.uid)) continue;
    json j = TenantJson(t);
    j.update({{"quota_bytes", t.limits.memory},
              {"weight", t.limits.weight},
              {"priority", node::PriorityName(t.limits.priority)},
              {"owner_uid", t.owner_unknown() ? json("learn") : json(t.owner)},
              {"source", t.source}});
    if (!t.cgroup.empty()) j["cgroup"] = t.cgroup;
    for (const TenantLabels::Field& f : TenantLabels::kFields) {
      if (!(t.labels.*f.value).empty()) j[f.api_key] = t.labels.*f.value;
    }
    // Usage: summed over its GPUs (quota_bytes is each one's), and per GPU for a tenant of several.
    uint64_t used = 0, refused = 0, reclaimed = 0, gpu_ns = 0, held = 0;
    // As the driver counts it, where the devices can say (CheckMemory).
    uint64_t device_bytes = 0, outside = 0, kills = 0;
    bool counted = false;
    json procs = json::array(), per_gpu = json::array();
    bool seen = false;
    for (auto [gpu, instance] : t.Places()) {
      const DeviceSlot* slot = SlotOf(gpu, instance);
      if (!slot) continue;
      for (const node::TenantUsage& u : snapshots[slot]) {
        if (u.id != t.id) continue;
        seen = true;
        used += u.used, refused += u.refused, reclaimed += u.reclaimed, gpu_ns += u.gpu_ns;
        held += u.held;
        for (auto [pid, bytes] : u.processes) {
          json p = {{"pid", pid}, {"used_bytes", bytes}};
          if (auto d = slot->device_bytes.find(pid); d != slot->device_bytes.end())
            p["device_bytes"] = d->second;
          if (t.spans_several()) p["gpu"] = gpu;
          procs.push_back(p);
        }
        if (auto m = slot->memory.find(t.id); m != slot->memory.end()) {
          counted = true;
          device_bytes += m->second.held;
          outside += m->second.outside;
        }
        if (auto k = slot->memory_kills.find(t.id); k != slot->memory_kills.end())
          kills += k->second;
        if (u.rhythm && !j.contains("rhythm")) j["rhythm"] = RhythmJson(*u.rhythm);
        json place = {{"gpu", gpu},
                      {"quota_bytes", t.LimitsAt(gpu, instance).memory},
                      {"used_bytes", u.used},
                      {"gpu_time_s", u.gpu_ns / 1e9}};
        if (instance >= 0) place["instance"] = instance;
        if (auto m = slot->memory.find(t.id); m != slot->memory.end())
          place["device_bytes"] = m->second.held;
        if (auto g = slot->group_limits.find(t.id);
            g != slot->group_limits.end() && !g->second.group_dir.empty()) {
          place["driver_limit_bytes"] = g->second.hard;
          if (!j.contains("driver_limit_bytes")) j["driver_limit_bytes"] = g->second.hard;
        }
        per_gpu.push_back(place);
      }
    }
    if (seen) {
      j.update({{"used_bytes", used},
                {"refused_allocations", refused},
                {"reclaimed_bytes", reclaimed},
                {"gpu_time_s", gpu_ns / 1e9},
                {"held_launches", held},
                {"processes", procs},
                {"memory_kills", kills}});
      if (counted) {
        j["device_bytes"] = device_bytes;
        j["outside_grants_bytes"] = outside;
      }
      if (t.spans_several()) j["per_gpu"] = per_gpu;
    }
    list.push_back(j);
  }
  if (!only_id.empty()) {
    if (list.empty())
      throw Error(op ? ErrorCode::kNotFound : ErrorCode::kPermissionDenied,
                  "no tenant '" + only_id + "' you may read");
    return Json(200, list[0]);
  }
  return Json(200, {{"tenants", list}});
}

uint64_t Agent::Reclaim() {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t total = 0;
  const std::vector<TenantRecord> tenants = store_.All();
  memory_.ForgetExited();
  std::map<const DeviceSlot*, std::vector<node::TenantUsage>> snapshots;
  for (Gpu& g : gpus_) {
    for (DeviceSlot& slot : g.slots) {
      if (!slot.ledger->Intact() || slot.ledger->capacity() != slot.device.memory ||
          slot.ledger->gpu_name() != slot.device.name) {
        RebuildSharedLedger(slot);
      }
      uint64_t bytes = slot.ReclaimDead();
      if (bytes) {
        service::Log("info", "reclaimed memory of dead processes",
                     {{"device", node::DeviceStem(slot.device)}, {"bytes", std::to_string(bytes)}});
      }
      total += bytes;
      memory_.Check(slot, TenantsOn(slot, tenants));
      snapshots[&slot] = slot.ledger->Snapshot();
    }
  }
  // Limits in the ledgers are the agent's to write: put back any that differ from what it granted,
  // and any tenant whose slot was wiped.
  for (const TenantRecord& t : tenants) {
    if (!Everywhere(t)) continue;
    for (auto [gpu, instance] : t.Places()) {
      const DeviceSlot* slot = SlotOf(gpu, instance);
      if (!slot->ledger->FindTenant(t.id)) {
        slot->ledger->AddTenant(t.id, t.LimitsAt(gpu, instance), false);
        service::Log("warn", "tenant's slot in the view ledger was wiped outside gpumuxd; restored",
                     {{"tenant", t.id}, {"gpu", std::to_string(gpu)}});
        continue;
      }
      for (const node::TenantUsage& u : snapshots[slot]) {
        if (u.id != t.id) continue;
        if (u.quota != t.LimitsAt(gpu, instance).memory ||
            u.cap_permille != t.limits.cap_permille || u.weight != t.limits.weight ||
            u.priority != t.limits.priority) {
          Apply(t);
          service::Log("warn",
                       "tenant's limits in the ledger were changed outside gpumuxd; restored",
                       {{"tenant", t.id},
                        {"gpu", std::to_string(gpu)},
                        {"found_quota", std::to_string(u.quota)},
                        {"granted_quota", std::to_string(t.LimitsAt(gpu, instance).memory)}});
        }
      }
    }
  }
  return total;
}

std::string Agent::MetricsText() {
  std::map<std::string, TenantLabels> labels;
  for (const TenantRecord& t : store_.All()) labels[t.id] = t.labels;
  std::vector<GpuMetrics> gpus;
  for (const Gpu& g : gpus_) {
    for (const DeviceSlot& slot : g.slots) {
      gpus.push_back({node::DeviceStem(slot.device).substr(3), slot.device.name, slot.device.memory,
                      slot.Usage(), labels});
      gpus.back().memory = slot.memory;
      gpus.back().memory_kills = slot.memory_kills;
      gpus.back().enforcement = EnforcementName(slot.enforcement);
      if (g.calibration && g.mode != ShareMode::kMig) {
        gpus.back().calibrated_bandwidth = g.calibration->figures.bandwidth;
        gpus.back().calibrated_flops = g.calibration->figures.flops;
      }
    }
  }
  return FormatMetrics(gpus, NowNs());
}

void Agent::ComputeTick() {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // a request holds the agent: the gates stay as they are
  uint64_t now = NowNs();
  for (Gpu& g : gpus_) {
    for (DeviceSlot& slot : g.slots) ticker_.Tick(slot, now, activity_);
  }
}

size_t Agent::tenant_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return store_.All().size();
}

}  // namespace gpumux::agent
