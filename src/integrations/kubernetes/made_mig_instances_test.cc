#include "integrations/kubernetes/made_mig_instances.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace gpumux::k8s {
namespace {

class MadeMigInstancesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("made-mig-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    path_ = (dir_ / "plugin" / "mig-instances-made.json").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(MadeMigInstancesTest, WhatOneRecordsTheNextReadsAndWhatItForgetsIsGone) {
  {
    MadeMigInstances made(path_);
    EXPECT_TRUE(made.keys().empty()) << "no record yet: none made";
    made.Add(MadeMigInstances::Key(0, "1g.10gb@4"));
    made.Add(MadeMigInstances::Key(3, "3g.40gb@0"));
  }
  MadeMigInstances again(path_);
  EXPECT_EQ(again.keys(), (std::set<std::string>{"0/1g.10gb@4", "3/3g.40gb@0"}));
  again.Forget({"0/1g.10gb@4", "0/never-made@1"});
  EXPECT_EQ(MadeMigInstances(path_).keys(), std::set<std::string>{"3/3g.40gb@0"});
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp")) << "written beside, then renamed over";
}

TEST_F(MadeMigInstancesTest, ARecordThatDoesNotReadIsSetAsideAndNothingCountsAsMade) {
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path());
  for (const char* bad : {"{\"made\": [\"0/1g.10gb@4\"", "{\"made\": [4]}", "[]", ""}) {
    std::ofstream(path_) << bad;
    MadeMigInstances made(path_);
    EXPECT_TRUE(made.keys().empty()) << bad;
    EXPECT_TRUE(std::filesystem::exists(path_ + ".bad")) << bad;
    EXPECT_FALSE(std::filesystem::exists(path_)) << bad;
    std::filesystem::remove(path_ + ".bad");
  }
}

TEST_F(MadeMigInstancesTest, ARecordItCannotWriteIsAnErrorThatNamesIt) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ / "plugin") << "a file where the directory should be";
  MadeMigInstances made(path_);
  try {
    made.Add(MadeMigInstances::Key(0, "1g.10gb@0"));
    FAIL() << "written through a file";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("mig-instances-made.json"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(made.Contains("0/1g.10gb@0")) << "what it holds in memory changed regardless";
}

}  // namespace
}  // namespace gpumux::k8s
