// The MIG instances gpumux made on demand (dynamic MIG: mig_maker.h), kept in a file under its
// program's directory so that a program started again still knows them: only these are removed once
// idle, never an instance an operator (or another program) made. Each is named "GPU/PROFILE@START"
// (MadeMigInstances::Key). Thread-compatible.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace gpumux::k8s {

class MadeMigInstances {
 public:
  // Reads the record at `path` if there is one. A file that is not such a record is set aside
  // (renamed to PATH.bad, said on stderr) and nothing counts as made: the driver then removes no
  // instance it cannot show it made.
  explicit MadeMigInstances(std::string path);

  static std::string Key(int gpu, const std::string& placement_entry);  // "0/1g.10gb@4"
  bool Contains(const std::string& key) const { return keys_.count(key) > 0; }
  const std::set<std::string>& keys() const { return keys_; }
  // Each writes the record (beside it, then renamed over: a crash leaves the old one or the new).
  // Throws Error (unavailable) when it cannot; what it holds in memory has changed regardless.
  void Add(const std::string& key);
  void Forget(const std::vector<std::string>& keys);

 private:
  void Save() const;
  std::string path_;
  std::set<std::string> keys_;
};

}  // namespace gpumux::k8s
