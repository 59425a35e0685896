#include "integrations/slurm/gres_conf.h"

#include "base/error.h"

#include <cctype>
#include <sstream>
#include <stdexcept>

namespace gpumux::slurm {
namespace {

std::string DeviceFile(const std::string& pattern, int index) {
  std::string out = pattern;
  size_t at = out.find("{}");
  if (at == std::string::npos) return out + std::to_string(index);
  return out.replace(at, 2, std::to_string(index));
}

std::string Gib(uint64_t bytes) {
  std::ostringstream s;
  s << double(bytes) / double(1ull << 30) << " GiB";
  return s.str();
}

}  // namespace

std::string GresType(const std::string& gpu_name) {
  std::string name = gpu_name;
  if (name.size() > 7 && name.compare(0, 7, "NVIDIA ") == 0)
    name = name.substr(7);  // NVML's vendor prefix
  std::string type;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) break;
    type += char(std::tolower(static_cast<unsigned char>(c)));
  }
  return type.empty() ? "gpu" : type;
}

std::string GresConf(const std::vector<node::Device>& gpus, const GresConfOptions& o) {
  if (gpus.empty()) throw BadInput("no GPUs to configure");
  if (o.shard_bytes == 0) throw BadInput("shard size must be more than 0 bytes");
  std::ostringstream conf;
  conf << "# gres.conf for " << o.node << " (gpumux slurm gres-conf): " << gpus.size()
       << " GPU(s), one shard per " << Gib(o.shard_bytes)
       << " of GPU memory; run gpumuxd with --shard-size " << o.shard_bytes << "\n"
       << "AutoDetect=off\n";
  uint64_t shards = 0;
  std::ostringstream types;
  for (const node::Device& d : gpus) {
    uint64_t n = d.memory / o.shard_bytes;
    if (n == 0)
      throw BadInput("GPU " + std::to_string(d.index) + " (" + d.name +
                     ") is smaller than one shard");
    std::string file = DeviceFile(o.device_file, d.index);
    conf << "Name=gpu Type=" << GresType(d.name) << " File=" << file << "\n"
         << "Name=shard Count=" << n << " File=" << file << "\n";
    shards += n;
  }
  conf << "\n# slurm.conf: the GRES types, and this node's Gres= (add to its NodeName line)\n"
       << "GresTypes=gpu,shard\n"
       << "SelectType=select/cons_tres\n"
       << "NodeName=" << o.node << " Gres=gpu:" << GresType(gpus[0].name) << ":" << gpus.size()
       << ",shard:" << shards << "\n";
  return conf.str();
}

}  // namespace gpumux::slurm
