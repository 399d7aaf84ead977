// hone: one binary from a model file to a tuned service. main() only wires
// the registered subcommands; each lives in its own cmd_*.cc.
#include <algorithm>
#include <cstdio>
#include <map>

#include "cli/commands.h"
#include "engine/backend.h"

namespace hone::cli {

std::vector<RegisteredCommand>& CommandRegistry() {
  static std::vector<RegisteredCommand> registry;  // function-local: safe during static init
  return registry;
}

CommandRegistrar::CommandRegistrar(int order, CommandFactory factory) {
  CommandRegistry().push_back({order, factory});
}

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "hone: %s\n", message.c_str());
  return code;
}

}  // namespace hone::cli

int main(int argc, char** argv) {
  using namespace hone::cli;
  CLI::App app{"hone: run LLMs as fast as this machine allows (llama.cpp inside)", "hone"};
  app.require_subcommand(1);
  app.set_version_flag("--version",
                       std::string("hone 0.1.0 (llama.cpp ") + hone::engine::LlamaVersion() + ")");
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "Show llama.cpp's own log")->envname("HONE_VERBOSE");

  auto registry = CommandRegistry();
  std::sort(registry.begin(), registry.end(), [](auto& a, auto& b) { return a.order < b.order; });
  std::map<CLI::App*, Runner> runners;
  for (auto& c : registry) {
    Runner r = c.factory(app);
    runners[app.get_subcommands({}).back()] = std::move(r);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message; its codes (105, 106, 109, ...) become the
    // usual 2 for a usage error, as hone's own argument checks return.
    return app.exit(e) == 0 ? 0 : 2;
  }
  hone::engine::SetVerbose(verbose);
  if (hone::Status isa = hone::engine::CheckCpuRunsThisBuild(); !isa.ok())
    return Fail(isa.error().message, 1);
  for (auto& [sub, run] : runners) {
    if (sub->parsed()) return run();
  }
  return Fail("no command given (try --help)", 2);
}
