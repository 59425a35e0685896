// spank_gpumux.so: the SPANK plugin that turns what Slurm granted a job on a GPU into a quota
// gpumux enforces. For each step that holds a share of a GPU (shards, an MPS percentage, or the
// plugin's own --gpumux-mem/--gpumux-compute options) it asks gpumuxd to admit the job as tenant
// `slurm-<job>` (on the GPU Slurm granted, or the MIG device whose UUID Slurm put in
// CUDA_VISIBLE_DEVICES; step_request.h) and starts the step's tasks under the shim with the
// environment gpumuxd answers.
// The job is one tenant: the first step (the batch step of an sbatch job) sets its limits, later
// steps (an srun inside the batch script) join it, so a job's steps share its grant instead of
// each taking it again. The step that admitted the tenant removes it when it ends (exits, fails or
// is cancelled).
//
// plugstack.conf:  required /usr/lib/gpumux/spank_gpumux.so [socket=/run/gpumux/gpumuxd.sock]
//
// Callbacks (Slurm 22.05): slurm_spank_init registers the options everywhere; in slurmstepd
// (remote context, root) slurm_spank_init_post_opt admits the tenant once per step (the step's
// environment already holds SLURM_STEP_GPUS/SLURM_JOB_GPUS and SLURM_SHARDS_ON_NODE there),
// slurm_spank_task_init_privileged sets each task's environment (tasks are forked from slurmstepd,
// so they inherit the answer), slurm_spank_exit removes the tenant when the admitting step ends,
// and slurm_spank_job_epilog when the job ends (steps still running in it keep it until then). A
// step whose tenant is refused (it does not fit, or gpumuxd is down) fails with gpumuxd's reason
// rather than running unguarded. No exception crosses into Slurm.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "base/cgroup.h"
#include "base/error.h"
#include "integrations/slurm/step_request.h"
#include "node/agent/agent_client.h"

extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>

// SPANK_PLUGIN(gpumux, 1), spelled out: in C++ namespace-scope const objects would get internal
// linkage and Slurm would not find them.
extern const char plugin_name[] = "gpumux";
extern const char plugin_type[] = "spank";
extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
extern const unsigned int spank_plugin_version = 1;
}

namespace {

using nlohmann::json;

struct StepState {
  std::string socket = "/run/gpumux/gpumuxd.sock";
  std::string mem, compute, priority;  // the user's options
  std::string tenant;                  // set once admitted or joined
  bool created = false;                // this step admitted the tenant (and removes it)
  json env;                            // gpumuxd's answer
} g;

int OnMem(int, const char* arg, int) {
  g.mem = arg ? arg : "";
  return 0;
}
int OnCompute(int, const char* arg, int) {
  g.compute = arg ? arg : "";
  return 0;
}
int OnPriority(int, const char* arg, int) {
  g.priority = arg ? arg : "";
  return 0;
}

struct spank_option kOptions[] = {
    {const_cast<char*>("gpumux-mem"), const_cast<char*>("SIZE"),
     const_cast<char*>(
         "GPU memory quota enforced by gpumux, e.g. 24GiB (default: from the granted shards)"),
     1, 0, OnMem},
    {const_cast<char*>("gpumux-compute"), const_cast<char*>("PCT"),
     const_cast<char*>("cap on GPU time enforced by gpumux, e.g. 40%"), 1, 0, OnCompute},
    {const_cast<char*>("gpumux-priority"), const_cast<char*>("P"),
     const_cast<char*>("gpumux priority: high, normal or low"), 1, 0, OnPriority},
};

std::string Env(spank_t sp, const char* name) {
  char buf[4096];
  if (spank_getenv(sp, name, buf, sizeof(buf)) != ESPANK_SUCCESS) return "";
  return buf;
}

// "slurm-<job>": the job's steps share one tenant.
std::string TenantId(spank_t sp) {
  uint32_t job = 0;
  spank_get_item(sp, S_JOB_ID, &job);
  return "slurm-" + std::to_string(job);
}

// Prepends `first` to a colon-separated list unless it is there already (nested steps inherit it).
std::string Prepend(const std::string& first, const std::string& list) {
  if (list.empty()) return first;
  if ((":" + list + ":").find(":" + first + ":") != std::string::npos) return list;
  return first + ":" + list;
}

// The plugstack.conf arguments: socket=PATH.
void ParseArguments(int ac, char** av) {
  for (int i = 0; i < ac; ++i) {
    if (std::strncmp(av[i], "socket=", 7) == 0) g.socket = av[i] + 7;
  }
}

// Asks gpumuxd to admit this step; fills g.tenant and g.env. Returns false (after saying why) if
// the step must not run.
bool Admit(spank_t sp) {
  gpumux::slurm::StepGrant grant;
  grant.step_gpus = Env(sp, "SLURM_STEP_GPUS");
  if (grant.step_gpus.empty()) grant.step_gpus = Env(sp, "SLURM_JOB_GPUS");
  grant.visible_devices = Env(sp, "CUDA_VISIBLE_DEVICES");
  grant.shards = Env(sp, "SLURM_SHARDS_ON_NODE");
  grant.mps_percent = Env(sp, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
  grant.mem = g.mem, grant.compute = g.compute, grant.priority = g.priority;
  const std::string& gpus = grant.step_gpus;
  std::optional<gpumux::agent::TenantRequest> built;
  try {
    built = gpumux::slurm::StepRequest(grant, TenantId(sp));
  } catch (const gpumux::Error& e) {
    slurm_error("gpumux: step not admitted on GPU %s: %s", gpus.c_str(), e.what());
    return false;
  }
  if (!built) return true;  // no shared GPU
  gpumux::agent::TenantRequest& request = *built;
  uint32_t uid = 0, job = 0;
  spank_get_item(sp, S_JOB_UID, &uid);
  spank_get_item(sp, S_JOB_ID, &job);
  request.owner_uid = uid;
  request.source = "slurm job " + std::to_string(job);
  request.labels.job = std::to_string(job);
  // Under Slurm's cgroup plugins a step runs in its job's group (".../job_<id>/step_<n>/..."): the
  // tenant is then bound to it, so that only the job's processes draw on it and, where the driver
  // limits a group's GPU memory (R615+), the driver holds the job to its quota. Elsewhere (no
  // cgroup plugin) the tenant is bound by its owner alone, as before.
  const std::string job_group = "job_" + std::to_string(job);
  if (gpumux::InCgroupNamed(gpumux::CgroupDirsOf(getpid()), job_group)) request.cgroup = job_group;
  gpumux::agent::Admission admitted;
  try {
    admitted = gpumux::agent::AgentClient(g.socket).Admit(request);
  } catch (const gpumux::Error& e) {
    if (e.code() == gpumux::ErrorCode::kUnavailable) throw;  // said below, with the socket
    slurm_error("gpumux: step not admitted on GPU %s: %s", gpus.c_str(), e.what());
    return false;
  }
  g.tenant = request.id;
  g.created = admitted.created;
  g.env = admitted.answer["env"];
  return true;
}

}  // namespace

extern "C" {

int slurm_spank_init(spank_t sp, int ac, char** av) {
  ParseArguments(ac, av);
  for (spank_option& o : kOptions) {
    if (spank_option_register(sp, &o) != ESPANK_SUCCESS) return -1;
  }
  return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  if (!spank_remote(sp)) return 0;
  try {
    return Admit(sp) ? 0 : -1;
  } catch (const std::exception& e) {
    slurm_error("gpumux: cannot admit the step (is gpumuxd running at %s?): %s", g.socket.c_str(),
                e.what());
    return -1;
  }
}

int slurm_spank_task_init_privileged(spank_t sp, int, char**) {
  if (g.tenant.empty()) return 0;
  try {
    for (auto& [k, v] : g.env.items()) {
      std::string value = v.get<std::string>();
      if (k == "LD_PRELOAD" || k == "LD_LIBRARY_PATH") value = Prepend(value, Env(sp, k.c_str()));
      spank_setenv(sp, k.c_str(), value.c_str(), 1);
    }
    return 0;
  } catch (const std::exception& e) {
    slurm_error("gpumux: cannot set the task's environment: %s", e.what());
    return -1;
  }
}

// The admitting step removes the tenant when it ends. While other steps of the job still run in it,
// gpumuxd refuses (409); the job's epilog then removes it once the whole job is over.
int slurm_spank_exit(spank_t sp, int, char**) {
  if (!spank_remote(sp) || !g.created) return 0;
  try {
    gpumux::agent::AgentClient(g.socket).Remove(g.tenant);
  } catch (const std::exception& e) {
    slurm_info("gpumux: tenant %s left for the job's epilog: %s", g.tenant.c_str(), e.what());
  }
  return 0;
}

// Runs on the node as root when the job has ended (job script context, a process of its own):
// removes the job's tenant if a step could not. Never fails: a required plugin's failing epilog
// drains the node.
int slurm_spank_job_epilog(spank_t sp, int ac, char** av) {
  ParseArguments(ac, av);
  uint32_t job = 0;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS || job == 0) {
    const char* id = std::getenv("SLURM_JOB_ID");
    job = id ? uint32_t(std::strtoul(id, nullptr, 10)) : 0;
  }
  if (job == 0) return 0;
  std::string tenant = "slurm-" + std::to_string(job);
  for (int attempt = 0; attempt < 50; ++attempt) {  // its last processes may still be exiting
    try {
      gpumux::agent::AgentClient(g.socket).Remove(tenant, /*missing_ok=*/true);
      return 0;
    } catch (const std::exception&) {
      // gpumuxd not reachable (restarting, or absent), or the tenant's processes not gone yet: try
      // again
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  slurm_error("gpumux: could not remove tenant slurm-%u from gpumuxd at %s", job, g.socket.c_str());
  return 0;
}

}  // extern "C"
