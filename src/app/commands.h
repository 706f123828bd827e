// The kvroute subcommands. Each Register*Command adds one CLI11 subcommand whose callback
// runs the command and stores its exit status in *exit_code. Logic lives in the modules;
// these files only parse flags and call into them.
#pragma once

#include <CLI/CLI.hpp>

namespace kvroute::app {

void RegisterVersionCommand(CLI::App& app, int* exit_code);
void RegisterBenchCommand(CLI::App& app, int* exit_code);
void RegisterSimCommand(CLI::App& app, int* exit_code);
void RegisterSimulateCommand(CLI::App& app, int* exit_code);

}  // namespace kvroute::app
