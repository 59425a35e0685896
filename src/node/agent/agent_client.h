// A typed client of gpumuxd's API (docs/gpumuxd.md) over its Unix socket. The API's
// paths and the keys of its answers live here, so the CLI and the SPANK plugin cannot drift from
// the agent. Request bodies are gpumuxd's JSON as documented (a plan's "agent" section holds them).
//
// Every call sends one request and waits for the answer (up to 10 s). Errors: Error(unavailable)
// when gpumuxd cannot be reached or gives no answer; otherwise, for a refusal, the Error whose code
// ErrorCodeForHttpStatus reads from the status, with gpumuxd's reason as its message.
// Thread-compatible: a client holds only the socket path.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/gpu_kind.h"
#include "node/agent/tenant_request.h"
#include "node/ledger/burst_rhythm.h"

namespace gpumux::agent {

struct Admission {
  bool created = false;   // a new tenant (201) rather than an update or a join (200)
  nlohmann::json answer;  // {"id", "gpu", "instance", "memory_bytes", "compute_cap_percent", "env"}
};

class AgentClient {
 public:
  explicit AgentClient(std::string socket_path) : socket_(std::move(socket_path)) {}

  // GET /v1/gpus: {"gpus": [{"index", "name", "memory_bytes", "mode", "shards", "instances"...}]}.
  nlohmann::json Gpus() const;
  // GET /v1/tenants: {"tenants": [...]}, all of them for an operator, the caller's own otherwise.
  nlohmann::json Tenants() const;
  // POST /v1/tenants: admits, updates or (with join) joins a tenant.
  Admission Admit(const TenantRequest& request) const;
  // PUT /v1/tenants/ID: changes the limits `request` gives of an admitted tenant (its id and
  // place unset).
  nlohmann::json Update(const std::string& id, const TenantRequest& request) const;
  // DELETE /v1/tenants/ID. With `missing_ok`, a tenant that is not there is no error (returns
  // false).
  bool Remove(const std::string& id, bool missing_ok = false) const;
  // PUT /v1/gpus/N {"mode": ..., "layout": [...]}.
  nlohmann::json SetMode(int gpu, const nlohmann::json& mode) const;

  const std::string& socket_path() const { return socket_; }

 private:
  // The answer's status and body; throws for a refusal (status >= 400).
  std::pair<int, nlohmann::json> Call(const std::string& method, const std::string& path,
                                      const nlohmann::json& body) const;
  std::string socket_;
};

// A high-priority tenant's learnt rhythm as GET /v1/tenants (and `gpumux status --json`) give it:
// {"period_ms", "burst_ms", "jitter_ms", "margin_ms", "anchor"}; and as a line for people.
nlohmann::json RhythmJson(const node::RhythmSummary& r);
// What instances a GPU can make and where (GET /v1/gpus "mig_geometry"): {"slots",
// "compute_slices", "profiles": [{"name", "memory_slices", "compute_slices", "memory_bytes",
// "max_instances", "starts", "media_engines"}]}, so that a client can say what could still be made
// beside what is.
nlohmann::json MigGeometryJson(const MigGeometry& geo);
std::string DescribeRhythm(const nlohmann::json& rhythm);

}  // namespace gpumux::agent
