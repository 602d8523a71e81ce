#include "common/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iterator>

#include "common/errno_status.h"
#include "common/owned_fd.h"

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

Status writeFileDurably(const std::string& path, const std::string& text) {
  const std::string next = path + ".next";
  OwnedFd out(::open(next.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  const auto failed = [&](const char* what) {
    return errnoStatus(errno, std::string("cannot ") + what + " " + next);
  };
  if (!out) return failed("create");
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(out.get(), text.data() + done, text.size() - done);
    if (n < 0) return failed("write");
    done += static_cast<size_t>(n);
  }
  if (::fsync(out.get()) != 0) return failed("sync");
  if (::rename(next.c_str(), path.c_str()) != 0) return failed("rename");
  return Status::ok();
}

}  // namespace granary
