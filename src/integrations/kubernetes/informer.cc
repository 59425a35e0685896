#include "integrations/kubernetes/informer.h"

#include <algorithm>
#include <random>
#include <thread>

#include "base/error.h"
#include "service/log.h"

namespace gpumux::k8s {

using nlohmann::json;

namespace {

json Metadata(const json& object) {
  const json& meta = object.contains("metadata") ? object["metadata"] : json::object();
  json out = json::object();
  for (const char* key : {"name", "namespace", "uid"})
    if (meta.contains(key)) out[key] = meta[key];
  return {{"metadata", out}};
}

}  // namespace

Informer::Informer(const KubeApi* api, std::string path, Handlers handlers, int page_size)
    : api_(api), path_(std::move(path)), handlers_(std::move(handlers)), page_size_(page_size) {}

std::string Informer::Key(const json& object) {
  const json& meta = object.contains("metadata") ? object["metadata"] : json::object();
  std::string name = meta.value("name", ""), ns = meta.value("namespace", "");
  return ns.empty() ? name : ns + "/" + name;
}

void Informer::List() {
  std::map<std::string, json> listed;
  std::string token, version;
  do {
    json page = api_->ListPage(path_, page_size_, token);
    const json& meta = page.contains("metadata") ? page["metadata"] : json::object();
    token = meta.value("continue", "");
    version = meta.value("resourceVersion", version);
    for (const json& object : page["items"]) {
      listed[Key(object)] = Metadata(object);
      handlers_.upsert(object);
    }
  } while (!token.empty());
  for (const auto& [key, meta] : known_)
    if (!listed.count(key)) handlers_.remove(meta);
  known_ = std::move(listed);
  version_ = version;
  expired_ = false;
  synced_ = true;
}

bool Informer::Watch(const std::atomic<bool>& stop, int timeout_s) {
  KubeApi::WatchEnd end = api_->Watch(
      path_, version_, timeout_s,
      [&](const json& e) {
        const json& object = e.contains("object") ? e["object"] : json::object();
        std::string version =
            object.contains("metadata") ? object["metadata"].value("resourceVersion", "") : "";
        std::string type = e.value("type", "");
        if (type == "ADDED" || type == "MODIFIED") {
          known_[Key(object)] = Metadata(object);
          handlers_.upsert(object);
        } else if (type == "DELETED") {
          known_.erase(Key(object));
          handlers_.remove(Metadata(object));
        }
        if (!version.empty()) version_ = version;  // bookmarks carry only this
        return true;
      },
      stop);
  if (end == KubeApi::WatchEnd::kExpired) expired_ = true;
  return end == KubeApi::WatchEnd::kClosed;
}

void Informer::Run(const std::atomic<bool>& stop, std::chrono::milliseconds backoff) {
  constexpr auto kMostBackoff = std::chrono::milliseconds(30'000);
  std::string last_error;
  bool listed = false;
  int failures = 0;  // in a row
  std::mt19937 random(std::random_device{}());
  while (!stop.load()) {
    try {
      if (!listed || expired_) {
        List();
        listed = true;
      }
      auto started = std::chrono::steady_clock::now();
      Watch(stop);
      failures = 0;
      last_error.clear();
      // A server that ends streams at once (a proxy, a test) is not watched in a busy loop.
      if (std::chrono::steady_clock::now() - started < std::chrono::milliseconds(50))
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } catch (const Error& e) {
      ++failures;
      // What was listed and watched still holds: the next watch resumes from the last version
      // seen, and only failures that go on (or 410 Gone) need the whole list again.
      if (failures >= kListAfterFailures) listed = false;
      if (e.what() != last_error || failures == kListAfterFailures)
        service::Log(
            "warn",
            listed ? "watch failed; will watch again from the last version"
                   : "watch failed; will list again",
            {{"path", path_}, {"reason", e.what()}, {"failures", std::to_string(failures)}});
      last_error = e.what();
      // Exponential, so that every node's programs do not come back at once after an API server
      // restart; jittered, so that they spread out.
      auto wait = std::min<std::chrono::milliseconds>(kMostBackoff,
                                                      backoff * (1 << std::min(failures - 1, 10)));
      wait = std::chrono::milliseconds(
          int64_t(double(wait.count()) * std::uniform_real_distribution<double>(0.5, 1.5)(random)));
      for (auto waited = std::chrono::milliseconds(0); waited < wait && !stop.load();
           waited += std::chrono::milliseconds(50))
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

}  // namespace gpumux::k8s
