// gpumuxd's API bodies: the input is the body of each tenant and GPU call, handled by an agent on a
// simulated H100 (as root, an operator). Every answer must be a status gpumuxd means to give, never
// a 500, and never an exception out of Handle.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "core/catalog.h"
#include "node/agent/agent.h"
#include "node/agent/request_body.h"

namespace {

gpumux::agent::Agent& TheAgent() {
  static std::unique_ptr<gpumux::agent::Agent> agent = [] {
    std::string dir = "/tmp/gpumux_fuzz_agent_" + std::to_string(getpid());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    gpumux::Catalog catalog = gpumux::Catalog::LoadBundled();
    gpumux::agent::AgentConfig config;
    config.runtime_dir = dir + "/run";
    config.state_path = dir + "/state.db";
    config.bin_dir = dir;
    config.gpus.push_back(gpumux::node::SimulatedDevice(catalog.FindGpu("H100"), 0));
    return std::make_unique<gpumux::agent::Agent>(
        config, gpumux::agent::MakeSimulatedBackend(config.runtime_dir));
  }();
  return *agent;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpumux::agent;
  std::string body(reinterpret_cast<const char*>(data), size);
  try {
    RequestBody parsed(body);
  } catch (const gpumux::Error&) {
  }
  gpumux::agent::Agent& agent = TheAgent();
  for (auto [method, path] :
       {std::pair{"POST", "/v1/tenants"}, std::pair{"PUT", "/v1/tenants/fuzz"},
        std::pair{"PUT", "/v1/gpus/0"}}) {
    HttpRequest r{method, path, body, true, 0, 0, getpid()};
    HttpResponse answer = agent.Handle(r);
    if (answer.status >= 500 && answer.status != 503) {
      std::fprintf(stderr, "%s %s answered %d: %s\n", method, path, answer.status,
                   answer.body.c_str());
      std::abort();
    }
  }
  // Leave no tenant behind for the next input (GPU modes may change; that is part of the state).
  agent.Handle({"DELETE", "/v1/tenants/fuzz", "", true, 0, 0, getpid()});
  auto list = agent.Handle({"GET", "/v1/tenants", "", true, 0, 0, getpid()});
  if (list.status != 200) std::abort();
  return 0;
}
