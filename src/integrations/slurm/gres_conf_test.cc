#include "integrations/slurm/gres_conf.h"

#include "base/error.h"

#include <gtest/gtest.h>

namespace gpumux::slurm {
namespace {

node::Device Gpu(int index, uint64_t gib) {
  node::Device d;
  d.index = index;
  d.name = "H100-SXM5-80GB";
  d.memory = gib << 30;
  return d;
}

TEST(GresConf, OneShardPerGibOfEachGpu) {
  std::string conf = GresConf({Gpu(0, 80), Gpu(1, 80)}, {"gpu-node-7"});
  EXPECT_NE(
      conf.find("Name=gpu Type=h100 File=/dev/nvidia0\nName=shard Count=80 File=/dev/nvidia0\n"),
      std::string::npos)
      << conf;
  EXPECT_NE(conf.find("Name=shard Count=80 File=/dev/nvidia1\n"), std::string::npos);
  EXPECT_NE(conf.find("NodeName=gpu-node-7 Gres=gpu:h100:2,shard:160\n"), std::string::npos)
      << conf;
  EXPECT_NE(conf.find("AutoDetect=off"), std::string::npos);
}

TEST(GresConf, ShardSizeAndDeviceFilesFollowTheOptions) {
  std::string conf = GresConf({Gpu(0, 24)}, {"n", 4ull << 30, "/tmp/fake-gpu{}"});
  EXPECT_NE(conf.find("Name=shard Count=6 File=/tmp/fake-gpu0\n"), std::string::npos) << conf;
  EXPECT_THROW(GresConf({Gpu(0, 2)}, {"n", 4ull << 30}), Error) << "a GPU smaller than a shard";
  EXPECT_THROW(GresConf({}, {}), Error);
}

TEST(GresConf, TypeIsTheLeadingWordOfTheName) {
  EXPECT_EQ(GresType("H100-SXM5-80GB (simulated)"), "h100");
  EXPECT_EQ(GresType("NVIDIA A100-SXM4-40GB"), "a100") << "NVML's vendor prefix is dropped";
  EXPECT_EQ(GresType("-"), "gpu");
}

}  // namespace
}  // namespace gpumux::slurm
