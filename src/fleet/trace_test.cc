#include "fleet/trace.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "fleet/test_support.h"

namespace gpumux::fleet {
namespace {

TEST(Trace, LoadsNodesAndBothPodFormats) {
  auto nodes = LoadNodes(WriteTempFile(
      "n.csv", "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,393216,8,G2\nn1,32000,262144,0,\n"));
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].gpus, 8);
  EXPECT_EQ(nodes[0].model, "G2");
  EXPECT_EQ(nodes[1].gpus, 0);
  auto full = LoadPods(WriteTempFile("p11.csv",
                                     "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_"
                                     "phase,creation_time,deletion_time,scheduled_time\n"
                                     "p0,12000,16384,1,1000,,LS,Running,0,10,0\n"
                                     "p1,6000,12288,1,460,V100M16|V100M32,LS,Running,1,10,1\n"
                                     "p2,4000,4096,0,0,,BE,Pending,2,10,\n"));
  ASSERT_EQ(full.size(), 3u);
  EXPECT_EQ(full[1].gpu_spec, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_TRUE(full[1].shares_gpu());
  EXPECT_TRUE(full[2].cpu_only());
  EXPECT_EQ(full[1].creation_time, 1);
  EXPECT_EQ(full[1].deletion_time, 10);
  auto five = LoadPods(WriteTempFile(
      "p5.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,88000,327680,8,1000\n"));
  EXPECT_EQ(five[0].total_gpu_milli(), 8000);
  EXPECT_EQ(five[0].creation_time, -1) << "no times in the five-column format";
}

void ExpectRefused(const std::string& text, const std::string& needle, bool pods = true) {
  std::string path = WriteTempFile("bad.csv", text);
  try {
    if (pods) {
      LoadPods(path);
    } else {
      LoadNodes(path);
    }
    FAIL() << "accepted:\n" << text;
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << "missing '" << needle << "' in " << msg;
  }
}

TEST(Trace, BadRowsStopTheLoadWithFileLineAndReason) {
  const std::string h = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
  ExpectRefused(h + "p0,1000,1,1,1000\np1,-5,1,1,500\n", ":3: cpu_milli -5 is negative");
  ExpectRefused(h + "p0,1000,1,1,1200\n", ":2: gpu_milli 1200 is over 1000");
  ExpectRefused(h + "p0,1000,1,1\n", ":2: 4 fields, expected 5");
  ExpectRefused(h + "p0,1000,1,2,500\n", ":2: num_gpu 2 with gpu_milli 500");
  ExpectRefused(h + "p0,1000,1,0,300\n", ":2: num_gpu 0 with gpu_milli 300");
  ExpectRefused(h + "p0,10x0,1,1,500\n", ":2: cpu_milli '10x0' is not a whole number");
  ExpectRefused("name,cpu_milli,memory_mib,num_gpu,gpu_milli,colour\np0,1,1,0,0,red\n",
                ":1: unknown column 'colour'");
  ExpectRefused("name,cpu_milli,memory_mib,num_gpu\np0,1,1,0\n", ":1: missing column 'gpu_milli'");
  ExpectRefused(h, "no pods");
  ExpectRefused(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\n"
      "p0,1,1,0,0,20,10\n",
      ":2: deletion_time 10 is before creation_time 20");
  ExpectRefused("sn,cpu_milli,memory_mib,gpu,model\nn0,1000,1,2,\n",
                ":2: node 'n0' has 2 GPUs but no model", false);
  ExpectRefused("sn,cpu_milli,memory_mib,gpu,model\nn0,1000,1,17,G2\n", "gpu 17 is over 16", false);
  ExpectRefused("sn,cpu_milli,memory_mib,gpu,model\nn0,1000,1,1,G2\nn0,1000,1,1,G2\n",
                "listed twice", false);
}

}  // namespace
}  // namespace gpumux::fleet
