// Test helpers for MIG rooms (node_gpus.h): an H100's, and a pod asking a profile.
#pragma once

#include <string>

#include "integrations/kubernetes/node_gpus.h"
#include "integrations/kubernetes/pod_request.h"

namespace gpumux::k8s {

// An H100's MIG placements without media engines (NVIDIA's MIG user guide, H100 80GB table).
inline MigRoom H100Room(int gpu) {
  MigRoom room;
  room.gpu = gpu;
  room.slices = 8;
  for (int s = 0; s < 7; ++s) room.placements.push_back({"1g.10gb", s, 1});
  for (int s : {0, 2, 4, 6}) room.placements.push_back({"1g.20gb", s, 2});
  for (int s : {0, 2, 4}) room.placements.push_back({"2g.20gb", s, 2});
  for (int s : {0, 4}) room.placements.push_back({"3g.40gb", s, 4});
  room.placements.push_back({"4g.40gb", 0, 4});
  room.placements.push_back({"7g.80gb", 0, 8});
  return room;
}

// A pod whose one container asks one instance of `profile`, as ParsePod reads it.
inline PodRequest MigPod(const std::string& profile, const std::string& uid = "u") {
  PodRequest pod;
  pod.uid = uid;
  pod.mig_profile = profile;
  pod.containers.push_back({"c", 0});
  pod.containers.back().mig_profile = profile;
  return pod;
}

}  // namespace gpumux::k8s
