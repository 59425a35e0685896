#include "integrations/kubernetes/watch_stream.h"

#include "base/input_file.h"

namespace gpumux::k8s {

using nlohmann::json;

bool WatchStream::Feed(std::string_view piece) {
  pending_.append(piece);
  size_t start = 0;
  for (size_t end; (end = pending_.find('\n', start)) != std::string::npos; start = end + 1) {
    json e = json::parse(std::string_view(pending_).substr(start, end - start), nullptr, false);
    if (!e.is_object()) continue;
    const json& type = e.contains("type") ? e["type"] : json();
    if (type == "ERROR") {
      const json& status = e.contains("object") ? e["object"] : json();
      const json& code = status.is_object() && status.contains("code") ? status["code"] : json();
      if (code.is_number_integer() && code.get<int64_t>() == 410) {
        expired_ = true;
      } else {
        failure_ = Quoted(e.dump(-1, ' ', false, json::error_handler_t::replace), 300);
      }
      return false;
    }
    if (!event_(e)) return false;
  }
  pending_.erase(0, start);
  if (pending_.size() > max_line_) {
    failure_ = "an event of over " + std::to_string(max_line_) + " bytes";
    return false;
  }
  return true;
}

}  // namespace gpumux::k8s
