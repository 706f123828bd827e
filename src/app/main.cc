// kvroute: one binary, one subcommand per entry point (see docs/ and `kvroute --help`).
#include <CLI/CLI.hpp>
#include <iostream>

#include "app/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "kvroute: a KV-cache-aware router for LLM inference clusters.\n"
      "Routes each request to the model server where its marginal cost is lowest, using the\n"
      "KV blocks each server holds, its load, and learned prefill/decode rates."};
  app.require_subcommand(1);
  app.fallthrough(false);
  int exit_code = 0;
  kvroute::app::RegisterVersionCommand(app, &exit_code);
  kvroute::app::RegisterBenchCommand(app, &exit_code);
  kvroute::app::RegisterSimCommand(app, &exit_code);
  kvroute::app::RegisterServeCommand(app, &exit_code);
  kvroute::app::RegisterConfigCommand(app, &exit_code);
  kvroute::app::RegisterSimulateCommand(app, &exit_code);
  kvroute::app::RegisterDemoCommand(app, &exit_code);
  kvroute::app::RegisterStoreCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
