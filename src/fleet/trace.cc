#include "fleet/trace.h"

#include <fmt/format.h>

#include <charconv>
#include <map>
#include <optional>
#include <set>

#include "base/error.h"
#include "base/input_file.h"

namespace gpumux::fleet {
namespace {

std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    fields.push_back(
        line.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (!fields.empty() && !fields.back().empty() && fields.back().back() == '\r')
    fields.back().pop_back();
  return fields;
}

// Reads a CSV with a header. `required` columns must be present, `optional` ones may be; any other
// column is an error. Calls `row` with a lookup from column name to field, and the line number.
class CsvReader {
 public:
  CsvReader(std::string path, std::set<std::string> required, std::set<std::string> optional)
      : path_(std::move(path)), in_(path_, kMaxLineBytes) {
    std::string header;
    if (!in_.Next(&header))
      throw BadInput(fmt::format("{}:1: the file is empty (expected a header)", path_));
    columns_ = SplitCsvLine(header);
    for (size_t i = 0; i < columns_.size(); ++i) {
      const std::string& c = columns_[i];
      if (!required.count(c) && !optional.count(c)) {
        throw BadInput(fmt::format("{}:1: unknown column '{}'", path_, Quoted(c)));
      }
      if (!index_.emplace(c, i).second)
        throw BadInput(fmt::format("{}:1: column '{}' appears twice", path_, Quoted(c)));
    }
    for (const std::string& c : required) {
      if (!index_.count(c)) throw BadInput(fmt::format("{}:1: missing column '{}'", path_, c));
    }
  }

  // Advances to the next data row; false at the end. Blank lines are errors too.
  bool Next() {
    std::string line;
    if (!in_.Next(&line)) return false;
    ++line_;
    fields_ = SplitCsvLine(line);
    if (fields_.size() != columns_.size()) {
      Fail(fmt::format("{} fields, expected {} ({})", fields_.size(), columns_.size(),
                       line.empty() ? "blank line" : "wrong column count"));
    }
    return true;
  }

  bool Has(const std::string& column) const { return index_.count(column) > 0; }
  const std::string& Field(const std::string& column) const { return fields_[index_.at(column)]; }

  int64_t Integer(const std::string& column, int64_t max) const {
    const std::string& s = Field(column);
    int64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size())
      Fail(fmt::format("{} '{}' is not a whole number", column, Quoted(s)));
    if (v < 0) Fail(fmt::format("{} {} is negative", column, v));
    if (v > max) Fail(fmt::format("{} {} is over {}", column, v, max));
    return v;
  }

  [[noreturn]] void Fail(const std::string& reason) const {
    throw BadInput(fmt::format("{}:{}: {}", path_, line_, reason));
  }

 private:
  // A trace row is a few hundred bytes; a "line" of megabytes is not a trace (/dev/zero, say).
  static constexpr size_t kMaxLineBytes = 64 << 10;
  std::string path_;
  InputLines in_;
  std::vector<std::string> columns_;
  std::map<std::string, size_t> index_;
  std::vector<std::string> fields_;
  int line_ = 1;
};

constexpr int64_t kHuge = int64_t(1) << 50;

}  // namespace

std::vector<NodeSpec> LoadNodes(const std::string& path) {
  CsvReader csv(path, {"sn", "cpu_milli", "memory_mib", "gpu", "model"}, {});
  std::vector<NodeSpec> nodes;
  std::set<std::string> names;
  while (csv.Next()) {
    NodeSpec n;
    n.name = csv.Field("sn");
    if (n.name.empty()) csv.Fail("empty node name");
    if (!names.insert(n.name).second)
      csv.Fail(fmt::format("node '{}' is listed twice", Quoted(n.name)));
    n.cpu_milli = csv.Integer("cpu_milli", kHuge);
    n.memory_mib = csv.Integer("memory_mib", kHuge);
    n.gpus = int(csv.Integer("gpu", kMaxGpusPerNode));
    n.model = csv.Field("model");
    if (n.gpus > 0 && n.model.empty())
      csv.Fail(fmt::format("node '{}' has {} GPUs but no model", Quoted(n.name), n.gpus));
    nodes.push_back(std::move(n));
  }
  if (nodes.empty()) throw BadInput(fmt::format("{}: no nodes", path));
  return nodes;
}

std::vector<PodSpec> LoadPods(const std::string& path) {
  CsvReader csv(
      path, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"},
      {"gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time"});
  std::vector<PodSpec> pods;
  while (csv.Next()) {
    PodSpec p;
    p.name = csv.Field("name");
    if (p.name.empty()) csv.Fail("empty pod name");
    p.cpu_milli = csv.Integer("cpu_milli", kHuge);
    p.memory_mib = csv.Integer("memory_mib", kHuge);
    p.num_gpu = int(csv.Integer("num_gpu", 1024));
    p.gpu_milli = int(csv.Integer("gpu_milli", kMilli));
    if (p.num_gpu == 0 && p.gpu_milli != 0) {
      csv.Fail(fmt::format("num_gpu 0 with gpu_milli {}: a CPU-only pod cannot ask for GPU",
                           p.gpu_milli));
    }
    if (p.num_gpu > 0 && p.gpu_milli == 0)
      csv.Fail(fmt::format("num_gpu {} with gpu_milli 0", p.num_gpu));
    if (p.num_gpu > 1 && p.gpu_milli != kMilli) {
      csv.Fail(fmt::format("num_gpu {} with gpu_milli {}: only a single-GPU pod may share a GPU",
                           p.num_gpu, p.gpu_milli));
    }
    if (csv.Has("gpu_spec") && !csv.Field("gpu_spec").empty()) {
      const std::string& spec = csv.Field("gpu_spec");
      size_t start = 0;
      while (true) {
        size_t bar = spec.find('|', start);
        std::string model =
            spec.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
        if (model.empty())
          csv.Fail(fmt::format("gpu_spec '{}' has an empty model name", Quoted(spec)));
        p.gpu_spec.push_back(model);
        if (bar == std::string::npos) break;
        start = bar + 1;
      }
    }
    if (csv.Has("creation_time") && !csv.Field("creation_time").empty())
      p.creation_time = csv.Integer("creation_time", kHuge);
    if (csv.Has("deletion_time") && !csv.Field("deletion_time").empty())
      p.deletion_time = csv.Integer("deletion_time", kHuge);
    if (p.creation_time >= 0 && p.deletion_time >= 0 && p.deletion_time < p.creation_time)
      csv.Fail(fmt::format("deletion_time {} is before creation_time {}", p.deletion_time,
                           p.creation_time));
    pods.push_back(std::move(p));
  }
  if (pods.empty()) throw BadInput(fmt::format("{}: no pods", path));
  return pods;
}

}  // namespace gpumux::fleet
