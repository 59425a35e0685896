#include "node/agent/agent_client.h"

#include <fmt/format.h>

#include "base/error.h"
#include "service/http_client.h"

namespace gpumux::agent {

using nlohmann::json;

std::pair<int, json> AgentClient::Call(const std::string& method, const std::string& path,
                                       const json& body) const {
  auto [status, text] = service::CallUnix(socket_, method, path, body.is_null() ? "" : body.dump());
  json answer = json::parse(text, nullptr, false);
  if (status >= 400) {
    std::string why = answer.is_object() && answer.contains("error") && answer["error"].is_string()
                          ? answer["error"].get<std::string>()
                          : text;
    throw Error(ErrorCodeForHttpStatus(status), "gpumuxd refused " + method + " " + path + " (" +
                                                    std::to_string(status) + "): " + why);
  }
  if (!answer.is_object()) {
    throw Unavailable("gpumuxd at " + socket_ + " answered " + method + " " + path +
                      " with no JSON object");
  }
  return {status, std::move(answer)};
}

json AgentClient::Gpus() const { return Call("GET", "/v1/gpus", nullptr).second; }

json AgentClient::Tenants() const { return Call("GET", "/v1/tenants", nullptr).second; }

Admission AgentClient::Admit(const TenantRequest& request) const {
  auto [status, answer] = Call("POST", "/v1/tenants", TenantRequestJson(request));
  return {status == 201, std::move(answer)};
}

json AgentClient::Update(const std::string& id, const TenantRequest& request) const {
  return Call("PUT", "/v1/tenants/" + id, TenantRequestJson(request)).second;
}

bool AgentClient::Remove(const std::string& id, bool missing_ok) const {
  try {
    Call("DELETE", "/v1/tenants/" + id, nullptr);
    return true;
  } catch (const Error& e) {
    if (missing_ok && e.code() == ErrorCode::kNotFound) return false;
    throw;
  }
}

json AgentClient::SetMode(int gpu, const json& mode) const {
  return Call("PUT", "/v1/gpus/" + std::to_string(gpu), mode).second;
}

nlohmann::json RhythmJson(const node::RhythmSummary& r) {
  return {{"period_ms", r.period_ns / 1e6},
          {"burst_ms", r.length_ns / 1e6},
          {"jitter_ms", r.jitter_ns / 1e6},
          {"margin_ms", r.margin_ns / 1e6},
          {"anchor", r.from_latest_start ? "latest start" : "beat"}};
}

std::string DescribeRhythm(const nlohmann::json& r) {
  auto ms = [&](const char* key) { return fmt::format("{:.2f} ms", r.value(key, 0.0)); };
  return "bursts every " + ms("period_ms") + ", " + ms("burst_ms") + " long, forecast from its " +
         r.value("anchor", std::string("beat")) + ", starts early by up to " + ms("jitter_ms") +
         "; others clear the GPU " + ms("margin_ms") + " before the next";
}

nlohmann::json MigGeometryJson(const MigGeometry& geo) {
  nlohmann::json profiles = nlohmann::json::array();
  for (const MigProfile& p : geo.profiles) {
    profiles.push_back({{"name", p.name},
                        {"memory_slices", p.memory_slices},
                        {"compute_slices", p.compute_slices},
                        {"memory_bytes", uint64_t(p.memory_bytes)},
                        {"max_instances", p.max_instances},
                        {"starts", p.placement_starts},
                        {"media_engines", p.holds_media_engines}});
  }
  return {{"slots", geo.slots}, {"compute_slices", geo.compute_slices}, {"profiles", profiles}};
}

}  // namespace gpumux::agent
