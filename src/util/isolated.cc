#include "util/isolated.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

namespace hone {
namespace {

using Clock = std::chrono::steady_clock;

// Reads from fd (non-blocking) into *out, keeping only the last `keep` bytes,
// until the child exits or the deadline passes; then reaps the child.
ChildOutcome Supervise(pid_t pid, int fd, double timeout_s, size_t keep) {
  ChildOutcome r;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  bool reaped = false;
  bool pipe_open = true;  // false once the child closed its end: then no polling (it would spin)
  for (;;) {
    struct pollfd p {
      fd, POLLIN, 0
    };
    int ms = static_cast<int>(std::chrono::duration<double, std::milli>(deadline - Clock::now()).count());
    if (ms <= 0) break;
    if (!pipe_open) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms, 20)));
    } else if (poll(&p, 1, std::min(ms, 50)) > 0) {
      char buf[4096];
      ssize_t n = read(fd, buf, sizeof buf);
      if (n > 0) {
        r.output.append(buf, static_cast<size_t>(n));
        if (r.output.size() > keep) r.output.erase(0, r.output.size() - keep);
        continue;
      }
      if (n == 0) pipe_open = false;
    }
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      reaped = true;
      break;
    }
  }
  if (!reaped) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    r.timed_out = true;
  } else {
    // Whatever is still in the pipe after exit.
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) r.output.append(buf, static_cast<size_t>(n));
    if (r.output.size() > keep) r.output.erase(0, r.output.size() - keep);
  }
  close(fd);
  if (r.timed_out) return r;
  if (WIFEXITED(status)) {
    r.exited = true;
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
  return r;
}

}  // namespace

std::string SignalDescription(int signal) {
  const char* name = sigabbrev_np(signal);
  const char* what = sigdescr_np(signal);
  return std::string("SIG") + (name ? name : std::to_string(signal).c_str()) + " (" +
         (what ? what : "unknown signal") + ")";
}

std::string ChildOutcome::Describe() const {
  if (timed_out) return "timed out";
  if (exited) return "exit code " + std::to_string(exit_code);
  if (signal) return "killed by " + SignalDescription(signal);
  return "ended in an unknown way";
}

namespace {

// A pipe for the child's report and a fork. In the parent: the child's pid
// and the pipe's read end (non-blocking), or an outcome that says why not.
struct Forked {
  pid_t pid = -1;  // 0 in the child
  int read_fd = -1, write_fd = -1;
  std::optional<ChildOutcome> failed;
};

Forked ForkWithPipe() {
  Forked f;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    f.failed = ChildOutcome{.output = std::strerror(errno)};
    return f;
  }
  f.pid = fork();
  if (f.pid < 0) {
    close(fds[0]);
    close(fds[1]);
    f.failed = ChildOutcome{.output = std::string("fork failed: ") + std::strerror(errno)};
    return f;
  }
  if (f.pid == 0) {
    close(fds[0]);
    f.write_fd = fds[1];
    return f;
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  f.read_fd = fds[0];
  return f;
}

}  // namespace

ChildOutcome RunForked(const std::function<int(std::string* message)>& fn, double timeout_s) {
  Forked f = ForkWithPipe();
  if (f.failed) return *f.failed;
  if (f.pid == 0) {
    // The default action, so a fault kills the child with its real signal
    // even where the parent installed handlers.
    for (int s : {SIGILL, SIGSEGV, SIGBUS, SIGFPE, SIGABRT}) signal(s, SIG_DFL);
    std::string message;
    int code = fn(&message);
    if (!message.empty()) (void)!write(f.write_fd, message.data(), message.size());
    _exit(code);  // no atexit handlers or static destructors of the parent's state
  }
  return Supervise(f.pid, f.read_fd, timeout_s, 64 * 1024);
}

ChildOutcome RunProgram(const std::vector<std::string>& argv, double timeout_s, size_t tail_bytes) {
  if (argv.empty()) return ChildOutcome{.output = "no program given"};
  std::vector<char*> args;  // built before fork: the child may only make async-signal-safe calls
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  Forked f = ForkWithPipe();
  if (f.failed) return *f.failed;
  if (f.pid == 0) {
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
      dup2(devnull, STDOUT_FILENO);
    }
    dup2(f.write_fd, STDERR_FILENO);
    for (int s : {SIGILL, SIGSEGV, SIGBUS, SIGFPE, SIGABRT, SIGPIPE}) signal(s, SIG_DFL);
    execv(args[0], args.data());
    static const char kMsg[] = "exec failed\n";
    (void)!write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    _exit(127);
  }
  return Supervise(f.pid, f.read_fd, timeout_s, tail_bytes);
}

}  // namespace hone
