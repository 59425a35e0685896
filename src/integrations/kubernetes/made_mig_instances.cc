#include "integrations/kubernetes/made_mig_instances.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace gpumux::k8s {

MadeMigInstances::MadeMigInstances(std::string path) : path_(std::move(path)) {
  std::ifstream in(path_);
  if (!in) return;  // none made yet
  std::stringstream text;
  text << in.rdbuf();
  try {
    nlohmann::json record = nlohmann::json::parse(text.str());
    for (const nlohmann::json& key : record.at("made")) keys_.insert(key.get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    keys_.clear();
    std::error_code ignored;
    std::filesystem::rename(path_, path_ + ".bad", ignored);
    std::fprintf(stderr,
                 "gpumux-k8s-dra-driver: %s is not a record of the MIG instances this driver made "
                 "(%s); set aside as %s.bad: no idle instance made before now will be removed\n",
                 path_.c_str(), e.what(), path_.c_str());
  }
}

std::string MadeMigInstances::Key(int gpu, const std::string& placement_entry) {
  return std::to_string(gpu) + "/" + placement_entry;
}

void MadeMigInstances::Add(const std::string& key) {
  if (keys_.insert(key).second) Save();
}

void MadeMigInstances::Forget(const std::vector<std::string>& keys) {
  size_t before = keys_.size();
  for (const std::string& key : keys) keys_.erase(key);
  if (keys_.size() != before) Save();
}

void MadeMigInstances::Save() const {
  std::string tmp = path_ + ".tmp";
  std::error_code ignored;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ignored);
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << nlohmann::json({{"made", keys_}}).dump() << "\n";
    if (!out.flush()) throw Unavailable(tmp + ": cannot write the record of MIG instances made");
  }
  std::error_code error;
  std::filesystem::rename(tmp, path_, error);
  if (error)
    throw Unavailable(path_ +
                      ": cannot write the record of MIG instances made: " + error.message());
}

}  // namespace gpumux::k8s
