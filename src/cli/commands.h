// Each subcommand registers its flags on the app and returns a runner that
// main() calls when that subcommand was chosen. One file per subcommand.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace hone::cli {

using Runner = std::function<int()>;

Runner AddInfoCommand(CLI::App& app);
Runner AddInspectCommand(CLI::App& app);
Runner AddRunCommand(CLI::App& app);
Runner AddSynthCommand(CLI::App& app);

// Prints "hone: <message>" to stderr and returns the exit code for errors.
int Fail(const std::string& message, int code = 1);

}  // namespace hone::cli
