// Each subcommand lives in its own cmd_*.cc: it registers its flags on the app
// and returns a runner that main() calls when that subcommand was chosen.
// A file adds itself with a file-scope registrar, so a new subcommand touches
// no other file:
//
//   static const CommandRegistrar kRegistrar(30, &AddTuneCommand);
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace hone::cli {

using Runner = std::function<int()>;
using CommandFactory = Runner (*)(CLI::App& app);

struct CommandRegistrar {
  // order: position in `hone --help` (info 10, inspect 20, run 30, synth 40,
  // tune 50, quantize 60, imatrix 70, bench 80, serve 90).
  CommandRegistrar(int order, CommandFactory factory);
};

struct RegisteredCommand {
  int order;
  CommandFactory factory;
};
std::vector<RegisteredCommand>& CommandRegistry();

// Prints "hone: <message>" to stderr and returns the exit code for errors.
int Fail(const std::string& message, int code = 1);

}  // namespace hone::cli
