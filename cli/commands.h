// granaryctl's sub-commands. Each takes the arguments after its name and returns the
// process exit code: 0 success, 1 the checked thing is bad, 2 bad usage.
#pragma once

#include <string>
#include <vector>

namespace granary::cli {

int validateCommand(const std::vector<std::string>& args);
int doctorCommand(const std::vector<std::string>& args);
int versionCommand(const std::vector<std::string>& args);
int mountCommand(const std::vector<std::string>& args);
int unmountCommand(const std::vector<std::string>& args);
int runCommand(const std::vector<std::string>& args);

}  // namespace granary::cli
