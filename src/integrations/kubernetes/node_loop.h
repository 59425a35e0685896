// The main loop of gpumux's Kubernetes node programs (the device plugin and the DRA driver): runs
// `step` at once and then every `period` until SIGTERM or SIGINT. A step that throws Error is
// logged ("will retry", once until its reason changes) and tried again at the next period: the
// kubelet, gpumuxd or the API server being away for a while is normal on a node.
#pragma once

#include <chrono>
#include <functional>

namespace gpumux::k8s {

void RunUntilSignalled(std::chrono::milliseconds period, const std::function<void()>& step);

}  // namespace gpumux::k8s
