// Reading Kubernetes objects (v1.Pod, ResourceClaim, gpumuxd's answers) field by field, where any
// field may be missing or of another type: a missing member reads as null, never throws.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace gpumux::k8s {

// object[key], or null when `object` is not an object or has no such member.
inline const nlohmann::json& Member(const nlohmann::json& object, const char* key) {
  static const nlohmann::json kNull;
  return object.is_object() && object.contains(key) ? object[key] : kNull;
}

// object[key] when it is a string, else "".
inline std::string MemberText(const nlohmann::json& object, const char* key) {
  const nlohmann::json& v = Member(object, key);
  return v.is_string() ? v.get<std::string>() : "";
}

}  // namespace gpumux::k8s
