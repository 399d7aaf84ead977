// Running code that may crash the process (an ISA path, a new kernel) where a
// crash is a result, not the end: in a child process, with a deadline.
//
// Two forms, because of OpenMP: GNU libgomp is not fork-safe, so a forked
// child that enters an OpenMP parallel region after its parent has used one
// hangs forever (reproduced with gcc 12: the child sits until killed).
//  - RunForked: fork() and call a function in the child. Only for code that
//    never starts OpenMP threads (ggml with one thread is fine).
//  - RunProgram: fork() + exec() of a program (hone itself, through
//    /proc/self/exe): a fresh process, safe for anything.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace hone {

struct ChildOutcome {
  bool exited = false;     // returned or called exit()
  int exit_code = -1;      // when exited
  int signal = 0;          // the signal that killed it, when it did not exit
  bool timed_out = false;  // killed by us at the deadline
  std::string output;      // what the child reported (RunForked) or its stderr tail (RunProgram)

  bool ok() const { return exited && exit_code == 0; }
  // "exit code 3", "killed by SIGILL (illegal instruction)", "timed out after 20 s"
  std::string Describe() const;
};

// Calls fn in a forked child; fn returns an exit code and may fill *message,
// which the parent receives. The child is killed at the deadline.
ChildOutcome RunForked(const std::function<int(std::string* message)>& fn, double timeout_s);

// Runs argv[0] with argv (no shell), stdout discarded, the last `tail_bytes`
// of stderr kept. The child is killed at the deadline.
ChildOutcome RunProgram(const std::vector<std::string>& argv, double timeout_s, size_t tail_bytes = 4096);

// "SIGILL (illegal instruction)", "SIGSEGV (segmentation fault)", ...
std::string SignalDescription(int signal);

}  // namespace hone
