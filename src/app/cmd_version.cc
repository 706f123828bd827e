#include <iostream>

#include "app/commands.h"

namespace kvroute::app {

void RegisterVersionCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("version", "Print the kvroute version");
  cmd->callback([exit_code] {
    std::cout << "kvroute 0.1.0\n";
    *exit_code = 0;
  });
}

}  // namespace kvroute::app
