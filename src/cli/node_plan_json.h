// A node plan (share/node_plan.h) as JSON: the "agent" section of `gpumux plan --json`, which
// `gpumux apply PLAN.json` reads back.
//   {"gpus":    [{"gpu": 0, "kind": "H100-SXM5-80GB", "memory_bytes": ..., "mode": "mig",
//                 "layout": ["3g.40gb@0", ...]}],
//    "tenants": [{"id": "chat-13b-1", "name": "chat-13b#1", "gpu": 0, "instance": 1,
//                 "memory": <quota bytes>, "need_bytes": ..., "compute": "30%"}]}
// Each GPU's "mode" and "layout" are the body of `PUT /v1/gpus/N`; each tenant's "id", "gpu",
// "instance", "memory" and "compute" the body of `POST /v1/tenants` (with "source": "plan").
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "node/agent/tenant_request.h"
#include "share/node_plan.h"

namespace gpumux {

nlohmann::json ToJson(const NodePlan& plan);

// Reads what ToJson wrote. Throws Error (bad input) naming the field (`where` +
// ".tenants[2].memory") for anything missing, of the wrong type or out of range.
NodePlan NodePlanFromJson(const nlohmann::json& j, const std::string& where);

// What gpumuxd is asked for one GPU (the body), and to admit one tenant.
nlohmann::json ModeRequest(const NodeGpuPlan& gpu);
agent::TenantRequest AdmitRequest(const NodeTenantPlan& tenant);

}  // namespace gpumux
