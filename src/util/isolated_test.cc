// Crashes, hangs and exit codes in a child process come back as values.
#include "util/isolated.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

namespace hone {
namespace {

TEST(RunForked, ReturnsTheExitCodeAndTheMessage) {
  auto r = RunForked(
      [](std::string* msg) {
        *msg = "max error 0.001";
        return 3;
      },
      10);
  EXPECT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.output, "max error 0.001");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.Describe(), "exit code 3");
}

TEST(RunForked, AnIllegalInstructionIsAResultNotACrash) {
  auto r = RunForked(
      [](std::string*) {
        raise(SIGILL);
        return 0;
      },
      10);
  EXPECT_FALSE(r.exited);
  EXPECT_EQ(r.signal, SIGILL);
  EXPECT_NE(r.Describe().find("SIGILL"), std::string::npos) << r.Describe();
  EXPECT_NE(r.Describe().find("llegal instruction"), std::string::npos) << r.Describe();
}

TEST(RunForked, ASegfaultIsReported) {
  auto r = RunForked(
      [](std::string*) {
        volatile int* p = nullptr;
        return *p;
      },
      10);
  EXPECT_EQ(r.signal, SIGSEGV);
}

TEST(RunForked, AHangIsKilledAtTheDeadline) {
  auto r = RunForked(
      [](std::string*) {
        for (;;) pause();
        return 0;
      },
      0.3);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.Describe(), "timed out");
}

TEST(RunProgram, KeepsTheTailOfStderrAndTheExitCode) {
  auto r = RunProgram({"/bin/sh", "-c", "echo to-stdout; echo line1 >&2; echo line2 >&2; exit 7"}, 10, 64);
  EXPECT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(r.output, "line1\nline2\n");
}

TEST(RunProgram, ReportsTheSignalThatKilledIt) {
  auto r = RunProgram({"/bin/sh", "-c", "kill -ILL $$"}, 10);
  EXPECT_EQ(r.signal, SIGILL) << r.Describe();
}

TEST(RunProgram, AMissingProgramIsExitCode127) {
  auto r = RunProgram({"/no/such/program"}, 10);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.output.find("exec failed"), std::string::npos);
}

}  // namespace
}  // namespace hone
