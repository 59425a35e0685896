// What gpumux's three Kubernetes programs share (the device plugin, the DRA driver and the
// scheduler extender, each a *_main.cc): their common options, a watch that runs beside their
// loop, and how an error ends them. Header-only: only the programs link CLI11.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "base/error.h"
#include "service/log.h"

namespace gpumux::k8s {

// --apiserver: where the API server is, in any form KubeApi takes.
inline void AddApiServerOption(CLI::App& app, std::string* apiserver) {
  app.add_option("--apiserver", *apiserver,
                 "the API server: in-cluster (the pod's service account), kubeconfig:PATH, a URL, "
                 "HOST:PORT (plain HTTP) or unix:PATH")
      ->capture_default_str();
}

// --agent (gpumuxd's socket) and --node (this node's name; default $NODE_NAME, which the
// DaemonSet sets from the downward API).
inline void AddNodeOptions(CLI::App& app, std::string* agent_socket, std::string* node_name) {
  if (const char* node = std::getenv("NODE_NAME")) *node_name = node;
  app.add_option("--agent", *agent_socket, "gpumuxd's socket")->capture_default_str();
  app.add_option("--node", *node_name, "this node's name (default: $NODE_NAME)");
}

// --poll: seconds between the program's looks at `what`, from 0.05 to `most_s`.
inline void AddPollOption(CLI::App& app, double* poll_s, const std::string& what, double most_s) {
  app.add_option("--poll", *poll_s, "seconds between looks at " + what)
      ->capture_default_str()
      ->check(CLI::Range(0.05, most_s));
}

// --dynamic-mig (`help` says what it then does) into `on`, and --mig-idle-grace SECONDS, read
// as idle_grace() once `app` has parsed its arguments.
struct DynamicMigOptions {
  double idle_grace_s = 300;
  void Add(CLI::App& app, bool* on, const std::string& help) {
    app.add_flag("--dynamic-mig", *on, help);
    app.add_option("--mig-idle-grace", idle_grace_s,
                   "with --dynamic-mig: seconds an instance stays idle (no tenant) before it is "
                   "removed")
        ->check(CLI::Range(0.0, 86400.0))
        ->capture_default_str();
  }
  std::chrono::milliseconds idle_grace() const {
    return std::chrono::milliseconds(int64_t(idle_grace_s * 1000));
  }
};

// A watch of the API server on a thread of its own from construction: `watch(stop)` returns once
// `stop` is set. Stop (or destruction) sets it and waits for the watch to return.
class BackgroundWatch {
 public:
  explicit BackgroundWatch(std::function<void(std::atomic<bool>&)> watch)
      : thread_([this, watch = std::move(watch)] { watch(stop_); }) {}
  ~BackgroundWatch() { Stop(); }
  BackgroundWatch(const BackgroundWatch&) = delete;
  BackgroundWatch& operator=(const BackgroundWatch&) = delete;
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};  // before thread_: set up before the watch starts
  std::thread thread_;
};

// Runs a program's body: an Error it throws is logged ("<name> failed", with the reason) and its
// code becomes the exit status (base/error.h); 0 when the body returns.
inline int RunProgram(const std::string& name, const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    service::Log("error", name + " failed", {{"reason", e.what()}});
    return ExitCode(e.code());
  }
  return 0;
}

}  // namespace gpumux::k8s
