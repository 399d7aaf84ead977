#include "tune/affinity.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "testing/test_env.h"

namespace hone::tune {
namespace {

TEST(Affinity, ParsesKernelCpuLists) {
  EXPECT_EQ(*ParseKernelCpuList("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(*ParseKernelCpuList("5"), (std::vector<int>{5}));
  for (const char* bad : {"a", "3-1", "1-", "0-3x"}) EXPECT_FALSE(ParseKernelCpuList(bad).ok()) << bad;
}

TEST(Affinity, ReadsCpusAllowedListFromStatus) {
  std::string status = "Name:\thone\nCpus_allowed:\tf\nCpus_allowed_list:\t0-1,4\nMems_allowed:\t1\n";
  EXPECT_EQ(*CpusAllowedFromStatus(status), (std::vector<int>{0, 1, 4}));
  EXPECT_FALSE(CpusAllowedFromStatus("Name:\tx\n").ok());
}

void WriteStatus(const std::string& root, int tid, const std::string& list) {
  std::string dir = root + "/self/task/" + std::to_string(tid);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/status") << "Name:\tt\nCpus_allowed_list:\t" << list << "\n";
}

TEST(Affinity, DetectsWhetherPinningTookEffect) {
  std::string root = testing::TempPath("affinity-fixture");
  std::filesystem::remove_all(root);
  WriteStatus(root, 100, "0-7");  // an unpinned helper thread
  WriteStatus(root, 101, "2");
  WriteStatus(root, 102, "3");
  auto threads = ReadThreadAffinities(root);
  ASSERT_TRUE(threads.ok()) << threads.error().ToString();
  ASSERT_EQ(threads->size(), 3u);
  EXPECT_EQ((*threads)[1].tid, 101);
  EXPECT_TRUE(PlacementTookEffect(*threads, {2, 3}, 2));
  EXPECT_FALSE(PlacementTookEffect(*threads, {2, 3}, 3));  // the third thread ignored the placement
  EXPECT_FALSE(PlacementTookEffect(*threads, {0, 1}, 1));
  EXPECT_FALSE(ReadThreadAffinities(root + "/missing").ok());
}

TEST(Affinity, SeesThisProcessesRealThreadsAndRestoresTheMainThread) {
  std::vector<int> before = CurrentThreadCpus();
  ASSERT_FALSE(before.empty());
  SetCurrentThreadCpus({before[0]});
  auto threads = ReadThreadAffinities();
  ASSERT_TRUE(threads.ok());
  EXPECT_TRUE(PlacementTookEffect(*threads, {before[0]}, 1));
  SetCurrentThreadCpus(before);
  EXPECT_EQ(CurrentThreadCpus(), before);
}

}  // namespace
}  // namespace hone::tune
