#include "common/files.h"

#include <fstream>
#include <iterator>

namespace granary {

Result<std::string> readTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return notFound(path + " cannot be read");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Result<Secret> readSecretFile(const std::string& path) {
  GRANARY_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  const auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return invalidArgument(path + " is empty");
  return Secret(text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1));
}

}  // namespace granary
