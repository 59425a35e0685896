// A list-then-watch view of one kind of API object, as client-go's reflector keeps one: it lists
// in pages (limit and continue), then watches from the list's resourceVersion with bookmarks, and
// watches again from the last version it saw when a stream ends or breaks (a cut connection, an
// API server restarting): it lists again only when the server answers 410 Gone (the version is
// older than it keeps) or watches keep failing, after a jittered exponential back-off. Every object
// listed, added or modified goes to `upsert`; every one deleted, or gone from a fresh list, to
// `remove` (with its metadata). Nothing lists the cluster again while the watch holds, so a reader
// of what the handlers built never waits on the API server.
//
// Thread-compatible: one thread runs List and Watch (or Run); the handlers run on it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "integrations/kubernetes/kube_api.h"

namespace gpumux::k8s {

class Informer {
 public:
  struct Handlers {
    std::function<void(const nlohmann::json&)> upsert;
    std::function<void(const nlohmann::json&)> remove;
  };
  // `path`: a list path ("/api/v1/pods", "/api/v1/pods?fieldSelector=spec.nodeName%3DN").
  // `api` must outlive the informer.
  Informer(const KubeApi* api, std::string path, Handlers handlers, int page_size = 500);

  // Lists every page; upserts each object, removes what was known and is no longer there.
  // Throws Error (what the API server answered, or unavailable).
  void List();
  // Watches from the last version seen until the stream ends (true), or the server says the
  // version is gone or `stop` is set (false; List again after 410). Throws Error.
  bool Watch(const std::atomic<bool>& stop, int timeout_s = 300);
  // Lists, then watches and watches again from the last version, until `stop`. After a failure it
  // waits `backoff`, doubled with each failure in a row up to 30 s, each wait drawn from half to
  // one and a half of that; it lists again after 410 Gone or kListAfterFailures failures in a row.
  // A failure is logged when its reason changes.
  void Run(const std::atomic<bool>& stop,
           std::chrono::milliseconds backoff = std::chrono::milliseconds(800));
  static constexpr int kListAfterFailures = 5;

  const std::string& resource_version() const { return version_; }
  size_t size() const { return known_.size(); }
  bool synced() const { return synced_.load(); }

 private:
  // "namespace/name" (or "name" for cluster-scoped objects).
  static std::string Key(const nlohmann::json& object);

  const KubeApi* api_;
  std::string path_;
  Handlers handlers_;
  int page_size_;
  std::string version_;
  bool expired_ = false;
  std::atomic<bool> synced_{false};
  // What is known of each object: its metadata (name, namespace, uid), for `remove`.
  std::map<std::string, nlohmann::json> known_;
};

}  // namespace gpumux::k8s
