// The scheduler extender's bodies: the input is the body kube-scheduler would send to filter,
// prioritize and bind (pods are written by users, so anything may be in them), handled by an
// extender that knows two nodes. Every answer must be a 200 whose body is JSON (a refusal says why
// in its fields, as kube-scheduler reads them), never another status or an exception out of
// Handle.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "integrations/kubernetes/extender.h"

namespace {

gpumux::k8s::Extender& TheExtender() {
  static std::unique_ptr<gpumux::k8s::Extender> extender = [] {
    auto e = std::make_unique<gpumux::k8s::Extender>(gpumux::k8s::ExtenderConfig{}, nullptr);
    std::vector<gpumux::k8s::Slot> slots = {{{0, -1}, 80}, {{1, 0}, 40}, {{1, 1}, 20}};
    e->SetNode("node-a", gpumux::k8s::NodeGpus(slots));
    e->SetNode("node-b", gpumux::k8s::NodeGpus({{{0, -1}, 80}}));
    return e;
  }();
  return *extender;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string body(reinterpret_cast<const char*>(data), size);
  for (const char* verb : {"/filter", "/prioritize", "/bind"}) {
    gpumux::service::HttpRequest r{"POST", verb, body};
    gpumux::service::HttpResponse answer = TheExtender().Handle(r);
    if (answer.status != 200 || nlohmann::json::parse(answer.body, nullptr, false).is_discarded()) {
      std::fprintf(stderr, "%s answered %d: %s\n", verb, answer.status, answer.body.c_str());
      std::abort();
    }
  }
  return 0;
}
