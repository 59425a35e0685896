#include "node/shim/memory_grant.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "service/http_client.h"

namespace gpumux::shim {

namespace {

// The body of a grant request for `bytes` of `tenant`'s credit on its GPU number `part`.
nlohmann::json GrantBody(const std::string& tenant, uint64_t bytes, int part) {
  nlohmann::json body = {{"tenant", tenant}, {"bytes", bytes}};
  if (part > 0) body["part"] = part;
  return body;
}

}  // namespace

uint64_t MemoryGrant::Ask(uint64_t want, uint64_t least) {
  nlohmann::json body = GrantBody(tenant_, want, part_);
  body["least"] = least;
  try {
    auto [status, answer] = service::CallUnix(socket_, "POST", "/v1/grants", body.dump());
    if (status != 200) return 0;
    nlohmann::json j = nlohmann::json::parse(answer, nullptr, false);
    uint64_t granted = j.is_object() ? j.value("granted", uint64_t(0)) : 0;
    return granted >= least && granted <= want ? granted : 0;
  } catch (const Error&) {
    return 0;  // gpumuxd cannot be reached: fail closed
  }
}

bool MemoryGrant::Register(std::string* why, int* activity) {
  nlohmann::json body = GrantBody(tenant_, 0, part_);
  try {
    auto [status, answer] = service::CallUnix(socket_, "POST", "/v1/grants", body.dump(), activity);
    if (status == 200) return true;
    nlohmann::json refusal = nlohmann::json::parse(answer, nullptr, /*allow_exceptions=*/false);
    *why = refusal.is_object() && refusal.contains("error") && refusal["error"].is_string()
               ? refusal["error"].get<std::string>()
               : "HTTP " + std::to_string(status);
  } catch (const Error& e) {
    *why = e.what();
  }
  return false;
}

void MemoryGrant::HandBack(uint64_t bytes) {
  nlohmann::json body = GrantBody(tenant_, bytes, part_);
  try {
    if (service::CallUnix(socket_, "POST", "/v1/grants/return", body.dump()).first == 200) return;
  } catch (const Error&) {
  }
  credit_.fetch_add(bytes);  // not taken back: it is still this process's to use
}

bool MemoryGrant::Take(uint64_t bytes) {
  // Hot path: one compare-and-swap on this process's own credit.
  uint64_t credit = credit_.load(std::memory_order_relaxed);
  while (credit >= bytes) {
    if (credit_.compare_exchange_weak(credit, credit - bytes, std::memory_order_acq_rel))
      return true;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (;;) {
    credit = credit_.load();
    if (credit >= bytes) {
      if (credit_.compare_exchange_weak(credit, credit - bytes)) return true;
      continue;
    }
    uint64_t short_by = bytes - credit;
    uint64_t granted = Ask(std::max(short_by, kGrantBatchBytes), short_by);
    if (granted == 0) return false;
    credit_.fetch_add(granted);
  }
}

void MemoryGrant::Give(uint64_t bytes) {
  uint64_t credit = credit_.fetch_add(bytes) + bytes;
  if (credit <= 2 * kGrantBatchBytes) return;
  std::lock_guard<std::mutex> lock(mu_);
  credit = credit_.load();
  while (credit > kGrantBatchBytes && !credit_.compare_exchange_weak(credit, kGrantBatchBytes)) {
  }
  if (credit > kGrantBatchBytes) HandBack(credit - kGrantBatchBytes);
}

void MemoryGrant::ReturnAll() {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t credit = credit_.exchange(0);
  if (credit) HandBack(credit);
}

}  // namespace gpumux::shim
