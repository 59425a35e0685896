#include "integrations/kubernetes/node_loop.h"

#include <signal.h>

#include <atomic>
#include <string>
#include <thread>

#include "base/error.h"
#include "service/log.h"

namespace gpumux::k8s {

namespace {
std::atomic<bool> g_stop{false};
void StopOnSignal(int) { g_stop = true; }
}  // namespace

void RunUntilSignalled(std::chrono::milliseconds period, const std::function<void()>& step) {
  signal(SIGTERM, StopOnSignal);
  signal(SIGINT, StopOnSignal);
  std::string last_error;
  while (!g_stop) {
    try {
      step();
      last_error.clear();
    } catch (const Error& e) {
      if (e.what() != last_error) service::Log("warn", "will retry", {{"reason", e.what()}});
      last_error = e.what();
    }
    for (auto t = std::chrono::milliseconds(0); t < period && !g_stop;
         t += std::chrono::milliseconds(50))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace gpumux::k8s
