// The body of a Kubernetes watch as the API server (or anything between it and us) may send it:
// any bytes, cut into pieces of any size. The parser must never throw, never report an event that
// is not a JSON object, and stop at an ERROR event.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "integrations/kubernetes/watch_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t piece = 1 + data[0] % 64;  // the first byte sets how the rest arrives
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  gpumux::k8s::WatchStream stream(
      [](const nlohmann::json& e) {
        if (!e.is_object()) std::abort();
        return true;
      },
      4096);
  for (size_t at = 0; at < body.size(); at += piece) {
    if (!stream.Feed(body.substr(at, piece))) break;
  }
  return 0;
}
