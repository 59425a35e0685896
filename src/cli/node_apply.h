// Bringing one node's gpumuxd to a node plan (share/node_plan.h): `gpumux apply` and `gpumux plan
// --apply`. The node's state is read once, every check is made before the first call, so a plan
// that cannot be applied is refused as a whole, and a node that already matches the plan gets no
// call at all (applying twice is applying once).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/calibration.h"
#include "node/agent/agent_client.h"
#include "node/agent/tenant_request.h"
#include "share/live_node.h"
#include "share/node_plan.h"

namespace gpumux {

struct AgentCall {
  std::string method;  // "PUT" or "POST"
  std::string path;    // "/v1/gpus/0", "/v1/tenants"
  nlohmann::json body;
  std::string what;  // for people: "GPU 0: timeslice -> mps", "admit chat-13b-1 on GPU 1: 30.2 GiB"
  agent::TenantRequest tenant{};  // what `body` says, for a call on a tenant (POST or PUT)

  // A call on a tenant: its body says `tenant`.
  static AgentCall OnTenant(std::string method, std::string path, agent::TenantRequest tenant,
                            std::string what) {
    nlohmann::json body = agent::TenantRequestJson(tenant);
    return {std::move(method), std::move(path), std::move(body), std::move(what),
            std::move(tenant)};
  }
};

// The calls that take a node whose `GET /v1/gpus` and `GET /v1/tenants` answers are `gpus` and
// `tenants` to `plan`: sharing modes first, then tenants (admitted, or updated where their limits
// differ). The plan owns the GPUs it names. Every request is checked with the rules gpumuxd applies
// (ids, compute caps, quotas, one tenant per id, MIG layouts the catalog can place). Throws, before
// any call is made:
//   Error (bad input)     a request gpumuxd would refuse as such (the Error names the tenant or
//   GPU); Error (does not fit)  the node lacks a planned GPU, or one of another size; the planned
//   quotas
//                         exceed a GPU's memory (on a GPU a little smaller than its catalog kind,
//                         as real ones are, each tenant's share of the spare shrinks first);
//   Error (conflict)      a planned GPU has a tenant the plan does not name, a planned tenant is on
//                         another GPU, or a GPU whose mode must change has tenants (a MIG layout)
//                         or live processes (MPS, time-slicing).
std::vector<AgentCall> CallsToApply(const NodePlan& plan, const nlohmann::json& gpus,
                                    const nlohmann::json& tenants);

// What a node runs, from its gpumuxd's answers to `GET /v1/gpus` and `GET /v1/tenants` (a plan
// made for it keeps its running tenants where they are, PlanInput::live). Throws Error (bad input)
// naming what is missing from an answer.
LiveNode ReadLiveNode(const nlohmann::json& gpus, const nlohmann::json& tenants);

// Reads the node's state from `agent`, and makes the calls CallsToApply returns unless `dry_run`;
// returns them. All or nothing: a call gpumuxd still refuses (the node changed under us) stops the
// rest and the calls made before it are undone, last first (a tenant admitted is removed, limits
// and modes are put back); the Error says which call was refused, and whether undoing failed too.
std::vector<AgentCall> ApplyNodePlan(const agent::AgentClient& agent, const NodePlan& plan,
                                     bool dry_run);

// The calibrations a node's gpumuxd serves with its GPUs (`gpus`: its answer to GET /v1/gpus), one
// per file however many GPUs share it, each path "FILE (`where`)". Throws Error (bad input) naming
// the GPU for one that does not read as a calibration.
std::vector<CalibrationFile> NodeCalibrations(const nlohmann::json& gpus, const std::string& where);

}  // namespace gpumux
